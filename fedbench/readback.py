"""The one way fedbench reads back a file it wrote: decoded, parsed and schema-validated (pydantic),
so that a damaged or foreign file is one line (BadFile, exit code 2) naming the file, what is wrong
with it and what to do, instead of a traceback or a value silently taken for another.

Before a byte is parsed, the file must be a regular file (a FIFO in its place would block the
reader forever; a device never ends), no larger than the bound of its kind (`max_bytes` of its
schema: an 8 GB summary.json is refused, not read into memory), and a JSON document must not nest
deeper than MAX_JSON_DEPTH (the parser recurses once per level: a file of 100,000 `[` is refused,
not a RecursionError).

The schemas hold what fedbench relies on and allow anything else (`extra="allow"`): a file written
by a newer version still reads. Callers decide what a bad file means: a run file of a run about to
be trained is set aside and the run trained again (a warning); a file a report or a plan needs
stops the command with the line.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from fedbench.errors import FedbenchError

log = logging.getLogger("fedbench")


class BadFile(FedbenchError):
    """A file fedbench reads back is unreadable or does not hold what it should."""

    def __init__(self, path: Path, what: str, fix: str) -> None:
        super().__init__(f"{path}: {what}; {fix}")
        self.path, self.what, self.fix = path, what, fix


MiB = 2**20

#: The deepest nesting of lists and objects a JSON file fedbench reads back may have. What
#: fedbench writes nests 4 levels at most (a metrics row's per-client diagnostics).
MAX_JSON_DEPTH = 64

#: The bound of a text file read back without a schema of its own (a STOP request).
MAX_TEXT_BYTES = 1 * MiB


class _Schema(BaseModel):
    model_config = ConfigDict(extra="allow")

    #: The largest file of this kind fedbench reads: a few hundred times what it writes.
    max_bytes: ClassVar[int] = 16 * MiB


Scalar = int | float | str | bool | None


class Attempt(_Schema):
    """attempt.json: who started the latest attempt at a run, and how many there have been."""

    max_bytes: ClassVar[int] = 1 * MiB

    attempts: int = Field(0, ge=0)
    host: str | None = None
    pid: int | None = None


class Checksum(_Schema):
    """checkpoint.json: the checkpoint's size and SHA-256 as written, and its round."""

    max_bytes: ClassVar[int] = 1 * MiB

    sha256: str
    bytes: int = Field(ge=0)
    round: int | None = None
    written: str | None = None


class FinalMetrics(_Schema):
    round: int | None = None
    test_acc: float | None = None
    test_loss: float | None = None
    train_loss: float | None = None


class Best(_Schema):
    round: int | None = None
    test_acc: float | None = None


class Summary(_Schema):
    """summary.json: how a run ended and its final metrics (the fields readers use)."""

    status: str
    error: str | None = None
    rounds: int | None = None
    final: FinalMetrics = Field(default_factory=FinalMetrics)
    best: Best = Field(default_factory=Best)
    d: int | None = None
    comm_up: float | None = None
    comm_down: float | None = None
    wall_s: float | None = None
    epsilon: float | None = None
    rounds_to_target: int | None = None


class MetricsRow(_Schema):
    """One row of metrics.jsonl: an evaluation at `round`; every metric a number (or null)."""

    round: int = Field(ge=0)

    @field_validator("round", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("round must be a whole number")
        return value

    @model_validator(mode="after")
    def _numbers(self) -> MetricsRow:
        for key, value in (self.model_extra or {}).items():
            if isinstance(value, dict | list):
                continue  # per-client lists and nested diagnostics are not reported numbers
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float)
            ):
                raise ValueError(f"{key} is {value!r}, not a number")
        return self


class PlanRun(_Schema):
    method: str
    setting: dict[str, Any]
    seed: int
    run_id: str = Field(min_length=1)


class PlanFile(_Schema):
    """plan.json: the table a sweep reports on and every run of it."""

    #: A plan lists every run of a table (its setting and id): thousands of runs fit.
    max_bytes: ClassVar[int] = 256 * MiB

    table: dict[str, Any]
    runs: list[PlanRun]
    preset: str | None = None
    fingerprint: str | None = None


class TunedCell(_Schema):
    values: dict[str, Scalar | list[Scalar]] | None = None


class TunedFile(_Schema):
    """tuned.yaml: per row and column, the values `fedbench tune` found."""

    table: str
    preset: str | None = None
    rows: dict[str, dict[str, TunedCell | None] | None]

    @field_validator("rows", mode="before")
    @classmethod
    def _column_keys(cls, value: Any) -> Any:
        # YAML reads a column such as `0.1` as a number: columns are named by their text.
        if isinstance(value, dict):
            return {
                k: {str(c): e for c, e in v.items()} if isinstance(v, dict) else v
                for k, v in value.items()
            }
        return value


S = TypeVar("S", bound=BaseModel)


def problem_text(exc: ValidationError) -> str:
    """The first problem of a failed validation, as `where: what` (one line)."""
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"])
    what = str(error["msg"]).removeprefix("Value error, ")
    return (f"{where}: {what}" if where else what).replace("\n", " ")


