"""The personalised evaluation protocol (docs/personalised.md, "The protocol"), run at the
last round of a run whose algorithm personalises or fine-tunes (`eval.personal`).

For each client that trained (every client not held out as unseen) with a non-empty local
test split: client i's model (x, with its personal part loaded by the method's
`load_personalised`), tested on its own test split (`personal_acc_*`); then the method's
fine-tuning (`finetune_steps` local steps, fedbench.algorithms.personal) and the test again
(`personal_ft_acc_*`). For each unseen client (`eval.unseen_clients`, never sampled for
training): x fine-tuned on its training data and tested (`unseen_acc_*`): fine-tune-then-
test for a method that fine-tunes, the plain test of x for a global one. A global algorithm
gets the same columns (no fine-tuning: before = after), so one table compares both kinds.
Each accuracy is summarised across clients by `summary.summarise` (mean, sample-weighted
mean, std, p10), the loss by its mean.

The engine supplies what touches its model (`ClientModels`: load a client's model, test it,
run a fine-tuning rule on it), so that this module sits below the engine; the engine restores
its own state afterwards (fedbench.engine.loop).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fedbench.algorithms.base import Algorithm, RoundInfo
from fedbench.algorithms.personal import FineTuning, PersonalAlgorithm
from fedbench.config import RunConfig
from fedbench.personal.summary import COLUMNS, STATS, summarise

#: The protocol's counts beside its accuracy columns (summary.COLUMNS).
COUNTS = ("personal_clients", "unseen_clients")


def personal_protocol(cfg: RunConfig, algorithm: Algorithm) -> bool:
    """Whether the run reports the personalised columns."""
    return cfg.eval.personal or isinstance(algorithm, PersonalAlgorithm)


@dataclass(frozen=True)
class ClientModels:
    """What the protocol does to the engine's resident model, supplied by the engine."""

    #: Load client i's model: x, with its stored personal part when the flag is set.
    load: Callable[[int, bool], None]
    #: (accuracy %, mean loss, test samples) of the model as loaded on the client's own test
    #: split; None for a client without test samples.
    test: Callable[[int], tuple[float, float, int] | None]
    #: Train the model as loaded with a local rule on the client's training data (the engine's
    #: own client loop), with the round info given.
    train: Callable[[int, Algorithm, RoundInfo], None]


def _client(
    models: ClientModels, method: PersonalAlgorithm | None, info: RoundInfo, client: int, seen: bool
) -> list[float] | None:
    """[acc, loss, acc after fine-tuning, loss after, test samples] of one client."""
    models.load(client, seen)
    before = models.test(client)
    if before is None:
        return None
    after = before
    if method is not None:
        models.train(client, FineTuning(method), info)
        tuned = models.test(client)
        assert tuned is not None
        after = tuned
    return [before[0], before[1], after[0], after[1], float(before[2])]


def personal_metrics(
    models: ClientModels, algorithm: Algorithm, num_clients: int, unseen: list[int], rounds: int
) -> dict[str, Any]:
    """The protocol's columns (module docstring). The fine-tuning draws its batches as a
    round `rounds` (one past the last) would: past every training round's draws."""
    method = algorithm if isinstance(algorithm, PersonalAlgorithm) else None
    if method is not None and method.finetune_steps() == 0:
        method = None
    info = RoundInfo(rounds, 0.0, 0, num_clients, 1)
    if method is not None:
        info = RoundInfo(rounds, method.finetune_lr(), method.finetune_steps(), num_clients, 1)
    held = set(unseen)
    trained = [_client(models, method, info, c, True) for c in range(num_clients) if c not in held]
    fresh = [_client(models, method, info, c, False) for c in sorted(held)]
    kept = [r for r in trained if r is not None]
    new = [r for r in fresh if r is not None]
    row: dict[str, Any] = {"personal_clients": len(kept), "unseen_clients": len(new)}
    for column, results, at in zip(COLUMNS, (kept, kept, new), (0, 2, 2), strict=True):
        stats = summarise([r[at] for r in results], [r[4] for r in results]) if results else {}
        row.update({f"{column}_{n}": stats.get(n) for n in STATS})
        loss = column.replace("_acc", "_loss") + "_mean"
        row[loss] = sum(r[at + 1] for r in results) / len(results) if results else None
    return row
