"""pfl-research (Apple's `pfl`) on the peers' workload: FederatedAveraging, one process (or
several under `torchrun`, pfl's multi-process mode), the
clients' K batches as each user's dataset (one local epoch of K batches of B), local SGD at
the workload's lr, central SGD at lr 1 (the mean of the updates)."""

from __future__ import annotations

import os
import sys
from importlib.metadata import version

import numpy as np
import torch
from common import (
    BATCH,
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


class Net(torch.nn.Module):
    """fedbench's cnn with the `loss` and `metrics` methods pfl's PyTorchModel asks for."""

    def __init__(self) -> None:
        super().__init__()
        self.net = model()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, x: torch.Tensor, y: torch.Tensor, eval: bool = False) -> torch.Tensor:
        self.eval() if eval else self.train()
        return torch.nn.functional.cross_entropy(self(x), y)

    @torch.no_grad()
    def metrics(self, x: torch.Tensor, y: torch.Tensor, eval: bool = True):
        from pfl.metrics import Weighted

        self.eval()
        loss = torch.nn.functional.cross_entropy(self(x), y, reduction="sum")
        return {"loss": Weighted(loss, len(y))}


def main() -> None:
    from pfl.aggregate.simulate import SimulatedBackend
    from pfl.algorithm import FederatedAveraging, NNAlgorithmParams
    from pfl.callback.base import TrainingProcessCallback
    from pfl.data.federated_dataset import FederatedDataset
    from pfl.data.sampling import get_user_sampler
    from pfl.hyperparam import NNEvalHyperParams, NNTrainHyperParams
    from pfl.metrics import Metrics
    from pfl.model.pytorch import PyTorchModel

    threads = int(sys.argv[2]) if len(sys.argv) > 2 else torch.get_num_threads()
    torch.set_num_threads(threads)
    data = load(data_path())
    x, y, parts = data["x"], data["y"], data["parts"]
    users = {}
    for c, part in enumerate(parts):
        # The client's K batches of round 0 (pfl keeps a user's data across rounds).
        idx = np.concatenate(client_batches(part, 0, c))
        users[str(c)] = (x[idx], y[idx])
    sampler = get_user_sampler("minimize_reuse", list(users))
    federated = FederatedDataset.from_slices(users, sampler)
    clock = RoundClock()

    class Clock(TrainingProcessCallback):
        def after_central_iteration(self, aggregate_metrics, model, *, central_iteration):
            clock.tick()
            return False, Metrics()

    pfl_model = PyTorchModel(
        model=(net := Net()),
        local_optimizer_create=torch.optim.SGD,
        central_optimizer=torch.optim.SGD(net.parameters(), lr=1.0),
    )
    FederatedAveraging().run(
        algorithm_params=NNAlgorithmParams(
            central_num_iterations=ROUNDS,
            evaluation_frequency=ROUNDS + 1,
            train_cohort_size=CLIENTS_PER_ROUND,
            val_cohort_size=0,
        ),
        backend=SimulatedBackend(training_data=federated, val_data=federated),
        model=pfl_model,
        model_train_params=NNTrainHyperParams(
            local_learning_rate=LR, local_num_epochs=1, local_batch_size=BATCH
        ),
        model_eval_params=NNEvalHyperParams(local_batch_size=1024),
        callbacks=[Clock()],
    )
    # Under torchrun (pfl's multi-process mode: a round's clients split over the processes)
    # every process runs the rounds; the first one reports.
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if os.environ.get("RANK", "0") == "0":
        report(
            clock.seconds(),
            system=f"pfl-research, {processes} process(es) x {threads} thread(s)",
            version=version("pfl"),
        )


if __name__ == "__main__":
    main()
