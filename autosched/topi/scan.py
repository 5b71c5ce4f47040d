"""TOPI's ``topi.cumsum`` and ``cumprod``, computed as relay's running reductions compute them."""

from __future__ import annotations

from autosched import relay, te
from autosched.topi._relay import lower_call


def _running(what: str, data: te.Tensor, axis: int | None, dtype: str | None, exclusive: bool | None) -> te.Tensor:
    op = relay.cumsum if what == "cumsum" else relay.cumprod

    def build(x):
        if dtype is not None and dtype != data.dtype:
            x = relay.cast(x, dtype)
        if axis is None:  # numpy's and TVM's: over the flattened tensor
            x = relay.reshape(x, (-1,))
        return op(x, 0 if axis is None else int(axis), bool(exclusive))

    return lower_call(what, [data], build)


def cumsum(data: te.Tensor, axis: int | None = None, dtype: str | None = None,
           exclusive: bool | None = None) -> te.Tensor:
    """The running sum along ``axis`` (None: of the flattened tensor), in ``dtype`` (default: the input's);
    ``exclusive`` leaves each element out of its own sum."""
    return _running("cumsum", data, axis, dtype, exclusive)


def cumprod(data: te.Tensor, axis: int | None = None, dtype: str | None = None,
            exclusive: bool | None = None) -> te.Tensor:
    """The running product along ``axis``, as :func:`cumsum`."""
    return _running("cumprod", data, axis, dtype, exclusive)


__all__ = ["cumprod", "cumsum"]
