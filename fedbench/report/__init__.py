"""Runs -> mean ± std tables (summary.csv, table.csv, table.md, table.tex), curves.png and, for
private rows at several budgets, the privacy-utility figure."""

from fedbench.report.build import Report, build_report

__all__ = ["Report", "build_report"]
