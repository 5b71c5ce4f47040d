"""TVM's ``relay.ExprVisitor`` and ``relay.ExprMutator``: walk or rewrite a relay expression by overriding
``visit_call``, ``visit_constant``, ``visit_var``, ``visit_tuple``, ``visit_tuple_getitem``,
``visit_function``; each node is visited once (results are memoised by node)."""

from __future__ import annotations

from typing import Any

from autosched.relay.ir.expr import Call, Constant, Expr, Function, RelayError, Tuple, TupleGetItem, Var


class ExprVisitor:
    """Visits every node of an expression once, producers first; override the ``visit_*`` you need."""

    def __init__(self) -> None:
        self.memo_map: dict[int, Any] = {}

    def visit(self, expr: Expr) -> Any:
        key = id(expr)
        if key in self.memo_map:
            return self.memo_map[key][1]
        if isinstance(expr, Call):
            out = self.visit_call(expr)
        elif isinstance(expr, Constant):
            out = self.visit_constant(expr)
        elif isinstance(expr, Var):
            out = self.visit_var(expr)
        elif isinstance(expr, Tuple):
            out = self.visit_tuple(expr)
        elif isinstance(expr, TupleGetItem):
            out = self.visit_tuple_getitem(expr)
        elif isinstance(expr, Function):
            out = self.visit_function(expr)
        else:
            raise RelayError(f"{type(self).__name__}: cannot visit {type(expr).__name__}")
        self.memo_map[key] = (expr, out)  # the node is kept alive, so its id stays its own
        return out

    def visit_call(self, call: Call) -> Any:
        if isinstance(call.op, Function):
            self.visit(call.op)
        for a in call.args:
            self.visit(a)

    def visit_tuple(self, tup: Tuple) -> Any:
        for f in tup.fields:
            self.visit(f)

    def visit_tuple_getitem(self, t: TupleGetItem) -> Any:
        self.visit(t.tuple_value)

    def visit_function(self, fn: Function) -> Any:
        for p in fn.params:
            self.visit(p)
        self.visit(fn.body)

    def visit_var(self, var: Var) -> Any:
        return None

    def visit_constant(self, const: Constant) -> Any:
        return None


class ExprMutator(ExprVisitor):
    """Rebuilds an expression from the results of visiting its nodes: by default each node is itself (the
    same object when nothing under it changed); override ``visit_*`` to replace nodes."""

    def visit_call(self, call: Call) -> Expr:
        op = self.visit(call.op) if isinstance(call.op, Function) else call.op
        args = [self.visit(a) for a in call.args]
        if op is call.op and all(a is b for a, b in zip(args, call.args)):
            return call
        return Call(op, args, call.attrs, call.compiler)

    def visit_tuple(self, tup: Tuple) -> Expr:
        fields = [self.visit(f) for f in tup.fields]
        return tup if all(a is b for a, b in zip(fields, tup.fields)) else Tuple(fields)

    def visit_tuple_getitem(self, t: TupleGetItem) -> Expr:
        value = self.visit(t.tuple_value)
        return t if value is t.tuple_value else TupleGetItem(value, t.index)

    def visit_function(self, fn: Function) -> Expr:
        params = [self.visit(p) for p in fn.params]
        body = self.visit(fn.body)
        if body is fn.body and all(a is b for a, b in zip(params, fn.params)):
            return fn
        return Function(params, body, None, fn.attrs)

    def visit_var(self, var: Var) -> Expr:
        return var

    def visit_constant(self, const: Constant) -> Expr:
        return const


__all__ = ["ExprMutator", "ExprVisitor"]
