"""Ready tensor-core intrinsics for ``Stage.tensorize``: a float16 tile loaded into a warp's fragment, the
fragments multiplied and accumulated, the accumulator filled and stored (:mod:`autosched.tir.wmma` says what
each builtin does on the GPU and on the CPU).

Each is declared once per process under a name that says what it is (``wmma.load_a.row_major.16x16x16.
float16.shared``), and declared again on demand where a trace that names it is replayed (a worker process):
records of tensor-core schedules replay anywhere.
"""

from __future__ import annotations

from autosched.errors import ScheduleError
from autosched.te import expr as E
from autosched.te import intrin
from autosched.te.intrin import TensorIntrin, decl_tensor_intrin
from autosched.te.tensor import compute, placeholder, reduce_axis
from autosched.tir import ir_builder
from autosched.tir.extern import call_intrin, decl_buffer
from autosched.tir.wmma import LAYOUTS, SHAPES, tile_shape

_SCOPE = {"a": "wmma.matrix_a", "b": "wmma.matrix_b", "c": "wmma.accumulator"}


def _check(shape: tuple[int, int, int], layout: str) -> tuple[int, int, int]:
    shape = tuple(int(x) for x in shape)  # type: ignore[assignment]
    if shape not in SHAPES:
        raise ScheduleError(f"tensor cores multiply {', '.join('x'.join(map(str, s)) for s in SHAPES)} tiles, "
                            f"not {'x'.join(map(str, shape))}")
    if layout not in LAYOUTS:
        raise ScheduleError(f"a tile's layout is one of {LAYOUTS}, not {layout!r}")
    return shape


def _memory_shape(role: str, shape: tuple[int, int, int], layout: str) -> tuple[int, int]:
    rows, cols = tile_shape(role, shape)
    return (rows, cols) if layout == "row_major" else (cols, rows)


def _cached(name: str, make) -> TensorIntrin:
    got = intrin._INTRINSICS.get(name)
    return got if got is not None else make()


def wmma_load(role: str, layout: str = "row_major", shape: tuple[int, int, int] = (16, 16, 16),
              dtype: str = "float16", scope: str = "shared") -> TensorIntrin:
    """Copy a tile of memory in ``scope`` into a fragment of ``role`` ('a': m x k, 'b': k x n, 'c': the m x n
    accumulator), the tile's rows ``layout`` (a column-major tile is stored transposed: n x k for 'b')."""
    shape = _check(shape, layout)
    if role not in _SCOPE:
        raise ScheduleError(f"wmma_load: role is 'a', 'b' or 'c', not {role!r}")
    name = f"wmma.load_{role}.{layout}.{'x'.join(map(str, shape))}.{dtype}.{scope}"

    def make() -> TensorIntrin:
        tile = _memory_shape(role, shape, layout)
        src = placeholder(tile, dtype, name="src")
        dst = compute(tile, lambda i, j: src[i, j], name="frag")
        bsrc = decl_buffer(tile, dtype, "src", strides=[E.Var("src_stride", "int64"), 1], scope=scope,
                           offset_factor=1)
        bdst = decl_buffer(tile, dtype, "frag", scope=_SCOPE[role], offset_factor=tile[0] * tile[1])

        def body(ins, outs):
            ib = ir_builder.create()
            ib.emit(call_intrin("handle", "tir.tvm_load_matrix_sync", outs[0].data, *shape,
                                outs[0].elem_offset // (tile[0] * tile[1]), ins[0].access_ptr("r"),
                                ins[0].strides[0], layout))
            return ib.get()

        return decl_tensor_intrin(dst.op, body, name=name, binds={src: bsrc, dst: bdst})

    return _cached(name, make)


