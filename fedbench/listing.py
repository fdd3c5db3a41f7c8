"""A table to show: a title, column names and rows of text. The layers below the command line
return one (`fedbench list`, `blocks`, `epsilon TABLE`, `bench`, `tune`); the command line
draws it with rich."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Listing:
    title: str
    columns: list[str]
    rows: list[list[str]]
    #: Columns aligned right (numbers).
    right: tuple[str, ...] = ()
    #: Long cells fold onto further lines instead of being cut (run ids, values).
    fold: bool = False
