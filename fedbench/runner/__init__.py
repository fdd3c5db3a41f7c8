"""Expand a table into runs (table configs, plans) and launch them."""
