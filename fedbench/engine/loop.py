"""The sequential engine: the run loop for every algorithm and dataset (data flow CLI ->
config -> plan -> launcher -> engine -> run folder -> report). A round is the round protocol
(fedbench.engine.protocol) whose clients train one after the other on the one resident model."""

from __future__ import annotations

import dataclasses
import functools
import platform
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from rich.console import Console
from torch import Tensor

import fedbench
from fedbench.algorithms.base import Algorithm, RoundInfo, State
from fedbench.algorithms.representation import uses_representation
from fedbench.config import RunConfig
from fedbench.engine.accelerate import GraphedForward, apply_precision, to_channels_last
from fedbench.engine.aggregation import FiniteWatch, RoundResults
from fedbench.engine.captured import CapturedStep
from fedbench.engine.checkpoint import load_checkpoint, remove_checkpoint, save_checkpoint
from fedbench.engine.checkpoint_state import checkpoint_problem
from fedbench.engine.client import LocalTraining, run_client
from fedbench.engine.client_pool import ClientPool
from fedbench.engine.client_state import client_state_device, to_device
from fedbench.engine.evaluate import evaluate, train_subset_indices
from fedbench.engine.per_client import client_test_data, per_client_metrics
from fedbench.engine.plan import ExecutionPlan
from fedbench.engine.progress import RunProgress, make_progress
from fedbench.engine.protocol import (
    ClientStart,
    Federation,
    Trained,
    run_round,
    uniform_weight,
)
from fedbench.engine.run_folder import RunFolder
from fedbench.engine.schedule import (
    client_local_steps,
    clients_per_round,
    local_lr,
    participation_counts,
    round_info,
)
from fedbench.engine.setup import RunSetup
from fedbench.errors import DivergedError
from fedbench.files import write_file
from fedbench.models.representation import represent_with, representation_split
from fedbench.personal.evaluate import ClientModels, personal_metrics, personal_protocol
from fedbench.personal.store import client_store
from fedbench.privacy.client_level import ClientLevelRound
from fedbench.provenance import git_state
from fedbench.step import Objective
from fedbench.threads import ThreadChoice, current_record
from fedbench.threads import apply as apply_threads

#: The server-state entry of the engine's client-level DP state (the adaptive clip C).
CLIENT_DP_KEY = "client_level_dp"


def _state_buffers(model: torch.nn.Module) -> list[Tensor]:
    """Buffers saved in the state_dict (BatchNorm statistics), in a fixed order."""
    keys = set(model.state_dict())
    return [b for name, b in model.named_buffers() if name in keys]


def rounds_to_target(rows: list[dict[str, Any]], target: float | None) -> int | None:
    """The first evaluated round with test_acc >= target (FedAdamom's "rounds to X%");
    None when no target is set or the run never reached it."""
    if target is None:
        return None
    return next((row["round"] for row in rows if row["test_acc"] >= target), None)


@dataclass
class RunPass:
    """Where one call of `Engine.run` stands: the round it started at and the next one, its
    clock and progress display, and how it ends (`over`: no round is left to train)."""

    start: int
    next_round: int
    t0: float
    progress: RunProgress
    status: str = "completed"
    error: str | None = None
    diverged_round: int | None = None
    over: bool = False


