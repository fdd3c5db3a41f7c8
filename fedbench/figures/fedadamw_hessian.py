"""FedAdamW Figures 3, 7 and 8: the Hessian of a small Transformer at 1% of training (one heatmap
per parameter block: query, key, value, attention output, MLP layers, embedding, head) and of a
1-hidden-layer MLP over training, and the number the paper's block-wise second moment rests on:
the share of the Hessian's squared Frobenius norm inside the diagonal blocks of each partition
fedbench offers (`blocks: tensor | hessian | dp_paper | global`), beside a random partition of the
same block sizes.

The models train through the engine (FedAdamW, run folders under OUT/runs, resumed like any run);
the Hessian is of the mean cross-entropy on a fixed batch of training samples at the saved model.
Exact (torch.func, forward-over-reverse) when the model has at most `exact_max` parameters;
otherwise the block mass is estimated from Hessian-vector products: with z Rademacher and t a
random sign per block, sum_B t_B <(Hz)_B, (H(z * t))_B> is unbiased for sum_B ||H_BB||_F^2 and
||Hz||^2 for ||H||_F^2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import Field

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure
    from torch import Tensor, nn

    from fedbench.config import RunConfig

PARTITIONS = ("tensor", "hessian", "dp_paper", "global")


# --- block masses -------------------------------------------------------------------------------
def partition_labels(kind: str, spec: Any) -> np.ndarray:
    """The block of every coordinate of the flattened parameters under `blocks: kind`."""
    from fedbench.algorithms.blocks import build_partition

    part = build_partition(kind, spec.shapes, spec)
    if part.whole_model:
        return np.zeros(sum(s.numel() for s in part.shapes), dtype=np.int64)
    labels, next_label = [], 0
    for shape, groups in zip(part.shapes, part.row_groups, strict=True):
        if groups is None:
            labels.append(np.full(shape.numel(), next_label))
            next_label += 1
            continue
        width = shape.numel() // sum(groups)
        for size in groups:
            labels.append(np.full(size * width, next_label))
            next_label += 1
    return np.concatenate(labels).astype(np.int64)


def block_mass(h2: np.ndarray, labels: np.ndarray) -> float:
    """Share of sum(H^2) (h2 = H**2) inside the diagonal blocks that `labels` define."""
    total = float(h2.sum())
    inside = 0.0
    for block in np.unique(labels):
        idx = np.flatnonzero(labels == block)
        inside += float(h2[np.ix_(idx, idx)].sum())
    return inside / total if total > 0 else math.nan


def random_labels(labels: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random partition with the same block sizes: the labels of a random permutation."""
    return labels[rng.permutation(len(labels))]


