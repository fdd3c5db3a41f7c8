"""Rules that ask the gradient oracle for the client's full local-data gradient (MimeLite's
c_i = grad f_i(x) with `full_batch_gradient`: Karimireddy et al., "Mime: Mimicking Centralized
Stochastic Algorithms in Federated Learning", 2020, Algorithm 1). One algorithm's hook, so a
base class of its own rather than a hook of every algorithm: the executors offer the gradient
as `GradientOracle.full()` and take the pass outside a compiled or graphed step; sample-level DP
refuses it (the pass is not privatised)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from fedbench.algorithms.hyperparams import AlgorithmConfig


class FullGradientRule(ABC):
    """A rule that may call `GradientOracle.full()` (under the hyperparameters that say so)."""

    @classmethod
    @abstractmethod
    def uses_full_gradient(cls, params: AlgorithmConfig) -> bool:
        """True: under `params` the rule asks its oracle for the gradient of the client's mean
        loss over its whole local data (MimeLite: at the first step, where y = x)."""


def uses_full_gradient(algorithm: Any, params: AlgorithmConfig) -> bool:
    """True for a `FullGradientRule` (an instance or its class) that takes the pass under
    `params`."""
    cls = algorithm if isinstance(algorithm, type) else type(algorithm)
    return issubclass(cls, FullGradientRule) and cls.uses_full_gradient(params)
