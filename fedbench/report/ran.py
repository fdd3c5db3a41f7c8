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
    ("partition.shards_per_client", "shards"),
    ("fl.participation", "participation"),
    ("fl.rounds", "rounds"),
    ("fl.local_steps", "K"),
    ("fl.batch_size", "B"),
    ("privacy", "privacy"),
)
#: The partition settings that only some kinds read (partitions.KIND_SETTINGS).
KIND_FACTS = ("partition.alpha", "partition.shards_per_client")
#: A fact of its own: the partition kind with the settings it reads (partition_label).
PARTITION_SETTING = "partition setting"
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
    "partition.shards_per_client": "{}/client",
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


def reads(cfg: Cfg, setting: str) -> bool:
    """Whether cfg's partition kind reads partition.<setting> (alpha, shards_per_client):
    partitions.reads; an unknown kind (a config of another version) reads alpha only."""
    from fedbench.partitions import PARTITIONS, settings_read
    from fedbench.partitions.base import DEFAULT_READS

    kind = str(get_path(cfg, "partition.kind"))
    read = settings_read(PARTITIONS.get(kind)) if kind in PARTITIONS else DEFAULT_READS
    return setting in read


def partition_label(cfg: Cfg) -> str:
    """A partition kind with the settings it reads, as a header reads it: 'Dir-0.1' (kind
    dirichlet), 'dirichlet_equal Dir-0.3', 'shards 2/client', 'iid'."""
    kind = str(get_path(cfg, "partition.kind"))
    parts = [] if kind == "dirichlet" else [kind]
    for key in KIND_FACTS:
        if reads(cfg, key.split(".")[1]):
            parts.append(value_label(key, get_path(cfg, key)))
    return " ".join(parts) or kind


def _cell_value(key: str, cfg: Cfg) -> tuple[str, str]:
    """(identity, header text) of one key in one run config: partition.kind with the settings
    the kind reads; a partition setting its kind does not read is ('', '')."""
    if key == "partition.kind":
        text = partition_label(cfg)
        return text, text
    if key in KIND_FACTS and not reads(cfg, key.split(".")[1]):
        return "", ""
    value = get_path(cfg, key)
    return json.dumps(value), value_label(key, value)


def column_label(
    keys: Iterable[str], cfgs: list[Cfg], setting: dict[str, Any] | None = None
) -> str:
    """'CNN / Dir-0.6': each grid key's value in the column's run configs (several values, as a
    row override may give, are joined by 'or'); '' for a table without a grid. A partition kind
    names the settings it reads ('shards 2/client'). With `setting` (the column's grid values),
    a value that ran in place of the grid's says so: 'digits for CIFAR-10' (used where two
    columns would otherwise read the same)."""
    keys = list(keys)
    parts = []
    for key in keys:
        if key in KIND_FACTS and "partition.kind" in keys:
            continue  # in the kind's label
        texts = dict(_cell_value(key, c) for c in cfgs)
        text = " or ".join(t for t in texts.values() if t)
        if not text:
            continue
        values = [json.loads(v) for v in dict.fromkeys(json.dumps(get_path(c, key)) for c in cfgs)]
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
    if key == PARTITION_SETTING:
        return partition_label(cfg)
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
    if key in KIND_FACTS and not reads(cfg, key.split(".")[1]):
        return "-"  # a setting the partition kind does not read
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
    for key, name in (*FACTS, (PARTITION_SETTING, PARTITION_SETTING)):
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
    kinds = next(f for f in facts_ if f.name == "partition").values
    if len(kinds) > 1:  # each kind with its own settings: 'Dir-0.1 or shards 2/client'
        partition = text.get(PARTITION_SETTING, partition)
    else:
        if text["alpha"] != "-":
            partition += f", alpha {text['alpha']}"
        if text.get("shards", "-") != "-":
            partition += f", {text['shards']} shards per client"
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


# --- every other setting that acts on the runs ------------------------------------------------

#: Fields no report states although they are in the run id: where the data lives, evaluation
#: frequency and batch, extra diagnostics, and the device and engine (the same computation).
UNSTATED_PREFIXES = (
    "seed",
    "data.root",
    "data.path",
    "data.download",
    "eval.every",
    "eval.batch_size",
    "eval.diagnostics",
    "runtime.device",
    "runtime.engine",
)
#: Stated by the FACTS sentence (privacy: noise or its target, clip, delta).
FACT_FIELDS = (
    *(key for key, _ in FACTS if key != "privacy"),
    "model.pretrained",
    "privacy.noise_multiplier",
    "privacy.target_epsilon",
    "privacy.clip",
    "privacy.delta",
)


