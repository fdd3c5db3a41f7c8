"""Text a table config gives the reports (its name, title, note, row and column labels): the
characters that markdown, CSV and LaTeX cannot hold as text are refused when the config is read.

- control characters (NUL, ESC, a newline, ...: Unicode category Cc) would be written raw: NUL
  ends the text for many readers, ESC starts a terminal escape sequence when the file is shown,
  a newline splits a markdown row;
- bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E/U+200F, U+061C) reorder what is
  displayed after them: an RTL override makes a label read as something it is not.

A note may span lines (newlines and tabs are allowed there: markdown and LaTeX print them as
spaces). Refused, not escaped: none of the three formats has a faithful spelling for them, and
a label is chosen by whoever writes the config, who can write it plainly.
"""

from __future__ import annotations

import unicodedata

_BIDI = {chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x200E, 0x200F, 0x061C)}


def unprintable(text: str, *, lines: bool = False) -> str | None:
    """What in `text` no report format can hold (`U+001B (a control character) at 4`), or None.
    `lines`: newlines and tabs are allowed (a note)."""
    for at, char in enumerate(text):
        if lines and char in "\n\t":
            continue
        if char in _BIDI:
            kind = "a bidirectional control"
        elif unicodedata.category(char) == "Cc":
            kind = "a control character"
        else:
            continue
        return f"U+{ord(char):04X} ({kind}) at character {at + 1}"
    return None
