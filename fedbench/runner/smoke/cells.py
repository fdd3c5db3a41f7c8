"""The smoke version of a run config (`--smoke`): the paper setting's model, input shape, classes,
tokenizer length, LoRA, privacy, algorithm, engine and precision, trained for one short round on
generated data; and the cells of a plan, one per (row, column).

What a smoke run replaces, and says it replaces:
- the data: generated files in the dataset's real format (fedbench.runner.smoke.data);
- pretrained weights: random weights of the same architecture;
- the federation: 2 clients (iid; LEAF: 2 natural users), all sampled, 1 round of 2 local steps
  (with `fl.local_steps_min`: 1..2) at batch size min(B, 2) (B 0, the whole local set, stays);
- evaluation: at round 0 and at the end, on at most 4 training samples, in batches of 4;
- checkpoints and loggers: none. The device is whatever this machine has (runtime.device auto).
Everything else (algorithm, privacy, engine, precision, compile, CUDA graphs, image size,
augmentation, dropout of clients) is the cell's own.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedbench.config import RunConfig, parse_run_config
from fedbench.runner.smoke.data import smoke_data

CLIENTS = 2
ROUNDS = 1
LOCAL_STEPS = 2
MAX_BATCH = 2
EVAL_SAMPLES = 4


@dataclass
class SmokeCell:
    """One (row, column) of a table, or one run of a figure, in its smoke form."""

    label: str
    cfg: RunConfig
    replaced: list[str] = field(default_factory=list)


def _fl(fl: dict[str, Any]) -> dict[str, Any]:
    batch = fl["batch_size"]
    out = {
        **fl,
        "rounds": ROUNDS,
        "participation": 1.0,
        "local_steps": LOCAL_STEPS,
        "batch_size": batch if batch == 0 else min(batch, MAX_BATCH),
    }
    if fl.get("local_steps_min") is not None:
        out["local_steps_min"] = 1
    return out


def smoke_config(cfg: RunConfig, data_root: Path) -> SmokeCell:
    """`cfg` in its smoke form (the module docstring), with the list of what was replaced."""
    data = copy.deepcopy(cfg.to_dict())
    replaced = [
        f"federation: {CLIENTS} clients x {LOCAL_STEPS} local steps x {ROUNDS} round, batch <= "
        f"{MAX_BATCH} (was {cfg.partition.clients} clients, {cfg.fl.rounds} rounds, K "
        f"{cfg.fl.local_steps}, B {cfg.fl.batch_size})"
    ]
    fields, what = smoke_data(cfg.data, data_root)
    data["data"].update(fields)
    if what is not None:
        replaced.append(what)
    if data["partition"]["kind"] == "natural":
        data["data"]["users"] = {**data["data"]["users"], "count": CLIENTS, "fraction": 1.0}
        data["partition"]["clients"] = CLIENTS
    else:
        # The partition's own fields go back to their defaults, so that columns differing
        # only in them (Dir-0.6 / Dir-0.1) are one smoke run.
        data["partition"] = {"kind": "iid", "clients": CLIENTS, "seed": cfg.partition.seed}
        if cfg.partition.client_test_fraction:  # each client's own test data (eval.personal)
            data["partition"]["client_test_fraction"] = cfg.partition.client_test_fraction
        if cfg.partition.kind != "iid":
            replaced.append(f"partition {cfg.partition.kind} -> iid")
    model = data["model"]
    if model["pretrained"] or model["weights"] is not None:
        model.update({"pretrained": False, "weights": None})
        replaced.append(f"{cfg.model.name}: random weights instead of the pretrained ones")
    data["fl"] = _fl(data["fl"])
    data["eval"].update({"every": ROUNDS, "train_subset": EVAL_SAMPLES, "batch_size": EVAL_SAMPLES})
    data["runtime"].update(
        {"device": "auto", "checkpoint_every": 0, "loggers": [], "workers": None}
    )
    return SmokeCell(label="", cfg=parse_run_config(data), replaced=replaced)
