"""In-place activations after layers that Opacus hooks (ghost clipping).

Opacus' ghost clipping wraps the output of every layer with trainable parameters in a backward
hook function (torch's full backward hooks), and autograd refuses an in-place operation on that
output: a model with `nn.ReLU(inplace=True)` (or an in-place dropout) right after a Conv1d or
Linear fails with "Output 0 of BackwardHookFunctionBackward is a view and is being modified
inplace". `copy_inputs_of_in_place_modules` gives every module that runs in place (its
`inplace` attribute is True) a copy of its input while gradients are recorded: the module still
runs its own in-place kernel, on the copy, so its values and its random draws (dropout) are the
ones it would compute without the hooks. In-place operations written in a model's forward code
(`F.relu(x, inplace=True)`, `x += y`) cannot be reached this way: `is_in_place_error` names the
error they raise, so that the caller can fall back to another method.
"""

from __future__ import annotations

from torch import Tensor, nn
from torch.utils.hooks import RemovableHandle


def _copy_input(module: nn.Module, args: tuple) -> tuple | None:
    """Forward pre-hook: the input as a copy when the module runs in place on a tensor that
    autograd tracks (the copy is differentiable; without gradients there is no hook to trip)."""
    if not getattr(module, "inplace", False) or not args:
        return None
    first = args[0]
    if not isinstance(first, Tensor) or not first.requires_grad:
        return None
    return (first.clone(), *args[1:])


def copy_inputs_of_in_place_modules(model: nn.Module) -> list[RemovableHandle]:
    """A `_copy_input` pre-hook on every module of `model` with an `inplace` attribute (the
    attribute is read at each call); returns the handles, to remove them."""
    return [
        module.register_forward_pre_hook(_copy_input)
        for module in model.modules()
        if isinstance(getattr(module, "inplace", None), bool)
    ]


def is_in_place_error(exc: BaseException) -> bool:
    """Whether `exc` is autograd's refusal of an in-place operation on a hooked layer's output."""
    return isinstance(exc, RuntimeError) and "modified inplace" in str(exc)
