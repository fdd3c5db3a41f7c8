"""`fedbench epsilon`: the privacy a config spends, computed from its schedule without training."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig, load_run_config, parse_override, read_yaml
from fedbench.engine.schedule import client_schedule, clients_per_round
from fedbench.errors import FedbenchError
from fedbench.listing import Listing
from fedbench.privacy.client_level import ClientLevelPlan, poisson_clients_of
from fedbench.privacy.plan import PrivacyPlan, resolve_plan
from fedbench.privacy.status import short_label, status_line
from fedbench.report.ran import cell_label
from fedbench.runner.table_config import Plan, TableConfig
from fedbench.suggest import did_you_mean


def client_sizes(cfg: RunConfig, client_size: int | None = None) -> list[int]:
    """n_i of every client: `client_size` for all of them, else from the actual partition."""
    if client_size is not None:
        if client_size < 1:
            raise FedbenchError(
                f"--client-size {client_size}: give the samples per client, a positive number "
                "(e.g. --client-size 1000 for CIFAR-10 over 50 clients)"
            )
        return [client_size] * cfg.partition.clients
    from fedbench.data.client_test import split_client_test
    from fedbench.data.partition import partition
    from fedbench.data.validation import run_data

    try:
        data = run_data(cfg)
    except FedbenchError as exc:
        raise FedbenchError(
            f"{exc} (or skip the data: --client-size N, the samples per client)"
        ) from None
    parts = partition(data.y_train.numpy(), cfg.partition, data.num_classes, data.client_train)
    parts, _ = split_client_test(cfg, data, parts)  # held-out samples are never trained on
    return [len(p) for p in parts]


def privacy_plan(cfg: RunConfig, client_size: int | None = None) -> PrivacyPlan | ClientLevelPlan:
    if cfg.privacy is None:
        raise FedbenchError(
            "this config has no privacy section; add one (e.g. --set privacy.noise_multiplier=1.0)"
        )
    return _plan_from_sizes(cfg, client_sizes(cfg, client_size))


def describe_privacy(cfg: RunConfig, client_size: int | None = None) -> str:
    plan = privacy_plan(cfg, client_size)
    p = plan.config
    calibrated = f" (calibrated to target_epsilon {p.target_epsilon:g})" if p.target_epsilon else ""
    sigma = f"noise_multiplier {plan.noise_multiplier:.4f}{calibrated}"
    who = "client level, every client" if isinstance(plan, ClientLevelPlan) else "worst client"
    head = f"epsilon {plan.epsilon():.4f} at delta {p.delta:g} ({who}, {p.accountant} accountant)"
    if isinstance(plan, ClientLevelPlan):
        adaptive = (
            f"; adaptive (quantile {p.target_quantile:g}, eta_C {p.clip_lr:g}, count noise "
            f"{plan.count_noise:g}, update noise multiplier {plan.update_noise_multiplier:.4f})"
            if p.adaptive_clip
            else ""
        )
        middle = [
            f"update clip {p.clip:g}{adaptive}",
            f"{cfg.fl.rounds} rounds, each one Gaussian release at client sampling rate "
            f"q = S/N = {plan.expected_clients}/{plan.num_clients} = {plan.rate:.4g}",
        ]
    else:
        accounts = plan.accounts()
        worst = max(range(plan.num_clients), key=lambda i: (accounts[i].gradients, plan.rates[i]))
        q = plan.rates[worst]
        middle = [
            f"clip {p.clip:g}; batch {cfg.fl.batch_size}; local_steps {cfg.fl.local_steps}; "
            f"rounds {cfg.fl.rounds}",
            f"per round a client joins: {plan.releases_per_round()}",
            f"most-used client {worst}: {accounts[worst].count} releases "
            f"({accounts[worst].gradients} privatised gradients) at q = {q:.4g} "
            f"(n_i = {round(cfg.fl.batch_size / q) if q < 1 else 'B'})",
        ]
    return "\n".join([head, sigma, *middle, status_line(plan.accounting())])


def _matches(setting: dict[str, Any], picks: dict[str, Any]) -> bool:
    return all(str(setting.get(key)) == str(value) for key, value in picks.items())


def parse_column_picks(items: list[str], table: TableConfig) -> dict[str, Any]:
    """`--column key=value` filters on the table's grid; a key or value it lacks is an error."""
    picks: dict[str, Any] = {}
    for item in items:
        path, value = parse_override(item)
        key = ".".join(path)
        if key not in table.grid:
            hint = did_you_mean(key, table.grid)
            raise FedbenchError(
                f"{table.table} has no grid key {key!r};{hint} "
                f"grid: {', '.join(table.grid) or 'none (one column)'}"
            )
        values = [str(v) for v in table.grid[key]]
        if str(value) not in values:
            hint = did_you_mean(str(value), values)
            raise FedbenchError(
                f"{table.table} grid {key} has no value {value!r};{hint} values: {', '.join(values)}"
            )
        picks[key] = value
    return picks


@dataclass(frozen=True)
class EpsilonCell:
    """One private (row, column) of a table's plan: the worst epsilon over its seeds, its delta
    and sigma, and the accounting line of that worst seed's plan (`status_line`)."""

    row: str
    column: str
    epsilon: float
    delta: float
    noise_multiplier: float
    accounting: str
    #: The status and direction alone (fedbench.privacy.status.short_label).
    status: str = ""

    def shown(self) -> list[str]:
        """The cell as `fedbench epsilon TABLE` lists it."""
        numbers = [f"{self.epsilon:.2f}", f"{self.delta:g}", f"{self.noise_multiplier:.4g}"]
        return [self.row, self.column, *numbers, self.accounting]


