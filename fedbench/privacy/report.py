"""`fedbench epsilon`: the privacy a config spends, computed from its schedule without training."""

from __future__ import annotations

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig
from fedbench.engine.schedule import client_schedule, clients_per_round
from fedbench.errors import FedbenchError
from fedbench.privacy.plan import PrivacyPlan, make_plan


def client_sizes(cfg: RunConfig, client_size: int | None = None) -> list[int]:
    """n_i of every client: `client_size` for all of them, else from the actual partition."""
    if client_size is not None:
        return [client_size] * cfg.partition.clients
    from fedbench.data import load_dataset
    from fedbench.data.partition import partition

    data = load_dataset(cfg.data)
    parts = partition(data.y_train.numpy(), cfg.partition, data.num_classes, data.client_train)
    return [len(p) for p in parts]


def privacy_plan(cfg: RunConfig, client_size: int | None = None) -> PrivacyPlan:
    if cfg.privacy is None:
        raise FedbenchError(
            "this config has no privacy section; add one (e.g. --set privacy.noise_multiplier=1.0)"
        )
    sizes = client_sizes(cfg, client_size)
    sampled = clients_per_round(cfg.fl.participation, len(sizes))
    schedule = client_schedule(cfg.seed, cfg.fl.rounds, len(sizes), sampled)
    per_step = ALGORITHMS.get(cfg.algorithm.name).gradients_per_step
    return make_plan(cfg, sizes, schedule, per_step)


def describe_privacy(cfg: RunConfig, client_size: int | None = None) -> str:
    plan = privacy_plan(cfg, client_size)
    p = plan.config
    steps = plan.steps()
    worst = max(range(plan.num_clients), key=lambda i: (steps[i], plan.rates[i]))
    lines = [
        f"epsilon {plan.epsilon():.4f} at delta {p.delta:g} (worst client, {p.accountant} accountant)",
        f"noise_multiplier {plan.noise_multiplier:.4f}"
        + (f" (calibrated to target_epsilon {p.target_epsilon:g})" if p.target_epsilon else ""),
        f"clip {p.clip:g}; batch {cfg.fl.batch_size}; local_steps {cfg.fl.local_steps}; "
        f"gradients per step {plan.gradients_per_step}; rounds {cfg.fl.rounds}",
        f"most-used client {worst}: {steps[worst]} steps at q = {plan.rates[worst]:.4g} "
        f"(n_i = {round(cfg.fl.batch_size / plan.rates[worst]) if plan.rates[worst] < 1 else 'B'})",
    ]
    return "\n".join(lines)
