"""A round's clients over several processes (the plan's `client_processes`,
fedbench.engine.layout): this process trains some of them, processes forked from it train the
others, each client with the one client step (fedbench.engine.client.run_client).

The forked processes are copies of the run's engine, made once when the run starts: the data,
the model and the algorithm are shared with this process (copy-on-write), not sent. A round
sends each process the global weights once, then its clients one by one (each client's local
state from `client_begin` and its round info); a process sends back the client's trained
weights, buffers, local state (as its training left it) and step ratio. The protocol then ends
the clients in client order in this process (fedbench.engine.protocol), so the aggregation,
the stored client states (SCAFFOLD's c_i, FedAdamW's stores), the server step and the
checkpoints are those of the one-process run, and the result is bitwise its result at the
same threads per process. The global torch generator is left where the round's last client
left it, as in the one-process run (a checkpoint saves it).

A forked process that dies (killed, out of memory) ends the run with ClientProcessError;
the run's checkpoint is untouched, and the next start of the run resumes from it exactly.
"""

from __future__ import annotations

import multiprocessing
import pickle
import queue
import signal
import threading
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any, Protocol

import torch
from torch import Tensor

from fedbench.algorithms.base import State
from fedbench.engine.client import LocalTraining, run_client
from fedbench.engine.protocol import ClientStart, Trained
from fedbench.engine.setup import RunSetup


class Engine(Protocol):
    """What the pool reads of the sequential engine (fedbench.engine.loop.Engine)."""

    setup: RunSetup
    #: The global weights and buffers of the round, copied into the model by `_load_global`.
    x: list[Tensor]
    global_buffers: list[Tensor]
    #: The resident model's trainable parameters and state_dict buffers.
    params: list[Tensor]
    buffers: list[Tensor]
    local_training: LocalTraining

    def _load_global(self) -> None: ...

    def _load_client(self, stored: State | None) -> None: ...


#: Clients handed to a process ahead of the one it trains: it starts the next at once, while
#: this process is still busy with its own client.
AHEAD = 2


class ClientProcessError(RuntimeError):
    """A process training a round's clients died or failed; the run resumes from its last
    checkpoint when it is started again."""


def _send(conn: Connection, message: Any) -> None:
    # Plain pickle (tensors as bytes), as _Sender.send.
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def _receive(conn: Connection) -> Any:
    return pickle.loads(conn.recv_bytes())


def _serve(engine: Engine, threads: int, conn: Connection, others: list[Connection]) -> None:
    """A forked process: the round's weights, then clients to train, until the pipe closes."""
    # Ctrl-C reaches the whole process group: the run's own process decides, and closes us.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for other in others:  # the pipes of the processes forked before: theirs to close
        other.close()
    torch.set_num_threads(threads)
    setup = engine.setup
    while True:
        try:
            message = _receive(conn)
        except (EOFError, OSError):
            return
        if message is None:
            return
        try:
            if message[0] == "round":
                engine.x, engine.global_buffers = message[1], message[2]
                continue
            _, client, info, local, measure, stored = message
            engine._load_client(stored)
            ratio = run_client(
                engine.local_training,
                client=client,
                samples=setup.clients[client],
                local=local,
                info=info,
                measure_steps=measure,
            )
            params = [p.detach().clone() for p in engine.params]
            buffers = [b.detach().clone() for b in engine.buffers]
            reply: tuple[Any, ...] = ("trained", params, buffers, local, ratio)
            reply += (torch.get_rng_state(),)
        except Exception:
            reply = ("error", traceback.format_exc())
        try:
            _send(conn, reply)
        except OSError:  # the run's process is gone
            return


