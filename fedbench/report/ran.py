"""What a table's runs actually were, from their resolved run configs, and how that differs from
the paper's setting (the table config without its preset and --set).

A report used to carry the paper's labels whatever ran: a quick preset on 8x8 digits was titled
"CIFAR-100 ... 300 rounds" and its digits accuracies sat beside CIFAR-100 numbers. Every report
now states the dataset, model, federation and local-training fields of the runs, names each
column by the values that ran in it, and compares the whole resolved config with the paper's.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from fedbench.engine.schedule import clients_per_round
from fedbench.report.paper import DATASET_LABELS, DEFAULT_VALUES

Cfg = dict[str, Any]

#: The fields every report states (the issue's list: dataset, model, rounds, K, B, clients,
#: participation), in reading order, with their short names.
FACTS: tuple[tuple[str, str], ...] = (
    ("data.name", "dataset"),
    ("model.name", "model"),
    ("partition.clients", "clients"),
    ("partition.kind", "partition"),
    ("partition.alpha", "alpha"),
    ("fl.participation", "participation"),
    ("fl.rounds", "rounds"),
    ("fl.local_steps", "K"),
    ("fl.batch_size", "B"),
    ("privacy", "privacy"),
)
#: Config fields that do not change what a table's numbers mean: left out of the comparison with
#: the paper's setting (where data lives, how often to evaluate, devices, seeds).
IGNORED_PREFIXES = ("runtime.", "eval.", "seed", "data.root", "data.path", "data.download")

NO_DP = "no DP"
MODEL_LABELS = {
    **DEFAULT_VALUES["model.name"],
    "cnn": "CNN",
    "logreg": "LogReg",
    "mlp": "MLP",
    "roberta_base": "RoBERTa-Base",
}
#: How a grid key's value reads in a column header ("{}" is the value).
KEY_FORMATS = {
    "partition.alpha": "Dir-{}",
    "algorithm.alpha": "α={}",
    "algorithm.weight_decay": "λ={}",
    "algorithm.beta2": "β2={}",
    "privacy.noise_multiplier": "σ={}",
    "privacy.target_epsilon": "ε={}",
    "privacy.delta": "δ={}",
}


def flatten(data: Cfg, prefix: str = "") -> dict[str, Any]:
    """{'fl': {'rounds': 3}} -> {'fl.rounds': 3} (lists and None stay values)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{dotted}."))
        else:
            out[dotted] = value
    return out


