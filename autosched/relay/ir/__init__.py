"""The graph IR, the bottom of relay: types, expressions and IRModule (expr), their text form (printer) and
type inference (type_infer), and the visitor / mutator classes users write passes with (expr_functor). It
imports nothing else of relay."""

from autosched.relay.ir import expr, expr_functor, printer
from autosched.relay.ir.expr import (
    Call,
    Constant,
    Expr,
    Function,
    FuncType,
    IRModule,
    RelayError,
    TensorType,
    Tuple,
    TupleGetItem,
    TupleType,
    Type,
    Var,
    children,
    const,
    free_vars,
    post_order,
    rebuild,
    rewrite,
    var,
)
from autosched.relay.ir.expr_functor import ExprMutator, ExprVisitor
from autosched.relay.ir.printer import astext
from autosched.relay.ir.type_infer import infer_type

__all__ = [
    "ExprMutator", "ExprVisitor", "expr_functor",
    "Call", "Constant", "Expr", "FuncType", "Function", "IRModule", "RelayError", "TensorType", "Tuple",
    "TupleGetItem", "TupleType", "Type", "Var", "astext", "children", "const", "expr", "free_vars", "infer_type",
    "post_order", "printer", "rebuild", "rewrite", "var",
]
