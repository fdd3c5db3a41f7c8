from __future__ import annotations

from pathlib import Path

import pytest

from fedbench.errors import FedbenchError
from fedbench.runner.table_config import (
    expand,
    find_table,
    list_tables,
    load_table,
    parse_table_config,
)
from tests.conftest import tiny_table_data


def table(**changes):
    data = tiny_table_data()
    data.update(changes)
    return parse_table_config(data)


def test_rows_x_columns_x_seeds():
    t = table(grid={"partition.alpha": [0.6, 0.1], "fl.local_steps": [1, 2, 3]}, seeds=[0, 1])
    plan = expand(t)
    assert len(plan.runs) == 2 * 6 * 2
    assert len({r.run_id for r in plan.runs}) == len(plan.runs)
    first = plan.runs[0]
    assert (first.method, first.seed) == ("Local SGD", 0)
    assert first.setting == {"partition.alpha": 0.6, "fl.local_steps": 1}
    assert first.cfg.algorithm.name == "fedavg"
    assert {r.cfg.seed for r in plan.runs} == {0, 1}
    assert plan.name == "tiny"


def test_method_switching_algorithm_keeps_only_common_base_fields():
    t = table()
    t.base["algorithm"]["alpha"] = 0.3  # a fedadamw field: must not leak into the fedavg row
    plan = expand(t)
    fedavg = next(r for r in plan.runs if r.method == "Local SGD")
    fedadamw = next(r for r in plan.runs if r.method == "FedAdamW")
    assert fedavg.cfg.algorithm.grad_clip == 10.0
    assert fedadamw.cfg.algorithm.alpha == 0.5  # method beats base


def test_precedence_base_method_grid_preset_set():
    t = table(
        grid={"fl.local_steps": [4]},
        methods={"M": {"fl": {"local_steps": 3, "batch_size": 8}, "algorithm": {"lr": 0.5}}},
        presets={"p": {"fl.batch_size": 4, "algorithm.lr": 0.25}},
    )
    cfg = expand(t).runs[0].cfg
    assert cfg.fl.local_steps == 4  # grid beats method
    assert cfg.fl.batch_size == 8 and cfg.algorithm.lr == 0.5  # method beats base
    cfg = expand(t, preset="p").runs[0].cfg
    assert cfg.fl.batch_size == 4 and cfg.algorithm.lr == 0.25  # preset beats method
    t.presets["p"]["fl.local_steps"] = 7
    assert expand(t, preset="p").runs[0].cfg.fl.local_steps == 7  # preset beats grid
    cfg = expand(t, preset="p", overrides=["fl.local_steps=9", "algorithm.lr=0.125"]).runs[0].cfg
    assert cfg.fl.local_steps == 9 and cfg.algorithm.lr == 0.125  # --set beats everything
    assert expand(t, preset="p").name == "tiny-p"


def test_preset_row_overrides_beat_the_preset_but_not_set():
    t = table(
        presets={"p": {"algorithm.lr": 0.25, "methods": {"FedAdamW": {"algorithm.lr": 0.003}}}}
    )
    by_row = {r.method: r.cfg for r in expand(t, preset="p", seeds=1).runs}
    assert by_row["FedAdamW"].algorithm.lr == 0.003
    assert by_row["Local SGD"].algorithm.lr == 0.25
    cfg = (
        expand(t, preset="p", seeds=1, methods=["FedAdamW"], overrides=["algorithm.lr=0.5"])
        .runs[0]
        .cfg
    )
    assert cfg.algorithm.lr == 0.5
    bad = table(presets={"p": {"methods": {"Nope": {"algorithm.lr": 0.1}}}})
    with pytest.raises(FedbenchError, match="unknown rows"):
        expand(bad, preset="p")


def test_preset_mapping_replaces_grid_values_but_keeps_the_column():
    t = table(
        grid={"model.name": ["resnet18", "vit_tiny"]},
        presets={"quick": {"model.name": {"resnet18": "cnn", "vit_tiny": "logreg"}}},
    )
    runs = expand(t, preset="quick", seeds=1, methods=["FedAdamW"]).runs
    assert [r.setting["model.name"] for r in runs] == ["resnet18", "vit_tiny"]
    assert [r.cfg.model.name for r in runs] == ["cnn", "logreg"]


def test_preset_column_overrides_follow_the_grid_value_after_the_preset() -> None:
    t = table(
        grid={"partition.alpha": [0.6, 0.1]},
        column_overrides={"partition.alpha": {0.6: {"eval.target": 81.0}}},
        presets={
            "q": {
                "eval.target": 20.0,
                "column_overrides": {"partition.alpha": {0.1: {"eval.target": 30.0}}},
            },
        },
    )
    runs = expand(t, seeds=1, methods=["FedAdamW"]).runs
    assert [r.cfg.eval.target for r in runs] == [81.0, None]
    quick = expand(t, preset="q", seeds=1, methods=["FedAdamW"]).runs
    assert [r.cfg.eval.target for r in quick] == [20.0, 30.0]  # preset, then its column
    bad = table(presets={"q": {"column_overrides": {"model.name": {"cnn": {}}}}})
    with pytest.raises(FedbenchError, match="column_overrides"):
        expand(bad, preset="q")