def random_masses(h2: np.ndarray, labels: np.ndarray, draws: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.array([block_mass(h2, random_labels(labels, rng)) for _ in range(draws)])


def max_pool(matrix: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """|matrix| max-pooled to at most size x size (for drawing), rounded to 4 digits; and the
    pooling factor."""
    factor = max(1, math.ceil(matrix.shape[0] / size))
    n = math.ceil(matrix.shape[0] / factor) * factor
    padded = np.zeros((n, n))
    padded[: matrix.shape[0], : matrix.shape[1]] = np.abs(matrix)
    pooled = padded.reshape(n // factor, factor, n // factor, factor).max(axis=(1, 3))
    return np.array([[float(f"{v:.4g}") for v in row] for row in pooled]), factor


# --- the Hessian --------------------------------------------------------------------------------
def _loss_of_flat(
    model: nn.Module, x: Tensor, y: Tensor
) -> tuple[Callable[[Tensor], Tensor], Tensor]:
    """loss(flat parameters) of the model on (x, y), and the model's flat parameters."""
    import torch

    from fedbench.step import Objective, split_model

    objective, split = Objective(), split_model(model)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    flat0 = torch.cat([p.detach().reshape(-1) for _, p in named])

    def loss(flat: Tensor) -> Tensor:
        params, offset = {}, 0
        for name, p in named:
            params[name] = flat[offset : offset + p.numel()].view(p.shape)
            offset += p.numel()
        return objective.functional(model, split, params, {}, x, y)

    return loss, flat0


def hvp_function(model: nn.Module, x: Tensor, y: Tensor) -> tuple[Callable[[Tensor], Tensor], int]:
    """v -> H v at the model's parameters (forward-over-reverse), and the dimension."""
    from torch.func import grad, jvp

    loss, flat0 = _loss_of_flat(model, x, y)
    gradient = grad(loss)

    def hvp(v: Tensor) -> Tensor:
        return jvp(gradient, (flat0,), (v,))[1]

    return hvp, flat0.numel()


def exact_hessian(model: nn.Module, x: Tensor, y: Tensor, chunk: int = 512) -> np.ndarray:
    """The full Hessian (d x d), a chunk of basis vectors at a time."""
    import torch
    from torch.func import vmap
    from torch.nn.attention import SDPBackend, sdpa_kernel

    hvp, d = hvp_function(model, x, y)
    eye = torch.eye(d, dtype=x.dtype, device=x.device)
    with sdpa_kernel(SDPBackend.MATH):  # the fused attention kernels have no forward AD
        cols = [vmap(hvp)(eye[i : i + chunk]) for i in range(0, d, chunk)]
    hessian = torch.cat(cols).cpu().numpy()
    return (hessian + hessian.T) / 2  # symmetric up to rounding


def estimated_masses(
    hvp: Callable[[Tensor], Tensor],
    d: int,
    labelings: list[np.ndarray],
    probes: int,
    seed: int,
) -> list[float]:
    """Hutchinson-style estimates of the diagonal-block share of ||H||_F^2, one per labeling."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    gen = torch.Generator().manual_seed(seed)
    total, inside = 0.0, np.zeros(len(labelings))
    with sdpa_kernel(SDPBackend.MATH):
        for _ in range(probes):
            z = torch.randint(0, 2, (d,), generator=gen).double() * 2 - 1
            hz = hvp(z).double().cpu()
            total += float(hz @ hz)
            for j, labels in enumerate(labelings):
                signs = torch.randint(0, 2, (int(labels.max()) + 1,), generator=gen) * 2 - 1
                t = signs[torch.as_tensor(labels)].double()
                hzt = hvp(z * t).double().cpu()
                inside[j] += float((t * hz * hzt).sum())
    return list(inside / total)


# --- the figure ---------------------------------------------------------------------------------
class HessianSettings(FigureSettings):
    transformer_data: str = "cifar10"
    mlp_data: str = "cifar100"
    #: Rounds of a full training run; the Transformer's Hessian is taken at `at` of them.
    train_rounds: int = Field(default=100, ge=1)
    at: float = Field(default=0.01, gt=0, le=1)
    #: The MLP's Hessians: at these fractions of train_rounds (0: the initialisation).
    mlp_at: list[float] = Field(default_factory=lambda: [0.0, 0.5, 1.0])
    hessian_samples: int = Field(default=256, ge=1)
    #: Largest model whose Hessian is computed exactly; above it, HVP estimates.
    exact_max: int = Field(default=5000, ge=0)
    probes: int = Field(default=20, ge=1, description="HVP probes per estimate")
    random_draws: int = Field(default=200, ge=2)
    #: "Near block-diagonal" (the paper's words) is checked as: the diagonal blocks of `blocks:
    #: hessian` hold at least this share of ||H||_F^2 (1 for an exactly block-diagonal H).
    near_block_diagonal: float = Field(default=0.5, gt=0, le=1)
    clients: int = Field(default=20, ge=1)
    local_steps: int = Field(default=20, ge=1)


def _run_config(settings: HessianSettings, model: str, data: str, rounds: int) -> RunConfig:
    from fedbench.config import parse_run_config

    return parse_run_config(
        {
            "seed": settings.seed,
            "data": {"name": data},
            "partition": {"kind": "dirichlet", "alpha": 0.1, "clients": settings.clients},
            "model": {"name": model},
            "fl": {
                "rounds": rounds,
                "participation": 0.25,
                "local_steps": settings.local_steps,
                "batch_size": 32,
            },
            "algorithm": {"name": "fedadamw", "lr": 1.0e-3, "weight_decay": 0.01},
            "eval": {"every": rounds},
        }
    )


def _snapshot(
    settings: HessianSettings, context: FigureContext, model_name: str, data: str, fraction: float
) -> dict[str, Any]:
    """Train to `fraction` of train_rounds (none at 0) and measure the Hessian there."""
    import torch

    from fedbench.engine.setup import param_spec, prepare_run

    rounds = round(fraction * settings.train_rounds)
    cfg = _run_config(settings, model_name, data, max(rounds, 1))
    setup = prepare_run(cfg)
    model = setup.model
    if rounds > 0:
        (folder,) = context.train([cfg], save_model=True)
        model.load_state_dict(torch.load(folder / "model.pt", map_location=setup.device))
    model = model.double().eval()
    gen = torch.Generator().manual_seed(settings.seed)
    n = min(settings.hessian_samples, setup.data.n_train)
    idx = torch.randperm(setup.data.n_train, generator=gen)[:n].to(setup.device)
    x = setup.data.x_train[idx]
    if setup.prepare is not None:
        x = setup.prepare(x)
    x, y = x.double(), setup.data.y_train[idx]
    spec = param_spec(model)
    labels = {kind: partition_labels(kind, spec) for kind in PARTITIONS}
    out: dict[str, Any] = {"round": rounds, "d": spec.d, "exact": spec.d <= settings.exact_max}
    rng_seed = settings.seed + 7
    if out["exact"]:
        hessian = exact_hessian(model, x, y)
        h2 = hessian**2
        masses = {kind: block_mass(h2, labels[kind]) for kind in PARTITIONS}
        randoms = {
            kind: random_masses(h2, labels[kind], settings.random_draws, rng_seed)
            for kind in PARTITIONS
        }
        out["tensors"] = _tensor_blocks(hessian, spec)
        pooled, factor = max_pool(hessian, 160)
        out["pooled"] = {"abs_h": pooled.tolist(), "factor": factor}
    else:
        hvp, d = hvp_function(model, x, y)
        rng = np.random.default_rng(rng_seed)
        kinds = list(PARTITIONS)
        estimated = estimated_masses(
            hvp, d, [labels[k] for k in kinds], settings.probes, settings.seed
        )
        masses = dict(zip(kinds, estimated, strict=True))
        draws = min(settings.random_draws, 20)  # each draw costs probes x 2 HVPs
        randoms = {
            k: np.array(
                estimated_masses(
                    hvp,
                    d,
                    [random_labels(labels[k], rng) for _ in range(draws)],
                    settings.probes,
                    settings.seed + 1,
                )
            )
            for k in kinds
        }
        out["tensors"] = []
        out["pooled"] = None
    out["partitions"] = {
        kind: {
            "blocks": int(labels[kind].max()) + 1,
            "mass": masses[kind],
            "random_mean": float(randoms[kind].mean()),
            "random_lo": float(np.quantile(randoms[kind], 0.025)),
            "random_hi": float(np.quantile(randoms[kind], 0.975)),
        }
        for kind in PARTITIONS
    }
    return out


def _tensor_blocks(hessian: np.ndarray, spec: Any) -> list[dict[str, Any]]:
    """|H| of each drawn parameter block's own diagonal sub-block, with the hessian partition's
    block edges inside it (coordinates), for the heatmaps."""
    from fedbench.algorithms.hessian import row_groups

    offsets = np.cumsum([0] + [s.numel() for s in spec.shapes])
    panels = []
    for i, (name, shape) in enumerate(zip(spec.names, spec.shapes, strict=True)):
        if not name.endswith("weight") or len(shape) < 2:
            continue
        groups = row_groups(spec, name, shape, "hessian") or [shape[0]]
        width = shape.numel() // shape[0]
        parts = [(name, 0, shape[0])]
        if name.endswith("qkv.weight"):
            third = shape[0] // 3
            parts = [(f"{w} ({name})", j * third, (j + 1) * third) for j, w in enumerate("qkv")]
        for title, row0, row1 in parts:
            lo, hi = offsets[i] + row0 * width, offsets[i] + row1 * width
            edges, row = [], row0
            for size in groups:
                if row0 < row < row1:
                    edges.append((row - row0) * width)
                row += size
            pooled, factor = max_pool(hessian[lo:hi, lo:hi], 128)
            panels.append(
                {
                    "title": title.replace("blocks.0.", ""),
                    "block": pooled.tolist(),
                    "edges": [e / factor for e in edges],
                }
            )
    return panels


@FIGURES.register("fedadamw-hessian")
class HessianFigure(Figure):
    """Block-wise Hessians and the diagonal-block share of each partition against random."""

    paper = "FedAdamW (Liu et al.), Figures 3, 7, 8"
    title = (
        "Block-wise Hessian of a small Transformer and an MLP; diagonal-block mass per partition"
    )
    Settings = HessianSettings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "quick": {
            "transformer_data": "digits",
            "mlp_data": "digits",
            "train_rounds": 20,
            "at": 0.05,
            "hessian_samples": 32,
            "random_draws": 100,
            "local_steps": 10,
        }
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd
        import torch

        torch.set_num_threads(1)  # many small HVPs: threads only contend on a loaded CPU
        transformer = _snapshot(
            settings, context, "vit_nano", settings.transformer_data, settings.at
        )
        mlps = [_snapshot(settings, context, "mlp", settings.mlp_data, f) for f in settings.mlp_at]
        rows = []
        for model, snaps in (("vit_nano", [transformer]), ("mlp", mlps)):
            for snap in snaps:
                for kind, part in snap["partitions"].items():
                    rows.append(
                        {"model": model, "round": snap["round"], "partition": kind,
                         "exact": snap["exact"], **part}
                    )  # fmt: skip
        return FigureData(pd.DataFrame(rows), {"transformer": transformer, "mlp": mlps})

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm

        panels = list(data.extra["transformer"]["tensors"])
        mlps = data.extra["mlp"]
        for snap in mlps:  # Figure 8: the MLP's whole Hessian over training
            if snap["pooled"] is not None:
                panels.append(
                    {
                        "title": f"mlp, whole |H|, round {snap['round']}",
                        "block": snap["pooled"]["abs_h"],
                        "edges": [],
                    }
                )
        cols = 4
        rows = math.ceil(len(panels) / cols) + 1 if panels else 1
        fig = plt.figure(figsize=(3.0 * cols, 3.0 * rows + 0.6))
        grid = fig.add_gridspec(rows, cols)
        for i, panel in enumerate(panels):
            ax = fig.add_subplot(grid[i // cols, i % cols])
            block = np.asarray(panel["block"])
            floor = max(block.max() * 1e-6, 1e-300)
            ax.imshow(np.maximum(block, floor), cmap="magma", norm=LogNorm(floor, block.max()))
            for edge in panel["edges"]:
                ax.axhline(edge - 0.5, color="cyan", lw=0.3)
                ax.axvline(edge - 0.5, color="cyan", lw=0.3)
            ax.set_title(panel["title"], fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
        bottom = fig.add_subplot(grid[rows - 1, :])
        self._draw_masses(bottom, data.extra["transformer"], mlps)
        t_round = data.extra["transformer"]["round"]
        fig.suptitle(
            f"|H| per parameter block of vit_nano after {t_round} round(s) and of the MLP over "
            "training (log colour, max-pooled; cyan: blocks: hessian)\nand the share of "
            "||H||_F^2 in each partition's diagonal blocks",
            fontsize=10,
        )
        fig.tight_layout()
        return fig

    @staticmethod
    def _draw_masses(ax: Any, transformer: dict[str, Any], mlps: list[dict[str, Any]]) -> None:
        snaps = [("vit_nano", transformer)] + [(f"mlp r{s['round']}", s) for s in mlps]
        width = 0.8 / len(PARTITIONS)
        for j, kind in enumerate(PARTITIONS):
            xs = np.arange(len(snaps)) + (j - 1.5) * width
            ours = [s["partitions"][kind]["mass"] for _, s in snaps]
            ax.bar(xs, ours, width * 0.9, label=f"blocks: {kind}")
            mean = [s["partitions"][kind]["random_mean"] for _, s in snaps]
            lo = [s["partitions"][kind]["random_lo"] for _, s in snaps]
            hi = [s["partitions"][kind]["random_hi"] for _, s in snaps]
            ax.errorbar(
                xs, mean, yerr=[np.subtract(mean, lo), np.subtract(hi, mean)], fmt="_",
                color="black", ms=10, capsize=2,
                label="random, same sizes (95%)" if j == 0 else None,
            )  # fmt: skip
        ax.set_xticks(range(len(snaps)), [name for name, _ in snaps])
        ax.set_ylabel("share of ||H||_F^2\nin diagonal blocks")
        ax.set_yscale("log")
        ax.legend(fontsize=7, ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.12))
        ax.grid(alpha=0.3, axis="y")

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        """Per model, two claims on the diagonal-block share m of ||H||_F^2 in `blocks:
        hessian`: the paper's "near block-diagonal" (m >= settings.near_block_diagonal at every
        snapshot), and the weaker "more block structure than chance" (m above the 95% interval
        of random partitions of the same block sizes). Each reports m itself (the smallest over
        the snapshots) beside the random partitions' share."""
        found = []
        snaps = [
            ("the small Transformer", [data.extra["transformer"]]),
            ("the MLP", data.extra["mlp"]),
        ]
        threshold = settings.near_block_diagonal
        for what, group in snaps:
            parts = [s["partitions"]["hessian"] for s in group]
            when = ", ".join(f"round {s['round']}" for s in group)
            low = int(np.argmin([p["mass"] for p in parts]))
            p = parts[low]
            found.append(
                Claim(
                    statement=f"the Hessian of {what} is near block-diagonal in blocks: hessian "
                    f"({when}): its diagonal blocks hold at least {threshold:g} of ||H||_F^2",
                    statistic=f"smallest diagonal-block share ({p['blocks']} blocks, round "
                    f"{group[low]['round']}; a random partition of the same sizes: "
                    f"{p['random_mean']:.3g}; threshold {threshold:g})",
                    value=p["mass"],
                    holds=all(q["mass"] >= threshold for q in parts),
                )
            )
            ratios = [q["mass"] / q["random_mean"] for q in parts]
            worst = int(np.argmin(ratios))
            p = parts[worst]
            found.append(
                Claim(
                    statement=f"the Hessian of {what} has more mass on the diagonal blocks of "
                    f"blocks: hessian ({when}) than a random partition of the same block sizes",
                    statistic=f"diagonal-block share ({p['blocks']} blocks, round "
                    f"{group[worst]['round']}; random: {p['random_mean']:.3g}, 95% "
                    f"[{p['random_lo']:.3g}, {p['random_hi']:.3g}], ratio {ratios[worst]:.3g})",
                    value=p["mass"],
                    holds=all(q["mass"] > q["random_hi"] for q in parts),
                )
            )
        return found
