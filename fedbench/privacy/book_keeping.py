"""Book-keeping (BK) clipping: sum_j clip(g_j) in one forward and one backward pass.

Bu, Wang, Zha, Karypis (2023), "Differentially private optimization on large model at small
cost" (ICML), Sec. 3-4. Every trainable layer of the supported kinds computes out = f(a; W), and
the per-sample gradient of its weight is a function of the layer's input a_j and the gradient
of sample j's loss with respect to its output, g_j = d loss_j / d out_j:

    Linear (input B x [T x] d_in, also peft LoRA's inner nn.Linear)   grad_j = g_j^T a_j
    Conv2d (a_j unfolded: in*k*k x L positions)                      grad_j = g_j a_j^T
    GroupNorm / LayerNorm (a_hat: a normalised, without affine)      grad_j = sum_pos g_j * a_hat_j
    Embedding (token ids)                                             grad_j = sum_t e_{id_t} g_t^T
    bias of any of them                                               grad_j = sum_pos g_j

One forward pass records a (forward hooks) and the gradient edge of each layer's output; one
backward pass of sum_j loss_j computes every g (and no parameter gradient). Per Linear or Conv2d
weight, one of three rules (`weight_rules`, by a cost model with memory budget KEEP_BYTES):
  keep   the per-sample gradients g_j^T a_j materialised (a batched matmul, or for a conv with
         many output positions a grouped convolution's weight gradient), their norms, and the
         clipped sum as sum_j c_j grad_j;
  ghost  the "ghost norm" ||g_j^T a_j||^2 = <a_j a_j^T, g_j g_j^T> (two T x T Gram matrices, Bu
         et al.'s mixed ghost norm, as fedbench.privacy.conv_norms for ghost clipping), and the
         clipped sum as one matmul (c g)^T a over the batch (for a conv: the weight gradient of
         the convolution for the output gradient scaled per sample);
  norm   the per-sample gradients materialised a chunk at a time for their norms only, and the
         clipped sum as for ghost.
With c_j = min(1, C/||g_j||) each layer's clipped sum is formed directly from the recorded a
and g ("book-keeping"), instead of ghost clipping's second backward pass of sum_j c_j loss_j.

Like ghost norms, this assumes that each trainable layer runs once per forward on the batch as
its first dimension (or, for Linear, LayerNorm and Embedding, on k rows per sample one sample
after another: Swin's windows); PrivateGradient checks it at every batch size it meets, from
the first batch of two or more samples on (the per-sample norms and gradients of three samples
of the whole batch against one backward pass per sample) and falls back to vmap otherwise.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import Tensor, nn
from torch.autograd.graph import GradientEdge, get_gradient_edge
from torch.nn.grad import conv2d_weight

from fedbench.errors import FedbenchError

#: Module types with a book-keeping rule (for their own trainable parameters).
BK_LAYERS: tuple[type[nn.Module], ...] = (
    nn.Linear,
    nn.Conv2d,
    nn.GroupNorm,
    nn.LayerNorm,
    nn.Embedding,
)


#: Memory for the per-sample weight gradients kept from the norms to the clipped sum (float32:
#: 4 bytes x B x out x in per layer), the same budget as vmap's chunks (mechanism.PER_SAMPLE_BYTES).
KEEP_BYTES = 256 * 2**20

#: How one layer's weight is handled: its per-sample gradients materialised and kept for the
#: clipped sum ("keep"), its norms from Gram matrices ("ghost"), or its per-sample gradients
#: materialised for the norms only ("norm"); the last two form the clipped sum by one matmul.
WeightRule = Literal["keep", "ghost", "norm"]


#: Cost of one entry of a materialised per-sample gradient, in multiply-adds: it is written,
#: then read for its norm and for the clipped sum (memory traffic, which a batched matmul with
#: few positions T cannot hide). CPU, one thread, ResNet-18 GN private step (ms, mean of two
#: best-of-3 runs on a 2-core machine at load 4-7): at 16x16 B 16,
#: 0 (operations only) 230, 8 139, 32 129, 128 127 (non-private 92); at 32x32 B 50, 8 1236,
#: 32 1163, 128 1165, 512 1183 (non-private 934). 128 rather than 32: on a GPU memory traffic
#: costs more operations still.
MATERIALISE_COST = 128


def rule_costs(positions: int, out_features: int, in_features: int) -> dict[WeightRule, int]:
    """Multiply-adds per sample of each rule for a weight with T positions, out x in entries:
    keep: g_j^T a_j (T out in) + MATERIALISE_COST per entry; ghost: the two Gram matrices
    (T^2 (out + in)) + the clipped sum by one matmul (T out in); norm: both matmuls + the
    entries."""
    t, p, d = positions, out_features, in_features
    entries = MATERIALISE_COST * p * d
    return {
        "keep": t * p * d + entries,
        "ghost": t * t * (p + d) + t * p * d,
        "norm": 2 * t * p * d + entries,
    }


def weight_rules(
    shapes: list[tuple[int, int, int, int]], budget_bytes: int = KEEP_BYTES, itemsize: int = 4
) -> list[WeightRule]:
    """The rule of each (B, T, out, in) weight: "ghost" or "norm", whichever `rule_costs` finds
    cheaper, or "keep" where that is cheaper still and the kept per-sample gradients fit the
    budget (given first to the layers that save the most operations per byte kept). Bu et al.'s
    memory criterion, 2 T^2 <= out in, favours the ghost norm more than these costs do: for
    ResNet-18's 128-channel convs at 16 x 16 positions the Gram matrices take 2.2x the
    operations of the gradient."""
    rules: list[WeightRule] = []
    saving: list[float] = []
    for _, t, p, d in shapes:
        costs = rule_costs(t, p, d)
        rules.append("ghost" if costs["ghost"] <= costs["norm"] else "norm")
        saving.append((costs[rules[-1]] - costs["keep"]) / (p * d))
    left = budget_bytes
    for i in sorted(range(len(shapes)), key=lambda i: -saving[i]):
        b, _, p, d = shapes[i]
        size = b * p * d * itemsize
        if saving[i] > 0 and size <= left:
            rules[i] = "keep"
            left -= size
    return rules


def numeric_padding(conv: nn.Conv2d) -> tuple[int, ...]:
    """The padding of a Conv2d with a rule (`_layer_problem` refuses string padding)."""
    if isinstance(conv.padding, str):
        raise ValueError(f"Conv2d padding {conv.padding!r} has no book-keeping rule")
    return conv.padding


def _layer_problem(name: str, module: nn.Module) -> str | None:
    """Why `module` (which holds trainable parameters) has no exact BK rule, or None."""
    kind = type(module).__name__
    if type(module) not in BK_LAYERS:
        return f"layer {name} ({kind}) has no book-keeping rule"
    if isinstance(module, nn.Conv2d) and (
        module.groups != 1 or module.padding_mode != "zeros" or isinstance(module.padding, str)
    ):
        return f"layer {name} (Conv2d with groups, padding mode or string padding) has no rule"
    if isinstance(module, nn.Embedding) and (
        module.max_norm is not None or module.scale_grad_by_freq
    ):
        return f"layer {name} (Embedding with max_norm or scale_grad_by_freq) has no rule"
    return None


def bk_problem(model: nn.Module) -> str | None:
    """Why book-keeping clipping cannot run `model` (a module with trainable parameters of its
    own that is not a supported layer, or a trainable parameter shared by two modules), or None
    when every trainable parameter belongs to one supported layer."""
    owner: dict[int, str] = {}
    for name, module in model.named_modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        problem = _layer_problem(name or "(root)", module)
        if problem is not None:
            return problem
        for p in own:
            if id(p) in owner:
                return f"a parameter of layer {name} is shared with layer {owner[id(p)]}"
            owner[id(p)] = name
    return None


def bk_supported(model: nn.Module) -> bool:
    """True when `bk_problem` finds none."""
    return bk_problem(model) is None


@dataclass
class _Record:
    """One layer's input and output-gradient edge from one forward pass."""

    activation: Tensor
    edge: GradientEdge
    #: The output's shape (its gradient is zero where the output does not reach the loss).
    shape: torch.Size
    calls: int = 1