class Engine:
    """Runs one configured federation in a run folder, resuming from its checkpoint."""

    #: The engine's name in summary.json and `fedbench bench` (runtime.engine's values).
    name = "sequential"
    #: Whether the engine trains its clients as rows stacked over a leading dimension with a
    #: step of its own (fedbench.engine.stacked): then it builds no per-client compiled step,
    #: compiled forward or CUDA-graphed forward.
    stacks_rows: ClassVar[bool] = False

    def __init__(
        self, plan: ExecutionPlan, setup: RunSetup, folder: RunFolder, console: Console | None
    ) -> None:
        if plan.executor != self.name:
            raise ValueError(f"a {plan.executor} plan given to the {self.name} engine")
        #: How the run executes, each choice with its reason (fedbench.engine.plan): the engine
        #: is built from it and reads no runtime choice from the config; summary.json records it.
        self.plan = plan
        self.setup = setup
        self.cfg: RunConfig = setup.cfg
        self.folder = folder
        self.console = console
        model = setup.model
        self.autocast = apply_precision(plan.precision, setup.device)
        if plan.channels_last:  # before x copies the layout
            to_channels_last(model)
        self.params: list[Tensor] = [p for p in model.parameters() if p.requires_grad]
        self.buffers = _state_buffers(model)
        self.x = [p.detach().clone() for p in self.params]
        self.global_buffers = [b.detach().clone() for b in self.buffers]
        self.server: State = setup.algorithm.init_server_state(self.x)
        self.state_device = client_state_device(self.cfg.runtime.client_state_device, setup.device)
        #: Every client's stored state, bounded in memory (fedbench.personal.store).
        self.client_states = client_store(self.cfg, self.state_device, folder.path)
        self.diagnostics: dict[str, float | None] = {
            "client_drift": None,
            "relative_drift": None,
            "v_spread": None,
            "local_step_ratio": None,
        }
        privacy = (
            setup.privacy if setup.privacy is not None and setup.privacy.level == "sample" else None
        )
        #: The local objective every executor differentiates (fedbench.step).
        self.objective = Objective(self.cfg.fl.label_smoothing)
        #: What the plan compiles (None: nothing): the sequential executor's whole client step
        #: or its forward here; the vectorised executor's step or gradient (its own __init__).
        self.compiled = None if plan.compile == "off" else plan.compile
        self.captured = (
            self._captured_step() if plan.compile == "step" and not self.stacks_rows else None
        )
        self.forward: Callable[[Tensor], Tensor] = (
            torch.compile(model) if plan.compile == "forward" else model
        )
        if plan.cuda_graphs and not self.stacks_rows:
            self.forward = GraphedForward(model)
        self.private = (
            privacy.mechanism(
                model,
                self.params,
                self.autocast,
                self.objective,
                method=plan.clipping,
                strict="clipping" in plan.required,
            )
            if privacy is not None and plan.clipping is not None
            else None
        )
        #: The notes already printed (`_note_clipping`): each once.
        self._noted: set[str] = set()
        #: summary.json's `seeds_together`: set by SeedsEngine for a run trained with others.
        self.seeds_together: dict[str, Any] | None = None
        self.local_training = LocalTraining(
            model=model,
            forward=self.forward,
            params=self.params,
            algorithm=setup.algorithm,
            data=setup.data,
            batch_size=self.cfg.fl.batch_size,
            seed=self.cfg.seed,
            grad_clip=self.cfg.algorithm.grad_clip,
            prepare=setup.prepare,
            autocast=self.autocast,
            channels_last=plan.channels_last,
            private=self.private,
            poisson=privacy is not None and privacy.config.sampling == "poisson",
            captured=self.captured,
            objective=self.objective,
            **self._representation(model),
        )
        n_train = setup.data.n_train
        subset = train_subset_indices(n_train, self.cfg.eval.train_subset, self.cfg.seed)
        self.train_eval_idx = torch.as_tensor(subset, device=setup.device)
        #: Whether every round's mean update was finite, kept on the device (read at evaluations
        #: and checkpoints, so that a round itself never waits for the device).
        self.watch = FiniteWatch()
        self.metrics_rows = 0
        self.elapsed_before = 0.0
        #: Where the final model goes (`--save-model`), written before the summary: a run is
        #: finished only with its model.pt in place, so a kill while writing it is resumed.
        self.model_file: Path | None = None
        #: The processes that train clients of a round beside this one (the plan's
        #: client_processes; started by `start_layout`), or None: every client trains here.
        self.pool: ClientPool | None = None

    def _captured_step(self) -> CapturedStep:
        """The compiled whole client step (the plan's `compile: step`, fedbench.engine.captured)."""
        s = self.setup
        return CapturedStep(
            s.model,
            s.algorithm,
            self.cfg.algorithm.grad_clip,
            self.autocast,
            s.device,
            objective=Objective(self.cfg.fl.label_smoothing),
        )

    # --- state ----------------------------------------------------------------------------------
    def _load_global(self) -> None:
        with torch.no_grad():
            torch._foreach_copy_(self.params, self.x)
            for b, g in zip(self.buffers, self.global_buffers, strict=True):
                b.copy_(g)

    def _load_client(self, stored: State | None) -> None:
        """Client i's model: x, with its personal part for a personalising algorithm."""
        self._load_global()
        if self.setup.algorithm.personalises:
            with torch.no_grad():
                self.setup.algorithm.load_client(self.params, self.buffers, stored)

    def _checkpoint(self, rounds_done: int, elapsed: float) -> None:
        save_checkpoint(
            self.folder.checkpoint,
            {
                "round": rounds_done,
                "x": self.x,
                "buffers": self.global_buffers,
                "server": self.server,
                **self.client_states.checkpoint_entries(),
                "metrics_rows": self.metrics_rows,
                "elapsed_s": elapsed,
                "torch_rng": torch.get_rng_state(),
                "run_id": self.folder.path.name,
                "config_hash": self.cfg.config_hash(),
            },
        )
        self.client_states.checkpointed()

    def _resume(self) -> int:
        ckpt = load_checkpoint(self.folder.checkpoint, self.setup.device, self._checkpoint_problem)
        if ckpt is None:
            write_file(self.folder.metrics, "")
            self.client_states.restore({"clients": {}})
            return 0
        line = self.folder.resuming_line()
        if self.console is not None and line is not None:
            self.console.print(line, highlight=False, soft_wrap=True)
        self.x = ckpt["x"]
        self.global_buffers = ckpt["buffers"]
        self.server = ckpt["server"]
        self.client_states.restore(ckpt)
        self.metrics_rows = ckpt["metrics_rows"]
        self.elapsed_before = ckpt["elapsed_s"]
        torch.set_rng_state(ckpt["torch_rng"])
        # Rows written after the checkpoint are recomputed, so the file matches an uninterrupted run.
        self.folder.truncate_metrics(self.metrics_rows)
        return int(ckpt["round"])

    def _checkpoint_problem(self, ckpt: Any) -> str | None:
        """What makes a loaded checkpoint unusable for this run (None: nothing): checked before
        anything is restored or truncated. A checkpoint of another run (its folder copied over
        this one) is refused like a corrupt one."""
        owner = self.folder.path.name, self.cfg.config_hash()
        legacy = self.cfg.run_id(legacy=True), self.cfg.config_hash(legacy=True)
        if isinstance(ckpt, dict) and (ckpt.get("run_id"), ckpt.get("config_hash")) == legacy:
            owner = legacy  # written under the id this run had before (RunFolder.for_config)
        return checkpoint_problem(
            ckpt,
            owner=owner,
            rounds=self.cfg.fl.rounds,
            num_clients=self.setup.num_clients,
            x=self.x,
            buffers=self.global_buffers,
            server=self.server,
            metrics_rows=len(self.folder.read_metrics()),
        )

    # --- evaluation -----------------------------------------------------------------------------
    def _evaluate(self, rounds_done: int, lr: float, elapsed: float) -> dict[str, Any]:
        s, cfg = self.setup, self.cfg
        self._load_global()
        acc, test_loss = evaluate(
            s.model, s.data.x_test, s.data.y_test, cfg.eval.batch_size, s.prepare, s.data.metric
        )
        idx = self.train_eval_idx
        _, train_loss = evaluate(
            s.model, s.data.x_train[idx], s.data.y_train[idx], cfg.eval.batch_size, s.prepare
        )
        # Client-rounds so far: with dropout, only the clients that finished their round count.
        if cfg.fl.dropout > 0:
            trained = sum(len(s.schedule[r]) for r in range(rounds_done))
        else:
            trained = clients_per_round(cfg.fl.participation, s.num_clients) * rounds_done
        row: dict[str, Any] = {
            "round": rounds_done,
            "test_acc": acc,
            "test_loss": test_loss,
            "train_loss": train_loss,
            "lr": lr,
            "comm_up": s.algorithm.comm_up() * trained,
            "comm_down": s.algorithm.comm_down() * trained,
            "elapsed_s": round(elapsed, 3),
        }
        if cfg.eval.diagnostics:
            row.update(self.diagnostics)
        if cfg.eval.per_client:  # the clients of the round just finished (round 0: the first's)
            sampled_now = s.schedule[max(rounds_done - 1, 0)]
            row.update(per_client_metrics(s, sampled_now, cfg.eval.batch_size))
        if rounds_done == cfg.fl.rounds and personal_protocol(cfg, s.algorithm):
            row.update(self._personal_row())
        if s.privacy is not None:
            row["epsilon"] = s.privacy.epsilon(rounds_done)
        self.folder.append_metrics(row)
        self.metrics_rows += 1
        return row

    def _personal_row(self) -> dict[str, Any]:
        """The personalised protocol's columns (fedbench.personal.evaluate) on this engine's
        model and store; torch's random state and the global model are restored after it."""
        s, algorithm = self.setup, self.setup.algorithm

        def load(client: int, stored: bool) -> None:
            state = self.client_states.get(client) if stored else None
            self._load_global()
            if algorithm.personalises:
                with torch.no_grad():
                    loaded = None if state is None else to_device(state, s.device)
                    algorithm.load_personalised(self.params, self.buffers, loaded)

        def test(client: int) -> tuple[float, float, int] | None:
            found = client_test_data(s, client)
            if found is None:
                return None
            acc, loss = evaluate(
                s.model, *found, self.cfg.eval.batch_size, s.prepare, s.data.metric
            )
            return acc, loss, len(found[1])

        def train(client: int, rule: Algorithm, info: RoundInfo) -> None:
            plain = dataclasses.replace(
                self.local_training, forward=s.model, algorithm=rule, captured=None, private=None
            )
            run_client(plain, client=client, samples=s.clients[client], local={}, info=info)

        rng = torch.get_rng_state()
        cuda = torch.cuda.get_rng_state_all() if s.device.type == "cuda" else None
        try:
            models = ClientModels(load, test, train)
            rounds = self.cfg.fl.rounds
            return personal_metrics(models, algorithm, s.num_clients, s.unseen_clients, rounds)
        finally:
            torch.set_rng_state(rng)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
            self._load_global()

    # --- one round ------------------------------------------------------------------------------
    def _round(self, r: int, lr: float, diagnostics: bool = False) -> None:
        """One round (fedbench.engine.protocol) whose clients train one after the other on the
        resident model; with `diagnostics`, also FedAdamW Figure 2's client_drift and v_spread."""
        s, cfg = self.setup, self.cfg
        clients = s.schedule[r]
        if not clients:  # every sampled client dropped out: no update this round
            return
        info = round_info(cfg.algorithm, r, lr, cfg.fl.local_steps, s.num_clients, len(clients))

        def train_one(start: ClientStart) -> Trained:
            self._load_client(start.stored)
            step_ratio = run_client(
                self.local_training,
                client=start.client,
                samples=s.clients[start.client],
                local=start.local,
                info=start.info,
                measure_steps=diagnostics,
            )
            return Trained([p.detach() for p in self.params], self.buffers, step_ratio)

        def train(starts: list[ClientStart]) -> list[Trained]:
            (start,) = starts
            return [train_one(start)]

        def steps_of(client: int) -> int:
            return client_local_steps(
                cfg.seed, r, client, cfg.fl.local_steps, cfg.fl.local_steps_min
            )

        results = self._new_results(r, diagnostics)
        fed = self.federation()
        if self.pool is None:
            found = run_round(fed, clients, info, train, results, steps_of=steps_of)
        else:
            pool = self.pool

            def kept(start: ClientStart) -> Trained:
                # Every client of the round is trained before the first ends: a copy of the
                # resident model's weights, which the next client here overwrites.
                trained = train_one(start)
                params = [p.clone() for p in trained.params]
                return Trained(params, [b.clone() for b in trained.buffers], trained.step_ratio)

            def pooled(starts: list[ClientStart]) -> list[Trained]:
                return pool.train(starts, kept, diagnostics)

            found = run_round(
                fed, clients, info, pooled, results, steps_of=steps_of, clients_together=None
            )
        self._after_round(results, found)

    def federation(self) -> Federation:
        """The run's server side as the round protocol reads and updates it (in place)."""
        s = self.setup
        weighted = self.cfg.algorithm.weighting == "samples"
        sizes = s.client_sizes
        return Federation(
            s.algorithm,
            self.x,
            self.server,
            self.client_states,
            self.global_buffers,
            self.watch,
            weight=(lambda client: float(sizes[client])) if weighted else uniform_weight,
            device=s.device,
            state_device=self.state_device,
        )

    def _representation(self, model: torch.nn.Module) -> dict[str, Any]:
        """LocalTraining's representation fields, for algorithms that use it (MOON)."""
        if not uses_representation(self.setup.algorithm):
            return {}
        represent, classify = representation_split(model)

        def represent_and_classify(x: Tensor) -> tuple[Tensor, Callable[[], Tensor]]:
            z = represent(x)
            return z, lambda: classify(z)

        return {
            "represent_and_classify": represent_and_classify,
            # the trainable parameters' names, in the order of self.params
            "represent_with": represent_with(model, self.setup.algorithm.spec.names),
        }

    def _new_results(self, r: int, diagnostics: bool) -> RoundResults:
        """The round's results, with the client-level DP mechanism of a client-level run (its
        clip C lives in the server state, so that a resumed run continues with it)."""
        plan, client_dp = self.setup.privacy, None
        if plan is not None and plan.level == "client":
            clip = self.server.setdefault(CLIENT_DP_KEY, {"clip": plan.config.clip})["clip"]
            algorithm = self.setup.algorithm
            client_dp = ClientLevelRound(
                plan,
                self.cfg.seed,
                r,
                float(clip),
                algorithm.public_uploads,
                algorithm.nonnegative_uploads,
            )
        keep = self.setup.algorithm.uses_client_uploads
        return RoundResults(diagnostics, keep_uploads=keep, client_dp=client_dp)

    def _after_round(self, results: RoundResults, found: dict[str, Any] | None) -> None:
        """What the run keeps of a finished round: client-level DP's new clip, diagnostics."""
        if results.client_dp is not None:
            self.server[CLIENT_DP_KEY]["clip"] = results.client_dp.new_clip
        if found is not None:
            self.diagnostics = found

    # --- the run ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        """Train the remaining rounds (from the checkpoint, if any) and write the summary."""
        # Before the progress display starts its thread: the client processes are forked
        # from a process of one thread; the first evaluation runs on the run's threads, too.
        self.start_layout()
        try:
            run = self.begin()
            try:
                self.first_evaluation(run)
                while not run.over:
                    self.step(run, functools.partial(self._round, *self.round_plan(run)))
            finally:
                run.progress.close()
        finally:
            self.close_layout()
        return self.end(run)

    def start_layout(self) -> None:
        """Put the plan's CPU layout in place (fedbench.engine.layout): torch's threads here,
        and the processes that train clients beside this one (forked now, so that they share
        the run's data and model as they are)."""
        if self.plan is None or "threads" not in {c.what for c in self.plan.choices}:
            return
        threads = self.plan["threads"]
        apply_threads(ThreadChoice(self.plan.threads, threads.reason), automatic=False)
        if self.plan.client_processes > 1 and self.pool is None and not self.stacks_rows:
            self.pool = ClientPool(self, self.plan.client_processes - 1, self.plan.threads)

    def close_layout(self) -> None:
        """End the processes `start_layout` started."""
        if self.pool is not None:
            self.pool.close()
            self.pool = None

    def begin(self) -> RunPass:
        """Resume from the checkpoint (if any) and start the progress display."""
        start = self._resume()
        progress = make_progress(self.console, self.folder.path.name)
        progress.start(self.cfg.fl.rounds, start)
        return RunPass(
            start, start, time.perf_counter(), progress, over=start >= self.cfg.fl.rounds
        )

    def first_evaluation(self, run: RunPass) -> None:
        """Round 0's metrics row (the initial model), for a run that starts from scratch."""
        if run.start == 0:
            lr = local_lr(self.cfg.algorithm, 0, self.cfg.fl.rounds)
            self._evaluate(0, lr, self.elapsed_before)

    def round_plan(self, run: RunPass) -> tuple[int, float, bool]:
        """The next round of `run`: its index, its learning rate, and whether it is a diagnostic
        (evaluated) round."""
        cfg = self.cfg
        r = run.next_round
        done = r + 1
        evaluated = done % cfg.eval.every == 0 or done == cfg.fl.rounds
        return r, local_lr(cfg.algorithm, r, cfg.fl.rounds), evaluated and cfg.eval.diagnostics

    def step(self, run: RunPass, train: Callable[[], None]) -> None:
        """Round `run.next_round`: `train()` (the round itself, as `round_plan` planned it: this
        engine's own round, or the end of a round whose clients trained stacked with other
        runs'), then its evaluation, the stop request, the checkpoint and the progress; a
        divergence (in `train` or in the evaluation) or a stop request ends the pass."""
        cfg = self.cfg
        rounds = cfg.fl.rounds
        r, lr, _ = self.round_plan(run)
        done = r + 1
        evaluated = done % cfg.eval.every == 0 or done == rounds
        try:
            train()
            self._note_clipping()
            elapsed = self.elapsed_before + time.perf_counter() - run.t0
            row = None
            if evaluated:
                self.watch.check()
                row = self._evaluate(done, lr, elapsed)
                if not (
                    row["train_loss"] == row["train_loss"] and abs(row["train_loss"]) < float("inf")
                ):
                    raise DivergedError(f"non-finite training loss in round {done}")
            stop = self.folder.stop_requested() if evaluated else None
            if stop is not None:
                run.progress.advance(done, row)
                run.status, run.error, run.over = "stopped", stop, True
                return
            every = cfg.runtime.checkpoint_every
            if every and done % every == 0 and done < rounds:
                self.watch.check()  # a checkpoint holds finite weights only
                self._checkpoint(done, elapsed)
            run.progress.advance(done, row)
        except DivergedError as exc:
            first = exc.round if exc.round is not None else done
            run.status, run.error, run.diverged_round, run.over = "diverged", str(exc), first, True
            return
        run.next_round = done
        run.over = done >= rounds

    def end(self, run: RunPass) -> dict[str, Any]:
        """The summary of a finished pass (written into the run folder)."""
        wall = self.elapsed_before + time.perf_counter() - run.t0
        self._note_clipping(end=True)
        return self._summary(run.status, run.error, run.diverged_round, wall)

    def _compile_fallback(self) -> str | None:
        """Why the compiled whole step fell back to eager (CompiledOrEager), if it did."""
        return self.captured.step.fallback if self.captured is not None else None

    def _note_clipping(self, end: bool = False) -> None:
        """Say once, after the round where it happens, when a sample-DP run falls back from bk
        or ghost clipping to vmap (checked at every new batch size, fedbench.privacy.mechanism)
        or the compiled step to eager; at the `end`, also when bk or ghost clipping only ever
        saw batches of one sample."""
        private = self.private
        notes = [] if private is None else [private.fallback]
        if private is not None and end:
            notes.append(private.unchecked_note())
        fallback = self._compile_fallback()
        if fallback is not None:
            notes.append(f"{fallback}; the step runs eagerly")
        for note in notes:
            if note is not None and note not in self._noted and self.console is not None:
                self.console.print(f"note: {note}", highlight=False, soft_wrap=True)
                self._noted.add(note)

    def _summary(
        self, status: str, error: str | None, diverged_round: int | None, wall: float
    ) -> dict[str, Any]:
        cfg, s = self.cfg, self.setup
        rows = self.folder.read_metrics()
        final = rows[-1] if rows else {}
        best = max(rows, key=lambda row: row["test_acc"]) if rows else {}
        summary = {
            "run_id": self.folder.path.name,
            "status": status,
            "error": error,
            "diverged_round": diverged_round,
            "algorithm": cfg.algorithm.name,
            "rounds": cfg.fl.rounds,
            "final": {k: final.get(k) for k in ("round", "test_acc", "test_loss", "train_loss")},
            "best": {"round": best.get("round"), "test_acc": best.get("test_acc")},
            "target": cfg.eval.target,
            "rounds_to_target": rounds_to_target(rows, cfg.eval.target),
            "d": s.algorithm.spec.d,
            "comm_up": s.algorithm.comm_up(),
            "comm_down": s.algorithm.comm_down(),
            "clients_per_round": clients_per_round(cfg.fl.participation, s.num_clients),
            "participation_counts": participation_counts(s.schedule, s.num_clients),
            "eval_split": "validation" if cfg.data.val_fraction else "test",
            "epsilon": s.privacy.epsilon() if s.privacy else None,
            "delta": s.privacy.config.delta if s.privacy else None,
            "noise_multiplier": s.privacy.noise_multiplier if s.privacy else None,
            "engine": self.name,
            # trained with other seeds in one computation (runtime.seeds_together): the group's
            # size and how its results relate to the run alone (fedbench.engine.seeds)
            "seeds_together": self.seeds_together,
            "dp_clipping": self.private.method if self.private is not None else None,
            # why bk or ghost clipping fell back to vmap, or saw only batches of one sample
            "dp_clipping_note": self.private.note() if self.private is not None else None,
            # runtime.compile: "step" (the whole client step, one graph), "forward", "gradient"
            # (the vectorised engine's gradient alone), or None; and why a step fell back
            "compiled": self.compiled,
            "compile_fallback": self._compile_fallback(),
            "plan": self.plan.to_dict(),
            # what the accountant analysed; "accounting": exact | approximate | upper bound
            "privacy_accounting": s.privacy.accounting() if s.privacy else None,
            "wall_s": round(wall, 3),
            "device": str(s.device),
            # CPU sums split over threads round differently: a run reproduces to the last
            # digit only at the same count (a sweep's CPU workers use one thread each).
            "torch_threads": torch.get_num_threads(),
            # how many threads and why: runtime.threads, or chosen from the free cores
            "threads": current_record(),
            "data_source": s.data.source,
            "git": git_state(),
            # the plugins that registered a name this run uses (fedbench.plugins): each one's
            # name, version and code hash; [] for a run of fedbench's own names
            "plugins": [plugin.record() for plugin in cfg.used_plugins()],
            "versions": {
                "fedbench": fedbench.__version__,
                "torch": torch.__version__,
                "python": platform.python_version(),
            },
        }
        if status == "completed" and self.model_file is not None:
            self._load_global()
            weights = self.setup.model.state_dict()
            write_file(self.model_file, lambda fh: torch.save(weights, fh))
        self.folder.write_summary(summary)
        remove_checkpoint(self.folder.checkpoint)
        return summary