def test_seeds_and_methods_selection():
    t = table(seeds=[3, 4, 5])
    plan = expand(t, seeds=2, methods=["FedAdamW"])
    assert [(r.method, r.seed) for r in plan.runs] == [("FedAdamW", 3), ("FedAdamW", 4)]
    assert [r.seed for r in expand(t, seeds=4, methods=["FedAdamW"]).runs] == [3, 4, 5, 6]
    with pytest.raises(FedbenchError, match="no row 'Nope'"):
        expand(t, methods=["Nope"])


def test_unknown_algorithm_and_bad_values_are_one_line_errors():
    t = table(methods={"X": {"algorithm": {"name": "scaffold_nope"}}})
    with pytest.raises(FedbenchError, match=r"row .X..*unknown algorithm 'scaffold_nope'") as exc:
        expand(t)
    assert "\n" not in str(exc.value)
    with pytest.raises(FedbenchError, match="no preset 'slow'"):
        expand(table(), preset="slow")
    with pytest.raises(FedbenchError, match=r"fl\.rounds"):
        expand(table(), overrides=["fl.rounds=0"])
    with pytest.raises(FedbenchError, match="unknown metric"):
        table(metrics=["accuracy"])
    with pytest.raises(FedbenchError, match="not a table config"):
        parse_table_config({"seed": 0})


def test_client_steps_estimate():
    plan = expand(table())
    # rounds 3 x clients 2 (0.4 of 5) x local steps 2, for 2 rows x 2 seeds
    assert plan.client_steps() == 4 * 3 * 2 * 2


#: Ablations and tables that are fedbench's own, not a paper table.
OWN_ABLATIONS = {"blocks", "fedadamw-variants"}
OWN_TABLES = {"baselines", "personalised"}


def test_shipped_configs_are_found_and_validate():
    """Every shipped table and ablation (FedAdamW, DP-FedAdamW) loads by name, names its paper
    table, and expands at its quick preset into valid run configs."""
    tables = list_tables("table")
    assert {"table1", "table2", "table3", "dp_table2", "dp_table11"} <= set(tables)
    ablations = set(list_tables("ablation"))
    assert {"components", "alpha", "weight-decay", "aggregation", "table11"} <= ablations
    assert ablations >= OWN_ABLATIONS
    for kind, names in (("table", tables), ("ablation", list_tables("ablation"))):
        for name in names:
            t = load_table(name, kind)
            assert "quick" in t.presets, name
            # fedbench's own ablations have no paper numbers and say so in their title.
            if name in OWN_ABLATIONS:
                assert t.paper is None and "fedbench ablation" in t.title, name
            elif name in OWN_TABLES:
                assert t.paper is None and "fedbench table" in t.title, name
            else:
                assert t.paper is not None, name
            plan = expand(t, preset="quick", seeds=1)
            assert plan.runs, name


def test_find_table_by_path(tiny_table_path: Path):
    assert find_table(str(tiny_table_path)) == tiny_table_path
    with pytest.raises(FedbenchError, match="no table named 'nope'"):
        find_table("nope")


def test_set_on_a_grid_key_replaces_the_columns():
    t = table(grid={"partition.alpha": [0.6, 0.1], "fl.local_steps": [4]})
    plan = expand(t, seeds=1, methods=["FedAdamW"], overrides=["partition.alpha=0.1"])
    # one column, labelled with what runs (it used to be two columns both running alpha=0.1)
    assert [r.setting for r in plan.runs] == [{"partition.alpha": 0.1, "fl.local_steps": 4}]
    assert plan.runs[0].cfg.partition.alpha == 0.1
    assert plan.table.grid["partition.alpha"] == [0.1]  # plan.json records the grid that ran
    listed = expand(t, seeds=1, methods=["FedAdamW"], overrides=["partition.alpha=[0.3, 0.05]"])
    assert [r.setting["partition.alpha"] for r in listed.runs] == [0.3, 0.05]
    assert [r.cfg.partition.alpha for r in listed.runs] == [0.3, 0.05]
    with pytest.raises(FedbenchError, match=r"--set partition.alpha=\[\] gives no column"):
        expand(t, overrides=["partition.alpha=[]"])


def test_set_on_a_grid_key_beats_the_presets_column_mapping():
    t = table(
        grid={"model.name": ["resnet18", "vit_tiny"]},
        presets={"quick": {"model.name": {"resnet18": "cnn", "vit_tiny": "logreg"}}},
    )
    runs = expand(t, preset="quick", seeds=1, methods=["FedAdamW"], overrides=["model.name=cnn"])
    assert [(r.setting["model.name"], r.cfg.model.name) for r in runs.runs] == [("cnn", "cnn")]
    runs = expand(
        t, preset="quick", seeds=1, methods=["FedAdamW"], overrides=["model.name=vit_tiny"]
    ).runs
    assert [(r.setting["model.name"], r.cfg.model.name) for r in runs] == [("vit_tiny", "vit_tiny")]


