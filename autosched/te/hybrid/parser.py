"""A hybrid script's Python source turned into loop IR: the body of a ``te.extern``-style operation.

The script is read as Python (``ast``), never run: loops become ``For`` statements of the loop IR
(``range`` / ``serial``, ``parallel``, ``vectorize``, ``unroll``, ``bind``; ``const_range`` is unrolled while
parsing), ``if`` becomes a branch (or is decided on the spot when its condition is a constant), tensors are
buffers read and written by index, ``output_tensor`` / ``allocate`` declare buffers and a scalar assigned an
expression is a one-element buffer. Names that are not the script's own (its closure and module globals) are
constants; a call of another hybrid script is inlined.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import operator
import textwrap
from collections import Counter
from typing import Any

from autosched.errors import AutoschedError
from autosched.te import expr as E
from autosched.te.expr import INDEX_DTYPE, Expr
from autosched.te.extern import ExternOp
from autosched.te.tensor import Tensor
from autosched.tir import stmt as S
from autosched.tir.extern import decl_buffer


class HybridError(AutoschedError, ValueError):
    """A hybrid script that cannot be turned into loop IR; the message names the script, line and construct."""


class _Buf:
    """A buffer as the script sees it: ``kind`` is 'input', 'output', 'alloc' or 'scalar'."""

    def __init__(self, buffer: S.Buffer, kind: str):
        self.buffer = buffer
        self.kind = kind

    @property
    def shape(self) -> tuple:
        return tuple(_py(d) for d in self.buffer.shape)

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


class _Partial:
    """``a[i]`` of a multi-dimensional buffer, waiting for ``[j]``."""

    def __init__(self, buf: _Buf, indices: list):
        self.buf = buf
        self.indices = indices


def _py(e: Any) -> Any:
    """A constant expression as a Python number; anything else as it is."""
    if isinstance(e, E.IntImm) and e.dtype != "bool":
        return e.value
    if isinstance(e, E.FloatImm):
        return e.value
    return e


def _is_const(v: Any) -> bool:
    return isinstance(v, (bool, int, float, str)) or (
        isinstance(v, (list, tuple)) and all(_is_const(x) for x in v))


_LOOPS = {"range": "serial", "serial": "serial", "parallel": "parallel", "vectorize": "vectorized",
          "unroll": "unrolled"}
_MATH = {"sqrt": E.sqrt, "log": E.log, "exp": E.exp, "tanh": E.tanh, "sigmoid": E.sigmoid, "floor": E.floor,
         "ceil": E.ceil, "trunc": E.trunc, "round": E.round, "erf": E.erf, "sin": E.sin, "cos": E.cos,
         "popcount": E.popcount}
_CASTS = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
          "uint64", "bool")
_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.BitAnd: operator.and_,
           ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.LShift: operator.lshift,
           ast.RShift: operator.rshift}
_CMPS = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
         ast.NotEq: operator.ne}


def _finish(items: list) -> S.Stmt:
    """A block's statements, each ``("alloc", buffer)`` marker scoping the statements after it."""
    out: list[S.Stmt] = []
    for k, x in enumerate(items):
        if isinstance(x, tuple):
            out.append(S.Allocate(x[1], _finish(items[k + 1:])))
            break
        out.append(x)
    return S.seq(out) if out else S.SeqStmt([])


class _Function:
    """One script's source and the names around it (closure, module globals)."""

    def __init__(self, fn: Any):
        self.fn = fn
        try:
            src = textwrap.dedent(inspect.getsource(fn))
        except (OSError, TypeError) as e:
            raise HybridError(f"hybrid script {fn.__name__}: its source cannot be read ({e})") from e
        tree = ast.parse(src)
        self.fdef = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
        self.line0 = fn.__code__.co_firstlineno - 1 - (self.fdef.lineno - 1)
        cv = inspect.getclosurevars(fn)
        self.outer = {**fn.__globals__, **cv.nonlocals}
        self.assigned: Counter = Counter()  # how often each name is assigned (not read in a target's index)
        for node in ast.walk(self.fdef):
            if isinstance(node, (ast.Assign, ast.AugAssign)):
                todo = list(node.targets if isinstance(node, ast.Assign) else [node.target])
                while todo:
                    t = todo.pop()
                    if isinstance(t, ast.Name):
                        self.assigned[t.id] += 1
                    elif isinstance(t, (ast.Tuple, ast.List)):
                        todo.extend(t.elts)


