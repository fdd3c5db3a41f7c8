"""The round loop, evaluation, checkpoint/resume and run folders."""

from fedbench.engine.run import RunResult, train

__all__ = ["RunResult", "train"]
