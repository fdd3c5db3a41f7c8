"""The options that select runs of a table and how they are launched, parsed and checked before
anything is planned or written (`fedbench run/ablate/tune/epsilon`)."""

from __future__ import annotations

from fedbench.errors import FedbenchError


def parse_seeds(text: str | None) -> int | list[int] | None:
    """`--seeds 3` -> 3 (the first three); `--seeds 0,3,7` -> [0, 3, 7]; `--seeds 7,` -> [7]."""
    if text is None:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        values = [int(p) for p in parts]
    except ValueError:
        raise FedbenchError(
            f"--seeds {text!r} is neither a count nor a list of integers; e.g. --seeds 3 or 0,3,7"
        ) from None
    if not values:
        raise FedbenchError("--seeds is empty; e.g. --seeds 3 or --seeds 0,3,7")
    return values if "," in text else values[0]


def parse_methods(text: str | None) -> list[str] | None:
    """`--methods "FedAvg, FedAdamW"` -> ["FedAvg", "FedAdamW"]; none given -> every row."""
    if not text:
        return None
    return [m.strip() for m in text.split(",") if m.strip()]


def check_workers(workers: int | None) -> None:
    if workers is not None and workers < 1:
        raise FedbenchError("--workers must be at least 1")


def check_launcher(
    launcher: str, workers: int | None, ray_address: str | None, dry_run: bool
) -> None:
    """The launcher options of run/ablate, checked before anything is planned or written; a real
    Ray sweep also needs Ray installed (the install hint)."""
    if launcher not in ("local", "ray"):
        raise FedbenchError(f"unknown --launcher {launcher!r}; use local or ray")
    check_workers(workers)
    if launcher == "ray" and workers is not None:
        raise FedbenchError(
            "--workers is for the local launcher; on Ray set --set runtime.cpus_per_run=N "
            "(and runtime.gpus_per_run) instead"
        )
    if launcher == "local" and ray_address is not None:
        raise FedbenchError("--ray-address needs --launcher ray")
    if launcher == "ray" and not dry_run:
        from fedbench.runner.ray_launcher import import_ray

        import_ray()
