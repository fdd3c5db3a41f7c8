"""A Flower simulation (`flwr[simulation]`, Ray backend) on the peers' workload: the FedAvg
strategy, 20 virtual clients, 5 a round, each a NumPyClient that runs the client's K SGD steps
of batch B; one client actor with the run's threads (client_resources num_cpus = the cores)."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

import numpy as np
import torch
from common import (
    CLIENTS_PER_ROUND,
    LR,
    ROUNDS,
    RoundClock,
    client_batches,
    data_path,
    load,
    model,
    report,
)


def main() -> None:
    from flwr.client import ClientApp, NumPyClient
    from flwr.common import Context, ndarrays_to_parameters
    from flwr.server import ServerApp, ServerAppComponents, ServerConfig
    from flwr.server.strategy import FedAvg
    from flwr.simulation import run_simulation

    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    path = str(data_path())
    data = load(data_path())
    clients = len(data["parts"])
    clock = RoundClock()

    class Client(NumPyClient):
        def __init__(self, cid: int) -> None:
            torch.set_num_threads(threads)
            self.cid = cid
            self.data = load(type(data_path())(path))
            self.net = model()

        def fit(self, parameters, config):
            params = list(self.net.parameters())
            with torch.no_grad():
                for p, value in zip(params, parameters, strict=True):
                    p.copy_(torch.from_numpy(value))
            opt = torch.optim.SGD(params, lr=LR)
            x, y = self.data["x"], self.data["y"]
            round_index = int(config.get("round", 0))
            for idx in client_batches(self.data["parts"][self.cid], round_index, self.cid):
                i = torch.from_numpy(idx)
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(self.net(x[i]), y[i]).backward()
                opt.step()
            return (
                [p.detach().numpy().copy() for p in params],
                len(self.data["parts"][self.cid]),
                {},
            )

    def client_fn(context: Context):
        return Client(int(context.node_config["partition-id"])).to_client()

    class Timed(FedAvg):
        def aggregate_fit(self, server_round, results, failures):
            found = super().aggregate_fit(server_round, results, failures)
            clock.tick()
            return found

    initial = ndarrays_to_parameters([p.detach().numpy() for p in model().parameters()])
    strategy = Timed(
        fraction_fit=CLIENTS_PER_ROUND / clients,
        fraction_evaluate=0.0,
        min_fit_clients=CLIENTS_PER_ROUND,
        min_evaluate_clients=0,
        min_available_clients=clients,
        initial_parameters=initial,
        on_fit_config_fn=lambda r: {"round": r - 1},
    )

    def server_fn(context: Context) -> ServerAppComponents:
        return ServerAppComponents(strategy=strategy, config=ServerConfig(num_rounds=ROUNDS))

    cores = len(os.sched_getaffinity(0))
    run_simulation(
        server_app=ServerApp(server_fn=server_fn),
        client_app=ClientApp(client_fn=client_fn),
        num_supernodes=clients,
        backend_config={"client_resources": {"num_cpus": cores, "num_gpus": 0.0}},
    )
    report(
        clock.seconds(),
        system=f"Flower simulation (Ray, 1 actor x {threads} thread(s))",
        version=version("flwr"),
        torch_threads=threads,
    )


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