@dataclass
class _Layer:
    """A supported module and its trainable parameters (in PrivateGradient's order)."""

    name: str
    module: nn.Module
    params: list[Tensor] = field(default_factory=list)


class _PerSample:
    """Per-sample squared norms of one layer's trainable parameters and their weighted sums,
    from its input a and output gradient g (cast to the parameter dtype), whose first dimension
    is the batch of B samples, or for Linear, LayerNorm and Embedding layers k x B rows, k rows
    per sample, sample-major (Swin's windows; `BookKeeper.problem`)."""

    def __init__(
        self,
        module: nn.Module,
        wanted: set[int],
        a: Tensor,
        g: Tensor,
        rule: WeightRule,
        budget_bytes: int,
        batch: int,
    ) -> None:
        self.module = module
        self.budget_bytes = budget_bytes
        #: {parameter: (B,) squared per-sample norm}
        self.squared: dict[Tensor, Tensor] = {}
        #: {parameter: (B, *shape) per-sample gradients}, where materialised.
        self._grads: dict[Tensor, Tensor] = {}
        #: {parameter: (a, g) with a (B, T, in), g (B, T, out)}, where the ghost norm was taken.
        self._ghost: dict[Tensor, tuple[Tensor, Tensor]] = {}
        #: {Conv2d weight: (input, output gradient)}, where not kept: its clipped sum is the
        #: weight gradient of the convolution with the output gradient scaled per sample.
        self._conv: dict[Tensor, tuple[Tensor, Tensor]] = {}
        #: Embedding: (ids (B, T), g (B, T, dim)).
        self._tokens: tuple[Tensor, Tensor] | None = None
        self.batch = batch
        # Only the parameters PrivateGradient trains (None: frozen or absent).
        weight = getattr(module, "weight", None)
        weight = weight if weight is not None and id(weight) in wanted else None
        bias = getattr(module, "bias", None)
        bias = bias if bias is not None and id(bias) in wanted else None
        if isinstance(module, nn.Embedding):
            if weight is not None:
                self._embedding(module, a, g)
        elif isinstance(module, nn.Conv2d):
            if weight is not None:
                self._conv_weight(module, weight, a, g, rule)
            if bias is not None:
                self._materialised(bias, g.flatten(2).sum(2))
        elif isinstance(module, nn.Linear):
            a = a.reshape(batch, -1, a.shape[-1])
            g = g.reshape(batch, -1, g.shape[-1])
            if weight is not None:
                self._matmul_weight(weight, a, g, rule)
            if bias is not None:
                self._materialised(bias, g.sum(1))
        else:
            self._normalisation(module, weight, bias, a, g)

    def _normalisation(
        self,
        module: nn.Module,
        weight: Tensor | None,
        bias: Tensor | None,
        a: Tensor,
        g: Tensor,
    ) -> None:
        """GroupNorm, LayerNorm: out = a_hat * weight + bias; their per-sample gradients are
        small (one entry per channel or normalised element), always materialised."""
        if isinstance(module, nn.GroupNorm):
            a_hat = nn.functional.group_norm(a, module.num_groups, eps=module.eps)
            dims = tuple(range(2, g.dim()))  # the weight has one entry per channel
        else:
            assert isinstance(module, nn.LayerNorm)
            a_hat = nn.functional.layer_norm(a, module.normalized_shape, eps=module.eps)
            shape = (self.batch, -1, *module.normalized_shape)  # the rows of each sample
            a_hat, g = a_hat.reshape(shape), g.reshape(shape)
            dims = (1,)
        if weight is not None:
            self._materialised(weight, (g * a_hat).sum(dims) if dims else g * a_hat)
        if bias is not None:
            self._materialised(bias, g.sum(dims) if dims else g)

    def _materialised(self, param: Tensor, grads: Tensor) -> None:
        self._grads[param] = grads
        self.squared[param] = torch.linalg.vector_norm(grads.flatten(1), dim=1).square()

    def _matmul_weight(self, weight: Tensor, a: Tensor, g: Tensor, rule: WeightRule) -> None:
        """a (B, T, in), g (B, T, out): per-sample gradients g_j^T a_j kept, or the ghost norm
        <a_j a_j^T, g_j g_j^T>, or the norms of g_j^T a_j materialised a chunk of samples at a
        time (within KEEP_BYTES) and dropped."""
        if rule == "keep":
            grads = torch.bmm(g.transpose(1, 2), a)  # (B, out, in)
            self._materialised(weight, grads.reshape(grads.shape[0], *weight.shape))
            return
        self._ghost[weight] = (a, g)
        if rule == "ghost":
            self.squared[weight] = ghost_squared_norms(a, g)
        else:
            self._chunked_norms(weight, a, g, lambda a, g: torch.bmm(g.transpose(1, 2), a))

    def _conv_weight(
        self, conv: nn.Conv2d, weight: Tensor, a: Tensor, g: Tensor, rule: WeightRule
    ) -> None:
        """The Conv2d analogue of `_matmul_weight`, with a_j unfolded (in*k*k x L positions)
        only for the ghost norm."""
        if rule == "keep":
            self._materialised(weight, conv_per_sample_grads(conv, a, g))
            return
        if rule == "ghost":
            unfolded = _unfold(conv, a)  # (B, in*k*k, L)
            flat = g.reshape(a.shape[0], g.shape[1], -1)  # (B, out, L)
            self.squared[weight] = ghost_squared_norms(unfolded.mT, flat.mT)
        else:
            self._chunked_norms(weight, a, g, lambda a, g: conv_per_sample_grads(conv, a, g))
        self._conv[weight] = (a, g)

    def _chunked_norms(
        self, weight: Tensor, a: Tensor, g: Tensor, grads: Callable[[Tensor, Tensor], Tensor]
    ) -> None:
        """The "norm" rule: the squared norms of the per-sample gradients `grads(a, g)`
        materialised a chunk of samples at a time (within the budget) and dropped."""
        step = max(1, self.budget_bytes // (a.element_size() * weight.numel()))
        self.squared[weight] = torch.cat(
            [
                torch.linalg.vector_norm(
                    grads(a[i : i + step], g[i : i + step]).flatten(1), dim=1
                ).square()
                for i in range(0, a.shape[0], step)
            ]
        )

    def _embedding(self, module: nn.Embedding, ids: Tensor, g: Tensor) -> None:
        """sum_t e_{id_t} g_t^T: its squared norm is sum_{t,s} [id_t = id_s] <g_t, g_s>."""
        weight = module.weight
        batch = self.batch
        ids = ids.reshape(batch, -1)
        g = g.reshape(batch, ids.shape[1], -1)
        if module.padding_idx is not None:  # the padding row gets no gradient
            g = g * (ids != module.padding_idx).unsqueeze(-1).to(g.dtype)
        same = (ids.unsqueeze(2) == ids.unsqueeze(1)).to(g.dtype)
        self.squared[weight] = (same * torch.bmm(g, g.transpose(1, 2))).sum((1, 2)).clamp(min=0)
        self._tokens = (ids, g)

    def weighted_sum(self, param: Tensor, weights: Tensor) -> Tensor:
        """sum_j weights_j * (per-sample gradient j of `param`)."""
        if param in self._grads:
            grads = self._grads[param]
            return torch.tensordot(weights.to(grads.dtype), grads, dims=1)
        if param in self._conv:
            a, g = self._conv[param]
            conv = self.module
            assert isinstance(conv, nn.Conv2d)
            return conv2d_weight(
                a,
                param.shape,
                g * weights.to(g.dtype).view(-1, 1, 1, 1),
                conv.stride,
                numeric_padding(conv),
                conv.dilation,
            )
        if param in self._ghost:
            a, g = self._ghost[param]
            scaled = (g * weights.to(g.dtype).view(-1, 1, 1)).flatten(0, 1)  # (B*T, out)
            return (scaled.T @ a.flatten(0, 1)).reshape(param.shape)
        assert self._tokens is not None
        ids, g = self._tokens
        scaled = (g * weights.to(g.dtype).view(-1, 1, 1)).flatten(0, 1)
        return torch.zeros_like(param).index_add_(0, ids.flatten(), scaled.to(param.dtype))


#: Output positions from which a Conv2d's per-sample weight gradients are computed as the weight
#: gradient of one grouped convolution (the batch as groups) rather than by unfolding its input
#: (im2col) and a batched matmul. On the CPU (one thread, B 50, 3x3 kernels) the grouped form
#: took 21 ms against 113 ms at 32x32 positions and 64 channels, 23 against 53 at 16x16 and 128
#: channels, but 164 against 87 at 8x8 and 256 channels.
GROUPED_POSITIONS = 256


def ghost_squared_norms(a: Tensor, g: Tensor) -> Tensor:
    """(B,) squared per-sample norms ||g_j^T a_j||^2 = <a_j a_j^T, g_j g_j^T> of a weight with
    input a (B, T, in) and output gradient g (B, T, out): the ghost norm (module docstring)."""
    gram_a = torch.bmm(a, a.transpose(1, 2))
    gram_g = torch.bmm(g, g.transpose(1, 2))
    return (gram_a * gram_g).sum((1, 2)).clamp(min=0)


def _unfold(conv: nn.Conv2d, a: Tensor) -> Tensor:
    """(B, in*k*k, L): the input patches that each output position sees (im2col)."""
    return nn.functional.unfold(
        a,
        conv.kernel_size,
        dilation=conv.dilation,
        padding=numeric_padding(conv),
        stride=conv.stride,
    )


def conv_per_sample_grads(conv: nn.Conv2d, a: Tensor, g: Tensor) -> Tensor:
    """(B, *weight.shape): each sample's weight gradient g_j a_j^T of a Conv2d (groups 1) with
    input a and output gradient g, by a grouped convolution's weight gradient where the output
    has at least GROUPED_POSITIONS positions, else by im2col and a batched matmul."""
    batch, out = g.shape[0], g.shape[1]
    positions = g[0, 0].numel()
    if positions >= GROUPED_POSITIONS:
        grads = conv2d_weight(
            a.reshape(1, -1, *a.shape[2:]),
            (batch * out, *conv.weight.shape[1:]),
            g.reshape(1, -1, *g.shape[2:]),
            conv.stride,
            numeric_padding(conv),
            conv.dilation,
            groups=batch,
        )
        return grads.view(batch, *conv.weight.shape)
    grads = torch.bmm(g.reshape(batch, out, positions), _unfold(conv, a).transpose(1, 2))
    return grads.view(batch, *conv.weight.shape)


def _matmul_shape(
    module: nn.Module, out_shape: torch.Size, batch: int
) -> tuple[int, int, int, int]:
    """(B, T, out, in) of a Linear or Conv2d weight's per-sample gradient g_j^T a_j, from the
    layer's output shape (T: tokens, windows x tokens or output positions per sample; in:
    in_features or in*k*k)."""
    if isinstance(module, nn.Conv2d):
        unfolded = module.in_channels * module.kernel_size[0] * module.kernel_size[1]
        positions = out_shape.numel() // (batch * module.out_channels) if batch else 0
        return batch, positions, module.out_channels, unfolded
    assert isinstance(module, nn.Linear)
    tokens = out_shape.numel() // (batch * module.out_features) if batch else 0
    return batch, tokens, module.out_features, module.in_features


class BookKeeper:
    """Forward hooks on every trainable layer of `model` (attached once, active only inside
    `recording`), and the per-sample norms and weighted gradient sums of one recorded batch."""

    def __init__(self, model: nn.Module, params: list[Tensor]) -> None:
        problem = bk_problem(model)
        if problem is not None:
            raise FedbenchError(
                f"book-keeping clipping cannot run this model: {problem}; use privacy.clipping auto"
            )
        self.params = params
        self._wanted = wanted = {id(p) for p in params}
        self.layers: list[_Layer] = []
        self._owner: dict[int, _Layer] = {}
        for name, module in model.named_modules():
            own = [p for p in module.parameters(recurse=False) if id(p) in wanted]
            if own:
                layer = _Layer(name or "(root)", module, own)
                self.layers.append(layer)
                for p in own:
                    self._owner[id(p)] = layer
        missing = [i for i, p in enumerate(params) if id(p) not in self._owner]
        if missing:
            raise FedbenchError(
                f"book-keeping clipping: {len(missing)} trainable tensors belong to no layer "
                "of the model"
            )
        #: Memory for kept per-sample weight gradients (`weight_rules`; also the chunk size of
        #: the "norm" rule).
        self.keep_bytes = KEEP_BYTES
        #: One rule for every Linear and Conv2d weight instead of `weight_rules`' (tests).
        self.rule: WeightRule | None = None
        self._active = False
        self._records: dict[int, _Record] = {}
        self._handles = [
            layer.module.register_forward_hook(self._forward_hook) for layer in self.layers
        ]

    def remove(self) -> None:
        """Detach the hooks (the model is trained by another method from then on)."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def _forward_hook(self, module: nn.Module, inputs: tuple, output: Tensor) -> None:
        if not self._active:
            return
        record = self._records.get(id(module))
        if record is not None:
            record.calls += 1
            return
        if not inputs or not isinstance(output, Tensor) or output.grad_fn is None:
            return  # not run with gradients: its per-sample gradients are zero
        self._records[id(module)] = _Record(
            inputs[0].detach(), get_gradient_edge(output), output.shape
        )

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        """Record each trainable layer's input and output edge during the forward passes inside."""
        self._records = {}
        self._active = True
        try:
            yield
        finally:
            self._active = False

    def clear(self) -> None:
        """Drop the recorded activations and gradients."""
        self._records = {}

    def problem(self, batch: int) -> str | None:
        """Why the recorded forward does not fit BK's assumptions, or None: a trainable layer
        runs twice, or on other rows than the batch's samples. A Linear, LayerNorm or Embedding
        may see k x B rows (Swin's window attention: B x windows), taken as k rows per sample,
        sample-major; the numerical check at each batch size confirms that (a sequence-first or
        window-major layer fails it at a batch of two or more samples)."""
        for layer in self.layers:
            record = self._records.get(id(layer.module))
            if record is None:
                continue
            if record.calls > 1:
                return f"layer {layer.name} runs {record.calls} times in one forward pass"
            rows = record.activation.shape[0] if record.activation.dim() else 0
            regrouped = isinstance(layer.module, (nn.Linear, nn.LayerNorm, nn.Embedding))
            if rows != batch and not (regrouped and batch > 0 and rows % batch == 0):
                return (
                    f"layer {layer.name} sees {record.activation.shape[0]} rows for a batch of "
                    f"{batch} (it reshapes the batch)"
                )
        return None

    def backward(self, loss: Tensor, batch: int) -> list[_PerSample]:
        """One backward pass of `loss` (the sum of the per-sample losses of `batch` samples) to
        every recorded layer output; returns each layer's per-sample norms and gradient sums
        (in `layers` order). Parameter gradients are not computed."""
        ran = [layer for layer in self.layers if id(layer.module) in self._records]
        records = [self._records[id(layer.module)] for layer in ran]
        backprops = torch.autograd.grad(loss, [r.edge for r in records], allow_unused=True)
        self._records = {}
        matmuls = [
            i
            for i, layer in enumerate(ran)
            if isinstance(layer.module, (nn.Linear, nn.Conv2d))
            and id(layer.module.weight) in self._wanted
        ]
        shapes = [_matmul_shape(ran[i].module, records[i].shape, batch) for i in matmuls]
        itemsize = ran[0].params[0].element_size() if ran else 4
        chosen = weight_rules(shapes, self.keep_bytes, itemsize)
        if self.rule is not None:
            chosen = [self.rule] * len(shapes)
        rules: dict[int, WeightRule] = dict(zip(matmuls, chosen, strict=True))
        per_layer = []
        for i, (layer, record, g) in enumerate(zip(ran, records, backprops, strict=True)):
            dtype = layer.params[0].dtype
            a = record.activation
            if g is None:  # the output does not reach the loss: zero gradients
                g = torch.zeros(record.shape, device=a.device, dtype=dtype)
            if not isinstance(layer.module, nn.Embedding):
                a = a.to(dtype)
            rule = rules.get(i, "keep")
            per_layer.append(
                _PerSample(layer.module, self._wanted, a, g.to(dtype), rule, self.keep_bytes, batch)
            )
        return per_layer

    def norms(self, per_layer: list[_PerSample], batch: int, like: Tensor) -> Tensor:
        """(B,) per-sample norm over all trainable parameters (`like`: device and dtype)."""
        squared = [sq.to(like.dtype) for layer in per_layer for sq in layer.squared.values()]
        if not squared:
            return torch.zeros(batch, device=like.device, dtype=like.dtype)
        return torch.stack(squared).sum(0).sqrt()

    def weighted_sums(self, per_layer: list[_PerSample], weights: Tensor) -> list[Tensor]:
        """sum_j weights_j g_j for each parameter of `params`, in its order (zero for a layer
        that did not run)."""
        by_module = {id(ps.module): ps for ps in per_layer}
        sums = []
        for p in self.params:
            ps = by_module.get(id(self._owner[id(p)].module))
            sums.append(torch.zeros_like(p) if ps is None else ps.weighted_sum(p, weights))
        return sums