class Parser:
    """Turns a hybrid script called on te tensors into an operation (see the module's docstring)."""

    def __init__(self, script: Any):
        self.script = script
        self.inputs: list[Tensor] = []
        self.in_bufs: list[S.Buffer] = []
        self.outputs: list[_Buf] = []
        self.blocks: list[list] = [[]]
        self.scopes: list[dict] = []
        self.names: Counter = Counter()
        self.fn: _Function | None = None
        self.node: ast.AST | None = None

    # ---- entry --------------------------------------------------------------------------------------------
    def build(self, args: tuple) -> list[Tensor]:
        ret = self._run(self.script, args, top=True)
        rets = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        for r in rets:
            if not isinstance(r, _Buf) or r.kind != "output":
                raise self._err("a hybrid script returns the tensors it declared with output_tensor")
        if {id(b) for b in self.outputs} != {id(r) for r in rets}:
            left = [b.buffer.name for b in self.outputs if all(b is not r for r in rets)]
            raise self._err(f"output_tensor {', '.join(left)} declared but not returned")
        body = _finish(self.blocks[0])
        op = ExternOp(self.script.__name__, self.inputs, self.in_bufs, [r.buffer for r in rets], body,
                      tag="hybrid")
        return [op.output(k) for k in range(op.num_outputs)]

    def _run(self, script: Any, args: tuple, top: bool) -> Any:
        fn = _Function(script.func if hasattr(script, "func") else script)
        params = [a.arg for a in fn.fdef.args.args]
        if len(params) != len(args):
            raise HybridError(f"hybrid script {fn.fn.__name__} takes {len(params)} arguments, {len(args)} given")
        saved = (self.fn, self.scopes)
        self.fn = fn
        self.scopes = [{p: self._arg(a) if top else a for p, a in zip(params, args)}]
        try:
            returned = self._block(fn.fdef.body, top=top)
        finally:
            self.fn, self.scopes = saved
        return returned

    def _arg(self, a: Any) -> Any:
        if isinstance(a, Tensor):
            for t, b in zip(self.inputs, self.in_bufs):
                if t is a:
                    return _Buf(b, "input")
            buf = decl_buffer(a.shape, a.dtype, self._fresh(a.name))
            self.inputs.append(a)
            self.in_bufs.append(buf)
            return _Buf(buf, "input")
        if isinstance(a, (list, tuple)):
            return [self._arg(x) for x in a]
        if isinstance(a, E.IterVar):
            return a.var
        if isinstance(a, Expr):
            return _py(a)
        if _is_const(a):
            return a
        raise HybridError(f"hybrid script {self.script.__name__}: argument {a!r} is not a te tensor, an "
                          "expression, a number or a list of them")

    # ---- statements ---------------------------------------------------------------------------------------
    def _err(self, msg: str) -> HybridError:
        where = ""
        if self.fn is not None and self.node is not None and hasattr(self.node, "lineno"):
            where = f", line {self.node.lineno + self.fn.line0}"
        name = self.fn.fn.__name__ if self.fn is not None else self.script.__name__
        return HybridError(f"hybrid script {name}{where}: {msg}")

    def _fresh(self, name: str) -> str:
        self.names[name] += 1
        return name if self.names[name] == 1 else f"{name}_{self.names[name] - 1}"

    def _emit(self, s: Any) -> None:
        self.blocks[-1].append(s)

    def _block(self, stmts: list, top: bool = False) -> Any:
        for k, st in enumerate(stmts):
            self.node = st
            if isinstance(st, ast.Return):
                if k != len(stmts) - 1 or len(self.scopes) != 1:
                    raise self._err("return must be the script's last statement")
                return self._expr(st.value) if st.value is not None else None
            self._stmt(st)
        return None

    def _stmt(self, st: ast.stmt) -> None:  # noqa: C901 - one case per statement kind
        if isinstance(st, ast.Expr):
            if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
                return  # a docstring
            v = self._expr(st.value)
            if isinstance(v, Expr):
                self._emit(S.Evaluate(v))
        elif isinstance(st, ast.Assign):
            if len(st.targets) != 1:
                raise self._err("chained assignment (a = b = ...) is not supported")
            self._assign(st.targets[0], st.value)
        elif isinstance(st, ast.AugAssign):
            op = _BINOPS.get(type(st.op))
            if op is None:
                raise self._err(f"the operator {type(st.op).__name__} is not supported")
            target = st.target
            load = ast.Name(target.id, ast.Load()) if isinstance(target, ast.Name) else \
                ast.Subscript(target.value, target.slice, ast.Load())
            ast.copy_location(load, target)
            self._store(target, op(self._expr(load), self._expr(st.value)))
        elif isinstance(st, ast.For):
            self._for(st)
        elif isinstance(st, ast.If):
            cond = self._expr(st.test)
            if not isinstance(cond, Expr) or isinstance(cond, E.IntImm):
                self._scoped(st.body if bool(_py(cond)) else st.orelse)
                return
            then = self._scoped_block(st.body)
            other = self._scoped_block(st.orelse) if st.orelse else None
            self._emit(S.IfThenElse(E._as_bool(cond), then, other))
        elif isinstance(st, ast.Assert):
            pass  # checked by the script's Python run (emulation); the loop IR has no assertions
        elif isinstance(st, ast.Pass):
            pass
        elif isinstance(st, ast.While):
            raise self._err("while loops are not supported; write a for loop over a bound")
        else:
            raise self._err(f"{type(st).__name__} statements are not supported in hybrid scripts")

    def _scoped(self, stmts: list) -> None:
        self.scopes.append({})
        try:
            self._block(stmts)
        finally:
            self.scopes.pop()

    def _scoped_block(self, stmts: list) -> S.Stmt:
        self.blocks.append([])
        self._scoped(stmts)
        return _finish(self.blocks.pop())

    def _for(self, st: ast.For) -> None:
        if not isinstance(st.target, ast.Name) or not isinstance(st.iter, ast.Call) or \
                not isinstance(st.iter.func, ast.Name):
            raise self._err("a for loop is `for i in range(...)` (or serial, parallel, vectorize, unroll, "
                            "const_range, bind)")
        if st.orelse:
            raise self._err("for ... else is not supported")
        kind = st.iter.func.id
        args = [self._expr(a) for a in st.iter.args]
        name = st.target.id
        if kind == "const_range":
            vals = [_py(a) for a in args]
            if not all(isinstance(v, int) for v in vals):
                raise self._err(f"const_range needs constant bounds, got {vals}")
            for v in range(*vals):
                self.scopes.append({name: v})
                try:
                    self._block(st.body)
                finally:
                    self.scopes.pop()
            return
        if kind == "bind":
            if len(args) != 2 or not isinstance(args[0], str):
                raise self._err("bind takes a thread tag and an extent: bind('threadIdx.x', n)")
            lo, hi, loop_kind, tag = 0, args[1], "thread_binding", args[0]
        elif kind in _LOOPS:
            if len(args) not in (1, 2):
                raise self._err(f"{kind} takes one or two bounds (a step is not supported)")
            lo, hi = (0, args[0]) if len(args) == 1 else args
            loop_kind, tag = _LOOPS[kind], ""
        else:
            raise self._err(f"unknown loop {kind}(...)")
        var = E.Var(name, INDEX_DTYPE)
        lo_e = _py(lo)
        ext = E.convert(hi) - E.convert(lo) if lo_e != 0 else E.convert(hi)
        if isinstance(ext, Expr) and ext.dtype != INDEX_DTYPE:
            ext = E.cast(INDEX_DTYPE, ext)
        self.blocks.append([])
        self.scopes.append({name: var if lo_e == 0 else var + E.convert(lo)})
        try:
            self._block(st.body)
        finally:
            self.scopes.pop()
            body = _finish(self.blocks.pop())
        self._emit(S.For(var, ext, loop_kind, body, tag))

    def _assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Tuple):
            if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
                vals = self._expr(value)
                if not isinstance(vals, (list, tuple)) or len(vals) != len(target.elts):
                    raise self._err("unpacking needs as many values as names")
                for t, v in zip(target.elts, vals):
                    self._bind_value(t, v)
                return
            for t, v in zip(target.elts, value.elts):
                self._assign(t, v)
            return
        if isinstance(target, ast.Name) and isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id in ("output_tensor", "allocate") and self._lookup(value.func.id) is None:
            self._declare(target.id, value)
            return
        self._bind_value(target, self._expr(value))

    def _bind_value(self, target: ast.expr, v: Any) -> None:
        if not isinstance(target, ast.Name):
            self._store(target, v)
            return
        name = target.id
        bound = self._lookup(name)
        if isinstance(bound, _Buf) and bound.kind == "scalar":
            self._store(target, v)
        elif isinstance(v, (_Buf, _Partial, list, tuple, str)) or (
                _is_const(v) and self.fn.assigned[name] == 1):
            self.scopes[-1][name] = v  # a constant, a tensor or a shape: a name for it
        elif bound is not None:
            raise self._err(f"{name} is not a variable that can be assigned here")
        else:
            ev = E.convert(v)
            buf = S.Buffer(self._fresh(name), [E.IntImm(1)], ev.dtype, "local")
            self._emit(("alloc", buf))
            self.scopes[-1][name] = _Buf(buf, "scalar")
            self._store(target, ev)

    def _declare(self, name: str, call: ast.Call) -> None:
        fn = call.func.id
        args = [self._expr(a) for a in call.args]
        kw = {k.arg: self._expr(k.value) for k in call.keywords}
        shape = args[0] if args else kw.get("shape")
        dtype = args[1] if len(args) > 1 else kw.get("dtype", "float32")
        scope = args[2] if len(args) > 2 else kw.get("scope", "global")
        if shape is None:
            raise self._err(f"{fn} needs a shape")
        shape = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        dims = [E.convert(_py(d)) for d in shape]
        buf = S.Buffer(self._fresh(name), dims, E.check_dtype(dtype), "global" if fn == "output_tensor" else scope)
        if fn == "output_tensor" and len(self.scopes) == 1 and len(self.blocks) == 1 and self._top():
            b = _Buf(buf, "output")
            self.outputs.append(b)
        else:
            if fn == "output_tensor" and self._top():
                raise self._err("output_tensor must be declared at the top of the script, outside loops and ifs")
            b = _Buf(buf, "alloc")  # a temporary (or an inlined script's output)
            self._emit(("alloc", buf))
        self.scopes[-1][name] = b

    def _top(self) -> bool:
        return self.fn is not None and self.fn.fn is (getattr(self.script, "func", self.script))

    def _store(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            buf = self._lookup(target.id)
            if not isinstance(buf, _Buf) or buf.kind != "scalar":
                raise self._err(f"{target.id} cannot be assigned to here")
            indices: list = [E.IntImm(0)]
        elif isinstance(target, ast.Subscript):
            base = self._expr(target.value)
            idx = self._index(target.slice)
            if isinstance(base, _Partial):
                base, idx = base.buf, base.indices + idx
            if not isinstance(base, _Buf):
                raise self._err("only tensors (inputs, output_tensor, allocate) can be written by index")
            if len(idx) != len(base.buffer.shape):
                raise self._err(f"{base.buffer.name} has {len(base.buffer.shape)} dimensions, "
                                f"{len(idx)} indices given")
            buf, indices = base, idx
        else:
            raise self._err(f"cannot assign to {type(target).__name__}")
        v = E.convert(value, buf.dtype) if not isinstance(value, Expr) else value
        if v.dtype != buf.dtype:
            v = E.cast(buf.dtype, v)
        self._emit(S.BufferStore(buf.buffer, v, [self._idx(i) for i in indices]))

    @staticmethod
    def _idx(i: Any) -> Expr:
        e = E.convert(i)
        return e if e.dtype == INDEX_DTYPE else E.cast(INDEX_DTYPE, e)

    def _index(self, node: ast.expr) -> list:
        if isinstance(node, ast.Tuple):
            return [self._expr(x) for x in node.elts]
        return [self._expr(node)]

    # ---- expressions --------------------------------------------------------------------------------------
    _MISSING = object()

    def _lookup(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def _name(self, name: str) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                v = scope[name]
                if isinstance(v, _Buf) and v.kind == "scalar":
                    return S.BufferLoad(v.buffer, [E.IntImm(0)])
                return v
        if self.fn.assigned.get(name):
            raise self._err(f"{name} is used outside the loop or branch that assigns it (assign it before)")
        if name in self.fn.outer:
            return self.fn.outer[name]
        if name in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[name]
        raise self._err(f"name {name!r} is not defined")

    def _expr(self, node: ast.expr) -> Any:  # noqa: C901 - one case per expression kind
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self._name(node.id)
        if isinstance(node, ast.Attribute):
            base = self._expr(node.value)
            if node.attr in ("shape", "dtype") and isinstance(base, (_Buf, Tensor)):
                return base.shape if node.attr == "shape" and isinstance(base, _Buf) else (
                    tuple(_py(d) for d in base.shape) if node.attr == "shape" else base.dtype)
            raise self._err(f"attribute .{node.attr} is not supported (only .shape and .dtype of tensors)")
        if isinstance(node, ast.Subscript):
            base = self._expr(node.value)
            idx = self._index(node.slice)
            if isinstance(base, _Partial):
                base, idx = base.buf, base.indices + idx
            if isinstance(base, _Buf):
                nd = len(base.buffer.shape)
                if len(idx) < nd:
                    return _Partial(base, idx)
                if len(idx) > nd:
                    raise self._err(f"{base.buffer.name} has {nd} dimensions, {len(idx)} indices given")
                return S.BufferLoad(base.buffer, [self._idx(i) for i in idx])
            if isinstance(base, (list, tuple, str)) or hasattr(base, "__getitem__"):
                for i in idx:  # b[i, j] of a list of lists is b[i][j]
                    if not isinstance(_py(i), int):
                        raise self._err("a constant list is indexed by constants (loop over it with const_range)")
                    base = base[_py(i)]
                return base
            raise self._err(f"{type(base).__name__} cannot be indexed")
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self._expr(x) for x in node.elts)
        if isinstance(node, ast.BinOp):
            a, b = self._expr(node.left), self._expr(node.right)
            if isinstance(node.op, ast.Pow):
                return a ** b if not isinstance(a, Expr) and not isinstance(b, Expr) else E.power(a, b)
            op = _BINOPS.get(type(node.op))
            if op is None:
                raise self._err(f"the operator {type(node.op).__name__} is not supported")
            return op(_py(a), _py(b))
        if isinstance(node, ast.UnaryOp):
            v = _py(self._expr(node.operand))
            if isinstance(node.op, ast.Not):
                return (not v) if not isinstance(v, Expr) else E.Not(E._as_bool(v))
            return {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert}[type(node.op)](v)
        if isinstance(node, ast.Compare):
            left = self._expr(node.left)
            parts = []
            for op, right in zip(node.ops, node.comparators):
                r = self._expr(right)
                fn = _CMPS.get(type(op))
                if fn is None:
                    raise self._err(f"the comparison {type(op).__name__} is not supported")
                parts.append(fn(_py(left), _py(r)) if not (isinstance(left, Expr) or isinstance(r, Expr))
                             else fn(E.convert(left), E.convert(r)))
                left = r
            return self._all(parts)
        if isinstance(node, ast.BoolOp):
            vals = [_py(self._expr(v)) for v in node.values]
            if isinstance(node.op, ast.And):
                return self._all(vals)
            if all(not isinstance(v, Expr) for v in vals):
                return builtins.any(vals)
            return E.any(*[E._as_bool(E.convert(v)) for v in vals if isinstance(v, Expr) or v])
        if isinstance(node, ast.IfExp):
            c = _py(self._expr(node.test))
            if not isinstance(c, Expr):
                return self._expr(node.body if c else node.orelse)
            return E.if_then_else(c, self._expr(node.body), self._expr(node.orelse))
        if isinstance(node, ast.Call):
            return self._call(node)
        raise self._err(f"{type(node).__name__} expressions are not supported in hybrid scripts")

    @staticmethod
    def _all(vals: list) -> Any:
        if all(not isinstance(v, Expr) for v in vals):
            return builtins.all(bool(v) for v in vals)
        if any(not isinstance(v, Expr) and not v for v in vals):
            return False
        return E.all(*[E._as_bool(v) for v in vals if isinstance(v, Expr)])

    def _call(self, node: ast.Call) -> Any:  # noqa: C901 - one case per intrinsic
        if not isinstance(node.func, ast.Name):
            raise self._err("only named functions can be called (intrinsics and other hybrid scripts)")
        name = node.func.id
        local = self._lookup(name)
        target = local if local is not None else self.fn.outer.get(name)
        args = [self._expr(a) for a in node.args]
        if target is not None and hasattr(target, "func") and hasattr(target, "is_hybrid_script"):
            ret = self._run(target, tuple(args), top=False)  # another script: inlined
            return ret
        if name in _MATH:
            return _MATH[name](args[0])
        if name == "power":
            return E.power(args[0], args[1])
        if name in ("min", "max"):
            vals = [_py(a) for a in args]
            if all(not isinstance(v, Expr) for v in vals):
                return builtins.min(vals) if name == "min" else builtins.max(vals)
            out = E.convert(vals[0])
            for v in vals[1:]:
                out = E.minimum(out, v) if name == "min" else E.maximum(out, v)
            return out
        if name == "abs":
            return builtins.abs(args[0]) if not isinstance(args[0], Expr) else E.abs(args[0])
        if name == "len":
            v = args[0]
            if isinstance(v, _Buf):
                return v.shape[0]
            if isinstance(v, _Partial):
                return v.buf.shape[len(v.indices)]
            return len(v)
        if name in _CASTS:
            v = args[0]
            if isinstance(v, Expr):
                return E.cast(name, v)
            return E.const(v, name)
        if name == "ceil_div":
            a, b = (_py(x) for x in args)
            return (a + b - 1) // b
        if name == "likely":
            return args[0]
        if name == "max_num_threads":
            return 1024
        if name in ("output_tensor", "allocate"):
            raise self._err(f"{name} is assigned to a name: x = {name}(shape, dtype)")
        if name in _LOOPS or name in ("const_range", "bind"):
            raise self._err(f"{name}(...) is only a for loop's range")
        raise self._err(f"calls of {name!r} are not supported in hybrid scripts (math intrinsics, casts, len, "
                        "min/max, ceil_div and other hybrid scripts are)")
