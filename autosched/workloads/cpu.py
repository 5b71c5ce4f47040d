"""Expert CPU schedules for the built-in workloads, written with the public primitives only.

Each is ``fn(sch, tensors, **params)`` and leaves its steps in ``sch.trace``.
"""

from __future__ import annotations

from autosched.workloads import register_schedule


def _largest_divisor(n: int, limit: int) -> int:
    for f in range(min(n, limit), 0, -1):
        if n % f == 0:
            return f
    return 1


@register_schedule("matmul")
def matmul_cpu(sch, tensors, M, N, K, dtype, **_):
    """Register-tiled matmul: an (mr x nr) accumulator block in registers, k outermost inside the tile."""
    A, B, C = tensors
    CL = sch.cache_write(C, "local")
    i, j = sch[C].op.axis
    mr, nr = _largest_divisor(M, 4), _largest_divisor(N, 32)
    io, jo, ii, ji = sch[C].tile(i, j, mr, nr)
    sch[C].parallel(io)
    sch[C].vectorize(ji)
    sch[CL].compute_at(sch[C], jo)
    ci, cj = sch[CL].op.axis
    (k,) = sch[CL].op.reduce_axis
    sch[CL].reorder(k, ci, cj)
    sch[CL].unroll(ci)
    sch[CL].vectorize(cj)
