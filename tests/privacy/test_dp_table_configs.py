"""The DP tables as shipped: dp_table2's ResNet-18 normalises with GroupNorm of 2 groups (the
authors' model), its fmnist-small preset, and every DP table's note on debias_floor."""

from __future__ import annotations

from torch import nn

from fedbench.models import build_model
from fedbench.runner.table_config import expand, load_table

DP_TABLES = [f"dp_table{i}" for i in range(2, 12)] + ["dp_table2_vit"]


def test_dp_table2_resnet18_has_two_groupnorm_groups() -> None:
    cfg = expand(load_table("dp_table2"), seeds=1, methods=["DP-FedAdamW"]).runs[0].cfg
    assert (cfg.model.name, cfg.model.norm, cfg.model.norm_groups) == ("resnet18", "gn", 2)
    norms = [
        m for m in build_model(cfg.model, (3, 32, 32), 10).modules() if isinstance(m, nn.GroupNorm)
    ]
    # stem 1 + two per basic block (8 blocks) + the 3 downsampling shortcuts
    assert len(norms) == 20 and {m.num_groups for m in norms} == {2}


def test_dp_table2_fmnist_small_preset() -> None:
    plan = expand(load_table("dp_table2"), preset="fmnist-small", seeds=1, methods=["DP-FedAdamW"])
    cfg = plan.runs[0].cfg
    assert (cfg.data.name, cfg.data.image_size, cfg.model.name) == ("fmnist", 14, "cnn")
    assert (cfg.partition.clients, cfg.fl.participation, cfg.fl.rounds, cfg.fl.local_steps) == (
        50,
        0.1,
        100,
        10,
    )
    assert cfg.privacy.clip == 0.1 and cfg.privacy.noise_multiplier == 1.0
    assert cfg.algorithm.lr == 3.0e-3 and cfg.algorithm.blocks == "dp_paper"


def test_every_dp_table_note_says_the_floor_is_an_addition() -> None:
    for name in DP_TABLES:
        note = load_table(name).note
        assert "debias_floor f (default 0.03) is fedbench's addition" in note, name
        assert "not in the paper's Algorithm 1" in note and "f = 0" in note, name