def get_path(cfg: Cfg, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _num(value: Any) -> str:
    """0.6 -> '0.6', 1e-05 -> '1e-05', 300 -> '300' (no trailing zeros, no float noise)."""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def value_label(key: str, value: Any) -> str:
    """One grid value as a header reads it: resnet18 -> ResNet-18, partition.alpha 0.6 -> Dir-0.6."""
    if key == "model.name":
        return MODEL_LABELS.get(str(value), str(value))
    if key == "data.name":
        return dataset_label(str(value))
    if key in KEY_FORMATS:
        return KEY_FORMATS[key].format(_num(value))
    short = key.split(".")[0] if key.endswith(".name") else key.split(".")[-1]
    return f"{short}={_num(value)}"


def dataset_label(name: str) -> str:
    if name.startswith("glue/"):
        return f"GLUE {name.split('/', 1)[1].upper()}"
    return DATASET_LABELS.get(name, name)


def column_label(
    keys: Iterable[str], cfgs: list[Cfg], setting: dict[str, Any] | None = None
) -> str:
    """'CNN / Dir-0.6': each grid key's value in the column's run configs (several values, as a
    row override may give, are joined by 'or'); '' for a table without a grid. With `setting`
    (the column's grid values), a value that ran in place of the grid's says so: 'digits for
    CIFAR-10' (used where two columns would otherwise read the same)."""
    parts = []
    for key in keys:
        values = [json.loads(v) for v in dict.fromkeys(json.dumps(get_path(c, key)) for c in cfgs)]
        text = " or ".join(value_label(key, v) for v in values)
        if setting is not None and key in setting and values != [setting[key]]:
            text += f" for {value_label(key, setting[key])}"
        parts.append(text)
    return " / ".join(parts)


def _participation(cfg: Cfg) -> str:
    p, n = get_path(cfg, "fl.participation"), get_path(cfg, "partition.clients")
    if p is None or n is None:
        return "?"
    return f"{p * 100:g}% ({clients_per_round(p, n)} per round)"


def _privacy(cfg: Cfg) -> str:
    """'DP σ=1, C=0.1, δ=1e-05' (σ 'calibrated to ε=3' with a target); 'no DP' when not private."""
    privacy = cfg.get("privacy")
    if not privacy:
        return NO_DP
    noise = privacy.get("noise_multiplier")
    if privacy.get("target_epsilon") is not None:
        noise = f"calibrated to ε={_num(privacy['target_epsilon'])}"
    else:
        noise = f"σ={_num(noise)}"
    return f"DP {noise}, C={_num(privacy.get('clip'))}, δ={_num(privacy.get('delta'))}"


def _fact_text(key: str, cfg: Cfg) -> str:
    if key == "privacy":
        return _privacy(cfg)
    value = get_path(cfg, key)
    if key == "data.name":
        return dataset_label(str(value))
    if key == "model.name":
        label = MODEL_LABELS.get(str(value), str(value))
        return label + (" (pretrained)" if get_path(cfg, "model.pretrained") else "")
    if key == "fl.participation":
        return _participation(cfg)
    if key == "fl.batch_size" and value == 0:
        return "full client data"
    if key == "partition.alpha" and not str(get_path(cfg, "partition.kind")).startswith("dirich"):
        return "-"
    return _num(value)


@dataclass(frozen=True)
class Fact:
    key: str
    name: str
    #: The text per distinct value, in first-seen order; one entry when every run agrees.
    values: list[str]
    #: True when the value follows the column (it is then in the column headers).
    per_column: bool


def facts(cfgs_by_column: dict[str, list[Cfg]]) -> list[Fact]:
    """The FACTS over every run of the table, noting those that change with the column."""
    out = []
    for key, name in FACTS:
        per_col = {
            col: list(dict.fromkeys(_fact_text(key, c) for c in cfgs))
            for col, cfgs in cfgs_by_column.items()
            if cfgs
        }
        values = list(dict.fromkeys(v for vs in per_col.values() for v in vs))
        per_column = len(values) > 1 and all(len(vs) == 1 for vs in per_col.values())
        out.append(Fact(key, name, values, per_column))
    return out


def describe(facts_: list[Fact]) -> str:
    """The what-ran sentence of every report, e.g. 'digits, model CNN or LogReg (per column); 20
    clients (dirichlet, alpha 0.6 or 0.1 (per column)), 20% (4 per round) participation; 20
    rounds, K=10 local steps, B=32'."""
    text = {f.name: _join(f) for f in facts_}
    partition = text["partition"]
    if text["alpha"] != "-":
        partition += f", alpha {text['alpha']}"
    sentence = (
        f"{text['dataset']}, model {text['model']}; {text['clients']} clients ({partition}), "
        f"{text['participation']} participation; {text['rounds']} rounds, K={text['K']} local "
        f"steps, B={text['B']}"
    )
    return sentence + (f"; {text['privacy']}" if text["privacy"] != NO_DP else "")


def _join(fact: Fact) -> str:
    if len(fact.values) == 1:
        return fact.values[0]
    return " or ".join(fact.values) + (" (per column)" if fact.per_column else " (varies by row)")


def differing_keys(pairs: Iterable[tuple[Cfg, Cfg]]) -> list[str]:
    """The dotted fields where what ran differs from the paper's setting, over (ran, paper)
    config pairs: the FACTS' fields first, in their order, then the others (e.g. algorithm.lr)."""
    found: dict[str, None] = {}
    for ran, paper in pairs:
        a, b = flatten(ran), flatten(paper)
        for key in sorted(set(a) | set(b)):
            if key.startswith(IGNORED_PREFIXES) or a.get(key) == b.get(key):
                continue
            found[key] = None
    facts_first = [k for k, _ in FACTS if k in found]
    return facts_first + [k for k in found if k not in facts_first]


def differences(pairs: Iterable[tuple[Cfg, Cfg]]) -> list[str]:
    """differing_keys with the FACTS' short names (dataset, model, rounds, K, ...)."""
    fact_names = dict(FACTS)
    return [fact_names.get(k, k) for k in differing_keys(pairs)]


def cell_label(setting: dict[str, Any], cfg: Cfg) -> str:
    """A (row, column) cell's column named by what runs in it: 'CNN for ResNet-18 / Dir-0.6'
    when a preset or --set replaced the grid value, 'ResNet-18 / Dir-0.6' when not, '-' for a
    table without a grid. Commands that list a plan's cells (the dry run, tune, epsilon,
    compare) use it, so that no cell reads as the paper's setting when it is not."""
    return column_label(list(setting), [cfg], setting) or "-"


def plan_sentence(preset: str | None, cfgs_by_column: dict[str, list[Cfg]]) -> str:
    """'preset quick: digits, model CNN or LogReg (per column); 20 clients ...': what a plan's
    runs train (the resolved configs), with the preset named."""
    named = f"preset {preset}" if preset else "no preset"
    return f"{named}: {describe(facts(cfgs_by_column))}" if cfgs_by_column else named


def setting_key(setting: dict[str, Any]) -> str:
    """The JSON key of a column's grid values, as plan.json and collect() spell it."""
    return json.dumps(setting, sort_keys=False)
