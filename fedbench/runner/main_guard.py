"""Worker processes and a script without `if __name__ == "__main__":`.

The local launcher starts its workers with multiprocessing's `spawn`, and a spawned process
imports the main script again (as `__mp_main__`, so that what the script defines can be
unpickled). A plain script that calls `fedbench.run_table(..., workers=2)` at its top level would
start the sweep again in every worker, where multiprocessing refuses it with a traceback and the
worker dies: each run was recorded as failed.

`spawn` stays: `fork` (and `forkserver`'s forks of a process that imported the script) copy a
parent whose torch may already run OpenMP/MKL thread pools or hold a CUDA context (a notebook
that trained before, a script that called `fedbench.train`), and a forked child of such a process
can deadlock in its thread pool or fail with "Cannot re-initialize CUDA in forked subprocess";
`forkserver` also re-imports the main script. So the launcher checks, before it starts any
worker, whether the sweep was started from the main script's top level outside the guard, and
refuses with one line that says to add it (`unguarded_line`).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from types import FrameType

from fedbench.errors import FedbenchError


def _is_main_test(test: ast.expr) -> bool:
    """Whether an `if` test compares `__name__` with "__main__" (in any order, maybe within
    `and`/`or`)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            names = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
            main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
            if names and main:
                return True
    return False


def _main_module_frame(frame: FrameType | None) -> FrameType | None:
    """The frame of the main script's top-level code on the calling stack, if any."""
    main = sys.modules.get("__main__")
    if main is None:
        return None
    namespace = vars(main)
    while frame is not None:
        if frame.f_globals is namespace and frame.f_code.co_name == "<module>":
            return frame
        frame = frame.f_back
    return None


def unguarded_line(frame: FrameType | None = None) -> tuple[str, int] | None:
    """(script, line) when the code running now was called from the top level of the main script
    outside `if __name__ == "__main__":`; None otherwise (a guarded script, the `fedbench`
    command, a notebook or `python -c`, whose main module a spawned worker does not import, or a
    script whose source cannot be read: then nothing is refused)."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not isinstance(path, str):
        return None
    top = _main_module_frame(frame if frame is not None else sys._getframe(1))
    if top is None:
        return None
    try:
        tree = ast.parse(Path(path).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return None
    line = top.f_lineno
    for node in tree.body:
        end = node.end_lineno or node.lineno
        if isinstance(node, ast.If) and _is_main_test(node.test) and node.lineno <= line <= end:
            return None
    return path, line


def require_main_guard(what: str) -> None:
    """Raise a FedbenchError, before any worker starts, when the main script would start `what`
    again in every spawned worker (see the module docstring)."""
    found = unguarded_line()
    if found is None:
        return
    path, line = found
    raise FedbenchError(
        f"{what} starts worker processes, each of which imports {path} again, and line "
        f'{line} of it runs outside `if __name__ == "__main__":`, so each worker would start '
        f'{what} again: put the script\'s calls under `if __name__ == "__main__":` (or use '
        "workers=1)"
    )
