"""DP-FedAdamW Figure 4: histograms of AdamW's first moment m and of sqrt(v) for DP-LocalAdamW with
and without DP noise at the same clipping, and the paper's case for its bias correction: DP
noise of std sigma C / (sR) per coordinate adds sigma^2 C^2 / (sR)^2 to E[g_tilde^2] (its Eq. 6),
so the centre of sqrt(v) shifts by about sqrt(sigma^2 C^2 / (sR)^2) = sigma C / (sR).

Two runs of dp_local_adamw train through the engine (noise_multiplier sigma and 0, the same clip
C; their run folders resume like any run). From each run's final model every client then runs
its K local steps once more through the engine's client path (fedbench.engine.probe), and its
m and v are read. v is bias-corrected, v_hat = v / (1 - beta2^K), so that the prediction carries
no (1 - beta2^K) factor. The centre of sqrt(v_hat) is its median over every coordinate of every
client; the measured shift is centre(DP) - centre(no noise), its 95% interval a bootstrap over
clients.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

import numpy as np
from pydantic import Field

from fedbench.figures.base import Claim, Figure, FigureContext, FigureData, FigureSettings
from fedbench.figures.registry import FIGURES

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure

    from fedbench.algorithms.local_adamw import LocalAdamWConfig
    from fedbench.config import RunConfig

#: The ratio measured / predicted counts as "approximately" the paper's shift inside this band.
BAND = (0.8, 1.25)
#: "The centres of m are aligned": the shift of m's median lies within this fraction of
#: std(m with DP), the width of the noisier histogram.
ALIGNED = 0.1


class DPFig4Settings(FigureSettings):
    data: str = "cifar10"
    #: Swin-Tiny takes 224 x 224 images: CIFAR-10 is resized on the device, as in DP Table 3.
    image_size: int | None = Field(default=224, gt=0)
    model: str = "swin_tiny"
    pretrained: bool = True
    clients: int = Field(default=100, ge=2)
    participation: float = Field(default=0.1, gt=0, le=1)
    alpha: float = Field(default=0.1, gt=0)
    rounds: int = Field(default=100, ge=1)
    local_steps: int = Field(default=20, ge=1)
    batch_size: int = Field(default=16, ge=1, description="sR")
    lr: float = Field(default=1.0e-4, gt=0)
    sigma: float = Field(default=1.0, gt=0)
    clip: float = Field(default=0.1, gt=0)
    #: Clients whose m and v are read (the first ones); 0: every client.
    probe_clients: int = Field(default=20, ge=0)
    bootstrap: int = Field(default=1000, ge=10)


def run_config(settings: DPFig4Settings, sigma: float) -> RunConfig:
    from fedbench.config import parse_run_config

    return parse_run_config(
        {
            "seed": settings.seed,
            "data": {"name": settings.data, "image_size": settings.image_size},
            "partition": {
                "kind": "dirichlet",
                "alpha": settings.alpha,
                "clients": settings.clients,
            },
            "model": {"name": settings.model, "pretrained": settings.pretrained},
            "fl": {
                "rounds": settings.rounds,
                "participation": settings.participation,
                "local_steps": settings.local_steps,
                "batch_size": settings.batch_size,
            },
            "algorithm": {"name": "dp_local_adamw", "lr": settings.lr, "weight_decay": 0.01},
            "privacy": {"noise_multiplier": sigma, "clip": settings.clip},
            "eval": {"every": settings.rounds},
        }
    )


def centre(values: list[np.ndarray]) -> float:
    """The median over every coordinate of every client."""
    return float(np.median(np.concatenate(values)))


def sqrt_v_shift(
    dp: list[np.ndarray], clean: list[np.ndarray], bootstrap: int, seed: int
) -> tuple[float, tuple[float, float]]:
    """centre(sqrt v_hat with DP) - centre(without) (or of m: any per-client values), and its 95%
    bootstrap interval over clients (the same resampled clients in both runs: they start from
    different models, but a client's data and batches are the same)."""
    shift = centre(dp) - centre(clean)
    rng = np.random.default_rng(seed)
    n = len(dp)
    boots = []
    for _ in range(bootstrap):
        pick = rng.integers(0, n, n)
        boots.append(centre([dp[i] for i in pick]) - centre([clean[i] for i in pick]))
    return shift, (float(np.quantile(boots, 0.025)), float(np.quantile(boots, 0.975)))


def moments(states: list[dict], beta2: float, k: int) -> tuple[list[np.ndarray], ...]:
    """Per client: m and sqrt(v_hat) over all coordinates (float64 numpy)."""
    import torch

    ms, roots = [], []
    for local in states:
        m = torch.cat([t.reshape(-1) for t in local["m"]]).double().cpu().numpy()
        v = torch.cat([t.reshape(-1) for t in local["v"]]).double().cpu().numpy()
        ms.append(m)
        roots.append(np.sqrt(v / (1.0 - beta2**k)))
    return ms, roots


@FIGURES.register("dp-fig4")
class DPFig4Figure(Figure):
    """Histograms of m and sqrt(v_hat), DP-LocalAdamW with and without noise, and the shift."""

    paper = "DP-FedAdamW (Liu et al.), Figure 4"
    title = "Histograms of m and sqrt(v) for DP-LocalAdamW with and without DP noise (same clip)"
    Settings = DPFig4Settings
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "quick": {
            "data": "digits",
            "image_size": None,
            "model": "cnn",
            "pretrained": False,
            "clients": 10,
            "participation": 0.3,
            "rounds": 2,
            "local_steps": 8,
            "batch_size": 16,
            "lr": 1.0e-3,
            "clip": 1.0,
            "probe_clients": 6,
        }
    }

    def compute(self, settings: Any, context: FigureContext) -> FigureData:
        import pandas as pd

        from fedbench.config import load_run_config
        from fedbench.engine.probe import client_local_states

        configs = [run_config(settings, settings.sigma), run_config(settings, 0.0)]
        folders = context.train(configs, save_model=True)
        found: dict[str, Any] = {}
        beta2 = cast("LocalAdamWConfig", configs[0].algorithm).beta2  # dp_local_adamw's
        for label, folder in zip(("dp", "clean"), folders, strict=True):
            # The run's own config (under --smoke, its smoke form), not the settings' one.
            cfg = load_run_config(folder / "config.yaml", [])
            count = settings.probe_clients or cfg.partition.clients
            clients = list(range(min(count, cfg.partition.clients)))
            states, divisors = client_local_states(cfg, folder, clients)
            found[label] = moments(states, beta2, settings.local_steps)
            found[f"{label}_divisors"] = divisors
        shift, interval = sqrt_v_shift(
            found["dp"][1], found["clean"][1], settings.bootstrap, settings.seed
        )
        # sigma C / (sR) per client (a client smaller than sR uses its whole set); their mean.
        predicted = float(
            np.mean([settings.sigma * settings.clip / b for b in found["dp_divisors"]])
        )
        m_shift, m_interval = sqrt_v_shift(
            found["dp"][0], found["clean"][0], settings.bootstrap, settings.seed
        )
        m_std = (
            float(np.concatenate(found["dp"][0]).std()),
            float(np.concatenate(found["clean"][0]).std()),
        )
        extra = {
            "runs": [f.name for f in folders],
            "clients": clients,
            "sR": found["dp_divisors"],
            "centre_sqrt_v": {"dp": centre(found["dp"][1]), "clean": centre(found["clean"][1])},
            "centre_m": {"dp": centre(found["dp"][0]), "clean": centre(found["clean"][0])},
            "std_m": {"dp": m_std[0], "clean": m_std[1]},
            "m_shift": m_shift,
            "m_shift_interval": list(m_interval),
            "shift": shift,
            "shift_interval": list(interval),
            "predicted": predicted,
            "zeros_sqrt_v": {},
        }
        rows = []
        for which, (ms, roots) in (("dp", found["dp"]), ("clean", found["clean"])):
            for quantity, values in (("m", ms), ("sqrt_v_hat", roots)):
                flat = np.concatenate(values)
                if quantity != "m":
                    # Exact zeros (units that never fired) have no place on a log axis.
                    extra["zeros_sqrt_v"][which] = int((flat == 0).sum())
                    flat = np.log10(flat[flat > 0])
                counts, edges = np.histogram(flat, bins=80)
                for c, lo, hi in zip(counts, edges[:-1], edges[1:], strict=True):
                    rows.append(
                        {"run": which, "quantity": quantity, "bin_lo": lo, "bin_hi": hi,
                         "count": int(c), "log10": quantity != "m"}
                    )  # fmt: skip
        return FigureData(pd.DataFrame(rows), extra)

    def draw(self, data: FigureData, settings: Any) -> MplFigure:
        import matplotlib.pyplot as plt

        table, extra = data.table, data.extra
        fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.9))
        zeros = extra["zeros_sqrt_v"]
        names = {"dp": f"DP (sigma {settings.sigma:g})", "clean": "no noise (same clip)"}
        for which, color in (("clean", "tab:blue"), ("dp", "tab:red")):
            for ax, quantity in ((left, "m"), (right, "sqrt_v_hat")):
                rows = table[(table.run == which) & (table.quantity == quantity)]
                lo, hi = rows.bin_lo.to_numpy(), rows.bin_hi.to_numpy()
                if quantity != "m":
                    lo, hi = 10**lo, 10**hi
                label = names[which]
                if quantity != "m" and zeros.get(which):
                    label += f" ({zeros[which]} zeros left out)"
                ax.stairs(rows["count"].to_numpy(), np.append(lo, hi[-1]), color=color,
                          label=label, fill=False, lw=1.2)  # fmt: skip
            right.axvline(extra["centre_sqrt_v"][which], color=color, ls="--", lw=0.8)
        predicted_dp = extra["centre_sqrt_v"]["clean"] + extra["predicted"]
        right.axvline(predicted_dp, color="black", ls=":", lw=1.2,
                      label="no-noise centre + sigma C / sR")  # fmt: skip
        right.set_xscale("log")
        left.set_yscale("log")
        right.set_yscale("log")
        left.set_xlabel("m (every coordinate of every probed client)")
        right.set_xlabel("sqrt(v_hat), log scale (dashed: medians)")
        left.set_ylabel("count")
        for ax in (left, right):
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        ratio = extra["shift"] / extra["predicted"]
        fig.suptitle(
            f"DP-LocalAdamW, {settings.model} on {settings.data}: sqrt(v) centre shift "
            f"{extra['shift']:.3g} vs sigma C / sR = {extra['predicted']:.3g} (ratio {ratio:.2f})",
            fontsize=10,
        )
        fig.tight_layout()
        return fig

    def claims(self, data: FigureData, settings: Any) -> list[Claim]:
        extra = data.extra
        predicted = extra["predicted"]
        ratio = extra["shift"] / predicted
        lo, hi = (x / predicted for x in extra["shift_interval"])
        if BAND[0] <= lo and hi <= BAND[1]:
            holds: bool | None = True
        elif hi < BAND[0] or lo > BAND[1]:
            holds = False
        else:
            holds = None
        std_ratio = extra["std_m"]["dp"] / extra["std_m"]["clean"]
        return [
            Claim(
                statement="DP noise shifts the centre of sqrt(v) by about "
                "sqrt(sigma^2 C^2 / (sR)^2)",
                statistic=f"measured shift / predicted {predicted:.3g} (shift "
                f"{extra['shift']:.3g}; 'about': ratio in [{BAND[0]}, {BAND[1]}])",
                value=ratio,
                holds=holds,
                interval=(lo, hi),
            ),
            Claim(
                statement="the variance of m is larger with DP noise",
                statistic="std(m with DP) / std(m without)",
                value=std_ratio,
                holds=std_ratio > 1.0,
            ),
            self._m_alignment(extra),
        ]

    @staticmethod
    def _m_alignment(extra: dict[str, Any]) -> Claim:
        """The paper's "the centres of m are aligned": the shift of m's median (DP - no DP) in
        units of std(m with DP); holds when its 95% interval lies inside +-ALIGNED, does not
        when it lies outside, else undecided."""
        width = extra["std_m"]["dp"]
        lo, hi = (x / width for x in extra["m_shift_interval"])
        if lo >= -ALIGNED and hi <= ALIGNED:
            holds: bool | None = True
        elif hi < -ALIGNED or lo > ALIGNED:
            holds = False
        else:
            holds = None
        return Claim(
            statement="the centres of m agree with and without DP noise",
            statistic=f"shift of m's median / std(m with DP) (shift {extra['m_shift']:.3g}; "
            f"'agree': within +-{ALIGNED:g})",
            value=extra["m_shift"] / width,
            holds=holds,
            interval=(lo, hi),
        )
