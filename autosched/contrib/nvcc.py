"""TVM's ``tvm.contrib.nvcc`` checks that GPU examples and tests make before they run: which compute
capabilities have tensor cores, float16 and int8 arithmetic. (autosched compiles CUDA kernels through LLVM's
NVPTX backend, not nvcc.)"""

from __future__ import annotations

from typing import Any

from autosched.target import Target


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"8.0"`` -> ``(8, 0)``; a ValueError names a malformed version."""
    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"compute version {compute_version!r} is not of the form '8.0'") from None


def have_tensorcore(compute_version: str | None = None, target: Any = None) -> bool:
    """Whether a GPU of this compute capability (or a cuda target's ``-arch``) has tensor cores: 7.0 and
    newer (Volta, Turing, Ampere, Hopper)."""
    if compute_version is None:
        if target is None:
            raise ValueError("have_tensorcore: give the compute version ('8.0') or a cuda target")
        arch = Target(target).arch or ""
        digits = arch.removeprefix("sm_").rstrip("a")
        compute_version = f"{digits[:-1]}.{digits[-1]}" if len(digits) >= 2 else "0.0"
    return parse_compute_version(compute_version)[0] >= 7


def have_fp16(compute_version: str) -> bool:
    """Whether a GPU of this compute capability does float16 arithmetic at full rate: 5.3, 6.0 and 6.2, and 7.0
    and newer (TVM's rule)."""
    major, minor = parse_compute_version(compute_version)
    return (major, minor) in ((5, 3), (6, 0), (6, 2)) or major >= 7


def have_int8(compute_version: str) -> bool:
    """Whether a GPU of this compute capability has int8 dot products (dp4a): 6.1 and newer."""
    return parse_compute_version(compute_version) >= (6, 1)


__all__ = ["have_fp16", "have_int8", "have_tensorcore", "parse_compute_version"]
