"""Small models the engine tests swap into a prepared run (digits: 1 x 8 x 8, 10 classes), and
prepared runs in float64 (the precision the engine tests compare in)."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig
from fedbench.engine.setup import RunSetup, param_spec, prepare_run


def batchnorm_net(seed: int = 0) -> nn.Module:
    """A conv net with BatchNorm (running statistics and a step counter), small enough to trace
    and train in seconds, initialised from `seed`."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1),
        nn.BatchNorm2d(4),
        nn.ReLU(),
        nn.Flatten(),
        nn.Linear(4 * 8 * 8, 10),
    )


def with_model(setup: RunSetup, model: nn.Module) -> RunSetup:
    """The setup with `model`, and its algorithm rebuilt for that model's parameters."""
    cfg = setup.cfg.algorithm
    algorithm = ALGORITHMS.get(cfg.name)(cfg, param_spec(model), num_clients=setup.num_clients)
    return replace(setup, model=model, algorithm=algorithm)


def double(setup: RunSetup) -> RunSetup:
    """The setup with its model and data in float64 (in place)."""
    setup.model.double()
    d = setup.data
    setup.data = replace(d, x_train=d.x_train.double(), x_test=d.x_test.double())
    return setup


def prepare64(cfg: RunConfig) -> RunSetup:
    """The run's setup with its model and data in float64."""
    return double(prepare_run(cfg))
