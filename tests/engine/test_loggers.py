"""runtime.loggers: TensorBoard event files read back with TensorBoard's own EventAccumulator
equal metrics.jsonl (also after an interrupted, resumed run); missing packages are user errors."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from fedbench.config import load_run_config
from fedbench.engine import train
from fedbench.engine.loggers import check_loggers, flat_config, scalars
from fedbench.engine.loop import Engine
from fedbench.errors import FedbenchError
from tests.conftest import TINY, read_metrics

needs_tensorboard = pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="tensorboard not installed"
)


def _config(*extra: str):
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    return load_run_config(None, [*sets, "runtime.loggers=[tensorboard]", *extra])


def _events(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    acc.Reload()
    return acc


def _assert_events_equal_metrics(run_dir) -> None:
    acc = _events(run_dir)
    rows = read_metrics(run_dir)
    for key in ("test_acc", "test_loss", "train_loss", "lr", "comm_up"):
        events = acc.Scalars(key)
        assert [e.step for e in events] == [row["round"] for row in rows], key
        # Event files store float32.
        assert [e.value for e in events] == pytest.approx([row[key] for row in rows], rel=1e-6)


@needs_tensorboard
@pytest.mark.slow
def test_tensorboard_events_equal_metrics_jsonl(tmp_path) -> None:
    cfg = _config()
    result = train(cfg, tmp_path)
    assert result.status == "completed"
    _assert_events_equal_metrics(result.run_dir)
    acc = _events(result.run_dir)
    text = acc.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert yaml.safe_load(text.strip("`").removeprefix("yaml\n")) == cfg.to_dict()
    # The loggers do not change the run's identity: same run id as without them.
    assert (
        result.run_dir.name
        == load_run_config(None, [v for i, v in enumerate(TINY) if i % 2 == 1]).run_id()
    )


@needs_tensorboard
@pytest.mark.slow
def test_tensorboard_after_resume_has_no_duplicate_steps(tmp_path, monkeypatch) -> None:
    """Round 4 is interrupted after the round-2 checkpoint: rounds 3 and 4 are recomputed, and
    the round-3 events of the first attempt must not stay beside the new ones."""
    cfg = _config("runtime.checkpoint_every=2", "eval.every=1")
    real_round = Engine._round

    def interrupted(self, r, lr, diagnostics=False):
        if r == 3:
            raise KeyboardInterrupt
        return real_round(self, r, lr, diagnostics)

    monkeypatch.setattr(Engine, "_round", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(cfg, tmp_path)
    monkeypatch.setattr(Engine, "_round", real_round)
    result = train(cfg, tmp_path)
    assert result.status == "completed"
    _assert_events_equal_metrics(result.run_dir)


def test_missing_logger_package_is_a_user_error(monkeypatch, tmp_path) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(FedbenchError, match=r"pip install 'fedbench\[wandb\]'"):
        check_loggers(["wandb"])
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    cfg = load_run_config(None, [*sets, "runtime.loggers=[wandb]"])
    with pytest.raises(FedbenchError, match="wandb package is not installed"):
        train(cfg, tmp_path)
    assert not (tmp_path / "runs").exists()


def test_unknown_logger_is_a_config_error() -> None:
    with pytest.raises(FedbenchError, match=r"runtime\.loggers"):
        load_run_config(None, ["runtime.loggers=[neptune]"])


def test_flat_config_and_scalars() -> None:
    assert flat_config({"a": {"b": 1, "c": None, "d": [1, 2]}, "e": {}}) == {
        "a.b": 1,
        "a.c": "null",
        "a.d": "[1, 2]",
        "e": "{}",
    }
    assert scalars({"round": 3, "test_acc": 50, "v_spread": None, "ok": True}) == {"test_acc": 50.0}


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mlflow") is None, reason="mlflow not installed")
def test_mlflow_store_holds_metrics_and_params(tmp_path) -> None:
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    result = train(load_run_config(None, [*sets, "runtime.loggers=[mlflow]"]), tmp_path)
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=(result.run_dir / "mlruns").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("fedbench").experiment_id])
    rows = read_metrics(result.run_dir)
    history = client.get_metric_history(run.info.run_id, "test_acc")
    assert [(h.step, h.value) for h in history] == [(r["round"], r["test_acc"]) for r in rows]
    assert run.data.params["algorithm.name"] == "fedadamw"
    assert run.data.params["fl.rounds"] == "4"
    assert run.info.status == "FINISHED"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb not installed")
def test_wandb_offline_run_is_written_in_the_run_folder(tmp_path) -> None:
    sets = [v for i, v in enumerate(TINY) if i % 2 == 1]
    result = train(load_run_config(None, [*sets, "runtime.loggers=[wandb]"]), tmp_path)
    runs = list((result.run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) == 1 and runs[0].stat().st_size > 0
    assert read_metrics(result.run_dir)[-1]["round"] == 4  # metrics.jsonl unaffected
