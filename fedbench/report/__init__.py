"""Runs -> mean ± std tables (summary.csv, table.csv, table.md, table.tex) and curves.png."""

from fedbench.report.build import Report, build_report

__all__ = ["Report", "build_report"]
