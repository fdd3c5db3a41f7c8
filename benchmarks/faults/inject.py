"""The fault injection: a `sitecustomize` that makes writes under FEDBENCH_FAULT_DIR fail with
EROFS (a read-only disk) or ENOSPC (a full one, after FEDBENCH_FAULT_BYTES bytes)."""

from __future__ import annotations

INJECT = '''
"""Fault injection for benchmarks/faults: writes under FEDBENCH_FAULT_DIR fail."""
import builtins, errno, io, os, sqlite3

_DIR = os.environ.get("FEDBENCH_FAULT_DIR")
if _DIR:
    _ROOT = os.path.realpath(_DIR)
    _KIND = os.environ.get("FEDBENCH_FAULT_KIND", "enospc")  # enospc | rofs
    _MATCH = os.environ.get("FEDBENCH_FAULT_MATCH", "")
    _BUDGET = [int(os.environ.get("FEDBENCH_FAULT_BYTES", "0"))]
    _CODE = errno.EROFS if _KIND == "rofs" else errno.ENOSPC

    def _hit(path):
        if isinstance(path, int):
            return False
        try:
            real = os.path.realpath(os.fspath(path))
        except TypeError:
            return False
        inside = real == _ROOT or real.startswith(_ROOT + os.sep)
        return inside and _MATCH in real

    def _fail(path):
        raise OSError(_CODE, os.strerror(_CODE), os.fspath(path))

    class _Full:
        """A file on a disk with _BUDGET bytes free (for every file of this process)."""

        def __init__(self, fh, path):
            self._fh, self._path = fh, path

        def write(self, data):
            if len(data) > _BUDGET[0]:
                _fail(self._path)
            _BUDGET[0] -= len(data)
            return self._fh.write(data)

        def __getattr__(self, name):
            return getattr(self._fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._fh.__exit__(*exc)

    _open = io.open

    def _patched_open(file, mode="r", *args, **kwargs):
        if any(c in mode for c in "wax+") and _hit(file):
            if _KIND == "rofs":
                _fail(file)
            return _Full(_open(file, mode, *args, **kwargs), file)
        return _open(file, mode, *args, **kwargs)

    builtins.open = io.open = _patched_open

    if _KIND == "rofs":
        _WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND

        def _guard(real, *which):
            def wrapper(*args, **kwargs):
                if any(_hit(args[i]) for i in which if i < len(args)):
                    _fail(args[which[0]])
                return real(*args, **kwargs)
            return wrapper

        _os_open = os.open

        def _patched_os_open(path, flags, *args, **kwargs):
            if flags & _WRITE and _hit(path):
                _fail(path)
            return _os_open(path, flags, *args, **kwargs)

        os.open = _patched_os_open
        for _name, _which in (("mkdir", (0,)), ("replace", (0, 1)), ("rename", (0, 1)),
                              ("unlink", (0,)), ("remove", (0,)), ("rmdir", (0,))):
            setattr(os, _name, _guard(getattr(os, _name), *_which))
        _connect = sqlite3.connect

        def _patched_connect(database, *args, **kwargs):
            if _hit(database):
                raise sqlite3.OperationalError("attempt to write a readonly database")
            return _connect(database, *args, **kwargs)

        sqlite3.connect = sqlite3.dbapi2.connect = _patched_connect
'''
