"""The bytes glibc's malloc has handed out and not got back (``mallinfo2``): what tests of kept workspaces
count, since the RSS keeps what malloc keeps."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable


class _MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                      "fsmblks", "uordblks", "fordblks", "keepcost")]


def malloc_in_use() -> Callable[[], int] | None:
    """A function giving the bytes in use now, or None where the C library has no mallinfo2 (glibc < 2.33)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    if not hasattr(libc, "mallinfo2"):
        return None
    libc.mallinfo2.restype = _MallInfo2

    def in_use() -> int:
        info = libc.mallinfo2()
        return info.uordblks + info.hblkhd

    return in_use
