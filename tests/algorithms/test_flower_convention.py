"""`algorithm.convention` of fedadam / fedyogi / fedadagrad: `flower` reproduces the server
trajectory of Flower's FedAdam / FedYogi / FedAdagrad strategies (their rule written out by hand
below in numpy float64, as flwr computes it; flwr is not a dependency), `reddi` (the default) is
Reddi et al.'s Algorithm 2, and the default leaves every existing run id unchanged.

The clients are real (K local SGD steps on the harness's least-squares problem) and weighted by
unequal sample counts n_i, as Flower's FedAvg aggregation weights them (`weighting: samples`)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from fedbench.algorithms import RoundInfo
from fedbench.config import load_run_config
from fedbench.engine.aggregation import Aggregator
from fedbench.errors import FedbenchError
from fedbench.fields import field_rows
from fedbench.runner.table_config import expand, list_tables, load_table
from tests.algorithms.harness import Problem, assert_close, flatten, make

ROUNDS, K, LR, WD = 8, 3, 0.05, 0.01
#: The clients' sample counts n_i: their weights in the server mean.
SIZES = [120, 45, 300, 9]


def _local_sgd(problem: Problem, x: np.ndarray, i: int) -> np.ndarray:
    """Client i's model after K local SGD steps from x (flat float64)."""
    y = torch.from_numpy(x.copy())
    for _ in range(K):
        y = y - LR * (problem.flat_grad(y, i) + WD * y)
    return y.numpy()


def flower_reference(
    variant: str, eta: float, beta_1: float, beta_2: float, tau: float
) -> np.ndarray:
    """Flower's strategy by hand: FedAvg's n_i-weighted mean of the client models, then
    delta_t = mean - current; m_t, v_t from 0; FedAdam's eta_norm with server_round + 1."""
    problem = Problem(clients=len(SIZES))
    current = flatten(problem.x0()).numpy()
    m_t = np.zeros_like(current)
    v_t = np.zeros_like(current)
    for server_round in range(1, ROUNDS + 1):  # Flower counts rounds from 1
        results = [(_local_sgd(problem, current, i), n) for i, n in enumerate(SIZES)]
        total = sum(n for _, n in results)
        aggregated = sum(y * n for y, n in results) / total
        delta_t = aggregated - current
        m_t = beta_1 * m_t + (1 - beta_1) * delta_t
        if variant == "adam":
            v_t = beta_2 * v_t + (1 - beta_2) * delta_t * delta_t
            eta_norm = (
                eta
                * np.sqrt(1 - np.power(beta_2, server_round + 1.0))
                / (1 - np.power(beta_1, server_round + 1.0))
            )
        elif variant == "yogi":
            v_t = v_t - (1.0 - beta_2) * delta_t * delta_t * np.sign(v_t - delta_t * delta_t)
            eta_norm = eta
        else:
            v_t = v_t + delta_t * delta_t
            eta_norm = eta
        current = current + eta_norm * m_t / (np.sqrt(v_t) + tau)
    return current


def reddi_reference(
    variant: str, eta: float, beta_1: float, beta_2: float, tau: float
) -> np.ndarray:
    """Reddi et al. 2021, Algorithm 2 on the same weighted clients: v_0 = tau^2, no correction."""
    problem = Problem(clients=len(SIZES))
    x = flatten(problem.x0()).numpy()
    m = np.zeros_like(x)
    v = np.full_like(x, tau**2)
    for _ in range(ROUNDS):
        deltas = [(_local_sgd(problem, x, i) - x, n) for i, n in enumerate(SIZES)]
        d = sum(delta * n for delta, n in deltas) / sum(SIZES)
        m = beta_1 * m + (1 - beta_1) * d
        if variant == "adam":
            v = beta_2 * v + (1 - beta_2) * d**2
        elif variant == "yogi":
            v = v - (1 - beta_2) * d**2 * np.sign(v - d**2)
        else:
            v = v + d**2
        x = x + eta * m / (np.sqrt(v) + tau)
    return x


def fedbench_trajectory(name: str, **fields: object) -> torch.Tensor:
    """fedbench's rule as the engine runs it: client_begin, K local steps, client_end, the
    engine's n_i-weighted streaming mean (Aggregator), server_update with the 0-based round."""
    problem = Problem(clients=len(SIZES))
    alg = make(name, clients=len(SIZES), weight_decay=WD, **fields)
    x = problem.x0()
    server = alg.init_server_state(x)
    for r in range(ROUNDS):
        info = RoundInfo(r, LR, K, len(SIZES), len(SIZES))
        results = Aggregator()
        for i, n in enumerate(SIZES):
            local = alg.client_begin(x, server, None, info)
            y = [t.clone() for t in x]
            for k in range(1, K + 1):
                g = problem.grad(y, i)
                with torch.no_grad():
                    alg.local_step(y, g, local, k, info)
            upload, _ = alg.client_end(y, x, local, None, info)
            results.add(upload, float(n))
        with torch.no_grad():
            alg.server_update(x, results.means(), server, info)
    return flatten(x)


