"""Run the algorithm's local rule on clients from a saved global model, through the engine's own
client path (`client_begin` + `run_client`), and return each client's local state after its K
steps: the optimizer moments that a finished run discards (DP-FedAdamW Figure 4 reads m and v).
Nothing is written and no round is aggregated."""

from __future__ import annotations

from pathlib import Path

import torch

from fedbench.algorithms.base import RoundInfo, State
from fedbench.config import RunConfig
from fedbench.engine.client import run_client
from fedbench.engine.loop import Engine
from fedbench.engine.plan import execution_plan
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import local_lr
from fedbench.engine.setup import prepare_run


def client_local_states(
    cfg: RunConfig, folder: Path, clients: list[int] | None = None
) -> tuple[list[State], list[int]]:
    """Each client's local state after K local steps from the run's final model (folder's
    model.pt), at the last round's learning rate; clients None: every client of the
    federation. Also returns each client's batch divisor B (its DP noise std is sigma C / B)."""
    # The clients' steps run one by one (run_client): the plan of the run on the sequential
    # executor (its precision, compile and clipping as the run's config asks).
    sequential = cfg.runtime.model_copy(update={"engine": "sequential"})
    setup = prepare_run(cfg.model_copy(update={"runtime": sequential}))
    engine = Engine(execution_plan(setup, group=1), setup, RunFolder(folder), console=None)
    state = torch.load(folder / "model.pt", map_location=setup.device)
    setup.model.load_state_dict(state)
    engine.x = [p.detach().clone() for p in engine.params]
    rounds = cfg.fl.rounds
    lr = local_lr(cfg.algorithm, rounds - 1, rounds)
    chosen = list(range(setup.num_clients)) if clients is None else clients
    info = RoundInfo(rounds - 1, lr, cfg.fl.local_steps, setup.num_clients, len(chosen))
    states, divisors = [], []
    for client in chosen:
        engine._load_global()
        local = setup.algorithm.client_begin(engine.x, engine.server, None, info)
        samples = setup.clients[client]
        run_client(engine.local_training, client=client, samples=samples, local=local, info=info)
        states.append(local)
        n_local = samples.numel()
        private = engine.private
        divisors.append(private.divisor(n_local) if private is not None else cfg.fl.batch_size)
    return states, divisors