def size_text(size: int) -> str:
    """A byte count as a reader takes it in: `8 GiB`, `1.5 MiB`, `120 bytes`."""
    if size < 1024:
        return f"{size} bytes"
    value, units = size / 1024, ["KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{value:.1f}".removesuffix(".0") + f" {units[0]}"


def _kind(mode: int) -> str:
    """What a file that is not a regular file is, as `ls -l` would tell."""
    for test, what in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def open_regular(path: Path, fix: str, limit: int) -> Any:
    """`path` opened for binary reading once it is known to be a regular file of at most `limit`
    bytes; else a BadFile (FileNotFoundError when absent). The open does not block: a FIFO with
    no writer opens at once (O_NONBLOCK) and is refused by its fstat before anything is read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise
    except OSError as exc:  # a socket (ENXIO), no permission, a loop of links, ...
        raise BadFile(path, f"cannot be read ({exc.strerror})", fix) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise BadFile(path, "is a folder, not a file", fix)
        if not stat.S_ISREG(info.st_mode):
            raise BadFile(path, f"is {_kind(info.st_mode)}, not a regular file", fix)
        if info.st_size > limit:
            raise BadFile(path, _too_big(info.st_size, limit), fix)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _too_big(size: int, limit: int) -> str:
    shown = size_text(size)
    if shown == size_text(limit):  # just past the bound: the count itself says it
        shown = f"{size:,} bytes"
    return f"is {shown}, more than the {size_text(limit)} such a file may hold"


def read_bytes(path: Path, fix: str, limit: int) -> bytes:
    """The bytes of the regular file at `path`, of at most `limit` bytes (`open_regular`)."""
    try:
        with open_regular(path, fix, limit) as fh:
            data = fh.read(limit + 1)  # the file may have grown since its fstat
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise BadFile(path, f"cannot be read ({exc.strerror})", fix) from None
    if len(data) > limit:
        raise BadFile(path, _too_big(len(data), limit), fix)
    return data


def read_text(path: Path, fix: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The file's text (UTF-8), read as `read_bytes` reads it; other bytes are a BadFile."""
    data = read_bytes(path, fix, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadFile(
            path, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})", fix
        ) from None


#: A JSON string (escapes included) and a bracket: what `json_depth` counts nesting with.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_BRACKETS = re.compile(r"[][{}]")


def json_depth(text: str, limit: int = MAX_JSON_DEPTH) -> int | None:
    """How deep the JSON `text` nests, or None when it nests deeper than `limit` (the scan
    stops there). Brackets inside strings do not count. Linear in the text: no parsing."""
    depth = deepest = 0
    for bracket in _BRACKETS.finditer(_JSON_STRING.sub('""', text)):
        if bracket.group() in "[{":
            depth += 1
            if depth > limit:
                return None
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def validate(path: Path, data: Any, schema: type[S], fix: str) -> S:
    """`data` (read from `path`) checked against `schema`; else a BadFile."""
    name = schema.__name__
    if not isinstance(data, dict):
        raise BadFile(path, f"holds a {type(data).__name__} where a {name} mapping belongs", fix)
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        raise BadFile(path, f"not a valid {name}: {problem_text(exc)}", fix) from None


def read_json(path: Path, schema: type[S], fix: str) -> S:
    """The JSON file at `path`, validated against `schema` (FileNotFoundError when absent)."""
    text = read_text(path, fix, limit=schema.max_bytes if issubclass(schema, _Schema) else MiB)
    if json_depth(text) is None:
        raise BadFile(path, f"nests lists or objects more than {MAX_JSON_DEPTH} deep", fix)
    try:
        data = json.loads(text)  # NaN and Infinity included: a diverged run's losses
    except (json.JSONDecodeError, ValueError) as exc:
        raise BadFile(path, f"is not JSON ({exc})", fix) from None
    return validate(path, data, schema, fix)


def read_json_dict(path: Path, schema: type[BaseModel], fix: str) -> dict[str, Any]:
    """`read_json` as the plain dict its callers index (validated and coerced)."""
    return read_json(path, schema, fix).model_dump()


def set_aside(path: Path, problem: BadFile, then: str) -> None:
    """A bad run file of a run that will be trained again: renamed to `<name>.corrupt` (kept for
    a look, out of the way) with a warning saying what happens next."""
    aside = path.with_name(path.name + ".corrupt")
    try:
        if path.is_dir():
            import shutil

            shutil.rmtree(aside, ignore_errors=True)
        path.replace(aside)
    except OSError:
        return  # a read-only disk: the write that follows reports it
    log.warning("warning: %s: %s; moved it to %s and %s", path, problem.what, aside.name, then)


def read_plan_file(path: Path) -> dict[str, Any]:
    """A table folder's plan.json (PlanFile), as a dict; a bad one is a BadFile saying how to
    write it again."""
    fix = (
        f"remove {path} and rerun the `fedbench run` (or `ablate`) command of this table to "
        "write it again (finished runs are kept)"
    )
    return read_json_dict(path, PlanFile, fix=fix)
