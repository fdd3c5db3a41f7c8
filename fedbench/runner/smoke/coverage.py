"""Which smoke cells cover every path the paper settings use, for a machine that cannot run them
all (CI on 2 CPU cores; `make gpu-check`'s time limit).

The full check (`make smoke`) trains every (row, column) of every table, ablation and figure.
The covering set keeps a cell when it is the first (cheapest first) to bring either
- a new (model, input, privacy, engine, precision): the real model at its real input shape under
  each privacy mode, engine (the execution plan's executor) and precision some table trains it
  with; or
- a new (algorithm, privacy, engine, precision): each update rule under each privacy mode,
  engine and precision some table uses, on the cheapest model that table pairs it with.
An algorithm's rule acts on parameter lists whatever the model, and a model's forward, backward
and per-sample clipping do not depend on the rule, so these pairs cover every combination of
the two while training about a tenth of the cells.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from fedbench.config import RunConfig
from fedbench.engine.plan import paper_executor
from fedbench.runner.smoke.cells import SmokeCell

#: Relative cost of a smoke run by model (others: 1), to cover the rules on cheap models first.
HEAVY = {"roberta_base": 8, "swin_base": 8, "vit_base": 8, "swin_tiny": 4, "resnet18": 2}


def privacy_key(cfg: RunConfig) -> str:
    if cfg.privacy is None:
        return "non-private"
    return f"{cfg.privacy.level}-DP ({cfg.privacy.sampling})"


def input_key(cfg: RunConfig) -> str:
    """The input a model sees: CIFAR-10 and -100 are one shape (32x32 RGB), every GLUE task is
    128 token ids; the class count only sizes the head."""
    name = cfg.data.name
    family = "glue" if name.startswith("glue/") else "cifar" if name.startswith("cifar") else name
    return family + (f"@{cfg.data.image_size}" if cfg.data.image_size else "")


def model_key(cfg: RunConfig) -> tuple[str, ...]:
    m = cfg.model
    model = m.name + (f"-{m.norm}" if m.name == "resnet18" else "") + ("+LoRA" if m.lora else "")
    return (model, input_key(cfg), privacy_key(cfg), paper_executor(cfg), cfg.runtime.precision)


def rule_key(cfg: RunConfig) -> tuple[str, ...]:
    return (cfg.algorithm.name, privacy_key(cfg), paper_executor(cfg), cfg.runtime.precision)


def cost(cfg: RunConfig) -> int:
    return HEAVY.get(cfg.model.name, 1) * (2 if cfg.privacy is not None else 1)


def covering(cells: Iterable[SmokeCell]) -> list[SmokeCell]:
    """The covering set of `cells` (module docstring), cheapest first."""
    chosen, models, rules, seen = [], set(), set(), set()
    ordered = sorted(enumerate(cells), key=lambda item: (cost(item[1].cfg), item[0]))
    for _, cell in ordered:
        key = cell.cfg.config_hash()
        m, r = model_key(cell.cfg), rule_key(cell.cfg)
        if key in seen or (m in models and r in rules):
            continue
        seen.add(key)
        models.add(m)
        rules.add(r)
        chosen.append(cell)
    return chosen


def all_table_cells(data_root: Path) -> list[SmokeCell]:
    """The smoke cells of every table and ablation, labelled `<table>: <row> | <column>`."""
    from fedbench.runner.smoke.check import plan_cells
    from fedbench.runner.sweep import make_plan
    from fedbench.runner.table_config import list_tables

    cells = []
    for kind in ("table", "ablation"):
        for name in list_tables(kind):
            for cell in plan_cells(make_plan(name, kind, seeds=1), data_root):
                cell.label = f"{name}: {cell.label}"
                cells.append(cell)
    return cells
