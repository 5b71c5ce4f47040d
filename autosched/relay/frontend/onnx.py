"""ONNX -> relay: ``from_onnx(model, shape=..., dtype=...)`` gives ``(mod, params)`` as TVM's frontend does.

How it works: the nodes are visited in graph order (ONNX guarantees a topological order). Each ONNX value name
maps either to a relay expression or, when it is known at import time (an initializer, a Constant node's value),
to a numpy array; ops that take a shape or a bound as an input (Reshape's shape, Clip's min/max, Pad's pads) read
that array. Initializers used as tensors become parameters of ``main`` (after the graph inputs) and their arrays
are returned in ``params``; ``freeze_params=True`` embeds them as constants instead.

A node whose inputs are all known at import time is evaluated then (onnx's reference evaluator), if it is small or
shape arithmetic: exporters compute Reshape targets with Shape -> Gather -> Unsqueeze -> Concat, and with static
shapes that is a constant. Shape, Size, Gather, Cast and ConstantOfShape are supported only that way
(relay has no op for them on tensors); Slice is folded so too, and on tensors becomes ``strided_slice``.

Static shapes only: every graph input needs a concrete shape (from the model or ``shape=``). Ops whose conversion
depends on a shape (SAME padding, Flatten on any axis, Softmax before opset 13, Gemm's bias) read it from ONNX's
own shape inference run with the given input shapes, and fall back to relay's type inference.

Before converting anything the whole graph is checked against the table of supported ops, so one error lists
every unsupported op type with its count (:class:`OpNotImplemented`).
"""

from __future__ import annotations

import logging
import math
import os
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autosched.errors import AutoschedError

logger = logging.getLogger("autosched.relay")

if TYPE_CHECKING:  # pragma: no cover
    import onnx

    from autosched.relay.expr import Expr, IRModule


class OpNotImplemented(AutoschedError, NotImplementedError):
    """The model uses ONNX operators this frontend does not convert; ``unsupported`` maps op type -> node count."""

    def __init__(self, message: str, unsupported: Mapping[str, int]):
        super().__init__(message)
        self.unsupported = dict(unsupported)


class OnnxImportError(AutoschedError, ValueError):
    """A supported op used in a way the frontend cannot convert (a non-constant shape, a training-mode node, ...)
    or a model input without a static shape; the message names the node and the problem."""


_DEFAULT_DOMAINS = ("", "ai.onnx")


def from_onnx(model: onnx.ModelProto | str | os.PathLike, shape: Mapping[str, Sequence[int]] | None = None,
              dtype: str | Mapping[str, str] = "float32", opset: int | None = None, freeze_params: bool = False
              ) -> tuple[IRModule, dict[str, np.ndarray]]:
    """Convert an ONNX model (a ``ModelProto`` or a path to a ``.onnx`` file) to a relay module and its weights.

    ``shape`` gives (or overrides) graph input shapes, e.g. ``{"data": (1, 3, 224, 224)}``; inputs with dynamic
    dimensions must be named here. ``dtype`` is the input dtype for inputs whose type the model does not declare
    (a dict gives it per input and overrides the model's). ``opset`` overrides the model's default-domain opset.

    Returns ``(mod, params)``: ``mod["main"]`` takes the graph inputs, then one parameter per initializer used as a
    tensor (named as in the model); ``params`` maps those names to numpy arrays, ready for ``relay.build``.
    Raises :class:`OpNotImplemented` listing every unsupported op type, and :class:`OnnxImportError` for an input
    without a static shape or a node that cannot be converted.
    """
    try:
        import onnx
    except ImportError as e:  # pragma: no cover - onnx is an optional dependency
        raise ImportError("relay.frontend.from_onnx needs the onnx package: pip install onnx") from e
    if isinstance(model, (str, os.PathLike)):
        model = onnx.load(os.fspath(model))
    if not isinstance(model, onnx.ModelProto):
        raise TypeError(f"from_onnx expects an onnx.ModelProto or a path, got {type(model).__name__}")
    return _GraphConverter(model, dict(shape or {}), dtype, opset, freeze_params).convert()


