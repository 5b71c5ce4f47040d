"""TOPI's padding helper (``topi.nn.utils.get_pad_tuple``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from autosched.errors import AutoschedError


def get_pad_tuple(padding: Any, kernel: Sequence[int]) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` of a padding given as an int, (h, w), four ints, ``"SAME"`` (the kernel's
    extent less one, the odd pixel at the end) or ``"VALID"`` (none)."""
    kh, kw = (int(k) for k in kernel)
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return 0, 0, 0, 0
        if padding.upper() == "SAME":
            ph, pw = kh - 1, kw - 1
            return ph // 2, pw // 2, ph - ph // 2, pw - pw // 2
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
