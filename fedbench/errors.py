"""Errors a user can cause: the CLI prints them as one line and exits with code 2."""


class FedbenchError(Exception):
    """A usage, config or data error: one line saying what is wrong and how to fix it."""

    exit_code = 2


class DivergedError(Exception):
    """A run produced a non-finite loss or parameter; the engine records `status: diverged`.

    `round` is the first round found non-finite, when the error knows it (the engine reads
    the device's record of it only at evaluations and checkpoints: `FiniteWatch`)."""

    def __init__(self, message: str, round: int | None = None) -> None:
        super().__init__(message)
        self.round = round


class Interrupted(FedbenchError):
    """Ctrl-C: the message says what was interrupted, where its checkpoint is and how to resume."""

    exit_code = 130
