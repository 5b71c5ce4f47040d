"""The ONNX importer: ``from_onnx`` and the graph walk; the op converters are in the sibling modules.

ONNX -> relay: ``from_onnx(model, shape=..., dtype=...)`` gives ``(mod, params)`` as TVM's frontend does.

How it works: the nodes are visited in graph order (ONNX guarantees a topological order). Each ONNX value name
maps either to a relay expression or, when it is known at import time (an initializer, a Constant node's value),
to a numpy array; ops that take a shape or a bound as an input (Reshape's shape, Clip's min/max, Pad's pads) read
that array. Initializers used as tensors become parameters of ``main`` (after the graph inputs) and their arrays
are returned in ``params``; ``freeze_params=True`` embeds them as constants instead.

A node whose inputs are all known at import time is evaluated then (onnx's reference evaluator), if it is small or
shape arithmetic: exporters compute Reshape targets with Shape -> Gather -> Unsqueeze -> Concat, and with static
shapes that is a constant; so are a transformer's positions (Range, Mod) and causal mask (Expand, Trilu, Equal),
whatever their size (``FOLD_ALWAYS``). Shape, Size, Range and ConstantOfShape are supported only that way
(relay has no op for them on tensors); Slice, Gather and Cast are folded so too, and on tensors become
``strided_slice``, ``take`` and ``cast``.

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
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from autosched.errors import AutoschedError
from autosched.relay import ir as relay_ir
from autosched.relay.frontend.onnx.registry import (
    CONVERTERS,
    FOLD_ALWAYS,
    FOLD_LIMIT,
    FOLD_ONLY,
    NEVER_FOLD,
    REWRITES,
)
from autosched.relay.ir.expr import Expr, IRModule

logger = logging.getLogger("autosched.relay")

if TYPE_CHECKING:  # pragma: no cover
    import onnx


class OpNotImplemented(AutoschedError, NotImplementedError):
    """The model uses ONNX operators this frontend does not convert; ``unsupported`` maps op type -> node count."""

    def __init__(self, message: str, unsupported: Mapping[str, int]):
        super().__init__(message)
        self.unsupported = dict(unsupported)


class OnnxImportError(AutoschedError, ValueError):
    """A supported op used in a way the frontend cannot convert (a non-constant shape, a training-mode node, ...)
    or a model input without a static shape; the message names the node and the problem."""


_DEFAULT_DOMAINS = ("", "ai.onnx")


def op_key(node: onnx.NodeProto) -> str:
    """The node's name in ``CONVERTERS``: the op type in the default domain, else ``domain.op_type`` (onnxruntime's
    ``com.microsoft.QLinearAdd``, say)."""
    return node.op_type if node.domain in _DEFAULT_DOMAINS else f"{node.domain}.{node.op_type}"


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


def _inputs_of(graph: onnx.GraphProto) -> set[str]:
    """Every value the nodes of ``graph`` read, in the bodies of its control-flow nodes too."""
    from onnx import AttributeProto

    out = set()
    for n in graph.node:
        out.update(i for i in n.input if i)
        for a in n.attribute:
            if a.type == AttributeProto.GRAPH:
                out |= _inputs_of(a.g)
    return out


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
        self.used: set[str] = _inputs_of(self.graph) | {o.name for o in self.graph.output}
        self.onnx_shapes: dict[str, tuple[int, ...]] = {}
        self.producers: dict[str, onnx.NodeProto] = {}  # ONNX value name -> the node that computed it
        self._node: onnx.NodeProto | None = None
        self._node_index = 0

    # ------------------------------------------------------------------------------ driver
    def convert(self) -> tuple[IRModule, dict[str, np.ndarray]]:
        self._check_supported()
        self._make_inputs()
        self._infer_onnx_shapes()
        self._convert_nodes(self.graph.node)
        self._node = None
        outs = [self.tensor(o.name) for o in self.graph.output]
        for o, e in zip(self.graph.output, outs):
            if not isinstance(e, Expr):
                raise OnnxImportError(f"graph output {o.name!r} is not a tensor ({type(e).__name__}); a sequence "
                                      f"output is not supported (ConcatFromSequence it)")
        body = outs[0] if len(outs) == 1 else relay_ir.Tuple(outs)
        used = [name for name in self.initializers if name in self.param_vars]  # in the model's order
        params = list(self.input_vars) + [self.param_vars[name] for name in used]
        mod = relay_ir.IRModule.from_expr(relay_ir.Function(params, body))
        weights = {} if self.freeze else {name: self.initializers[name] for name in used}
        return mod, weights

    def _convert_nodes(self, nodes: Sequence[onnx.NodeProto]) -> None:
        """Convert ``nodes`` in order into the value tables (folded when their inputs are known at import)."""
        for i, node in enumerate(nodes):
            self._node, self._node_index = node, i
            result = self._fold(node) if self._foldable(node) else None
            if result is None:
                attrs = _attrs(node)
                result = next((r for r in (f(self, node, attrs) for f in REWRITES.get(op_key(node), ()))
                               if r is not None), None)
            if result is None:
                result = CONVERTERS[op_key(node)](self, node, attrs)
            for name in node.output:
                self.producers[name] = node
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

    def convert_subgraph(self, graph: onnx.GraphProto, bound: dict[str, Any] | None = None) -> list[Any]:
        """The outputs of a control-flow node's body ``graph`` (an expression, or an array when known at import),
        its nodes converted into the same tables: they read outer values by name. ``bound`` gives the body's
        formal inputs their values (arrays or expressions)."""
        from onnx import numpy_helper

        bad = Counter(op_key(n) for n in graph.node if op_key(n) not in CONVERTERS)
        if bad:
            self._fail(f"its body {graph.name!r} uses unsupported operator type(s): "
                       f"{', '.join(f'{op} (x{k})' for op, k in sorted(bad.items()))}")
        for t in graph.initializer:
            self.initializers[t.name] = numpy_helper.to_array(t)
        for name, value in (bound or {}).items():  # (a value known at one step may be computed at the next)
            self.consts.pop(name, None)
            self.exprs.pop(name, None)
            (self.consts if isinstance(value, np.ndarray) else self.exprs)[name] = value
        self.used |= {o.name for o in graph.output}
        for n in graph.node:  # a body converted again (a loop's next iteration) computes its values anew
            for name in n.output:
                self.exprs.pop(name, None)
                self.consts.pop(name, None)
        where = self._node, self._node_index
        self._convert_nodes(graph.node)
        self._node, self._node_index = where
        return [self.consts[o.name] if o.name in self.consts else self.tensor(o.name) for o in graph.output]

    def _check_supported(self) -> None:
        bad: Counter[str] = Counter()
        for node in self.graph.node:
            if op_key(node) not in CONVERTERS:
                bad[op_key(node)] += 1
        if bad:
            listing = ", ".join(f"{op} (x{n})" for op, n in sorted(bad.items(), key=lambda kv: (-kv[1], kv[0])))
            raise OpNotImplemented(
                f"the ONNX model uses {len(bad)} unsupported operator type(s) in {sum(bad.values())} node(s): "
                f"{listing}. Supported: {', '.join(sorted(CONVERTERS))}", bad)

    def _make_inputs(self) -> None:
        from onnx import helper

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
            v = relay_ir.var(vi.name, shape=shape, dtype=dtype)
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

        m = _without_big_weights(self.model)
        for node in m.graph.node:  # onnx's STFT inference takes a missing onesided for 0 (the spec's default: 1)
            if node.op_type == "STFT" and not any(a.name == "onesided" for a in node.attribute):
                node.attribute.append(onnx.helper.make_attribute("onesided", 1))
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
        if name in self.exprs:
            return self.exprs[name]
        if name in self.initializers:
            value = self.initializers[name]
            if self.freeze:
                e = relay_ir.const(value)
            else:
                e = relay_ir.var(name, shape=value.shape, dtype=str(value.dtype))
                self.param_vars[name] = e
            self.exprs[name] = e
            return e
        if name in self.consts:
            if self.consts[name].size == 0:
                self._fail(f"input {name!r} is empty (shape {list(self.consts[name].shape)}); relay's tensors are "
                           "never empty (an empty slice is taken only as a Concat input, where it adds nothing)")
            e = relay_ir.const(self.consts[name])
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

    def dtype(self, name: str) -> str:
        """The element type of ONNX value ``name`` (an import-time value's, else by relay's type inference)."""
        if self.is_const(name):
            return str(self.value(name, "").dtype)
        t = self.tensor(name)
        ann = getattr(t, "type_annotation", None)
        if ann is not None and getattr(ann, "dtype", None):
            return str(ann.dtype)
        params = list(self.input_vars) + list(self.param_vars.values())
        func = relay_ir.Function(params, t)
        relay_ir.infer_type(func)
        return str(func.body.checked_type.dtype)

    def _relay_shape(self, expr: Expr) -> tuple[int, ...]:
        """Shape by relay's type inference of ``expr`` over the variables made so far."""
        params = list(self.input_vars) + list(self.param_vars.values())
        func = relay_ir.Function(params, expr)
        relay_ir.infer_type(func)
        return tuple(int(d) for d in func.body.checked_type.shape)

    def is_const(self, name: str) -> bool:
        """Whether ONNX value ``name`` is known at import time (an initializer, a Constant or a folded value)."""
        return name in self.consts or name in self.initializers

    def _foldable(self, node: onnx.NodeProto) -> bool:
        """Nodes whose inputs are all known at import time are evaluated now (shape arithmetic, small constants);
        weights above ``FOLD_LIMIT`` elements stay parameters."""
        ins = [n for n in node.input if n]
        if not ins or node.op_type in NEVER_FOLD or not all(self.is_const(n) for n in ins):
            return False
        return node.op_type in FOLD_ALWAYS or sum(self.value(n, "").size for n in ins) <= FOLD_LIMIT

    def _fold(self, node: onnx.NodeProto) -> list[np.ndarray] | None:
        """The node's outputs computed by onnx's reference evaluator at the model's opset; None when the evaluator
        cannot (it lacks DequantizeLinear-13, say) and the op has a converter, whose relay ops FoldConstant then
        evaluates at build."""
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        graph = helper.make_graph([node], "fold", [helper.make_empty_tensor_value_info(n) for n in node.input if n],
                                  [helper.make_empty_tensor_value_info(n) for n in node.output if n])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        try:
            values = ReferenceEvaluator(model).run(None, {n: self.value(n, "") for n in node.input if n})
        except Exception as e:
            if node.op_type not in FOLD_ONLY:
                return None
            self._fail(f"evaluating it on its constant inputs failed: {type(e).__name__}: {e}")
        it = iter(values)
        return [np.asarray(next(it)) if n else np.zeros(0) for n in node.output]

    def convert_as(self, node: onnx.NodeProto, op_type: str, inputs: Sequence[Expr | str], attrs: dict) -> Expr:
        """The converter of ``op_type`` (a default-domain op) on ``inputs`` (expressions, or value names; "" for
        an omitted one) with ``attrs``: a fused or quantized node written as the op it wraps. The expressions
        get names after ``node``'s first output, so errors still name ``node``."""
        from onnx import helper

        names = []
        for i, v in enumerate(inputs):
            if isinstance(v, str):
                names.append(v)
                continue
            names.append(f"{node.output[0]}/{op_type}/{i}")
            self.exprs[names[-1]] = v
        return CONVERTERS[op_type](self, helper.make_node(op_type, names, [node.output[0]], name=node.name, **attrs),
                                   attrs)

    def optional(self, node: onnx.NodeProto, i: int) -> str | None:
        """Input ``i`` of ``node``, or None when it is absent (past the end, or the empty name)."""
        return node.input[i] if len(node.input) > i and node.input[i] else None


#: initializers with more elements than this go to shape inference as typed inputs, without their values
SHAPE_DATA_MAX = 1024


def _without_big_weights(model: Any) -> Any:
    """A copy of ``model`` for ONNX's shape inference, its big initializers (the weights) given as typed graph
    inputs: inference serialises and parses the model, about 7 s of VGG-11's 530 MB, and reads the values of
    small tensors only (shapes, axes, the constants data propagation follows)."""
    import onnx

    m = onnx.ModelProto()
    _copy_fields(model, m, skip="graph")
    src, g = model.graph, m.graph
    _copy_fields(src, g, skip="initializer")
    typed = {vi.name for vi in src.input}
    for t in src.initializer:
        if math.prod(t.dims) <= SHAPE_DATA_MAX:
            g.initializer.append(t)
        elif t.name not in typed:
            g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return m


def _copy_fields(src: Any, dst: Any, skip: str) -> None:
    """Copy the protobuf message ``src``'s set fields into ``dst``, all but ``skip``."""
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        if hasattr(value, "extend"):  # a repeated field (protobuf's descriptors name that differently by version)
            getattr(dst, field.name).extend(value)
        elif hasattr(value, "CopyFrom"):
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)