def wmma_mma(shape: tuple[int, int, int] = (16, 16, 16), dtype: str = "float16", acc: str = "float32",
             b_layout: str = "row_major") -> TensorIntrin:
    """``c[i, j] += a[i, k] * b[k, j]`` on fragments, products summed in ``acc``; with ``b_layout``
    'col_major' the B fragment holds the tile transposed (``b[j, k]``, a dense layer's weight)."""
    shape = _check(shape, b_layout)
    m, n, k = shape
    name = f"wmma.mma.{'x'.join(map(str, shape))}.{dtype}.{acc}.b_{b_layout}"

    def make() -> TensorIntrin:
        a = placeholder((m, k), dtype, name="a")
        b = placeholder(_memory_shape("b", shape, b_layout), dtype, name="b")
        kk = reduce_axis((0, k), name="k")
        if b_layout == "row_major":
            c = compute((m, n), lambda i, j: E.sum(a[i, kk].astype(acc) * b[kk, j].astype(acc), axis=kk), name="c")
        else:
            c = compute((m, n), lambda i, j: E.sum(a[i, kk].astype(acc) * b[j, kk].astype(acc), axis=kk), name="c")
        bufs = {t: decl_buffer(t.shape, t.dtype, t.name, scope=_SCOPE[r], offset_factor=int(t.shape[0]) *
                               int(t.shape[1])) for t, r in ((a, "a"), (b, "b"), (c, "c"))}

        def body(ins, outs):
            ba, bb = ins
            (bc,) = outs

            def index(buf):
                return buf.elem_offset // (int(buf.shape[0]) * int(buf.shape[1]))

            fill = ir_builder.create()
            fill.emit(call_intrin("handle", "tir.tvm_fill_fragment", bc.data, *shape, index(bc), 0.0))
            mma = ir_builder.create()
            mma.emit(call_intrin("handle", "tir.tvm_mma_sync", bc.data, index(bc), ba.data, index(ba), bb.data,
                                 index(bb), bc.data, index(bc)))
            return mma.get(), fill.get(), mma.get()

        return decl_tensor_intrin(c.op, body, name=name, binds=bufs)

    return _cached(name, make)


def wmma_store(shape: tuple[int, int, int] = (16, 16, 16), acc: str = "float32",
               scope: str = "global") -> TensorIntrin:
    """Write an accumulator fragment to an m x n tile of memory in ``scope`` (rows of any stride)."""
    shape = _check(shape, "row_major")
    m, n, _ = shape
    name = f"wmma.store.{'x'.join(map(str, shape))}.{acc}.{scope}"

    def make() -> TensorIntrin:
        frag = placeholder((m, n), acc, name="frag")
        dst = compute((m, n), lambda i, j: frag[i, j], name="dst")
        bfrag = decl_buffer((m, n), acc, "frag", scope="wmma.accumulator", offset_factor=m * n)
        bdst = decl_buffer((m, n), acc, "dst", strides=[E.Var("dst_stride", "int64"), 1], scope=scope,
                           offset_factor=1)

        def body(ins, outs):
            ib = ir_builder.create()
            ib.emit(call_intrin("handle", "tir.tvm_store_matrix_sync", ins[0].data, *shape,
                                ins[0].elem_offset // (m * n), outs[0].access_ptr("w"), outs[0].strides[0],
                                "row_major"))
            return ib.get()

        return decl_tensor_intrin(dst.op, body, name=name, binds={frag: bfrag, dst: bdst})

    return _cached(name, make)


def _declare(name: str) -> TensorIntrin | None:
    """The intrinsic a name of this module's form stands for (for a trace replayed in a fresh process)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "wmma":
        return None
    try:
        shape = tuple(int(x) for x in parts[3 if parts[1].startswith("load") else 2].split("x"))
        if parts[1].startswith("load_") and len(parts) == 6:
            return wmma_load(parts[1][5:], parts[2], shape, parts[4], parts[5])  # type: ignore[arg-type]
        if parts[1] == "mma" and len(parts) == 6:
            return wmma_mma(shape, parts[3], parts[4], parts[5][2:])  # type: ignore[arg-type]
        if parts[1] == "store" and len(parts) == 5:
            return wmma_store(shape, parts[3], parts[4])  # type: ignore[arg-type]
    except (ValueError, ScheduleError):
        return None
    return None


intrin.PROVIDERS.append(_declare)

__all__ = ["wmma_load", "wmma_mma", "wmma_store"]