#: (variant, eta, beta_1, beta_2, tau): Flower's defaults of each strategy (FedAdam's and
#: FedAdagrad's tau 1e-9 in flwr.server.strategy, 1e-3 in flwr.serverapp.strategy).
FLOWER_CASES = [
    ("adam", 0.1, 0.9, 0.99, 1e-9),
    ("adam", 0.1, 0.9, 0.99, 1e-3),
    ("yogi", 0.01, 0.9, 0.99, 1e-3),
    ("adagrad", 0.1, 0.0, 0.0, 1e-9),
    ("adagrad", 0.1, 0.0, 0.0, 1e-3),
]


def _fields(variant: str, eta: float, beta_1: float, beta_2: float, tau: float) -> dict:
    fields = {"server_lr": eta, "beta1": beta_1, "tau": tau}
    if variant != "adagrad":
        fields["beta2"] = beta_2
    return fields


@pytest.mark.parametrize(("variant", "eta", "beta_1", "beta_2", "tau"), FLOWER_CASES)
def test_flower_convention_equals_flowers_rule_over_eight_weighted_rounds(
    variant: str, eta: float, beta_1: float, beta_2: float, tau: float
) -> None:
    fields = _fields(variant, eta, beta_1, beta_2, tau)
    ours = fedbench_trajectory(f"fed{variant}", convention="flower", **fields)
    expected = torch.from_numpy(flower_reference(variant, eta, beta_1, beta_2, tau))
    assert_close(ours, expected)


@pytest.mark.parametrize("variant", ["adam", "yogi", "adagrad"])
def test_reddi_convention_is_algorithm_2(variant: str) -> None:
    eta, beta_1, beta_2, tau = 0.1, 0.9, 0.99, 1e-3
    fields = _fields(variant, eta, beta_1, beta_2, tau)
    ours = fedbench_trajectory(f"fed{variant}", **fields)  # the default convention
    assert_close(ours, torch.from_numpy(reddi_reference(variant, eta, beta_1, beta_2, tau)))
    flower = (
        fedbench_trajectory(f"fed{variant}", convention="flower", **fields)
        if (variant != "adagrad")
        else None
    )
    if flower is not None:  # the two conventions are different rules
        assert (ours - flower).abs().max() > 1e-3


@pytest.mark.parametrize(
    ("tau", "gap_reddi", "gap_corrected", "moved"),
    [(1e-3, 0.502, 0.093, 0.672), (1e-9, 0.526, 0.062, 0.713)],
)
def test_the_gap_between_reddi_and_flower_fedadam_quoted_in_docs(
    tau: float, gap_reddi: float, gap_corrected: float, moved: float
) -> None:
    """docs/flower.md quotes these numbers: the largest coordinate difference after 8 rounds
    between fedbench's default FedAdam and Flower's at the same eta 0.1, betas 0.9 / 0.99 and
    tau, with fedbench's bias_correction: true (not Flower's rule either), and how far Flower's
    model moved from x_0 in those rounds (the scale of the gap)."""
    fields = {"server_lr": 0.1, "beta1": 0.9, "beta2": 0.99, "tau": tau}
    flower = torch.from_numpy(flower_reference("adam", 0.1, 0.9, 0.99, tau))
    reddi = fedbench_trajectory("fedadam", **fields)
    corrected = fedbench_trajectory("fedadam", bias_correction=True, **fields)
    start = flatten(Problem(clients=len(SIZES)).x0())
    assert round(float((reddi - flower).abs().max()), 3) == gap_reddi
    assert round(float((corrected - flower).abs().max()), 3) == gap_corrected
    assert round(float((flower - start).abs().max()), 3) == moved
    assert_close(fedbench_trajectory("fedadam", convention="flower", **fields), flower)


def flower_fedavgm_reference(server_learning_rate: float, server_momentum: float) -> np.ndarray:
    """Flower's FedAvgM by hand: pseudo_gradient = current - n_i-weighted mean; with momentum,
    v = pseudo_gradient in the first round, then v = momentum v + pseudo_gradient; current -=
    server_learning_rate * v (momentum 0, lr 1: FedAvg)."""
    problem = Problem(clients=len(SIZES))
    current = flatten(problem.x0()).numpy()
    velocity = None
    for _ in range(ROUNDS):
        results = [(_local_sgd(problem, current, i), n) for i, n in enumerate(SIZES)]
        aggregated = sum(y * n for y, n in results) / sum(n for _, n in results)
        pseudo_gradient = current - aggregated
        if server_momentum > 0.0:
            velocity = (
                pseudo_gradient
                if velocity is None
                else server_momentum * velocity + pseudo_gradient
            )
            pseudo_gradient = velocity
        current = current - server_learning_rate * pseudo_gradient
    return current


