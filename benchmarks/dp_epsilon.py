"""Sample-level epsilon of every DP table at its paper settings (docs/privacy.md, "Epsilon at the
paper's settings"): `python benchmarks/dp_epsilon.py [--seeds 5]`.

Run from the repository root; no data is read. Each column's clients are assumed to hold equal
shares of the training set (n_i = training samples / clients: CIFAR-10/100 50,000 / 50 = 1,000,
...), and, since a Dirichlet partition gives many clients less than that share, half of it too:
a smaller client has a larger sampling rate B / n_i and spends more. Each cell is what
`fedbench epsilon TABLE --client-size N --column data.name=D` prints: the worst client over the
table's seeds (their client schedules differ). Rows that privatise two gradients per step
(dp_fedsam, dp_fafed) are shown apart. Prints one markdown table.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

from fedbench.algorithms.registry import ALGORITHMS
from fedbench.report.epsilon import parse_column_picks, table_epsilons
from fedbench.runner.sweep import make_plan
from fedbench.runner.table_config import load_table

TABLES = [
    "dp_table2",
    "dp_table2_vit",
    "dp_table3",
    "dp_table4",
    "dp_table5",
    "dp_table6",
    "dp_table7",
    "dp_table8",
    "dp_table9",
    "dp_table10",
    "dp_table11",
]
#: Training samples of each data set the DP tables use.
TRAIN_SIZE = {
    "cifar10": 50_000,
    "cifar100": 50_000,
    "tinyimagenet": 100_000,
    "glue/sst2": 67_349,
    "glue/qqp": 363_846,
    "glue/qnli": 104_743,
    "glue/mnli": 392_702,
}


def _fmt(values: set[float]) -> str:
    return " / ".join(f"{v:.3g}" for v in sorted(values))


def epsilon_rows(seeds: int) -> list[str]:
    lines = [
        "| table | data | n_i | T x K, B, clients/round | sigma | delta "
        "| epsilon | at n_i/2 | 2 gradients/step (rows) | accounting |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name in TABLES:
        table = load_table(name)
        plan = make_plan(name, seeds=list(range(seeds)))
        datasets = list(dict.fromkeys(run.cfg.data.name for run in plan.runs))
        for data in datasets:
            clients = plan.runs[0].cfg.partition.clients
            n = TRAIN_SIZE[data] // clients
            picks = (
                parse_column_picks([f"data.name={data}"], table)
                if "data.name" in (table.grid or {})
                else None
            )
            # (sigma or target, delta, gradients per step) -> epsilons
            cells: dict[tuple, dict[int, set[float]]] = defaultdict(lambda: defaultdict(set))
            twice: set[str] = set()
            accounting: set[str] = set()  # status and direction (fedbench.privacy.status)
            for size in (n, n // 2):
                for row, _col, eps, delta, sigma, status in table_epsilons(plan, size, picks):
                    accounting.add(status)
                    cfg = next(r.cfg for r in plan.runs if r.method == row)
                    per_step = ALGORITHMS.get(cfg.algorithm.name).gradients_per_step
                    if per_step > 1:
                        twice.add(row)
                    target = cfg.privacy.target_epsilon
                    # Calibrated cells (dp_table5): the target is the epsilon, show the sigma.
                    key = (per_step, delta, f"{sigma:g}" if target is None else f"eps {target:g}")
                    cells[key][size].add(eps if target is None else sigma)
            fl = plan.runs[0].cfg.fl
            per_round = max(1, round(fl.participation * clients))
            shape = f"{fl.rounds} x {fl.local_steps}, {fl.batch_size}, {per_round}/{clients}"
            one = {k: v for k, v in cells.items() if k[0] == 1}
            two = {k: v for k, v in cells.items() if k[0] > 1}
            for (_, delta, sigma), by_size in sorted(one.items(), key=lambda kv: str(kv[0])):
                sig = sigma
                if sigma.startswith("eps"):  # calibrated: epsilon fixed, sigma per client size
                    sig = f"{_fmt(by_size[n])} (n_i/2: {_fmt(by_size[n // 2])})"
                extra = [
                    f"{_fmt(v[n])} (n_i/2: {_fmt(v[n // 2])})"
                    for (p2, d2, s2), v in two.items()
                    if d2 == delta and s2 == sigma
                ]
                lines.append(
                    f"| {name} | {data} | {n} | {shape} | {sig} | {delta:g} | "
                    + (
                        f"{sigma[4:]} (target) | {sigma[4:]} | "
                        if sigma.startswith("eps")
                        else f"{_fmt(by_size[n])} | {_fmt(by_size[n // 2])} | "
                    )
                    + (f"{'; '.join(extra)} ({', '.join(sorted(twice))})" if extra else "-")
                    + f" | {'; '.join(sorted(accounting))} |"
                )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="the tables' first N seeds")
    args = parser.parse_args()
    print("\n".join(epsilon_rows(args.seeds)))


if __name__ == "__main__":
    main()
