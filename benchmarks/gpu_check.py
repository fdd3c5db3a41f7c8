"""`make gpu-check`: everything that needs a GPU, in one go, within about 9 minutes (one 600 s call of a lent machine), each part
in its own process with its own time limit (one failure or time-out loses only that part), most
wanted first; `--budget` (560 s) caps the whole check, so the last parts are skipped rather than
the call cut off.

Parts (docs/performance.md, "make gpu-check"):
  cuda-tests  the tests marked `cuda` (engine on the device, graphs, bf16 + BatchNorm, bk on Swin)
  smoke       the covering smoke cells of every table at paper settings (benchmarks/smoke_check.py)
  agreement   a short real-data federation in every engine x precision x graphs combination, 3
              seeds, against sequential fp32 (benchmarks/agreement.py)
  bench       `fedbench bench --suite table1` at K 10: sequential fp32, vectorised bf16 with
              its stacked step as a CUDA graph (key vectorized/bf16+graphs), sequential bf16,
              and vectorised bf16 eager for ResNet-18 BN and ViT-Tiny (40 s a row at most:
              8 rows fit the part), client steps/s, projected Table 1 hours
  bench-seeds the bench part's seeds-together rows: ResNet-18 BN and ViT-Tiny, 5 seeds stacked
              (`runtime.seeds_together`) against 5 separate vectorised runs, K 5
              (benchmarks/seeds_together.py)
  dp-ratio    benchmarks/dp_ratio.py --paper: private / non-private step per DP table model
  profile     torch.profiler: top CUDA kernels and CPU ops per client step (benchmarks/profile_step.py)

Writes benchmarks/results/gpu-check.json and gpu-check.md (and copies them, with each part's
own JSON, into $OUT when set). Without CUDA every part reports "needs CUDA" and the check
exits 0: that is its dry run. `--cpu` runs the parts on the CPU anyway (slow; for testing this
script), `--only PART ...` runs some of them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable


@dataclass(frozen=True)
class Part:
    name: str
    command: list[str]
    limit_s: int
    output: str | None = None  # the part's own JSON (or folder of JSONs) under the results


def parts(results: Path, fmnist: str | None) -> list[Part]:
    data = ["--data-root", fmnist] if fmnist else []
    return [
        Part(
            "cuda-tests",
            [PY, "-m", "pytest", "-q", "-m", "cuda", "-p", "no:cacheprovider", "tests/engine"],
            70,
        ),
        Part(
            "bench",
            [
                PY,
                "-m",
                "fedbench",
                "bench",
                "--suite",
                "table1",
                "--set",
                "fl.local_steps=10",
                "--rounds",
                "2",
                "--repeats",
                "1",
                "--row-timeout",
                "40",
                "--out",
                str(results / "gpu-bench"),
            ],
            330,
            "gpu-bench",
        ),
        Part(
            "bench-seeds",
            [
                PY,
                "benchmarks/seeds_together.py",
                "--models",
                "resnet18_bn",
                "vit_tiny",
                "--seeds",
                "5",
                "--local-steps",
                "5",
                "--rounds",
                "1",
                "--repeats",
                "1",
                "--json",
                str(results / "gpu-seeds-together.json"),
                "--markdown",
                str(results / "gpu-seeds-together.md"),
            ],
            45,
            "gpu-seeds-together.json",
        ),
        Part(
            "agreement",
            [
                PY,
                "benchmarks/agreement.py",
                "--rounds",
                "4",
                "--seeds",
                "3",
                "--models",
                "resnet18-bn",
                *data,
                "--json",
                str(results / "gpu-agreement.json"),
            ],
            90,
            "gpu-agreement.json",
        ),
        Part(
            "smoke",
            [
                PY,
                "benchmarks/smoke_check.py",
                "--scope",
                "covering",
                "--budget",
                "80",
                "--json",
                str(results / "gpu-smoke.json"),
            ],
            100,
            "gpu-smoke.json",
        ),
        Part(
            "dp-ratio",
            [
                PY,
                "benchmarks/dp_ratio.py",
                "--paper",
                "--repeats",
                "3",
                "--out",
                str(results / "gpu-dp"),
            ],
            60,
            "gpu-dp",
        ),
        Part(
            "profile",
            [
                PY,
                "benchmarks/profile_step.py",
                "--precision",
                "bf16",
                "--json",
                str(results / "gpu-profile.json"),
            ],
            60,
            "gpu-profile.json",
        ),
    ]


def run_part(part: Part, env: dict[str, str], limit_s: float) -> dict:
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            part.command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=limit_s
        )
        status = "ok" if done.returncode == 0 else f"failed (exit {done.returncode})"
        output = done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        status = f"timed out after {limit_s:.0f} s"
        output = (
            (exc.stdout or b"").decode(errors="replace")
            if isinstance(exc.stdout, bytes)
            else (exc.stdout or "")
        )
    lines = [line for line in output.splitlines() if line.strip()]
    return {
        "part": part.name,
        "status": status,
        "seconds": round(time.perf_counter() - t0, 1),
        "limit_s": part.limit_s,
        "tail": lines[-25:],
    }


def markdown(report: dict) -> str:
    out = [
        f"# make gpu-check: {report['device']}",
        "",
        f"torch {report['torch']}, {report['when']}, {report['seconds']} s in all.",
        "",
        "| part | status | seconds (limit) |",
        "| --- | --- | --- |",
    ]
    for row in report["parts"]:
        out.append(f"| {row['part']} | {row['status']} | {row['seconds']} ({row['limit_s']}) |")
    for row in report["parts"]:
        out += ["", f"## {row['part']}", "", "```", *row["tail"], "```"]
    return "\n".join(out) + "\n"


def main() -> int:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu", action="store_true", help="run the parts without CUDA too")
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--fmnist", default=None, help="a folder with the Fashion-MNIST files")
    parser.add_argument("--results", type=Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--budget",
        type=float,
        default=570.0,
        help="seconds for the whole check (default 570: one 600 s call of a lent machine); a "
        "part gets min(its limit, what is left) and is skipped with under 15 s left",
    )
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = torch.cuda.get_device_name(0) if cuda else "cpu (no CUDA)"
    args.results.mkdir(parents=True, exist_ok=True)
    env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }
    report = {
        "device": device,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "parts": [],
    }
    t0 = time.perf_counter()
    out_dir = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    for part in parts(args.results, args.fmnist):
        if args.only and part.name not in args.only:
            continue
        if not cuda and not args.cpu:
            row = {
                "part": part.name,
                "status": "needs CUDA",
                "seconds": 0.0,
                "limit_s": part.limit_s,
                "tail": [],
            }
        elif args.budget - (time.perf_counter() - t0) < 15:
            row = {
                "part": part.name,
                "status": "skipped: out of budget",
                "seconds": 0.0,
                "limit_s": part.limit_s,
                "tail": [],
            }
        else:
            left = args.budget - (time.perf_counter() - t0)
            row = run_part(part, env, min(part.limit_s, left))
        report["parts"].append(row)
        print(f"{row['part']}: {row['status']} ({row['seconds']} s)", flush=True)
        report["seconds"] = round(time.perf_counter() - t0, 1)
        # Written after every part: a check cut short still leaves what it finished.
        (args.results / "gpu-check.json").write_text(json.dumps(report, indent=2) + "\n")
        (args.results / "gpu-check.md").write_text(markdown(report))
        if out_dir is not None:
            for name in ("gpu-check.json", "gpu-check.md", part.output):
                path = args.results / name if name else None
                if path is not None and path.is_file():
                    shutil.copy(path, out_dir / name)
                elif path is not None and path.is_dir():
                    for file in path.glob("*.json"):
                        shutil.copy(file, out_dir / f"{name}-{file.name}")
    fine = ("ok", "needs CUDA", "skipped: out of budget")
    bad = [r for r in report["parts"] if r["status"] not in fine]
    print(
        f"gpu-check on {device}: {len(report['parts']) - len(bad)}/{len(report['parts'])} "
        f"parts ok or skipped; {report.get('seconds', 0)} s",
        flush=True,
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