# ----------------------------------------------------------------------------------------------- helpers
def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values (strings decoded, tensors as numpy arrays)."""
    from onnx import AttributeProto, helper, numpy_helper

    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type == AttributeProto.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
        else:
            v = helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode()
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode() for x in v]
            out[a.name] = v
    return out


def _same_pads(in_size: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
               upper: bool) -> list[int]:
    """ONNX SAME_UPPER / SAME_LOWER padding: output = ceil(input / stride); the odd pixel goes to the end (UPPER)
    or the beginning (LOWER). Returns ONNX order ``[begin..., end...]``."""
    begins, ends = [], []
    for n, k, s, d in zip(in_size, kernel, strides, dilations):
        out = -(-n // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - n, 0)
        small, big = total // 2, total - total // 2
        begins.append(small if upper else big)
        ends.append(big if upper else small)
    return begins + ends


class _GraphConverter:
    """One conversion: the value table, the parameter table and the per-op converters."""

    def __init__(self, model: onnx.ModelProto, shapes: dict[str, Sequence[int]], dtype: str | Mapping[str, str],
                 opset: int | None, freeze_params: bool):
        from onnx import numpy_helper

        self.model = model
        self.graph = model.graph
        self.freeze = freeze_params
        model_opset = next((o.version for o in model.opset_import if o.domain in _DEFAULT_DOMAINS), None)
        self.opset = int(opset or model_opset or 1)
        self.user_shapes = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
        self.user_dtype = dtype
        self.initializers: dict[str, np.ndarray] = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.exprs: dict[str, Expr] = {}  # ONNX value name -> relay expression
        self.consts: dict[str, np.ndarray] = {}  # ONNX value name -> value known at import (Constant, folded nodes)
        self.param_vars: dict[str, Any] = {}  # initializer name -> relay Var, made on first use as a tensor
        self.input_vars: list[Any] = []
        self.used: set[str] = {i for n in self.graph.node for i in n.input if i} | {o.name for o in self.graph.output}
        self.onnx_shapes: dict[str, tuple[int, ...]] = {}
        self._node: onnx.NodeProto | None = None
        self._node_index = 0

    # ------------------------------------------------------------------------------ driver
    def convert(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        from autosched import relay

        self._check_supported()
        self._make_inputs()
        self._infer_onnx_shapes()
        for i, node in enumerate(self.graph.node):
            self._node, self._node_index = node, i
            if self._foldable(node):
                result = self._fold(node)
            else:
                result = _CONVERTERS[node.op_type](self, node, _attrs(node))
            outputs = result if isinstance(result, (tuple, list)) else (result,)
            for name, value in zip(node.output, outputs):
                if not name:
                    continue
                if isinstance(value, np.ndarray):
                    self.consts[name] = value
                else:
                    self.exprs[name] = value
            for name in node.output[len(outputs):]:
                if name and name in self.used:
                    self._fail(f"output {name!r} (output {list(node.output).index(name)}) is used, but only the "
                               f"first {len(outputs)} output(s) are supported in inference")
        self._node = None
        outs = [self.tensor(o.name) for o in self.graph.output]
        body = outs[0] if len(outs) == 1 else relay.Tuple(outs)
        used = [name for name in self.initializers if name in self.param_vars]  # in the model's order
        params = list(self.input_vars) + [self.param_vars[name] for name in used]
        mod = relay.IRModule.from_expr(relay.Function(params, body))
        weights = {} if self.freeze else {name: self.initializers[name] for name in used}
        return mod, weights

    def _check_supported(self) -> None:
        bad: Counter[str] = Counter()
        for node in self.graph.node:
            if node.domain not in _DEFAULT_DOMAINS:
                bad[f"{node.domain}.{node.op_type}"] += 1
            elif node.op_type not in _CONVERTERS:
                bad[node.op_type] += 1
        if bad:
            listing = ", ".join(f"{op} (x{n})" for op, n in sorted(bad.items(), key=lambda kv: (-kv[1], kv[0])))
            raise OpNotImplemented(
                f"the ONNX model uses {len(bad)} unsupported operator type(s) in {sum(bad.values())} node(s): "
                f"{listing}. Supported: {', '.join(sorted(_CONVERTERS))}", bad)

    def _make_inputs(self) -> None:
        from onnx import helper

        from autosched import relay

        names = []
        for vi in self.graph.input:
            if vi.name in self.initializers:  # IR < 4 lists initializers among the inputs too
                continue
            names.append(vi.name)
            tt = vi.type.tensor_type
            if vi.name in self.user_shapes:
                shape = self.user_shapes[vi.name]
            else:
                dims = [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]
                if not tt.HasField("shape") or any(d is None for d in dims):
                    given = [dv.dim_param or "?" if d is None else d for d, dv in zip(dims, tt.shape.dim)]
                    raise OnnxImportError(
                        f"graph input {vi.name!r} has no static shape ({given if tt.HasField('shape') else 'none'});"
                        f" give it with shape={{{vi.name!r}: (...)}}")
                shape = tuple(dims)
            if isinstance(self.user_dtype, Mapping) and vi.name in self.user_dtype:
                dtype = str(self.user_dtype[vi.name])
            elif tt.elem_type:
                dtype = str(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
            else:
                dtype = self.user_dtype if isinstance(self.user_dtype, str) else "float32"
            v = relay.var(vi.name, shape=shape, dtype=dtype)
            self.input_vars.append(v)
            self.exprs[vi.name] = v
            self.onnx_shapes[vi.name] = tuple(shape)
        unknown = sorted(set(self.user_shapes) - set(names))
        if unknown:
            raise OnnxImportError(f"shape= names {unknown}, which are not graph inputs of the model "
                                  f"(its inputs: {names})")

    def _infer_onnx_shapes(self) -> None:
        """Static shapes of intermediate values from ONNX's shape inference, run with the inputs' final shapes."""
        import onnx

        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        for vi in m.graph.input:
            if vi.name in self.onnx_shapes:
                dims = vi.type.tensor_type.shape.dim
                del dims[:]
                for d in self.onnx_shapes[vi.name]:
                    dims.add().dim_value = d
        try:
            inferred = onnx.shape_inference.infer_shapes(m, data_prop=True)
        except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
            # relay's type inference still runs; what it cannot do without ONNX's shapes fails at that node
            logger.warning("from_onnx: ONNX shape inference failed, so intermediate shapes come from relay's type "
                           "inference only (a node that needs a static shape may then fail): %s; check the model "
                           "with onnx.checker.check_model(model, full_check=True)", " ".join(str(e).split()))
            return
        for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
            tt = vi.type.tensor_type
            if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
                self.onnx_shapes.setdefault(vi.name, tuple(d.dim_value for d in tt.shape.dim))

    # ------------------------------------------------------------------------------ values
    def _where(self) -> str:
        node = self._node
        if node is None:
            return "graph"
        label = repr(node.name) if node.name else f"#{self._node_index} (output {node.output[0]!r})"
        return f"node {label} ({node.op_type})"

    def _fail(self, problem: str) -> None:
        raise OnnxImportError(f"{self._where()}: {problem}")

    def tensor(self, name: str) -> Expr:
        """The relay expression for ONNX value ``name`` (an initializer becomes a parameter on first use)."""
        from autosched import relay

        if name in self.exprs:
            return self.exprs[name]
        if name in self.initializers:
            value = self.initializers[name]
            if self.freeze:
                e = relay.const(value)
            else:
                e = relay.var(name, shape=value.shape, dtype=str(value.dtype))
                self.param_vars[name] = e
            self.exprs[name] = e
            return e
        if name in self.consts:
            e = relay.const(self.consts[name])
            self.exprs[name] = e
            return e
        self._fail(f"input {name!r} is not a graph input, an initializer or the output of an earlier node")
        raise AssertionError  # unreachable

    def value(self, name: str, what: str) -> np.ndarray:
        """The import-time value of ``name`` (an initializer or a Constant's output), for ``what`` (an input that
        must be constant, e.g. Reshape's shape)."""
        if name in self.consts:
            return self.consts[name]
        if name in self.initializers:
            return self.initializers[name]
        self._fail(f"{what} (input {name!r}) must be a constant (an initializer or a Constant node); "
                   "computed shapes and bounds are not supported")
        raise AssertionError  # unreachable

    def shape(self, name: str) -> tuple[int, ...]:
        """The static shape of ONNX value ``name``."""
        if name in self.onnx_shapes:
            return self.onnx_shapes[name]
        if name in self.initializers:
            return tuple(self.initializers[name].shape)
        if name in self.consts:
            return tuple(self.consts[name].shape)
        return self._relay_shape(self.tensor(name))

    def _relay_shape(self, expr: Expr) -> tuple[int, ...]:
        """Shape by relay's type inference of ``expr`` over the variables made so far."""
        from autosched import relay

        params = list(self.input_vars) + list(self.param_vars.values())
        mod = relay.transform.InferType()(relay.IRModule.from_expr(relay.Function(params, expr)))
        return tuple(int(d) for d in mod["main"].body.checked_type.shape)

    def is_const(self, name: str) -> bool:
        """Whether ONNX value ``name`` is known at import time (an initializer, a Constant or a folded value)."""
        return name in self.consts or name in self.initializers

    def _foldable(self, node: onnx.NodeProto) -> bool:
        """Nodes whose inputs are all known at import time are evaluated now (shape arithmetic, small constants);
        weights above ``_FOLD_LIMIT`` elements stay parameters."""
        ins = [n for n in node.input if n]
        if not ins or not all(self.is_const(n) for n in ins):
            return False
        return node.op_type in _FOLD_ONLY or sum(self.value(n, "").size for n in ins) <= _FOLD_LIMIT

    def _fold(self, node: onnx.NodeProto) -> list[np.ndarray]:
        """The node's outputs computed by onnx's reference evaluator at the model's opset."""
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(n) for n in node.input if n],
                                  [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            values = ReferenceEvaluator(model).run(None, {n: self.value(n, "") for n in node.input if n})
        except Exception as e:
            self._fail(f"evaluating it on its constant inputs failed: {type(e).__name__}: {e}")
        it = iter(values)
        return [np.asarray(next(it)) if n else np.zeros(0) for n in node.output]

    def optional(self, node: onnx.NodeProto, i: int) -> str | None:
        """Input ``i`` of ``node``, or None when it is absent (past the end, or the empty name)."""
        return node.input[i] if len(node.input) > i and node.input[i] else None


# --------------------------------------------------------------------------------------------- op converters
Converter = Callable[[_GraphConverter, "onnx.NodeProto", dict], Any]
_CONVERTERS: dict[str, Converter] = {}


def _register(*ops: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for op in ops:
            _CONVERTERS[op] = fn
        return fn

    return deco


def _spatial_attrs(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, kernel: Sequence[int]
                   ) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """strides, dilations and (top, left, bottom, right) padding of a 2-D Conv/pool node, auto_pad resolved."""
    nd = len(kernel)
    if nd != 2:
        g._fail(f"only 2-D (NCHW) inputs are supported; the kernel has {nd} spatial dimension(s)")
    strides = tuple(attrs.get("strides", [1] * nd))
    dilations = tuple(attrs.get("dilations", [1] * nd))
    auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    if auto_pad == "NOTSET":
        pads = list(attrs.get("pads", [0] * 2 * nd))
    elif auto_pad == "VALID":
        pads = [0] * 2 * nd
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        in_size = g.shape(node.input[0])[2:]
        pads = _same_pads(in_size, kernel, strides, dilations, upper=auto_pad == "SAME_UPPER")
    else:
        g._fail(f"unknown auto_pad {auto_pad!r} (expected NOTSET, SAME_UPPER, SAME_LOWER or VALID)")
    if len(pads) != 2 * nd or any(p < 0 for p in pads):
        g._fail(f"pads {pads} must be {2 * nd} non-negative integers")
    return strides, dilations, (pads[0], pads[1], pads[2], pads[3])


@_register("Conv")
def _conv(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    wshape = g.shape(node.input[1])
    if len(wshape) != 4:
        g._fail(f"only 2-D convolutions are supported; the weight {node.input[1]!r} has shape {wshape}")
    kernel = tuple(attrs.get("kernel_shape", wshape[2:]))
    if kernel != tuple(wshape[2:]):
        g._fail(f"kernel_shape {list(kernel)} does not match the weight's shape {wshape}")
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    out = relay.nn.conv2d(g.tensor(node.input[0]), g.tensor(node.input[1]), strides=strides, padding=padding,
                          dilation=dilations, groups=int(attrs.get("group", 1)), channels=wshape[0],
                          kernel_size=kernel)
    bias = g.optional(node, 2)
    if bias is not None:
        out = relay.nn.bias_add(out, g.tensor(bias), axis=1)
    return out


def _pool_common(g: _GraphConverter, node: onnx.NodeProto, attrs: dict):
    if "kernel_shape" not in attrs:
        g._fail("the kernel_shape attribute is required")
    kernel = tuple(attrs["kernel_shape"])
    strides, dilations, padding = _spatial_attrs(g, node, attrs, kernel)
    return kernel, strides, dilations, padding, bool(attrs.get("ceil_mode", 0))


@_register("MaxPool")
def _max_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    if attrs.get("storage_order", 0) != 0:
        g._fail("storage_order=1 (column-major Indices) is not supported")
    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    return relay.nn.max_pool2d(g.tensor(node.input[0]), pool_size=kernel, strides=strides, dilation=dilations,
                               padding=padding, ceil_mode=ceil)


@_register("AveragePool")
def _avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    kernel, strides, dilations, padding, ceil = _pool_common(g, node, attrs)
    if any(d != 1 for d in dilations):
        g._fail(f"dilations {list(dilations)} are not supported for AveragePool (only 1)")
    return relay.nn.avg_pool2d(g.tensor(node.input[0]), pool_size=kernel, strides=strides, padding=padding,
                               ceil_mode=ceil, count_include_pad=bool(attrs.get("count_include_pad", 0)))


@_register("GlobalAveragePool")
def _global_avg_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    rank = len(g.shape(node.input[0]))
    if rank != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got rank {rank}")
    return relay.nn.global_avg_pool2d(g.tensor(node.input[0]))


@_register("BatchNormalization")
def _batch_norm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    if attrs.get("training_mode", 0):
        g._fail("training_mode=1 is not supported (inference only)")
    if not attrs.get("spatial", 1):
        g._fail("spatial=0 (per-activation statistics, opset < 9) is not supported")
    x, scale, bias, mean, var = (g.tensor(n) for n in node.input[:5])
    return relay.nn.batch_norm(x, scale, bias, mean, var, axis=1, epsilon=float(attrs.get("epsilon", 1e-5)))[0]


@_register("Gemm")
def _gemm(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
    for i in (0, 1):
        r = len(g.shape(node.input[i]))
        if r != 2:
            g._fail(f"input {i} ({node.input[i]!r}) must be 2-D, got rank {r}")
    if attrs.get("transA", 0):
        a = relay.transpose(a, axes=(1, 0))
    if not attrs.get("transB", 0):  # dense wants the weight as [units, in]
        b = relay.transpose(b, axes=(1, 0))
    out = relay.nn.dense(a, b)
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    if alpha != 1.0:
        out = relay.multiply(out, relay.const(alpha, "float32"))
    c_name = g.optional(node, 2)
    if c_name is not None and beta != 0.0:
        c = g.tensor(c_name)
        if beta != 1.0:
            c = relay.multiply(c, relay.const(beta, "float32"))
        n_out = g.shape(node.input[1])[0 if attrs.get("transB", 0) else 1]
        out = relay.nn.bias_add(out, c, axis=1) if g.shape(c_name) == (n_out,) else relay.add(out, c)
    return out


@_register("MatMul")
def _matmul(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """numpy.matmul semantics: a 1-D operand is promoted to a matrix (and its dimension dropped from the result);
    when b has no batch (or a batch of 1) a's leading dimensions fold into the rows of one matmul; otherwise a
    batch_matmul over equal batch dimensions (or a batch of 1 in a, which it broadcasts)."""
    from autosched import relay

    sa, sb = g.shape(node.input[0]), g.shape(node.input[1])
    a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
    if not sa or not sb:
        g._fail("scalar operands are not allowed by MatMul")
    ra, rb = len(sa), len(sb)
    if ra == 1:
        a, sa = relay.reshape(a, (1, sa[0])), (1, sa[0])
    if rb == 1:
        b, sb = relay.reshape(b, (sb[0], 1)), (sb[0], 1)
    m, k, n = sa[-2], sa[-1], sb[-1]
    if sb[-2] != k:
        g._fail(f"inner dimensions differ: {g.shape(node.input[0])} x {g.shape(node.input[1])}")
    try:
        batch = tuple(np.broadcast_shapes(sa[:-2], sb[:-2]))
    except ValueError:
        g._fail(f"batch dimensions of {sa} and {sb} do not broadcast")
    final = batch + ((m,) if ra > 1 else ()) + ((n,) if rb > 1 else ())
    batch_a, batch_b = math.prod(sa[:-2]), math.prod(sb[:-2])
    if batch_b == 1:  # the rows of every batch of a times one matrix b
        x = a if len(sa) == 2 else relay.reshape(a, (batch_a * m, k))
        y = b if len(sb) == 2 else relay.reshape(b, (k, n))
        out, got = relay.nn.matmul(x, y), (batch_a * m, n)
    else:  # batch_matmul broadcasts a batch of 1 in a; otherwise both batch shapes must be the broadcast one
        if batch_a != 1 and (1,) * (len(batch) - len(sa[:-2])) + tuple(sa[:-2]) != batch:
            g._fail(f"broadcasting batch dimensions {sa} x {sb} is not supported (equal batches, or 1 in a)")
        if (1,) * (len(batch) - len(sb[:-2])) + tuple(sb[:-2]) != batch:
            g._fail(f"broadcasting batch dimensions {sa} x {sb} is not supported (equal batches, or 1 in a)")
        x = relay.reshape(a, (batch_a, m, k)) if len(sa) != 3 else a
        y = relay.reshape(b, (batch_b, k, n)) if len(sb) != 3 else b
        out, got = relay.nn.batch_matmul(x, y, transpose_a=False, transpose_b=False), (batch_b, m, n)
    return out if got == final else relay.reshape(out, final)


def _binary(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        from autosched import relay

        a, b = g.tensor(node.input[0]), g.tensor(node.input[1])
        if attrs.get("broadcast", 0) and "axis" in attrs:  # opset < 7: b aligned to a from ``axis``
            ra, sb = len(g.shape(node.input[0])), g.shape(node.input[1])
            axis = attrs["axis"] % ra
            b = relay.reshape(b, tuple(sb) + (1,) * (ra - axis - len(sb)))
        return getattr(relay, name)(a, b)

    convert.__name__ = f"_{name}"
    return convert


for _op, _fn in (("Add", "add"), ("Sub", "subtract"), ("Mul", "multiply"), ("Div", "divide")):
    _register(_op)(_binary(_fn))


@_register("Relu")
def _relu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    return relay.nn.relu(g.tensor(node.input[0]))


@_register("Sigmoid")
def _sigmoid(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    return relay.sigmoid(g.tensor(node.input[0]))


@_register("Tanh")
def _tanh(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    return relay.tanh(g.tensor(node.input[0]))


def _unary(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        from autosched import relay

        return getattr(relay, name)(g.tensor(node.input[0]))

    convert.__name__ = f"_{name}"
    return convert


for _op, _fn in (("Exp", "exp"), ("Sqrt", "sqrt"), ("Neg", "negative")):
    _register(_op)(_unary(_fn))


def _variadic(name: str) -> Converter:
    def convert(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
        from autosched import relay

        out = g.tensor(node.input[0])
        for n in node.input[1:]:
            out = getattr(relay, name)(out, g.tensor(n))
        return out

    convert.__name__ = f"_{name}_all"
    return convert


for _op, _fn in (("Max", "maximum"), ("Min", "minimum"), ("Sum", "add")):
    _register(_op)(_variadic(_fn))


def _scalar(g: _GraphConverter, name: str, value: float) -> Expr:
    """A scalar constant of ``name``'s dtype."""
    from autosched import relay

    dtype = g.initializers[name].dtype if name in g.initializers else None
    if dtype is None:
        t = g.tensor(name)
        dtype = getattr(getattr(t, "type_annotation", None), "dtype", None) or "float32"
    return relay.const(np.array(value, dtype=dtype))


@_register("LeakyRelu")
def _leaky_relu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """relu(x) + alpha * min(x, 0): exact for any alpha (one branch is always zero)."""
    from autosched import relay

    x = g.tensor(node.input[0])
    alpha = float(attrs.get("alpha", 0.01))
    zero, a = _scalar(g, node.input[0], 0.0), _scalar(g, node.input[0], alpha)
    return relay.add(relay.nn.relu(x), relay.multiply(relay.minimum(x, zero), a))


@_register("HardSigmoid")
def _hard_sigmoid(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    x = g.tensor(node.input[0])
    alpha, beta = float(attrs.get("alpha", 0.2)), float(attrs.get("beta", 0.5))
    lin = relay.add(relay.multiply(x, _scalar(g, node.input[0], alpha)), _scalar(g, node.input[0], beta))
    return relay.clip(lin, 0.0, 1.0)


@_register("HardSwish")
def _hard_swish(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """x * HardSigmoid(x) with alpha 1/6, beta 1/2 (MobileNetV3)."""
    from autosched import relay

    x = g.tensor(node.input[0])
    lin = relay.add(relay.multiply(x, _scalar(g, node.input[0], 1.0 / 6.0)), _scalar(g, node.input[0], 0.5))
    return relay.multiply(x, relay.clip(lin, 0.0, 1.0))


@_register("Clip")
def _clip(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Clip: bounds are attributes before opset 11 and optional (constant) inputs from 11 on; ReLU6 is Clip 0..6."""
    from autosched import relay

    big = float(np.finfo(np.float32).max)
    if g.opset < 11:
        lo, hi = float(attrs.get("min", -big)), float(attrs.get("max", big))
    else:
        lo_name, hi_name = g.optional(node, 1), g.optional(node, 2)
        lo = float(np.asarray(g.value(lo_name, "min")).reshape(-1)[0]) if lo_name else -big
        hi = float(np.asarray(g.value(hi_name, "max")).reshape(-1)[0]) if hi_name else big
    return relay.clip(g.tensor(node.input[0]), lo, hi)


@_register("Softmax", "LogSoftmax")
def _softmax(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """From opset 13 (Log)Softmax is over one axis (default -1); before, over all axes from ``axis`` (default 1)
    on, which is a (log) softmax of the input flattened to 2-D at ``axis``."""
    from autosched import relay
    from autosched.relay.ops import log_softmax

    fn = relay.nn.softmax if node.op_type == "Softmax" else log_softmax
    x = g.tensor(node.input[0])
    shape = g.shape(node.input[0])
    if g.opset >= 13:
        return fn(x, axis=int(attrs.get("axis", -1)))
    axis = int(attrs.get("axis", 1)) % len(shape)
    if axis == len(shape) - 1:
        return fn(x, axis=-1)
    flat = relay.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))
    return relay.reshape(fn(flat, axis=1), tuple(shape))


@_register("Reshape")
def _reshape(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    if g.opset < 5:
        newshape = [int(d) for d in attrs["shape"]]
    else:
        newshape = [int(d) for d in np.asarray(g.value(node.input[1], "the target shape")).reshape(-1)]
    if attrs.get("allowzero", 0) and 0 in newshape:
        g._fail(f"allowzero=1 with a 0 in the shape {newshape} (an empty tensor) is not supported")
    return relay.reshape(g.tensor(node.input[0]), tuple(newshape))


@_register("Flatten")
def _flatten(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    shape = g.shape(node.input[0])
    axis = int(attrs.get("axis", 1))
    axis = axis + len(shape) if axis < 0 else axis
    x = g.tensor(node.input[0])
    if axis == 1 and len(shape) >= 2:
        return relay.nn.batch_flatten(x)
    return relay.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))


def _axes(g: _GraphConverter, node: onnx.NodeProto, attrs: dict, since: int) -> list[int] | None:
    """The ``axes`` of Squeeze/Unsqueeze/ReduceMean: an attribute before opset ``since``, a constant input from it."""
    if g.opset < since:
        return [int(a) for a in attrs["axes"]] if "axes" in attrs else None
    name = g.optional(node, 1)
    return [int(a) for a in np.asarray(g.value(name, "axes")).reshape(-1)] if name else None


@_register("Unsqueeze")
def _unsqueeze(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A reshape to the static shape with the new unit axes (constant inputs are evaluated at import instead)."""
    from autosched import relay

    shape = list(g.shape(node.input[0]))
    axes = _axes(g, node, attrs, 13)
    if axes is None:
        g._fail("the axes are required")
    rank = len(shape) + len(axes)
    for a in sorted(a % rank for a in axes):
        shape.insert(a, 1)
    return relay.reshape(g.tensor(node.input[0]), tuple(shape))


@_register("Squeeze")
def _squeeze(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    shape = g.shape(node.input[0])
    axes = _axes(g, node, attrs, 13)
    drop = {a % len(shape) for a in axes} if axes is not None else {i for i, d in enumerate(shape) if d == 1}
    if any(shape[a] != 1 for a in drop):
        g._fail(f"cannot squeeze axes {sorted(drop)} of shape {shape}: not all of size 1")
    return relay.reshape(g.tensor(node.input[0]), tuple(d for i, d in enumerate(shape) if i not in drop))


@_register("ReduceMean")
def _reduce_mean(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The mean over H and W of an NCHW tensor (global average pooling, as some exporters write it)."""
    from autosched import relay

    shape = g.shape(node.input[0])
    axes = _axes(g, node, attrs, 18)
    axes = sorted(a % len(shape) for a in axes) if axes is not None else list(range(len(shape)))
    if len(shape) != 4 or axes != [2, 3]:
        g._fail(f"only the mean over axes [2, 3] of a 4-D (NCHW) tensor is supported, got axes {axes} of shape "
                f"{shape}")
    out = relay.nn.global_avg_pool2d(g.tensor(node.input[0]))
    return out if attrs.get("keepdims", 1) else relay.reshape(out, tuple(shape[:2]))


@_register("GlobalMaxPool")
def _global_max_pool(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    shape = g.shape(node.input[0])
    if len(shape) != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got shape {shape}")
    return relay.nn.max_pool2d(g.tensor(node.input[0]), pool_size=shape[2:], strides=(1, 1))


@_register("Transpose")
def _transpose(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    perm = attrs.get("perm")
    return relay.transpose(g.tensor(node.input[0]), axes=tuple(perm) if perm is not None else None)


@_register("Concat")
def _concat(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    if "axis" not in attrs:
        g._fail("the axis attribute is required")
    rank = len(g.shape(node.input[0]))
    return relay.concatenate([g.tensor(n) for n in node.input], axis=int(attrs["axis"]) % rank)


@_register("Pad")
def _pad(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    from autosched import relay

    mode = attrs.get("mode", "constant")
    if mode != "constant":
        g._fail(f"mode {mode!r} is not supported (only 'constant')")
    rank = len(g.shape(node.input[0]))
    if g.opset < 11:
        pads = [int(p) for p in attrs.get("pads", attrs.get("paddings", []))]
        pad_value = float(attrs.get("value", 0.0))
        axes = list(range(rank))
    else:
        pads = [int(p) for p in np.asarray(g.value(node.input[1], "pads")).reshape(-1)]
        cv = g.optional(node, 2)
        pad_value = float(np.asarray(g.value(cv, "constant_value")).reshape(-1)[0]) if cv else 0.0
        ax = g.optional(node, 3)
        axes = [int(a) % rank for a in np.asarray(g.value(ax, "axes")).reshape(-1)] if ax else list(range(rank))
    if len(pads) != 2 * len(axes):
        g._fail(f"pads {pads} must have 2 x {len(axes)} entries")
    if any(p < 0 for p in pads):
        g._fail(f"negative pads {pads} (cropping) are not supported")
    width = [[0, 0] for _ in range(rank)]
    for i, a in enumerate(axes):
        width[a] = [pads[i], pads[i + len(axes)]]
    return relay.nn.pad(g.tensor(node.input[0]), pad_width=tuple(tuple(w) for w in width), pad_value=pad_value)


@_register("Constant")
def _constant(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """A Constant's value stays a numpy array: ops that need it at import time read it; others get relay.const."""
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    g._fail(f"only tensor and numeric values are supported (attributes: {sorted(attrs)})")
    raise AssertionError  # unreachable


@_register("Identity")
def _identity(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    name = node.input[0]
    if name in g.consts:  # keep a constant a constant, so Reshape(x, Identity(shape)) still converts
        return g.consts[name]
    return g.tensor(name)


@_register("Dropout")
def _dropout(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Inference: Dropout is the identity (its mask output is not available)."""
    mode = g.optional(node, 2)
    if mode is not None and bool(np.asarray(g.value(mode, "training_mode")).reshape(-1)[0]):
        g._fail("training_mode=True is not supported (inference only)")
    return g.tensor(node.input[0])


@_register("Mean")
def _mean(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """The inputs added (numpy broadcasting), divided by their count."""
    from autosched import relay

    out = g.tensor(node.input[0])
    for n in node.input[1:]:
        out = relay.add(out, g.tensor(n))
    return out if len(node.input) == 1 else relay.divide(out, _scalar(g, node.input[0], float(len(node.input))))


@_register("PRelu")
def _prelu(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """A slope that varies along one axis (per channel: [C, 1, 1], or [C] on a 2-D input) or not at all is
    ``nn.prelu`` on that axis (it fuses into a conv's epilogue); any other broadcastable slope is
    relu(x) + slope * min(x, 0). Before opset 7 a 1-D slope of C values is per channel (axis 1)."""
    from autosched import relay
    from autosched.relay.ops import prelu

    xs, ss = g.shape(node.input[0]), g.shape(node.input[1])
    x, slope = g.tensor(node.input[0]), g.tensor(node.input[1])
    rank = len(xs)
    if g.opset < 7 and len(ss) == 1 and rank >= 2 and ss[0] == xs[1]:
        return prelu(x, slope, axis=1)
    aligned = (1,) * (rank - len(ss)) + tuple(ss)
    if len(ss) > rank or any(s not in (1, d) for s, d in zip(aligned, xs)):
        g._fail(f"slope shape {list(ss)} does not broadcast to the input's shape {list(xs)}")
    varying = [k for k, s in enumerate(aligned) if s != 1]
    if len(varying) <= 1:
        axis = varying[0] if varying else rank - 1
        size = aligned[axis] if varying else 1
        return prelu(x, slope if tuple(ss) == (size,) else relay.reshape(slope, (size,)), axis=axis)
    zero = _scalar(g, node.input[0], 0.0)
    return relay.add(relay.nn.relu(x), relay.multiply(relay.minimum(x, zero), slope))


@_register("LRN")
def _lrn(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Across channels: x / (bias + alpha / size * sum of x^2 over the size channels around c) ^ beta."""
    from autosched.relay.ops import lrn

    if "size" not in attrs:
        g._fail("the size attribute is required")
    if len(g.shape(node.input[0])) < 3:
        g._fail(f"the input must be (N, C, D1, ...), got shape {list(g.shape(node.input[0]))}")
    return lrn(g.tensor(node.input[0]), size=int(attrs["size"]), axis=1, bias=float(attrs.get("bias", 1.0)),
               alpha=float(attrs.get("alpha", 1e-4)), beta=float(attrs.get("beta", 0.75)))


@_register("Split")
def _split(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> tuple:
    """One ``strided_slice`` per output: sizes from ``split`` (an attribute before opset 13, a constant input
    from it), else equal parts (from opset 18 ``num_outputs`` parts, the last one smaller when they do not divide).
    """
    from autosched.relay.ops import strided_slice

    shape = g.shape(node.input[0])
    axis = int(attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        g._fail(f"axis {axis} is out of range for shape {list(shape)}")
    axis %= len(shape)
    dim, n = shape[axis], len(node.output)
    if g.opset < 13:
        sizes = [int(s) for s in attrs["split"]] if "split" in attrs else None
    else:
        name = g.optional(node, 1)
        sizes = [int(s) for s in np.asarray(g.value(name, "split")).reshape(-1)] if name else None
    if sizes is None:
        parts = int(attrs.get("num_outputs", n))
        if parts != n:
            g._fail(f"num_outputs={parts} but the node has {n} outputs")
        if g.opset < 18 and dim % n:
            g._fail(f"axis {axis} of size {dim} does not split into {n} equal parts (give the split sizes)")
        chunk = -(-dim // n)
        sizes = [chunk] * (n - 1) + [dim - chunk * (n - 1)]
    if len(sizes) != n or sum(sizes) != dim or min(sizes) <= 0:
        g._fail(f"split sizes {sizes} must be {n} positive sizes adding up to {dim}, the size of axis {axis} "
                f"(empty outputs are not supported)")
    outs, start = [], 0
    x = g.tensor(node.input[0])
    for s in sizes:
        outs.append(strided_slice(x, begin=[start], end=[start + s], strides=[1], axes=[axis]))
        start += s
    return tuple(outs)


@_register("Slice")
def _slice(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """``strided_slice`` with constant starts/ends/axes/steps (attributes before opset 10, inputs from it), any
    non-zero steps; negative and out-of-range indices follow ONNX's clamping (values known at import time are
    evaluated instead)."""
    from autosched.relay.ops import slice_range, strided_slice

    shape = g.shape(node.input[0])
    rank = len(shape)
    if g.opset < 10:
        starts, ends = [int(v) for v in attrs.get("starts", [])], [int(v) for v in attrs.get("ends", [])]
        axes = [int(a) for a in attrs["axes"]] if "axes" in attrs else list(range(len(starts)))
        steps = [1] * len(starts)
    else:
        def ints(i: int, what: str) -> list[int] | None:
            name = g.optional(node, i)
            return [int(v) for v in np.asarray(g.value(name, what)).reshape(-1)] if name else None

        starts, ends = ints(1, "starts"), ints(2, "ends")
        axes = ints(3, "axes") or list(range(len(starts or [])))
        steps = ints(4, "steps") or [1] * len(starts or [])
    if starts is None or ends is None or not len(starts) == len(ends) == len(axes) == len(steps):
        g._fail(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must have the same length")
    if any(not -rank <= a < rank for a in axes) or len({a % rank for a in axes}) != len(axes):
        g._fail(f"axes {axes} must be distinct axes of the {rank}-D input")
    if 0 in steps:
        g._fail(f"steps {steps} must not be 0")
    axes = [a % rank for a in axes]
    for a, b, e, s in zip(axes, starts, ends, steps):
        if slice_range(shape[a], b, e, s)[1] == 0:
            g._fail(f"starts {b}, ends {e}, steps {s} select nothing of axis {a} (size {shape[a]}) of shape "
                    f"{list(shape)}; empty tensors are not supported")
    # indices past -dim - 1 .. dim + 1 clamp the same way as those bounds (keeps INT64_MAX out of the attributes)
    starts = [min(max(b, -shape[a] - 1), shape[a] + 1) for a, b in zip(axes, starts)]
    ends = [min(max(e, -shape[a] - 1), shape[a] + 1) for a, e in zip(axes, ends)]
    return strided_slice(g.tensor(node.input[0]), begin=starts, end=ends, strides=steps, axes=axes)


def _nearest_source(out_size: int, in_size: int, scale: float, transform: str, rounding: str) -> list[int]:
    """The input pixel ONNX's nearest Resize reads for each output pixel of one axis (float32, as onnxruntime)."""
    f32 = np.float32
    o, s = np.arange(out_size, dtype=f32), f32(scale)
    if transform == "asymmetric":
        x = o / s
    elif transform in ("half_pixel", "half_pixel_symmetric"):
        x = (o + f32(0.5)) / s - f32(0.5)
        if transform == "half_pixel_symmetric":
            adjustment = f32(out_size) / (s * f32(in_size))
            x = x + f32(in_size) / f32(2) * (f32(1) - adjustment)
    elif transform == "pytorch_half_pixel":
        x = (o + f32(0.5)) / s - f32(0.5) if out_size > 1 else np.zeros_like(o)
    elif transform == "align_corners":
        x = o * f32(in_size - 1) / f32(out_size - 1) if out_size > 1 else np.zeros_like(o)
    elif transform == "tf_half_pixel_for_nn":
        x = (o + f32(0.5)) / s
    else:
        raise ValueError(transform)
    if rounding == "round_prefer_floor":
        idx = np.where(x - np.floor(x) == f32(0.5), np.floor(x), np.round(x))
    elif rounding == "round_prefer_ceil":
        idx = np.where(x - np.floor(x) == f32(0.5), np.ceil(x), np.round(x))
    elif rounding == "floor":
        idx = np.floor(x)
    elif rounding == "ceil":
        idx = np.ceil(x)
    else:
        raise ValueError(rounding)
    return [int(v) for v in np.clip(idx, 0, in_size - 1)]


_RESIZE_TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                      "tf_half_pixel_for_nn")


@_register("Resize", "Upsample")
def _resize(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Expr:
    """Nearest-neighbour resizing of NCHW data by integer factors on H and W with constant scales or sizes, when
    the coordinate transformation and rounding read input pixel o // factor for output pixel o (every input pixel
    repeated factor times: the defaults, and asymmetric/floor) -> ``nn.upsampling``. Upsample (opset < 10) and
    Resize-10 use asymmetric coordinates and floor."""
    from autosched.relay.ops import upsampling

    mode = attrs.get("mode", "nearest")
    if mode != "nearest":
        g._fail(f"mode {mode!r} is not supported (only 'nearest')")
    shape = g.shape(node.input[0])
    if len(shape) != 4:
        g._fail(f"only 4-D (NCHW) inputs are supported, got shape {list(shape)}")
    if node.op_type == "Upsample" or g.opset < 11:
        transform, rounding = "asymmetric", "floor"
        if node.op_type == "Upsample" and g.opset < 9:
            scales = [float(s) for s in attrs.get("scales", [])]
        else:
            scales = [float(s) for s in np.asarray(g.value(node.input[1], "scales")).reshape(-1)]
        sizes = None
    else:
        transform = attrs.get("coordinate_transformation_mode", "half_pixel")
        rounding = attrs.get("nearest_mode", "round_prefer_floor")
        if transform not in _RESIZE_TRANSFORMS:
            g._fail(f"coordinate_transformation_mode {transform!r} is not supported (only "
                    f"{', '.join(_RESIZE_TRANSFORMS)})")
        if rounding not in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
            g._fail(f"unknown nearest_mode {rounding!r}")
        sc, sz = g.optional(node, 2), g.optional(node, 3)
        scales = [float(s) for s in np.asarray(g.value(sc, "scales")).reshape(-1)] if sc else []
        sizes = [int(s) for s in np.asarray(g.value(sz, "sizes")).reshape(-1)] if sz else None
        if scales and sizes:
            g._fail("scales and sizes are both given; ONNX allows only one")
        if sizes and attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
            g._fail(f"keep_aspect_ratio_policy {attrs['keep_aspect_ratio_policy']!r} is not supported (only "
                    "'stretch')")
    axes = [int(a) % 4 for a in attrs.get("axes", range(4))]
    given = scales if not sizes else sizes
    if len(given) != len(axes):
        g._fail(f"{'scales' if not sizes else 'sizes'} {given} must have one value per axis {axes}")
    full_scales, full_sizes = [1.0] * 4, list(shape)
    for a, v in zip(axes, given):
        if sizes:
            full_sizes[a], full_scales[a] = int(v), int(v) / shape[a]
        else:
            full_sizes[a], full_scales[a] = int(math.floor(shape[a] * v)), float(v)
    if full_sizes[:2] != list(shape[:2]):
        g._fail(f"only H and W can be resized; the output size would be {full_sizes} for input {list(shape)}")
    factors = []
    for a in (2, 3):
        factor = full_sizes[a] // shape[a]
        if full_sizes[a] != factor * shape[a] or factor < 1:
            g._fail(f"only upsampling by integer factors is supported; axis {a} goes from {shape[a]} to "
                    f"{full_sizes[a]} (scales {full_scales})")
        src = _nearest_source(full_sizes[a], shape[a], full_scales[a], transform, rounding)
        if src != [o // factor for o in range(full_sizes[a])]:
            g._fail(f"coordinate_transformation_mode {transform!r} with nearest_mode {rounding!r} and scale "
                    f"{full_scales[a]} does not repeat each input pixel {factor} times (axis {a} reads input pixels "
                    f"{src[:8]}...); only such replication is supported")
        factors.append(factor)
    if factors == [1, 1]:
        return g.tensor(node.input[0])
    return upsampling(g.tensor(node.input[0]), scale_h=factors[0], scale_w=factors[1])


# ops supported only on values known at import time (static shapes make the shape arithmetic that exporters
# emit, e.g. Shape -> Gather -> Unsqueeze -> Concat -> Reshape, constant): they are evaluated by ``_fold``
_FOLD_ONLY = frozenset({"Shape", "Size", "Gather", "Slice", "Cast", "ConstantOfShape"})
_FOLD_LIMIT = 4096  # a node of constant inputs with at most this many elements in all is evaluated at import


@_register("Shape")
def _shape(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    """The static shape (``start``/``end`` from opset 15) as an int64 constant."""
    shape = g.shape(node.input[0])
    start, end = attrs.get("start", 0), attrs.get("end", len(shape))
    return np.array(shape[start:end], np.int64)


@_register("Size")
def _size(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> np.ndarray:
    return np.array(math.prod(g.shape(node.input[0])), np.int64)


def _fold_only(g: _GraphConverter, node: onnx.NodeProto, attrs: dict) -> Any:
    computed = [n for n in node.input if n and not g.is_const(n)]
    g._fail(f"supported only on values known at import time (shapes, constants); input {computed[0]!r} is "
            "computed from the graph inputs")


for _op in sorted(_FOLD_ONLY - {"Shape", "Size", "Slice"}):  # Slice also converts on tensors
    _register(_op)(_fold_only)

SUPPORTED_OPS: tuple[str, ...] = tuple(sorted(_CONVERTERS))
