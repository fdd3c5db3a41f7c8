"""moon: the model-contrastive loss by hand (float64), the loss the engine builds from the
model's representation against separate model copies, the representation contract of the
vision models, and MOON with mu = 0 through the engine = FedAvg."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from fedbench.algorithms import ALGORITHMS, RoundInfo
from fedbench.algorithms.moon import model_contrastive_loss
from fedbench.config import ModelConfig
from fedbench.engine import train
from fedbench.engine.client import _local_loss
from fedbench.models import build_model
from fedbench.models.representation import represent_with, representation_split
from fedbench.step import Objective
from tests.conftest import read_metrics, strip_elapsed
from tests.engine.test_engine import tiny_config


def test_model_contrastive_loss_by_hand() -> None:
    z = torch.tensor([[1.0, 0.0], [0.0, 2.0]], dtype=torch.float64)
    z_glob = torch.tensor([[1.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    z_prev = torch.tensor([[-1.0, 0.0], [3.0, 0.0]], dtype=torch.float64)
    tau = 0.5
    # sample 0: cos(z, g) = 1/sqrt2, cos(z, p) = -1; sample 1: cos(z, g) = 1, cos(z, p) = 0
    terms = []
    for pos, neg in ((1 / math.sqrt(2), -1.0), (1.0, 0.0)):
        a, b = math.exp(pos / tau), math.exp(neg / tau)
        terms.append(-math.log(a / (a + b)))
    got = model_contrastive_loss(z, z_glob, z_prev, tau)
    assert float(got) == pytest.approx(sum(terms) / 2, rel=1e-14)
    # z_prev = z_glob: the term is log 2 whatever z is
    assert float(model_contrastive_loss(z, z_glob, z_glob, tau)) == pytest.approx(math.log(2))


def test_engine_loss_is_cross_entropy_plus_mu_times_the_contrastive_term() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 4), nn.Tanh(), nn.Linear(4, 3)).double()
    names = [n for n, _ in model.named_parameters()]
    current = [p.detach().clone() for p in model.parameters()]
    glob = [t + 0.1 * torch.randn_like(t) for t in current]
    prev = [t - 0.2 * torch.randn_like(t) for t in current]
    cls = ALGORITHMS.get("moon")
    alg = cls(cls.Params(mu=2.0, temperature=0.7), None, num_clients=2)  # type: ignore[arg-type]
    represent, classify = representation_split(model)
    run = SimpleNamespace(
        forward=model,
        objective=Objective(),
        algorithm=alg,
        represent_and_classify=lambda x: (represent(x), lambda: classify(represent(x))),
        represent_with=represent_with(model, names),
    )
    xb = torch.randn(6, 5, dtype=torch.float64)
    yb = torch.tensor([0, 1, 2, 0, 1, 2])
    loss = _local_loss(run, xb, yb, {"x": glob, "prev": prev}, RoundInfo(0, 0.1, 1, 2, 1))

    def copy_with(weights: list[torch.Tensor]) -> nn.Module:
        other = copy.deepcopy(model)
        with torch.no_grad():
            for p, w in zip(other.parameters(), weights, strict=True):
                p.copy_(w)
        return other.eval()

    z = model[:-1](xb)
    expected = nn.functional.cross_entropy(model(xb), yb) + 2.0 * model_contrastive_loss(
        z, copy_with(glob)[:-1](xb), copy_with(prev)[:-1](xb), 0.7
    )
    assert float(loss.detach()) == pytest.approx(float(expected.detach()), rel=1e-13)
    # the anchors carry no gradient: d loss / d params equals that of the expected expression
    g1 = torch.autograd.grad(loss, list(model.parameters()))
    g2 = torch.autograd.grad(expected, list(model.parameters()))
    for a, b in zip(g1, g2, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("name", "shape"),
    [("logreg", (1, 8, 8)), ("cnn", (1, 8, 8)), ("resnet18", (3, 8, 8)), ("vit_tiny", (3, 8, 8))],
)
def test_classify_of_represent_is_the_model(name: str, shape: tuple[int, ...]) -> None:
    torch.manual_seed(0)
    model = build_model(ModelConfig(name=name, norm="gn"), shape, 4).double().eval()
    represent, classify = representation_split(model)
    x = torch.randn(3, *shape, dtype=torch.float64)
    torch.testing.assert_close(classify(represent(x)), model(x), rtol=0, atol=0)
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    same = represent_with(model, names)([p.detach() for p in model.parameters()], x)
    torch.testing.assert_close(same, represent(x), rtol=0, atol=0)


def test_moon_with_mu_zero_is_fedavg_through_the_engine(tmp_path: Path) -> None:
    fedavg = train(tiny_config("algorithm.name=fedavg"), tmp_path / "a")
    moon = train(tiny_config("algorithm.name=moon", "algorithm.mu=0"), tmp_path / "b")
    assert strip_elapsed(read_metrics(moon.run_dir)) == strip_elapsed(read_metrics(fedavg.run_dir))


def test_moon_refuses_privacy_and_models_without_a_representation(run_cli) -> None:
    assert "dp_moon" not in ALGORITHMS
    from fedbench.errors import FedbenchError

    with pytest.raises(FedbenchError, match="does not expose its representation"):
        representation_split(nn.LSTM(3, 3))


def test_moon_refuses_batchnorm_running_statistics(run_cli) -> None:
    """The anchors swap parameters only: BatchNorm's running statistics would be the local
    model's, not z_glob's or z_prev's own. One line, exit 2; GroupNorm runs."""
    from fedbench.errors import FedbenchError
    from fedbench.models.representation import check_anchor_statistics

    bn = build_model(ModelConfig(name="resnet18", norm="bn"), (3, 8, 8), 4)
    with pytest.raises(FedbenchError, match="BatchNorm running statistics"):
        check_anchor_statistics(bn, "resnet18", "moon")
    check_anchor_statistics(
        build_model(ModelConfig(name="resnet18", norm="gn"), (3, 8, 8), 4), "resnet18", "moon"
    )
    code, _, err = run_cli(
        "train", "--set", "algorithm.name=moon", "--set", "model.name=resnet18",
        "--set", "model.norm=bn", "--set", "fl.rounds=1",
    )  # fmt: skip
    assert code == 2 and "use model.norm gn" in err and len(err.strip().splitlines()) == 1
