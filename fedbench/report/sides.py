"""`fedbench compare`'s sides told apart: each side's folder named by as much of its path as
tells it apart from the others', and what its runs share (config fields, the sweep's preset and
--set values) set against the other side's."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.report.ran import IGNORED_PREFIXES, flatten


@dataclass(frozen=True)
class RanSetting:
    """What every run of one side shares: the resolved config fields (dotted; the seed, where
    data lives, evaluation and runtime left aside: they do not change what the numbers mean),
    and the sweep's preset and --set values (plan.json)."""

    fields: dict[str, Any]
    preset: str | None = None
    overrides: tuple[str, ...] = ()

    @classmethod
    def of(cls, cfgs: list[dict[str, Any]], preset: str | None, overrides: list[str]) -> RanSetting:
        return cls(_shared_settings(cfgs), preset, tuple(overrides))


def _shared_settings(cfgs: list[dict[str, Any]]) -> dict[str, Any]:
    """The dotted fields whose value every config shares (the seed, where data lives,
    evaluation and runtime left aside: they do not change what the numbers mean)."""
    flat = [flatten(c) for c in cfgs]
    if not flat:
        return {}
    out = {}
    for key in flat[0]:
        if key.startswith(IGNORED_PREFIXES):
            continue
        values = {json.dumps(f.get(key), sort_keys=True) for f in flat}
        if len(values) == 1:
            out[key] = flat[0][key]
    return out


def side_names(folders: list[Path]) -> dict[Path, str]:
    """Each folder by the fewest trailing parts of its path that tell it apart from the other
    folders: `dpstudy` alone, `a/dpstudy` and `b/dpstudy` for two sweeps of one table."""
    unique = list(dict.fromkeys(f.resolve() for f in folders))
    names = {}
    for folder in unique:
        for count in range(1, len(folder.parts) + 1):
            tail = folder.parts[-count:]
            if all(other.parts[-count:] != tail for other in unique if other != folder):
                names[folder] = "/".join(tail)
                break
        else:
            names[folder] = str(folder)
    return {f: names[f.resolve()] for f in folders}


def _text(value: Any) -> str:
    return (
        "unset"
        if value is None
        else json.dumps(value)
        if isinstance(value, dict | list)
        else str(value)
    )


def setting_differences(a: RanSetting, b: RanSetting) -> list[str]:
    """What tells side A's runs from side B's: each config field both sides have whose value
    differs ('algorithm.lr 0.1 vs 0.05'; an algorithm's own fields are not listed because the
    other side's algorithm lacks them), a section only one side has ('privacy set vs unset'),
    then the preset and the --set values where they differ."""
    lines = []
    for key in dict.fromkeys([*a.fields, *b.fields]):
        if key not in a.fields or key not in b.fields:
            continue
        mine, theirs = a.fields[key], b.fields[key]
        if json.dumps(mine, sort_keys=True) != json.dumps(theirs, sort_keys=True):
            lines.append(f"{key} {_text(mine)} vs {_text(theirs)}")
    sections = [_sections(side.fields) for side in (a, b)]
    for section in dict.fromkeys([*sections[0], *sections[1]]):
        if (section in sections[0]) != (section in sections[1]):
            which = ["set" if section in mine else "unset" for mine in sections]
            lines.append(f"{section} {which[0]} vs {which[1]}")
    if a.preset != b.preset:
        lines.append(f"preset {a.preset or 'none'} vs {b.preset or 'none'}")
    if a.overrides != b.overrides:
        sets = [", ".join(side.overrides) or "none" for side in (a, b)]
        lines.append(f"--set {sets[0]} vs {sets[1]}")
    return lines


def _sections(settings: dict[str, Any]) -> list[str]:
    """The config sections with a value (privacy: null is no section)."""
    return list(dict.fromkeys(k.split(".")[0] for k, v in settings.items() if v is not None))
