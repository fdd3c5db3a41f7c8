"""fednova: the hand rule with heterogeneous local steps (x + eta_g tau_eff mean_i Delta_i/tau_i),
FedAvg when every client runs the same steps, and the objective-inconsistency fix on a problem
where FedAvg's fixed point is pulled toward the clients that run longest."""

import torch

from tests.algorithms.harness import Problem, assert_close, flatten, make, run_federated

STEPS = {0: 1, 1: 3, 2: 5}  # tau_i per client


def fednova_reference(problem, rounds, lr, wd, eta_g, steps):
    x = flatten(problem.x0())
    for _ in range(rounds):
        normalised, taus = [], []
        for i in range(problem.N):
            y = x.clone()
            for _ in range(steps[i]):
                y = y - lr * (problem.flat_grad(y, i) + wd * y)
            normalised.append((y - x) / steps[i])
            taus.append(steps[i])
        tau_eff = sum(taus) / len(taus)
        x = x + eta_g * tau_eff * torch.stack(normalised).mean(0)
    return x


def test_fednova_two_rounds_by_hand_with_heterogeneous_steps() -> None:
    problem = Problem(clients=3)
    alg = make("fednova", clients=3, weight_decay=0.01, server_lr=0.8)
    x, _, _ = run_federated(
        alg, problem, rounds=2, local_steps=5, lr=0.05, steps_of=lambda r, i: STEPS[i]
    )
    assert_close(x, fednova_reference(problem, 2, 0.05, 0.01, 0.8, STEPS))
    assert alg.comm_up() == 8.0


def test_fednova_with_equal_steps_is_fedavg() -> None:
    problem = Problem(clients=3)
    nova, _, _ = run_federated(
        make("fednova", clients=3, weight_decay=0.01), problem, rounds=2, local_steps=3, lr=0.05
    )
    avg, _, _ = run_federated(
        make("fedavg", clients=3, weight_decay=0.01), problem, rounds=2, local_steps=3, lr=0.05
    )
    assert_close(nova, flatten(avg))


def test_fednova_removes_the_pull_toward_clients_with_more_steps() -> None:
    """Wang et al.'s point: with tau_i = 1, 3, 5 FedAvg converges to a point weighted toward
    client 2's optimum; FedNova's fixed point is much closer to the true global optimum."""
    problem = Problem(clients=3, n=8, shift=2.0)
    optimum = problem.optimum()
    gaps = {}
    for name in ("fednova", "fedavg"):
        x, _, _ = run_federated(
            make(name, clients=3, weight_decay=0.0),
            problem,
            rounds=300,
            local_steps=5,
            lr=0.01,
            steps_of=lambda r, i: STEPS[i],
        )
        gaps[name] = float((flatten(x) - optimum).norm())
    assert gaps["fednova"] < 0.25 * gaps["fedavg"]


def _dp_fednova_reference(problem, lr, wd, clip, steps, nominal):
    """One round of DP-FedNova without noise, by hand in float64: u_i = K d_i clipped to C,
    x + (tau_eff / K) mean_i u_i with the exact (public) tau_eff."""
    x = flatten(problem.x0())
    uploads = []
    for i in range(problem.N):
        y = x.clone()
        for _ in range(steps[i]):
            y = y - lr * (problem.flat_grad(y, i) + wd * y)
        u = nominal * (y - x) / steps[i]
        uploads.append(u * min(1.0, clip / float(u.norm())))
    tau_eff = sum(steps.values()) / len(steps)
    return x + (tau_eff / nominal) * torch.stack(uploads).mean(0)


def _one_client_level_round(alg, problem, lr, steps, nominal, clip, z):
    """One round through the client-level mechanism (fedbench.privacy.client_level) as the
    engine runs it: clip each upload as it arrives, privatise the sum, server step."""
    from dataclasses import replace

    from fedbench.algorithms.base import RoundInfo
    from fedbench.config import PrivacyConfig
    from fedbench.privacy.client_level import ClientLevelRound, client_level_plan

    config = PrivacyConfig(level="client", noise_multiplier=z, clip=clip)
    plan = client_level_plan(config, num_clients=problem.N, sampled=problem.N, rounds=1)
    mechanism = ClientLevelRound(plan, seed=0, round_idx=0, clip=clip, public=alg.public_uploads)
    x = problem.x0()
    server = alg.init_server_state(x)
    base = RoundInfo(0, lr, nominal, problem.N, problem.N)
    sums: dict = {}
    for i in range(problem.N):
        info = replace(base, local_steps=steps[i], nominal_steps=nominal)
        local = alg.client_begin(x, server, None, info)
        y = [t.clone() for t in x]
        for k in range(1, steps[i] + 1):
            g = problem.grad(y, i)
            with torch.no_grad():
                alg.local_step(y, g, local, k, info)
        with torch.no_grad():
            upload, _ = alg.client_end(y, x, local, None, info)
        for key, tensors in mechanism.add(upload).items():
            sums[key] = (
                [s + t for s, t in zip(sums[key], tensors, strict=True)] if key in sums else tensors
            )
    with torch.no_grad():
        alg.server_update(x, mechanism.privatise(sums), server, base)
    return x


def test_dp_fednova_clips_the_normalised_direction_and_keeps_tau_public() -> None:
    """Client-level DP with tau_i = 1, 3, 5 and no noise: the hand rule (clip K d_i to C, exact
    tau_eff). Before the fix the clip covered [Delta_i, d_i, tau_i] together (tau_i >> C
    dominated the norm) and tau_eff itself was clipped and noised."""
    problem = Problem(clients=3)
    alg = make("fednova", clients=3, weight_decay=0.01)
    x = _one_client_level_round(alg, problem, 0.05, STEPS, nominal=5, clip=0.05, z=0.0)
    assert_close(x, _dp_fednova_reference(problem, 0.05, 0.01, 0.05, STEPS, nominal=5))


def test_dp_fednova_with_equal_steps_is_dp_fedavg_noise_included() -> None:
    problem = Problem(clients=3)
    equal = {0: 4, 1: 4, 2: 4}
    for z in (0.0, 1.3):
        nova = _one_client_level_round(
            make("fednova", clients=3, weight_decay=0.01), problem, 0.05, equal, 4, 0.05, z
        )
        avg = _one_client_level_round(
            make("fedavg", clients=3, weight_decay=0.01), problem, 0.05, equal, 4, 0.05, z
        )
        assert torch.equal(flatten(nova), flatten(avg))
