"""API: the Python API with wrong types: a FedbenchError or a TypeError naming the argument."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from benchmarks.faults.context import Context

API_CALLS = {
    "train(None, out)": "fedbench.train(None, OUT)",
    "train(cfg, out=None)": "fedbench.train(fedbench.load_config(), out=None)",
    "run_table(..., seeds='2')": "fedbench.run_table('table1', seeds='2', out=OUT)",
    "load_config(overrides='fl.rounds=3')": "fedbench.load_config(overrides='fl.rounds=3')",
    "run_table(..., methods='FedAvg')": "fedbench.run_table('table1', methods='FedAvg', out=OUT)",
    "make_report(3)": "fedbench.make_report(3)",
    "load_config(path=5)": "fedbench.load_config(5)",
}


def case_api(ctx: Context) -> None:
    """Wrong types through the Python API: a FedbenchError, or a TypeError naming the argument."""
    out = ctx.folder("api")
    script = textwrap.dedent(
        f"""
        import json, fedbench
        OUT = {str(out)!r}
        found = {{}}
        for case, call in {API_CALLS!r}.items():
            try:
                eval(call)
                found[case] = "no error"
            except fedbench.FedbenchError as exc:
                found[case] = "ok"
            except TypeError as exc:
                arg = call.split("(", 1)[1]
                named = any(w in str(exc) for w in ("out", "seeds", "overrides", "methods",
                                                     "config", "folder", "path"))
                found[case] = "ok" if named else f"TypeError: {{exc}}"
            except Exception as exc:
                found[case] = f"{{type(exc).__name__}}: {{exc}}"
        print(json.dumps(found))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], env=ctx.fb.env(), capture_output=True, text=True
    )
    try:
        found = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        found = {case: f"the script failed: {proc.stderr[-200:]}" for case in API_CALLS}
    for case, verdict in found.items():
        ctx.tally.record("api types", case, None if verdict == "ok" else verdict[:200])
