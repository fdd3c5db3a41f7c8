"""`--smoke`: the smoke form of a cell, generated data in the real formats, the one-line
outcomes and the exit code, and the covering set CI trains."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from fedbench.config import DataConfig, load_run_config
from fedbench.data import load_dataset
from fedbench.errors import FedbenchError
from fedbench.runner.smoke.cells import LOCAL_STEPS, MAX_BATCH, smoke_config
from fedbench.runner.smoke.coverage import covering, model_key, rule_key
from fedbench.runner.smoke.data import N_TEST, N_TRAIN, smoke_data
from fedbench.runner.smoke.run import SmokeOutcome, one_line
from fedbench.runner.sweep import make_plan
from tests.conftest import tiny_table_data


@pytest.mark.parametrize(
    ("name", "shape", "classes"),
    [
        ("cifar10", (3, 32, 32), 10),
        ("cifar100", (3, 32, 32), 100),
        ("fmnist", (1, 28, 28), 10),
        ("tinyimagenet", (3, 64, 64), 200),
        ("glue/sst2", (128,), 2),
        ("glue/mnli", (128,), 3),
        ("femnist", (1, 28, 28), 62),
    ],
)
def test_generated_data_loads_through_the_real_loader_at_the_real_shape(
    tmp_path: Path, name: str, shape: tuple, classes: int
) -> None:
    fields, what = smoke_data(DataConfig(name=name), tmp_path)
    assert what is not None and name in what
    data = load_dataset(DataConfig(name=name, **fields))
    assert tuple(data.x_train.shape[1:]) == shape and data.num_classes == classes
    if not name.startswith(("femnist", "tinyimagenet")):
        assert data.n_train == N_TRAIN and data.x_test.shape[0] == N_TEST
    assert smoke_data(DataConfig(name=name), tmp_path)[0] == fields  # written once


def test_embedded_data_is_used_as_configured(tmp_path: Path) -> None:
    assert smoke_data(DataConfig(name="digits"), tmp_path) == ({}, None)


def test_the_smoke_form_keeps_the_paper_setting_and_says_what_it_replaced(tmp_path: Path) -> None:
    cfg = load_run_config(
        None,
        [
            "data.name=cifar100", "data.image_size=224", "model.name=swin_tiny",
            "model.pretrained=true", "model.lora={r: 4}", "algorithm.name=dp_fedadamw",
            "privacy.noise_multiplier=1.0", "partition.clients=100", "partition.alpha=0.1",
            "fl.batch_size=16", "fl.local_steps=50", "fl.rounds=300", "runtime.precision=bf16",
        ],
    )  # fmt: skip
    cell = smoke_config(cfg, tmp_path)
    s = cell.cfg
    assert (s.model.name, s.model.lora, s.data.image_size) == ("swin_tiny", {"r": 4}, 224)
    assert s.algorithm == cfg.algorithm and s.privacy == cfg.privacy
    assert s.runtime.precision == "bf16" and s.runtime.engine == cfg.runtime.engine
    assert not s.model.pretrained and s.model.weights is None
    assert (s.partition.kind, s.partition.clients, s.fl.rounds) == ("iid", 2, 1)
    assert (s.fl.local_steps, s.fl.batch_size, s.fl.participation) == (LOCAL_STEPS, MAX_BATCH, 1.0)
    text = "\n".join(cell.replaced)
    assert "random weights" in text and "dirichlet -> iid" in text
    assert "100 clients, 300 rounds, K 50, B 16" in text and "data cifar100" in text


def _table(tmp_path: Path, methods: dict) -> Path:
    data = tiny_table_data()
    data["methods"] = methods
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_run_smoke_prints_one_line_per_cell_and_writes_nothing(tmp_path: Path, run_cli) -> None:
    path = _table(tmp_path, {"A": {"algorithm": {"name": "fedavg"}},
                             "B": {"algorithm": {"name": "fedadamw"}}})  # fmt: skip
    out = tmp_path / "out"
    code, stdout, _ = run_cli("run", str(path), "--smoke", "--out", str(out))
    lines = stdout.splitlines()
    assert code == 0, stdout
    assert lines[0].startswith("smoke tiny: 2 cells at paper settings") and "on cpu" in lines[0]
    assert any("federation: 2 clients x 2 local steps" in line for line in lines)
    cells = [line for line in lines if line.startswith(("ok", "FAIL", "n/a"))]
    assert len(cells) == 2 and all(line.startswith("ok") for line in cells)
    assert cells[0].endswith("A | Dir-0.6")  # the column as the tables name it
    assert lines[-1].startswith("smoke tiny: 2/2 cells ok (2 distinct runs)")
    assert not out.exists()


def test_a_failing_cell_is_one_line_and_exit_1(tmp_path: Path, run_cli, monkeypatch) -> None:
    from fedbench.runner.smoke import run as smoke_run

    real = smoke_run.train_cell

    def crash_fedavg(cell, out, save_model=False):
        if cell.cfg.algorithm.name == "fedavg":
            return False, one_line(RuntimeError("stack expects equal size\nsecond line")), False
        return real(cell, out, save_model)

    monkeypatch.setattr(smoke_run, "train_cell", crash_fedavg)
    path = _table(tmp_path, {"A": {"algorithm": {"name": "fedavg"}},
                             "B": {"algorithm": {"name": "fedadamw"}}})  # fmt: skip
    code, stdout, _ = run_cli("run", str(path), "--smoke")
    assert code == 1
    fail = [line for line in stdout.splitlines() if line.startswith("FAIL")]
    assert len(fail) == 1 and fail[0].endswith("RuntimeError: stack expects equal size")
    assert "1 FAILED" in stdout.splitlines()[-1]


def test_a_refused_cell_is_na_not_a_failure(tmp_path: Path, run_cli) -> None:
    path = _table(tmp_path, {"BN": {"model": {"name": "resnet18", "norm": "bn"},
                                    "algorithm": {"name": "dp_fedavg"},
                                    "privacy": {"noise_multiplier": 1.0}}})  # fmt: skip
    code, stdout, _ = run_cli("run", str(path), "--smoke")
    assert code == 0
    (cell,) = [line for line in stdout.splitlines() if line.startswith("n/a")]
    assert "BatchNorm" in cell and "use model.norm gn" in cell
    assert "1 refused up front (n/a)" in stdout.splitlines()[-1]


def test_smoke_refuses_options_that_do_not_apply(tmp_path: Path, run_cli) -> None:
    path = _table(tmp_path, {"A": {"algorithm": {"name": "fedavg"}}})
    code, _, err = run_cli("run", str(path), "--smoke", "--dry-run")
    assert code == 2 and "--smoke trains" in err
    code, _, err = run_cli("figure", "fedadamw-fig2", "--smoke", "--preset", "quick")
    assert code == 2 and "--smoke checks the paper settings" in err


def test_outcome_lines() -> None:
    assert SmokeOutcome("x", True, 1.25).line() == "ok       1.2 s  x"
    line = SmokeOutcome("y", True, 0.0, shared_with="x").line()
    assert line.endswith("y (same run as x)")
    assert one_line(FedbenchError("one\ntwo")) == "one"


def test_covering_keeps_every_model_and_rule_key_once(tmp_path: Path) -> None:
    plan = make_plan("table1", seeds=1)
    from fedbench.runner.smoke.check import plan_cells

    cells = plan_cells(plan, tmp_path)
    chosen = covering(cells)
    assert {model_key(c.cfg) for c in chosen} == {model_key(c.cfg) for c in cells}
    assert {rule_key(c.cfg) for c in chosen} == {rule_key(c.cfg) for c in cells}
    assert len(chosen) < len(cells) // 2
    # rules are covered on the cheaper model (ViT-Tiny before ResNet-18)
    assert sum(c.cfg.model.name == "vit_tiny" for c in chosen) == 8


def test_cifar_reader_reads_the_real_layout_and_refuses_other_objects(tmp_path: Path) -> None:
    from fedbench.data.vision import write_cifar

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (6, 32, 32, 3), dtype=np.uint8)
    write_cifar(tmp_path, "cifar10", (images, np.arange(6) % 10), (images[:2], np.arange(2)))
    data = load_dataset(DataConfig(name="cifar10", root=str(tmp_path), download=False))
    assert data.n_train == 6 and data.x_train.shape[1:] == (3, 32, 32)
    # pixel (0, 0) of image 0, channel 0, normalised with CIFAR-10's statistics
    expected = (images[0, 0, 0, 0] / 255.0 - 0.4914) / 0.2470
    assert torch.isclose(data.x_train[0, 0, 0, 0], torch.tensor(expected, dtype=torch.float32))

    class Payload:
        def __reduce__(self):
            return (print, ("executed",))

    with open(tmp_path / "cifar-10-batches-py" / "test_batch", "wb") as fh:
        pickle.dump({"data": Payload(), "labels": [0]}, fh, protocol=2)
    with pytest.raises(
        FedbenchError, match=r"incomplete or corrupted \(unexpected object __builtin__\.print\)"
    ):
        load_dataset(DataConfig(name="cifar10", root=str(tmp_path), download=False))


@pytest.mark.parametrize(
    ("command", "what"),
    [
        ("figure", "unknown figure 'nosuch'"),
        ("run", "no table named 'nosuch'"),
        ("ablate", "no ablation named 'nosuch'"),
    ],
)
def test_an_unknown_name_to_smoke_is_one_line_and_exit_2(run_cli, command: str, what: str):
    """`figure nosuch --smoke` exited 1 after "0/0 cells ok" with nothing on stderr."""
    code, out, err = run_cli(command, "nosuch", "--smoke")
    assert code == 2 and out == "" and err.count("\n") == 1, (out, err)
    assert err.startswith(f"error: {what}; known: ")
