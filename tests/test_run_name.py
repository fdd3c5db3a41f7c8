"""Run folder names carry the short settings that differ from the algorithm's defaults."""

from fedbench.config import load_run_config
from fedbench.run_name import differing_label


def test_runs_differing_in_alpha_get_different_readable_names() -> None:
    """The bug: two FedAdamW runs differing in alpha shared the prefix fedadamw-digits-cnn-s0."""
    a = load_run_config(None, ["algorithm.alpha=0.1"]).run_id()
    b = load_run_config(None, ["algorithm.alpha=0.9"]).run_id()
    default = load_run_config(None, []).run_id()
    assert a.startswith("fedadamw-alpha0.1-digits-cnn-s0-")
    assert b.startswith("fedadamw-alpha0.9-digits-cnn-s0-")
    assert default.startswith("fedadamw-digits-cnn-s0-")


def test_label_orders_own_fields_first_uses_paper_letters_and_keeps_to_budget() -> None:
    cfg = load_run_config(
        None,
        [
            "fl.rounds=300",
            "partition.alpha=0.1",
            "algorithm.v_agg=none",
            "algorithm.lr=0.001",
            "model.norm=gn",
        ],
    )
    # norm-gn does not fit in the 32 characters after the first four.
    assert cfg.run_id().startswith("fedadamw-v_agg-none-dir0.1-lr0.001-T300-digits-cnn-s0-")
    defaults = {"algorithm": {"alpha": 0.5, "m_agg": False}, "fl": {"rounds": 30}}
    config = {"algorithm": {"alpha": 0.25, "m_agg": True}, "fl": {"rounds": 200}}
    assert differing_label(config, defaults, {"alpha", "m_agg"}) == "-alpha0.25-m_agg-true-T200"
    # Tokens that do not fit the budget are left out (the hash still tells the runs apart).
    assert differing_label(config, defaults, {"alpha", "m_agg"}, budget=15) == "-alpha0.25-T200"


def test_names_are_safe_for_a_file_system() -> None:
    cfg = load_run_config(None, ["data.name=glue/cola", "model.name=roberta_micro"])
    assert "/" not in cfg.run_id()
    label = differing_label({"model": {"lora": None, "x": "a/b c"}}, {"model": {"x": "d"}}, set())
    assert label == "-model.x-a_b_c"


def test_a_large_float_keeps_its_sign_of_exponent() -> None:
    """1e12 was written lr1e+12, which the folder name turned into lr1e-12 (the opposite)."""
    big = load_run_config(None, ["algorithm.lr=1.0e12"]).run_id()
    small = load_run_config(None, ["algorithm.lr=1.0e-12"]).run_id()
    assert big.startswith("fedadamw-lr1e12-digits-cnn-s0-")
    assert small.startswith("fedadamw-lr1e-12-digits-cnn-s0-")
    assert differing_label({"fl": {"x": 2.5e6}}, {"fl": {"x": 1.0}}, set()) == "-fl.x2.5e06"
