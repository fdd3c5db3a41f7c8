"""Config: YAML + `--set` overrides (YAML-typed), per-algorithm fields, unknown keys, run ids."""

import pytest
from pydantic import ValidationError

from fedbench.algorithms.fedadamw import FedAdamWConfig
from fedbench.config import RunConfig, apply_overrides, load_run_config, parse_override
from fedbench.errors import FedbenchError


def test_override_values_are_yaml_typed():
    assert parse_override("a.b=null") == (["a", "b"], None)
    assert parse_override("x=true") == (["x"], True)
    assert parse_override("lr=3.0e-4") == (["lr"], 3.0e-4)
    assert parse_override("seeds=[0, 1]") == (["seeds"], [0, 1])
    assert parse_override("name=fedadamw") == (["name"], "fedadamw")
    assert parse_override("path=a=b") == (["path"], "a=b")
    with pytest.raises(FedbenchError, match="no '='"):
        parse_override("fl.rounds")


def test_overrides_apply_in_order_and_replace_null_sections():
    data = {"fl": {"rounds": 3}, "privacy": None}
    out = apply_overrides(data, ["fl.rounds=5", "fl.rounds=7", "privacy.clip=0.5"])
    assert out == {"fl": {"rounds": 7}, "privacy": {"clip": 0.5}}
    assert data == {"fl": {"rounds": 3}, "privacy": None}  # the input is not modified


def test_yaml_file_then_overrides(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text("algorithm: {name: fedadamw, alpha: 0.25}\nfl: {rounds: 9}\n")
    cfg = load_run_config(path, ["algorithm.v_agg=full", "fl.rounds=11"])
    assert isinstance(cfg.algorithm, FedAdamWConfig)
    assert (cfg.algorithm.alpha, cfg.algorithm.v_agg, cfg.fl.rounds) == (0.25, "full", 11)


def test_algorithm_defaults_follow_algorithms_md():
    a = RunConfig.model_validate({"algorithm": {"name": "fedadamw"}}).algorithm
    assert (a.alpha, a.beta1, a.beta2, a.eps, a.lr, a.weight_decay) == (
        0.5,
        0.9,
        0.999,
        1e-8,
        3e-4,
        0.01,
    )
    assert (a.v_agg, a.m_agg, a.decoupled, a.blocks, a.v_bias_correction) == (
        "block_mean",
        False,
        True,
        "auto",
        "global",
    )
    assert (a.m_bias_correction, a.alignment) == ("local", "additive")
    f = RunConfig.model_validate({"algorithm": {"name": "fedavg"}}).algorithm
    assert (f.lr, f.weight_decay, f.grad_clip, f.server_lr) == (0.1, 1e-3, 10.0, 1.0)


def test_fields_of_another_algorithm_are_rejected():
    with pytest.raises(FedbenchError, match=r"algorithm\.alpha"):
        load_run_config(None, ["algorithm.name=fedavg", "algorithm.alpha=0.5"])


def test_table_config_is_refused_by_train(tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text("table: t1\nmethods: {}\n")
    with pytest.raises(FedbenchError, match="fedbench run"):
        load_run_config(path)


def test_run_id_is_stable_and_ignores_workers():
    a = load_run_config(None, ["fl.rounds=3"])
    b = load_run_config(None, ["fl.rounds=3", "runtime.workers=4", "runtime.checkpoint_every=2"])
    c = load_run_config(None, ["fl.rounds=4"])
    assert a.run_id() == b.run_id() != c.run_id()
    assert a.run_id().startswith("fedadamw-digits-cnn-s0-")


def test_configs_are_frozen_values():
    cfg = load_run_config(None, ["algorithm.name=fedavg"])
    with pytest.raises(ValidationError, match="frozen"):
        cfg.fl.rounds = 3
    with pytest.raises(ValidationError, match="frozen"):
        cfg.algorithm.lr = 1.0
    longer = cfg.model_copy(update={"fl": cfg.fl.model_copy(update={"rounds": 99})})
    assert (longer.fl.rounds, cfg.fl.rounds) == (99, 30)


def test_dp_algorithm_gets_the_privacy_defaults_and_unknown_names_fail():
    cfg = RunConfig.model_validate({"algorithm": {"name": "dp_fedavg"}})
    assert cfg.privacy is not None and cfg.privacy.noise_multiplier == 1.0
    assert RunConfig.model_validate({"algorithm": {"name": "fedavg"}}).privacy is None
    with pytest.raises(FedbenchError, match="unknown algorithm 'fedavgg'"):
        load_run_config(None, ["algorithm.name=fedavgg"])
    with pytest.raises(FedbenchError, match=r"algorithm\.lr"):
        load_run_config(None, ["algorithm.name=dp_fedadamw", "algorithm.lr=-1"])
