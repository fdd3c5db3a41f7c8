"""The readable part of a run folder's name: the short settings in which a run differs from the
defaults of its algorithm, so that two FedAdamW runs that differ only in alpha do not share a
prefix (`fedadamw-alpha0.1-digits-cnn-s0-<hash>` vs `fedadamw-digits-cnn-s0-<hash>`). Federated
settings use the papers' letters: `dir0.1` (Dirichlet alpha), `N100` clients, `T300` rounds,
`K50` local steps, `B50` batch.

The hash in the name still identifies the run; this part is only for reading, so it keeps the
settings that fit in `budget` characters, the algorithm's own settings first.
"""

from __future__ import annotations

import re
from typing import Any, cast

from pydantic import BaseModel

#: Already in the name (algorithm, dataset, model, seed) or not part of what ran.
SKIPPED = {
    "seed",
    "algorithm.name",
    "data.name",
    "data.root",
    "data.path",
    "data.download",
    "model.name",
    "model.weights",
}
#: Sections in the order their settings are named after the algorithm's own.
SECTION_ORDER = ("partition", "privacy", "algorithm", "fl", "model", "data")
UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
#: Short names for the federated settings, in the papers' notation (T rounds, K local steps, ...).
ALIASES = {
    "partition.alpha": "dir",
    "partition.clients": "N",
    "partition.kind": "split",
    "partition.shards_per_client": "shards",
    "fl.rounds": "T",
    "fl.local_steps": "K",
    "fl.batch_size": "B",
    "fl.participation": "part",
    "privacy.noise_multiplier": "sigma",
    "privacy.clip": "C",
    "privacy.target_epsilon": "eps",
    "privacy.delta": "delta",
    "privacy.level": "dp",
}


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{dotted}."))
        else:
            flat[dotted] = value
    return flat


def _token(key: str, value: Any, own: bool) -> str | None:
    """`alpha0.1`, `v_agg-none`, `dir0.1` (partition.alpha); None for values that are not short."""
    if isinstance(value, list | dict):
        return None
    name = key.split(".", 1)[1] if own else ALIASES.get(key, key)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        text = f"{name}-{str(value).lower() if not isinstance(value, str) else value}"
    else:
        # 1e+12 is written 1e12: the run folder's name turns a "+" into "-", which would read
        # as 1e-12.
        text = (
            f"{name}{value:g}".replace("e+", "e") if isinstance(value, float) else f"{name}{value}"
        )
    return UNSAFE.sub("_", text)


def differing_label(
    config: dict[str, Any], defaults: dict[str, Any], own: set[str], budget: int = 32
) -> str:
    """`-tok1-tok2` for the settings of `config` that differ from `defaults` (both run configs
    as dicts), the algorithm's own fields (`own`) first, as many as fit in `budget`."""
    have, base = _flatten(config), _flatten(defaults)
    keys = [
        k
        for k in have
        if k not in SKIPPED and not k.startswith(("runtime.", "eval.")) and have[k] != base.get(k)
    ]

    def rank(key: str) -> tuple[int, int]:
        section, _, field = key.partition(".")
        if section == "algorithm" and field in own:
            return (0, 0)
        return (1, SECTION_ORDER.index(section) if section in SECTION_ORDER else len(SECTION_ORDER))

    tokens: list[str] = []
    used = 0
    for key in sorted(keys, key=rank):  # stable: declaration order within a rank
        token = _token(key, have[key], own=key.startswith("algorithm."))
        if token is None or used + len(token) + 1 > budget:
            continue
        tokens.append(token)
        used += len(token) + 1
    return "".join(f"-{t}" for t in tokens)


def readable_label(cfg: Any, acting: dict[str, Any] | None = None) -> str:
    """differing_label of a RunConfig against the defaults of the same algorithm (with the
    privacy section's defaults when it has one). `acting`: the config's fields that act on the
    run (RunConfig.acting_data), so that no setting the run does not read names it (a shards
    run's partition.alpha); None labels every field (the ids issued before)."""
    params = cfg.algorithm
    common: dict[str, Any] = next(
        (
            cast("type[BaseModel]", c).model_fields
            for c in type(params).__mro__
            if c.__name__ == "AlgorithmConfig"
        ),
        {},
    )
    own = set(type(params).model_fields) - set(common)
    privacy = type(cfg.privacy)() if cfg.privacy is not None else None
    defaults = type(cfg)(algorithm=type(params)(), privacy=privacy)
    return differing_label(cfg.to_dict() if acting is None else acting, defaults.to_dict(), own)
