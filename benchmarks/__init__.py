"""Measurement and fault scripts (not part of the fedbench package). Most run as files
(`python benchmarks/NAME.py`); the fault script is a package: `python -m benchmarks.faults`.

This file makes `benchmarks` a regular package, so that the checkout's folder is found before
the unrelated top-level `benchmarks` package that opacus installs into site-packages."""