def table_epsilon_cells(
    plan: Plan, client_size: int | None = None, columns: dict[str, Any] | None = None
) -> list[EpsilonCell]:
    """Every private (row, column) of `plan`, the worst over its seeds; client sizes are
    computed once per distinct data + partition."""
    sizes: dict[str, list[int]] = {}
    cells: dict[tuple[str, str], EpsilonCell] = {}
    for run in plan.runs:
        if columns and not _matches(run.setting, columns):
            continue
        cfg = run.cfg
        if cfg.privacy is None:
            continue
        key = json.dumps([cfg.data.model_dump(mode="json"), cfg.partition.model_dump(mode="json")])
        if key not in sizes:
            sizes[key] = client_sizes(cfg, client_size)
        p = _plan_from_sizes(cfg, sizes[key])
        where = cell_label(run.setting, cfg.to_dict())  # what runs, not the grid's value
        eps = p.epsilon()
        old = cells.get((run.method, where))
        if old is None or eps > old.epsilon:
            accounting = p.accounting()
            cells[(run.method, where)] = EpsilonCell(
                run.method,
                where,
                eps,
                p.config.delta,
                p.noise_multiplier,
                status_line(accounting),
                short_label(accounting),
            )
    return list(cells.values())


def table_epsilons(
    plan: Plan, client_size: int | None = None, columns: dict[str, Any] | None = None
) -> list[tuple[str, str, float, float, float, str]]:
    """(row, column, epsilon, delta, noise_multiplier, accounting) of every private (row,
    column) of `plan`, the worst over its seeds (accounting: the status and direction of that
    epsilon, fedbench.privacy.status)."""
    return [
        (c.row, c.column, c.epsilon, c.delta, c.noise_multiplier, c.status)
        for c in table_epsilon_cells(plan, client_size, columns)
    ]


def _plan_from_sizes(cfg: RunConfig, sizes: list[int]) -> PrivacyPlan | ClientLevelPlan:
    sampled = clients_per_round(cfg.fl.participation, len(sizes))
    schedule = client_schedule(
        cfg.seed,
        cfg.fl.rounds,
        len(sizes),
        sampled,
        cfg.fl.dropout,
        poisson_clients_of(cfg.privacy),
    )
    return resolve_plan(cfg, ALGORITHMS.get(cfg.algorithm.name), sizes, schedule, sampled)


def table_name(config: str | None) -> str | None:
    """The table `fedbench epsilon CONFIG` names, or None for a run config (or none given): a
    YAML file with `table:` and `methods:` is a table config, and so is a name without a YAML
    suffix that is not a file (configs/dp/<name>.yaml)."""
    if config is None:
        return None
    path = Path(config)
    if path.is_file():
        data = read_yaml(path)
        return config if "table" in data and "methods" in data else None
    return config if path.suffix not in (".yaml", ".yml") else None


def table_epsilon_listing(
    name: str,
    *,
    preset: str | None = None,
    seeds: str | None = None,
    methods: str | None = None,
    columns: list[str] | None = None,
    overrides: list[str] | None = None,
    client_size: int | None = None,
) -> Listing:
    """`fedbench epsilon TABLE`: epsilon of every private (row, column) of the table's plan."""
    from fedbench.runner.selection import parse_methods, parse_seeds
    from fedbench.runner.sweep import make_plan
    from fedbench.runner.table_config import load_table

    rows = parse_methods(methods)
    picks = parse_column_picks(columns or [], load_table(name))
    plan = make_plan(
        name, preset=preset, seeds=parse_seeds(seeds), methods=rows, overrides=overrides or []
    )
    cells = table_epsilon_cells(plan, client_size, picks)
    if not cells:
        raise FedbenchError(f"{plan.name}: no private run in the selection (no privacy section)")
    return Listing(
        f"{plan.name}: epsilon of the worst client (over seeds "
        f"{','.join(str(s) for s in sorted({r.seed for r in plan.runs}))})",
        ["method", "column", "epsilon", "delta", "noise_multiplier", "accounting"],
        [c.shown() for c in cells],
        fold=True,
    )


def epsilon_view(
    config: str | None,
    *,
    overrides: list[str] | None = None,
    client_size: int | None = None,
    preset: str | None = None,
    methods: str | None = None,
    columns: list[str] | None = None,
    seeds: str | None = None,
) -> str | Listing:
    """`fedbench epsilon [CONFIG]`: a table config gives the epsilon per (row, column) of its
    plan; a run config (or the defaults with --set) gives its privacy in a few lines."""
    name = table_name(config)
    if name is not None:
        return table_epsilon_listing(
            name,
            preset=preset,
            seeds=seeds,
            methods=methods,
            columns=columns,
            overrides=overrides,
            client_size=client_size,
        )
    if preset or methods or columns or seeds:
        raise FedbenchError("--preset, --methods, --column and --seeds apply to table configs only")
    cfg = load_run_config(Path(config) if config is not None else None, overrides or [])
    return describe_privacy(cfg, client_size)