def test_column_overrides_set_fields_per_grid_value_with_their_precedence():
    """grid value < column override < preset < preset row < --set; other columns keep the base."""
    data = tiny_table_data()
    data["base"]["privacy"] = {"noise_multiplier": 1.0, "delta": 1.0e-5}
    data["methods"] = {"DP": {"algorithm": {"name": "dp_fedavg"}}}
    data["grid"] = {"partition.alpha": [0.6, 0.1], "fl.local_steps": [2, 3]}
    data["column_overrides"] = {
        "partition.alpha": {0.1: {"privacy.delta": 1.0e-6, "fl.local_steps": 5}},
    }
    t = table(**{k: data[k] for k in ("base", "methods", "grid", "column_overrides")})
    runs = expand(t, seeds=1).runs
    deltas = {(r.setting["partition.alpha"], r.setting["fl.local_steps"]): r for r in runs}
    assert deltas[0.6, 2].cfg.privacy.delta == 1.0e-5 and deltas[0.6, 3].cfg.fl.local_steps == 3
    assert deltas[0.1, 2].cfg.privacy.delta == 1.0e-6
    assert deltas[0.1, 2].cfg.fl.local_steps == 5  # the column override beats the grid value
    assert deltas[0.1, 2].setting == {"partition.alpha": 0.1, "fl.local_steps": 2}  # identity kept
    t.presets["p"] = {"privacy.delta": 1.0e-7}
    assert {r.cfg.privacy.delta for r in expand(t, preset="p").runs} == {1.0e-7}
    overridden = expand(t, overrides=["privacy.delta=1e-8"]).runs
    assert {r.cfg.privacy.delta for r in overridden} == {1.0e-8}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"data.name": {"digits": {"privacy.delta": 1e-6}}}, "is not a grid key"),
        ({"partition.alpha": {0.3: {"privacy.delta": 1e-6}}}, "0.3 is not one of the grid"),
        ({"partition.alpha": {0.6: 1e-6}}, "column_overrides"),
    ],
)
def test_column_overrides_must_name_grid_keys_and_values(overrides, message):
    with pytest.raises(FedbenchError, match=message):
        table(column_overrides=overrides)


def test_table11_rows_are_algorithm_2_algorithm_3_and_local_adamw():
    """FedAdamW Table 11's "Algorithm 3" is Appendix A's (beta1 0, lambda 0, convex alignment)."""
    t = load_table("table11", "ablation")
    assert t.paper is not None and t.paper.table == "fedadamw_table11"
    runs = {r.method: r.cfg.algorithm for r in expand(t, seeds=1).runs}
    alg3, alg2 = runs["FedAdamW (Algorithm 3)"], runs["FedAdamW (Algorithm 2)"]
    assert (alg3.beta1, alg3.weight_decay, alg3.alignment, alg3.blocks) == (
        0.0,
        0.0,
        "convex",
        "auto",
    )
    assert (alg2.beta1, alg2.weight_decay, alg2.alignment) == (0.9, 0.01, "additive")
    assert runs["Local AdamW"].name == "local_adamw"


@pytest.mark.parametrize("char", ["\x00", "\x1b", "\u202e", "\n", "\u2066"])
@pytest.mark.parametrize("where", ["row", "title", "table", "column_labels.partition.alpha"])
def test_a_label_no_report_can_hold_is_refused_in_one_line(char: str, where: str):
    """A row label or title with NUL, ESC or an RTL override was written raw into table.md and
    .csv (a newline split the markdown row)."""
    data = tiny_table_data()
    label = f"Fed{char}AdamW"
    if where == "row":
        data["methods"][label] = data["methods"].pop("FedAdamW")
    elif where.startswith("column_labels"):
        data["column_labels"] = {"partition.alpha": {0.6: label}}
    else:
        data[where] = label
    with pytest.raises(FedbenchError) as caught:
        parse_table_config(data, "t.yaml")
    message = str(caught.value)
    name = where.split(".partition")[0] + (".partition.alpha" if "column" in where else "")
    assert message.startswith(f"t.yaml: {name} {label!r} holds U+{ord(char):04X} (a ")
    assert "at character 4, which a report cannot hold; write it without" in message
    assert "\n" not in message


def test_a_note_may_span_lines_and_plain_unicode_labels_stay():
    data = tiny_table_data()
    data["note"] = "first line\nsecond line"
    data["methods"]["FedAdamW (α 0.5, β₂ 0.999) — 日本"] = data["methods"].pop("FedAdamW")
    table = parse_table_config(data)
    assert table.note == "first line\nsecond line" and len(table.methods) == 2
