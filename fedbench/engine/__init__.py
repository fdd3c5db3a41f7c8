"""The round loop, evaluation, checkpoint/resume and run folders."""

from fedbench.engine.loop import RunResult, train

__all__ = ["RunResult", "train"]