@pytest.mark.parametrize(("lr", "momentum"), [(1.0, 0.0), (1.0, 0.9), (0.7, 0.5)])
def test_fedavgm_equals_flowers_fedavgm_without_a_switch(lr: float, momentum: float) -> None:
    ours = fedbench_trajectory("fedavgm", server_lr=lr, momentum=momentum)
    assert_close(ours, torch.from_numpy(flower_fedavgm_reference(lr, momentum)))


def test_flower_convention_refuses_what_flower_cannot_run() -> None:
    with pytest.raises(FedbenchError, match="set bias_correction false"):
        load_run_config(
            None,
            [
                "algorithm.name=fedadam",
                "algorithm.convention=flower",
                "algorithm.bias_correction=true",
            ],
        )
    with pytest.raises(FedbenchError, match=r"set algorithm\.beta1 0 with convention flower"):
        load_run_config(None, ["algorithm.name=fedadagrad", "algorithm.convention=flower"])
    cfg = load_run_config(
        None, ["algorithm.name=fedadagrad", "algorithm.convention=flower", "algorithm.beta1=0"]
    )
    assert cfg.algorithm.convention == "flower"


def test_convention_is_a_listed_field_of_every_fedopt_algorithm() -> None:
    from fedbench.algorithms import ALGORITHMS

    for name in ("fedadam", "fedyogi", "fedadagrad", "dp_fedadam"):
        rows = {r.name: r for r in field_rows(ALGORITHMS.get(name).Params)}
        assert rows["convention"].type == "reddi | flower"
        assert rows["convention"].default == "reddi"


#: Run ids issued before `convention` existed (computed on the commit before it was added).
PINNED_IDS = {
    ("algorithm.name=fedadam",): "fedadam-digits-cnn-s0-e978f41f39",
    (
        "algorithm.name=fedyogi",
        "algorithm.bias_correction=true",
    ): "fedyogi-bias_correction-true-digits-cnn-s0-5873443851",
    (
        "algorithm.name=fedadagrad",
        "algorithm.server_lr=0.1",
    ): "fedadagrad-server_lr0.1-digits-cnn-s0-32f7d7c89d",
    ("algorithm.name=dp_fedadam",): "dp_fedadam-digits-cnn-s0-97e197ed9c",
}
#: sha256 of the sorted run ids of every FedAdam / FedYogi / FedAdagrad cell (seed 0) of every
#: shipped table and ablation, before `convention` existed (37 ids; the DP tables' cells at the
#: `privacy.sampling: fixed` they had then).
TABLE_FEDOPT_IDS = "141c5281945f59bed3df3a9012a5971cb8f2cf209055dcb1bfb43f39b10b890e"
#: Tables shipped after `convention` existed: their cells never had another id.
NEWER_TABLES = {"personalised"}


def test_the_default_convention_keeps_every_existing_run_id() -> None:
    for sets, run_id in PINNED_IDS.items():
        assert load_run_config(None, list(sets)).run_id() == run_id
        explicit = load_run_config(None, [*sets, "algorithm.convention=reddi"])
        assert explicit.run_id() == run_id
    ids = set()
    for kind in ("table", "ablation"):
        for name in list_tables(kind):
            if name in NEWER_TABLES:
                continue
            table = load_table(name, kind)
            # The DP tables moved to Poisson sampling on purpose (docs/privacy.md); with the
            # sampling they had, their FedOpt cells keep their ids too.
            fixed = ["privacy.sampling=fixed"] if table.base.get("privacy") is not None else []
            for run in expand(table, seeds=1, overrides=fixed).runs:
                if run.cfg.algorithm.name.removeprefix("dp_") in (
                    "fedadam",
                    "fedyogi",
                    "fedadagrad",
                ):
                    ids.add(run.cfg.run_id())
    assert len(ids) == 37
    assert hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest() == TABLE_FEDOPT_IDS


def test_flower_convention_has_its_own_run_id() -> None:
    flower = load_run_config(None, ["algorithm.name=fedadam", "algorithm.convention=flower"])
    assert flower.run_id().startswith("fedadam-convention-flower-digits-cnn-s0-")
    assert flower.run_id() != PINNED_IDS[("algorithm.name=fedadam",)]
    assert flower.config_hash() != load_run_config(None, ["algorithm.name=fedadam"]).config_hash()
