"""TOPI's padding helpers (``topi.nn.utils.get_pad_tuple``, ``get_pad_tuple1d``, ``get_pad_tuple3d``): SAME pads
by the kernel's extent less one, the odd pad at the begin, as TVM."""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Integral
from typing import Any

from autosched.errors import AutoschedError


def get_pad_tuple(padding: Any, kernel: Sequence[int]) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` of a padding given as an int, (h, w), four ints, ``"SAME"`` (the kernel's
    extent less one, the odd pixel at the top and left, as TVM) or ``"VALID"`` (none)."""
    kh, kw = (int(k) for k in kernel)
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() == "SAME":
            ph, pw = kh - 1, kw - 1
            return (ph + 1) // 2, (pw + 1) // 2, ph // 2, pw // 2
        raise AutoschedError(f"padding {padding!r} is not SAME or VALID")
    if isinstance(padding, int):
        return padding, padding, padding, padding
    pads = tuple(int(p) for p in padding)
    if len(pads) == 1:
        return pads * 4
    if len(pads) == 2:
        return pads[0], pads[1], pads[0], pads[1]
    if len(pads) == 4:
        return pads  # type: ignore[return-value]
    raise AutoschedError(f"padding {padding!r} has {len(pads)} values; give 1, 2 or 4")


def pads_of(padding: Any, kernel: Any, what: str) -> tuple[int, ...]:
    """The begin pads then the end pads over ``len(kernel)`` axes, as TVM's ``get_pad_tuple1d/3d``: an int or n
    ints (both sides), 2n ints, VALID, or SAME (the kernel's extent less one, the odd pad at the begin)."""
    kernel = [int(kernel)] if isinstance(kernel, Integral) else [int(k) for k in kernel]
    n = len(kernel)
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        total = [k - 1 if padding.upper() == "SAME" else 0 for k in kernel]
        return tuple((t + 1) // 2 for t in total) + tuple(t // 2 for t in total)
    vals = [padding] if isinstance(padding, Integral) else list(padding) if isinstance(padding, (list, tuple)) else []
    if len(vals) in (1, n):
        vals = vals * (2 * n // len(vals))
    if len(vals) != 2 * n or not all(isinstance(p, Integral) and p >= 0 for p in vals):
        raise AutoschedError(f"topi.{what}: padding {padding!r} must be an int, {n} ints (both sides), {2 * n} ints "
                             f"(the begins, then the ends), each >= 0, or SAME or VALID")
    return tuple(int(p) for p in vals)


def get_pad_tuple1d(padding: Any, kernel: Any) -> tuple[int, int]:
    """``(left, right)`` of a 1-D padding (TVM's helper: SAME puts the odd pad on the left)."""
    return pads_of(padding, kernel, "nn.get_pad_tuple1d")  # type: ignore[return-value]


def get_pad_tuple3d(padding: Any, kernel: Any) -> tuple[int, int, int, int, int, int]:
    """``(front, top, left, back, bottom, right)`` of a 3-D padding (TVM's helper: SAME puts odd pads first)."""
    return pads_of(padding, kernel, "nn.get_pad_tuple3d")  # type: ignore[return-value]
