"""A bare PyTorch loop on the peers' workload: the same clients' batches and SGD steps, no
federated logic but copying the weights in and averaging them out (the least a round needs)."""

from __future__ import annotations

import sys

import torch
from common import LR, ROUNDS, RoundClock, client_batches, data_path, load, model, report, sampled


def main() -> None:
    threads = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    torch.set_num_threads(threads)
    data = load(data_path())
    net = model()
    params = list(net.parameters())
    global_weights = [p.detach().clone() for p in params]
    loss_fn = torch.nn.CrossEntropyLoss()
    clock = RoundClock()
    for r in range(ROUNDS):
        total = [torch.zeros_like(p) for p in params]
        chosen = sampled(r, len(data["parts"]))
        for c in chosen:
            with torch.no_grad():
                for p, g in zip(params, global_weights, strict=True):
                    p.copy_(g)
            opt = torch.optim.SGD(params, lr=LR)
            for idx in client_batches(data["parts"][c], r, c):
                i = torch.from_numpy(idx)
                opt.zero_grad(set_to_none=True)
                loss_fn(net(data["x"][i]), data["y"][i]).backward()
                opt.step()
            with torch.no_grad():
                for t, p in zip(total, params, strict=True):
                    t.add_(p)
        global_weights = [t / len(chosen) for t in total]
        clock.tick()
    report(
        clock.seconds(), system=f"bare PyTorch loop, {threads} thread(s)", version=torch.__version__
    )


if __name__ == "__main__":
    main()
