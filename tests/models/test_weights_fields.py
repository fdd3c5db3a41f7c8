"""A weights field that the model cannot use is an error (one line, exit 2, nothing written),
never silently ignored."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import tiny_table_data

RUN = ["--set", "data.name=digits", "--set", "model.name=logreg", "--set", "fl.rounds=1"]


@pytest.mark.parametrize(
    ("sets", "expected"),
    [
        (
            ["model.pretrained=true", "model.weights=/etc/passwd"],
            "model logreg has no pretrained weights, so model.pretrained=true and "
            "model.weights=/etc/passwd cannot be used",
        ),
        (
            ["model.weights=/no/such/file.pt"],
            "model logreg has no pretrained weights, so model.weights=/no/such/file.pt cannot",
        ),
        (["model.pretrained=true"], "model logreg has no pretrained weights"),
        (
            ["model.name=vit_micro", "model.pretrained=true"],
            "model vit_micro has no pretrained weights",
        ),
        (
            ["model.name=swin_tiny", "model.weights=/etc/passwd"],
            "model.weights=/etc/passwd is set but model.pretrained is false",
        ),
    ],
)
def test_unusable_weights_fields_are_errors(sets, expected, run_cli, tmp_path: Path) -> None:
    args = [x for item in sets for x in ("--set", item)]
    code, out, err = run_cli("train", *RUN, *args, "--out", str(tmp_path / "out"))
    assert code == 2 and err.count("\n") == 1 and expected in err, err
    assert "roberta_base, swin_base, swin_tiny, vit_base" in err or "pretrained is false" in err
    assert out == "" and not (tmp_path / "out").exists()


def test_a_sweep_stops_before_training_on_unusable_weights(run_cli, tmp_path: Path) -> None:
    data = tiny_table_data()
    data["base"]["model"] = {"name": "logreg", "pretrained": True, "weights": "/etc/passwd"}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = run_cli("run", str(path), "--out", str(tmp_path / "out"))
    assert code == 2 and "nothing was run" in err and "has no pretrained weights" in err, err
    assert not (tmp_path / "out" / "runs").exists()
