"""Loading plugins in this process: what they register is theirs (dp_ twins included), listed
and validated like fedbench's own; run ids hash their code and built-in ids do not move; a
broken or clashing plugin is one line and leaves nothing behind."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest

from fedbench import plugins
from fedbench.config import load_run_config
from fedbench.errors import FedbenchError
from fedbench.plugins.load import module_name
from fedbench.plugins.source import ENV_VAR, parse
from tests.conftest import TINY, cli_env

#: A plugin of two kinds at once: a model and a partition kind.
MODEL_AND_PARTITION = '''
import numpy as np
from torch import nn

from fedbench.models import MODELS
from fedbench.partitions import PARTITIONS, reads


@MODELS.register("plugin_linear")
def plugin_linear(cfg, input_shape, num_classes):
    """Flatten + one linear layer, from a plugin."""
    import math

    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), num_classes))


@PARTITIONS.register("round_robin")
@reads()
def round_robin(task):
    """Sample i to client i mod N."""
    return [np.arange(c, task.n, task.settings.clients) for c in range(task.settings.clients)]
'''


def _algorithms():
    from fedbench.algorithms import ALGORITHMS

    return ALGORITHMS


def test_a_file_plugin_registers_its_algorithm_and_its_dp_twin(signum_file: Path) -> None:
    plugins.declare([str(signum_file)])
    algorithms = _algorithms()
    signum = algorithms.get("signum")
    twin = algorithms.get("dp_signum")
    assert twin.dp_twin_of == "signum" and issubclass(twin, signum) and twin.requires_privacy
    (plugin,) = plugins.loaded()
    assert algorithms.origin("signum") is plugin and algorithms.origin("dp_signum") is plugin
    assert algorithms.origin("fedavg") is None
    assert plugin.registered == [("algorithm", "signum"), ("algorithm", "dp_signum")]
    code = signum_file.read_bytes()
    assert plugin.sha256 == hashlib.sha256(b"signum.py\0" + code + b"\0").hexdigest()
    assert plugin.record() == {
        "name": str(signum_file),
        "kind": "file",
        "target": str(signum_file),
        "distribution": None,
        "version": None,
        "sha256": plugin.sha256,
        "registered": ["algorithm signum", "algorithm dp_signum"],
    }


def test_its_hyperparameters_are_listed_and_validated(signum_file: Path, run_cli) -> None:
    code, out, err = run_cli("--plugin", str(signum_file), "list", "algorithms", "signum")
    assert code == 0, err
    assert "signum: Bernstein et al. 2018 (ICML)" in out
    assert f"from plugin {signum_file} (file; code sha256 " in out
    assert "momentum of the gradients whose sign is the step" in out and "[0, 1)" in out
    code, out, err = run_cli("--plugin", str(signum_file), "list", "algorithms")
    assert code == 0, err
    row = next(line for line in out.splitlines() if "│ signum " in line)
    assert row.rstrip(" │").endswith("│ signum.py")  # the `plugin` column names it
    with pytest.raises(FedbenchError, match=r"invalid config value for 'algorithm\.beta'"):
        load_run_config(None, ["algorithm.name=signum", "algorithm.beta=1.5"])
    with pytest.raises(FedbenchError, match=r"signum's fields: lr, .*, weighting, beta$"):
        load_run_config(None, ["algorithm.name=signum", "algorithm.alpha=0.5"])


def test_run_ids_hash_the_plugin_code_and_built_in_ids_do_not_move(signum_file: Path) -> None:
    built_in = load_run_config(None, ["algorithm.lr=0.01"])
    before = (built_in.run_id(), built_in.config_hash())
    plugins.declare([str(signum_file)])
    first = load_run_config(None, ["algorithm.name=signum"])
    assert first.used_plugins() == plugins.loaded()
    first_id, first_hash = first.run_id(), first.config_hash()
    after = load_run_config(None, ["algorithm.lr=0.01"])
    assert (after.run_id(), after.config_hash()) == before and after.used_plugins() == []

    signum_file.write_text(signum_file.read_text() + "\n# a comment changes the code\n")
    plugins.reset()
    plugins.declare([str(signum_file)])
    second = load_run_config(None, ["algorithm.name=signum"])
    assert first_id.startswith("signum-digits-cnn-s0-")
    assert second.run_id().startswith("signum-digits-cnn-s0-")
    assert second.run_id() != first_id and second.config_hash() != first_hash
    # With a privacy section signum is filed as its twin dp_signum, which the plugin owns too.
    private = load_run_config(None, ["algorithm.name=signum", "privacy.noise_multiplier=1.0"])
    assert private.run_id().startswith("dp_signum-") and private.used_plugins() != []


def test_every_kind_a_run_uses_names_its_plugin(tmp_path: Path) -> None:
    path = tmp_path / "parts.py"
    path.write_text(MODEL_AND_PARTITION)
    plugins.declare([str(path)])
    cfg = load_run_config(None, ["model.name=plugin_linear", "partition.kind=round_robin"])
    (plugin,) = cfg.used_plugins()
    assert plugin.registered == [("model", "plugin_linear"), ("partition kind", "round_robin")]
    assert "plugin_linear" in cfg.run_id()
    from fedbench.catalog import listing

    models = listing("models")
    assert models.columns == ["name", "description", "plugin"]
    assert [
        "plugin_linear",
        "Flatten + one linear layer, from a plugin.",
        "parts.py",
    ] in models.rows
    assert [row[-1] for row in models.rows if row[0] == "cnn"] == ["-"]


def test_a_broken_plugin_is_one_line_and_a_fixed_one_loads_again(tmp_path: Path, run_cli) -> None:
    path = tmp_path / "half.py"
    body = (
        "from fedbench.algorithms import ALGORITHMS\n"
        "from fedbench.algorithms.fedavg import FedAvg\n"
        "class Half(FedAvg):\n"
        "    '''FedAvg under another name.'''\n"
        "ALGORITHMS.register('half')(Half)\n"
    )
    path.write_text(body + "raise RuntimeError('boom\\nsecond line')\n")
    code, out, err = run_cli("--plugin", str(path), "list", "algorithms")
    assert (code, out) == (2, "")
    assert err == (
        f"error: plugin {path} (--plugin) failed to load (RuntimeError: boom); fix it, or drop "
        "that --plugin\n"
    )
    assert module_name(parse(str(path), "--plugin")) not in sys.modules
    # What it registered before failing was removed: fixed, it registers `half` (and its twin)
    # without a clash.
    path.write_text(body)
    code, out, err = run_cli("--plugin", str(path), "list", "algorithms", "half")
    assert code == 0, err
    assert [p.registered for p in plugins.loaded()] == [
        [("algorithm", "half"), ("algorithm", "dp_half")]
    ]


def test_a_taken_name_is_one_line_naming_both_owners(tmp_path: Path, run_cli) -> None:
    clash = tmp_path / "clash.py"
    clash.write_text(
        "from fedbench.models import MODELS\n"
        "MODELS.register('cnn')(lambda cfg, shape, classes: None)\n"
    )
    code, _, err = run_cli("--plugin", str(clash), "list", "models")
    assert code == 2
    assert err == (
        f"error: plugin {clash} (--plugin) registers model 'cnn', which fedbench already "
        "registers; rename it in the plugin, or drop that --plugin\n"
    )
    plugins.reset()
    first, second = tmp_path / "first.py", tmp_path / "second.py"
    for path in (first, second):
        path.write_text(MODEL_AND_PARTITION)
    code, _, err = run_cli("--plugin", str(first), "--plugin", str(second), "list", "models")
    assert code == 2
    assert err.startswith(
        f"error: plugin {second} (--plugin) registers model 'plugin_linear', which plugin "
        f"{first} already registers; rename it in the plugin"
    )


def test_the_environment_variable_declares_plugins(
    signum_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, str(signum_file))
    assert "signum" in _algorithms()
    assert [p.source.via for p in plugins.loaded()] == [ENV_VAR]


def test_a_worker_loads_exactly_the_list_it_is_given(
    signum_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("raise ImportError('never loaded')\n")
    monkeypatch.setenv(ENV_VAR, str(broken))  # what the worker's environment would discover
    plugins.use([parse(str(signum_file), "--plugin")])  # what the driver sent
    assert "signum" in _algorithms()
    assert [p.source.target for p in plugins.loaded()] == [str(signum_file)]


def test_print_plan_and_summary_name_the_plugins(signum_file: Path, tmp_path: Path, run_cli):
    code, out, err = run_cli(
        "--plugin", str(signum_file), "train", "--set", "algorithm.name=signum", *TINY,
        "--print-plan",
    )  # fmt: skip
    assert code == 0, err
    (plugin,) = plugins.loaded()
    assert (
        f"plugin: {signum_file} (file; code sha256 {plugin.sha256[:12]}): algorithm signum, "
        "algorithm dp_signum"
    ) in out.splitlines()
    code, out, err = run_cli("--plugin", str(signum_file), "train", *TINY, "--print-plan")
    assert code == 0, err
    assert "plugins: none (every name the run uses is fedbench's own)" in out
    assert f"plugins loaded, not used by this run: {signum_file}" in out

    out_dir = tmp_path / "out"
    args = ["train", "--set", "algorithm.name=signum", *TINY, "--out", str(out_dir)]
    code, _, err = run_cli("--plugin", str(signum_file), *args)
    assert code == 0, err
    (run_dir,) = (out_dir / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["plugins"] == [plugin.record()]


def test_help_loads_no_plugin_and_nothing_heavy(tmp_path: Path) -> None:
    # A broken plugin, declared both ways: parsing the command line must not import it (nor
    # torch: tests/test_import_graph.py), only the first lookup of a name does.
    import subprocess

    from tests.test_import_graph import HEAVY_MODULES

    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('imported at --help')\n")
    script = (
        "import sys\n"
        "from fedbench.cli import main\n"
        "sys.argv = ['fedbench', *sys.argv[1:]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        f"print(sorted(m for m in {HEAVY_MODULES!r} if m in sys.modules), file=sys.stderr)\n"
    )
    env = {**cli_env(), ENV_VAR: str(broken)}
    for argv in (["--help"], ["--plugin", str(broken), "train", "--help"]):
        done = subprocess.run(
            [sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == "[]", (argv, done.stderr)


def test_a_dry_run_names_the_plugins_and_their_rows(signum_file: Path, tmp_path: Path, run_cli):
    import yaml

    from tests.conftest import tiny_table_data

    table = tiny_table_data()
    table["methods"]["Signum"] = {"algorithm": {"name": "signum", "lr": 0.01}}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    code, out, err = run_cli("--plugin", str(signum_file), "run", str(path), "--dry-run")
    assert code == 0, err
    (plugin,) = plugins.loaded()
    assert f"plugin: {plugin.line()}; rows: Signum" in out.splitlines()
    code, out, err = run_cli("run", str(path), "--dry-run", "--methods", "FedAdamW")
    assert code == 0, err
    assert f"plugins loaded, not used by this table: {signum_file}" in out.splitlines()


def test_plugin_after_the_command_is_one_line_saying_where_it_goes(
    signum_file: Path, run_cli
) -> None:
    code, out, err = run_cli("train", "--set", "fl.rounds=1", "--plugin", str(signum_file))
    assert (code, out) == (2, "")
    assert err == (
        "error: --plugin goes before the command: fedbench --plugin MODULE_OR_FILE train ...\n"
    )
    assert plugins.loaded() == []
    code, out, err = run_cli("--plugin", str(signum_file), "list", "algorithms", "signum")
    assert code == 0, err
