"""The Ray launcher (`--launcher ray [--ray-address ADDR]`): each run is one Ray task.

A task asks for `runtime.cpus_per_run` CPUs and `runtime.gpus_per_run` GPUs (fractions pack
several runs on one GPU; null means 1/runs_per_gpu on a cluster with GPUs, else none), so Ray's
scheduler spreads a sweep over every GPU and node of the cluster. Tasks write their run folders
under --out themselves, so --out must be on storage that every node mounts at the same path: the
driver checks that it can write there and that a task on every node reads what it wrote.

The sweep logic is the local launcher's: the same queue (a failed run, or one whose worker died,
is retried once and resumes from its checkpoint; a run locked by another sweep is waited for), the
same progress display, the same outcomes. Ray itself is optional: `pip install 'fedbench[ray]'`.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from rich.console import Console

from fedbench import plugins
from fedbench.errors import FedbenchError
from fedbench.plugins import PluginSource
from fedbench.runner.launcher import (
    Outcome,
    RunQueue,
    SweepProgress,
    Task,
    run_one,
    settle,
    unique_runs,
)
from fedbench.runner.table_config import Plan, PlannedRun

INSTALL_HINT = "--launcher ray needs Ray; install it with: pip install 'fedbench[ray]'"


def import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise FedbenchError(INSTALL_HINT) from None
    return ray


def _run_task(
    cfg_data: dict[str, Any],
    out: str,
    wait: bool,
    threads: int,
    plugin_sources: tuple[PluginSource, ...] = (),
) -> Outcome | str:
    """The body of one Ray task (in a Ray worker process), with the driver's plugins (a file
    plugin must be at the same path on every node, as --out is); the error line where the
    task cannot read its config (a plugin that fails to load on this node)."""
    import ray

    from fedbench.threads import ThreadChoice, apply

    # The task's CPUs are Ray's to give: no load-based choice (a run's runtime.threads overrides).
    apply(ThreadChoice(threads, "Ray task: runtime.cpus_per_run"))
    plugins.use(plugin_sources)
    try:
        outcome = run_one(cfg_data, out, wait=wait)
    except FedbenchError as exc:
        return str(exc)
    outcome.node = ray.get_runtime_context().get_node_id()[:8]
    return outcome


def _probe_task(path: str, token: str) -> str | None:
    """On one node: None when `path` holds `token` and the folder is writable, else why not."""
    import socket

    probe = Path(path)
    try:
        if probe.read_text() != token:
            return f"{probe} has other contents on {socket.gethostname()}"
        (probe.parent / f"{probe.name}.{socket.gethostname()}").write_text(token)
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def check_shared_out(ray: Any, out: Path) -> None:
    """--out is writable here and the same folder on every alive node, else a FedbenchError."""
    token = uuid.uuid4().hex
    probe = out / f".fedbench-ray-probe-{token[:8]}"
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe.write_text(token)
    except OSError as exc:
        raise FedbenchError(f"--out {out} is not writable ({exc}); choose another folder") from None
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = {
            node["NodeManagerAddress"]: ray.remote(_probe_task)
            .options(
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
            )
            .remote(str(probe), token)
            for node in nodes
        }
        for address, ref in refs.items():
            problem = ray.get(ref)
            if problem is not None:
                raise FedbenchError(
                    f"--out {out} is not shared with Ray node {address} ({problem}); put --out on "
                    "storage that every node mounts at the same path (NFS, a cluster file system)"
                )
    finally:
        for leftover in out.glob(f"{probe.name}*"):
            leftover.unlink(missing_ok=True)


def _connect(ray: Any, address: str | None) -> None:
    options: dict[str, Any] = {"logging_level": "ERROR", "log_to_driver": False}
    try:
        if address is None:
            # An existing cluster (RAY_ADDRESS, or one started on this machine), else a local one.
            ray.init(**options)
        else:
            ray.init(address=address, **options)
    except ConnectionError as exc:
        raise FedbenchError(
            f"cannot reach the Ray cluster at {address} ({exc}); start it with `ray start --head` "
            "or fix --ray-address"
        ) from None


def task_resources(run: PlannedRun, cluster_gpus: float) -> tuple[float, float]:
    """(CPUs, GPUs) a run's task asks for."""
    runtime = run.cfg.runtime
    gpus = runtime.gpus_per_run
    if gpus is None:
        gpus = 1.0 / runtime.runs_per_gpu if cluster_gpus > 0 else 0.0
    return runtime.cpus_per_run, gpus


def capacity(resources: dict[str, float], cpus: float, gpus: float) -> int:
    """How many runs of this size the cluster runs at once."""
    fit = int(resources.get("CPU", 0) // cpus)
    if gpus > 0:
        fit = min(fit, int(resources.get("GPU", 0) // gpus))
    return max(fit, 1)


def launch_ray(
    plan: Plan, out: Path, *, address: str | None = None, console: Console | None = None
) -> dict[str, Outcome]:
    """Run every planned run as a Ray task; return the outcome per run_id."""
    ray = import_ray()
    out = out.resolve()  # tasks on other nodes need the absolute path
    runs = unique_runs(plan)
    queue = RunQueue(runs)
    connected_here = not ray.is_initialized()
    if connected_here:
        _connect(ray, address)
    try:
        check_shared_out(ray, out)
        resources = ray.cluster_resources()
        sizes = {run.run_id: task_resources(run, resources.get("GPU", 0.0)) for run in runs}
        first = sizes[runs[0].run_id] if runs else (1.0, 0.0)
        progress = SweepProgress(console, len(runs), capacity(resources, *first), plan.name, runs)
        try:
            _drive(ray, queue, out, sizes, progress)
        finally:
            progress.close()
    finally:
        if connected_here:
            ray.shutdown()
    return queue.outcomes


def _drive(
    ray: Any,
    queue: RunQueue,
    out: Path,
    sizes: dict[str, tuple[float, float]],
    progress: SweepProgress,
) -> None:
    task_fn = ray.remote(_run_task)
    plugin_sources = tuple(plugins.wanted())  # every task loads the driver's plugins
    pending: dict[Any, Task] = {}
    try:
        while queue or pending:
            while queue:
                task = queue.pop()
                if task.wait and pending:
                    # Wait for a run another sweep holds only when ours are all done.
                    queue.todo.appendleft(task)
                    break
                cpus, gpus = sizes[task.run.run_id]
                ref = task_fn.options(num_cpus=cpus, num_gpus=gpus, max_retries=0).remote(
                    task.run.cfg.to_dict(), str(out), task.wait, max(1, int(cpus)), plugin_sources
                )
                pending[ref] = task
            progress.set_running(min(len(pending), progress.workers))
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in ready:
                task = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                    if isinstance(outcome, str):  # the task could not read its config
                        outcome = Outcome(task.run.run_id, "failed", outcome)
                except ray.exceptions.RayError as exc:  # the worker process or its node died
                    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                    outcome = Outcome(
                        task.run.run_id, "failed", f"Ray task died ({type(exc).__name__}: {first})"
                    )
                settle(queue, task, outcome, progress)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