def stated_settings(cfg: Cfg) -> dict[str, Any]:
    """The fields of a resolved run config that act on its results (RunConfig.acting_data) and
    differ from the built-in defaults (its algorithm's, its privacy section's), flattened,
    beyond those the FACTS sentence states, plus algorithm.name; {} for a config this version
    cannot read."""
    return _settings(cfg)[0]


def _settings(cfg: Cfg) -> tuple[dict[str, Any], dict[str, Any]]:
    """(stated_settings, every acting field beyond the FACTS with its effective value: the one
    that ran, default or not)."""
    from fedbench.config import RunConfig, parse_run_config
    from fedbench.errors import FedbenchError

    try:
        run = parse_run_config(json.loads(json.dumps(cfg)))
    except FedbenchError:
        return {}, {}
    privacy = type(run.privacy)() if run.privacy is not None else None
    defaults = flatten(RunConfig(algorithm=type(run.algorithm)(), privacy=privacy).to_dict())
    stated = {"algorithm.name": run.algorithm.name}
    effective = dict(stated)
    for key, value in flatten(run.acting_data()).items():
        if key.startswith(UNSTATED_PREFIXES) or key in FACT_FIELDS:
            continue
        effective[key] = value
        if key not in defaults or value != defaults[key]:
            stated[key] = value
    return stated, effective


@dataclass(frozen=True)
class Scoped:
    """The stated settings of a table's runs, each once, where it applies: `base` (the same in
    every run), `columns` (keys that follow the column: the headers name them), `rows` (row label
    -> key -> text, for keys that follow the row or change within it)."""

    base: dict[str, str]
    columns: list[str]
    rows: dict[str, dict[str, str]]

    def base_text(self) -> str:
        """'data.image_size=14, eval.train_subset=0' (empty without any)."""
        return ", ".join(f"{k}={v}" for k, v in self.base.items())

    def rows_text(self) -> str:
        """'FedAvg: fedavg, lr=0.05; FedAdam: fedadam, lr=0.05, server_lr=0.1'."""
        return "; ".join(
            f"{row}: " + ", ".join(_row_item(k, v) for k, v in items.items())
            for row, items in self.rows.items()
            if items
        )


def _row_item(key: str, text: str) -> str:
    if key == "algorithm.name":
        return text
    return f"{key.removeprefix('algorithm.')}={text}"


def _text(value: Any) -> str:
    """A stated value as YAML writes it: 0.05, true, null, [a, b]."""
    if isinstance(value, dict | list | bool) or value is None:
        return json.dumps(value)
    return _num(value)


def scope_settings(runs: list[tuple[str, str, Cfg]], grid_keys: Iterable[str]) -> Scoped:
    """stated_settings of every (row label, column key, run config), sorted by where each
    applies (Scoped). Grid keys are left out: the column headers name them. A key some run
    states is shown with its effective value in every run that has it: FedAvg's lr at its
    default still reads `lr=0.1` beside FedAdam's stated `lr=0.05`."""
    settings = [(row, col, _settings(cfg)) for row, col, cfg in runs]
    stated = [(row, col, effective) for row, col, (_, effective) in settings]
    skip = set(grid_keys)
    named = (k for _, _, (s, _) in settings for k in s)
    keys = [k for k in dict.fromkeys(named) if k not in skip]
    base: dict[str, str] = {}
    columns: list[str] = []
    rows: dict[str, dict[str, str]] = {row: {} for row in dict.fromkeys(r for r, _, _ in stated)}
    for key in keys:
        values = [(row, col, json.dumps(s.get(key))) for row, col, s in stated]
        distinct = dict.fromkeys(v for _, _, v in values)
        if len(distinct) == 1:
            base[key] = _text(json.loads(next(iter(distinct))))
            continue
        by_col: dict[str, set[str]] = {}
        by_row: dict[str, list[str]] = {}
        for row, col, v in values:
            by_col.setdefault(col, set()).add(v)
            by_row.setdefault(row, [])
            if v not in by_row[row]:
                by_row[row].append(v)
        if key != "algorithm.name" and all(len(v) == 1 for v in by_col.values()):
            columns.append(key)
            continue
        for row, texts in by_row.items():
            shown = [_text(json.loads(v)) for v in texts if v != "null"]
            if shown:
                varies = " (varies by column)" if len(texts) > 1 else ""
                rows[row][key] = " or ".join(shown) + varies
    return Scoped(base, columns, rows)