class _Sender:
    """Writes the messages to one process from a thread of its own: a process that sends back
    a trained client while a message to it is being written would otherwise wait on this
    process, which waits on it (each pipe holds some 64 KiB, a model's weights are more)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.failed = False
        self.thread = threading.Thread(target=self._write, daemon=True)
        self.thread.start()

    def _write(self) -> None:
        while (data := self.queue.get()) is not None:
            try:
                self.conn.send_bytes(data)
            except OSError:  # the process died: its reader says so
                self.failed = True
                return

    def send(self, message: Any) -> None:
        # Pickled here and now (plain pickle, tensors as bytes): the round goes on meanwhile,
        # and torch's multiprocessing pickler would move every tensor sent into shared memory.
        self.queue.put(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(timeout=5)


@dataclass
class _Process:
    process: Any  # multiprocessing's ForkProcess
    conn: Connection
    sender: _Sender | None = None
    #: The indexes (into the round's starts) handed to it and not yet back, in order.
    waiting: deque[int] = field(default_factory=deque)
    #: Whether it holds this round's global weights.
    has_round: bool = False


class ClientPool:
    """`extra` processes forked from `engine` (at `threads` threads each) that train clients
    of its rounds beside this process."""

    def __init__(self, engine: Engine, extra: int, threads: int) -> None:
        context = multiprocessing.get_context("fork")
        self.engine = engine
        self.measure_steps = False
        self.processes: list[_Process] = []
        for _ in range(extra):
            mine, theirs = context.Pipe()
            # This process' ends of the pipes, for the new one to close (the pipe of a process
            # closes only when every copy of the other end is closed).
            others = [mine, *(proc.conn for proc in self.processes)]
            process = context.Process(
                target=_serve, args=(engine, threads, theirs, others), daemon=True
            )
            process.start()
            theirs.close()
            self.processes.append(_Process(process, mine))
        for proc in self.processes:  # threads only once every process is forked
            proc.sender = _Sender(proc.conn)

    def train(
        self,
        starts: Sequence[ClientStart],
        here: Callable[[ClientStart], Trained],
        measure_steps: bool = False,
    ) -> list[Trained]:
        """Train `starts` (a round's clients, begun), some `here` and the others in the
        processes (with `measure_steps`: each one's step ratio); the trained clients in the
        order of `starts`."""
        self.measure_steps = measure_steps
        done: list[Trained | None] = [None] * len(starts)
        rng: list[Tensor | None] = [None] * len(starts)
        queue = deque(range(len(starts)))
        # At most a fair share ahead: with as many processes as clients (more processes than
        # cores, fedbench.engine.layout) each process then starts with one client.
        ahead = min(AHEAD, -(-len(starts) // (len(self.processes) + 1)))
        for proc in self.processes:
            proc.has_round = False
            self._hand_out(proc, starts, queue, ahead)
        while queue or any(proc.waiting for proc in self.processes):
            if queue:
                i = queue.popleft()
                done[i] = here(starts[i])
                rng[i] = torch.get_rng_state()
                block = False
            else:
                block = True
            for proc in self._ready(block):
                self._collect(proc, starts, done, rng)
                self._hand_out(proc, starts, queue, ahead)
        last = rng[-1]
        if last is not None:  # where the round's last client left the generator
            torch.set_rng_state(last)
        return [trained for trained in done if trained is not None]

    def _hand_out(
        self, proc: _Process, starts: Sequence[ClientStart], queue: deque[int], ahead: int
    ) -> None:
        while queue and len(proc.waiting) < ahead:
            if not proc.has_round:
                engine = self.engine
                self._send(proc, ("round", engine.x, engine.global_buffers))
                proc.has_round = True
            i = queue.popleft()
            start = starts[i]
            stored = start.stored if self.engine.setup.algorithm.personalises else None
            message = ("client", start.client, start.info, start.local, self.measure_steps, stored)
            self._send(proc, message)
            proc.waiting.append(i)

    def _ready(self, block: bool) -> list[_Process]:
        """The processes with a reply (or dead: `_collect` says so); `block`: wait for one."""
        busy = [proc for proc in self.processes if proc.waiting]
        if not busy:
            return []
        handles: list[Any] = [proc.conn for proc in busy] + [p.process.sentinel for p in busy]
        ready = wait(handles, timeout=None if block else 0)
        return [p for p in busy if p.conn in ready or p.process.sentinel in ready]

    def _collect(
        self,
        proc: _Process,
        starts: Sequence[ClientStart],
        done: list[Trained | None],
        rng: list[Tensor | None],
    ) -> None:
        """Read every reply `proc` has ready (a dead process: ClientProcessError)."""
        while proc.waiting and (proc.conn.poll() or not proc.process.is_alive()):
            i = proc.waiting[0]
            try:
                reply = _receive(proc.conn)
            except (EOFError, OSError):
                raise self._died(proc, starts[i].client) from None
            if reply[0] == "error":
                raise ClientProcessError(
                    f"the process training client {starts[i].client} failed:\n{reply[1]}"
                )
            _, params, buffers, local, ratio, state = reply
            # client_end reads the local state as training left it (FedAdamW's moments).
            done[i] = Trained(params, buffers, ratio, local=local)
            rng[i] = state
            proc.waiting.popleft()

    def _send(self, proc: _Process, message: Any) -> None:
        assert proc.sender is not None
        if proc.sender.failed:
            raise self._died(proc, None)
        proc.sender.send(message)

    def _died(self, proc: _Process, client: int | None) -> ClientProcessError:
        proc.process.join(timeout=5)
        code = proc.process.exitcode
        how = (
            f"killed by {signal.Signals(-code).name}"
            if code is not None and code < 0
            else f"exit code {code}"
        )
        what = f" while training client {client}" if client is not None else ""
        return ClientProcessError(
            f"a client process of the run (pid {proc.process.pid}) died{what} ({how}); "
            "start the run again to resume it from its last checkpoint"
        )

    def close(self) -> None:
        """End the processes (they exit when their pipe closes)."""
        for proc in self.processes:
            if proc.sender is not None:
                proc.sender.close()
            proc.conn.close()
        for proc in self.processes:
            proc.process.join(timeout=5)
            if proc.process.is_alive():
                proc.process.kill()
                proc.process.join()
        self.processes = []
