"""Small models the engine tests swap into a prepared run (digits: 1 x 8 x 8, 10 classes), and
prepared runs in float64 (the precision the engine tests compare in)."""

from __future__ import annotations

from dataclasses import replace

import torch
from torch import nn

from fedbench.algorithms import ALGORITHMS
from fedbench.config import RunConfig
from fedbench.engine.loop import Engine
from fedbench.engine.plan import execution_plan
from fedbench.engine.run_folder import RunFolder
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


def build_engine(cls: type[Engine], setup: RunSetup, folder: RunFolder) -> Engine:
    """An engine of class `cls` built from its plan: the plan of `setup` run on that executor
    (`runtime.engine` set to its name), as select_engine builds one."""
    runtime = setup.cfg.runtime.model_copy(update={"engine": cls.name})
    setup = replace(setup, cfg=setup.cfg.model_copy(update={"runtime": runtime}))
    return cls(execution_plan(setup), setup, folder, None)
