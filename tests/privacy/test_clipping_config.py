"""`privacy.clipping`: which exact method computes the clipped per-sample sums (bk, ghost, vmap;
auto by default). A speed setting: not part of the run id; `summary.json` names the method used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fedbench.config import load_run_config
from tests.conftest import TINY

PRIVATE = ["privacy.noise_multiplier=1.0", "privacy.clip=1.0"]


def test_clipping_leaves_the_run_id_alone() -> None:
    for level in ("sample", "client"):
        base = [*PRIVATE, f"privacy.level={level}"]
        auto = load_run_config(None, ["algorithm.name=fedavg", *base]).run_id()
        methods = ("bk", "ghost", "vmap") if level == "sample" else ()
        for method in methods:
            cfg = load_run_config(
                None, ["algorithm.name=fedavg", *base, f"privacy.clipping={method}"]
            )
            assert cfg.run_id() == auto and cfg.privacy is not None
            assert cfg.privacy.clipping == method


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (["privacy.level=client", "privacy.clipping=bk"], "clipping applies to level sample only"),
        (["privacy.clipping=fast"], "clipping"),
    ],
)
def test_a_wrong_clipping_is_a_one_line_user_error(
    run_cli, tmp_path: Path, setting, message
) -> None:
    sets = [arg for s in [*PRIVATE, *setting] for arg in ("--set", s)]
    code, _, err = run_cli("train", *TINY, *sets, "--out", str(tmp_path))
    assert code == 2 and message in err and "Traceback" not in err
    assert err.strip().count("\n") == 0


@pytest.mark.parametrize(("clipping", "used"), [(None, "bk"), ("vmap", "vmap"), ("ghost", "ghost")])
def test_the_run_uses_the_method_asked_for_and_names_it(
    run_cli, tmp_path: Path, clipping: str | None, used: str
) -> None:
    sets = [arg for s in PRIVATE for arg in ("--set", s)]
    if clipping is not None:
        sets += ["--set", f"privacy.clipping={clipping}"]
    code, _, err = run_cli("train", *TINY, *sets, "--out", str(tmp_path))
    assert code == 0, err
    (summary,) = tmp_path.rglob("summary.json")
    assert json.loads(summary.read_text())["dp_clipping"] == used
