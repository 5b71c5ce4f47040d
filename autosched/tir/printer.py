"""A readable text form of expressions and loop nests, one loop per line, like ``tvm.lower``.

Each IR prints beside its nodes (``repr`` needs no module above them): expressions in
:mod:`autosched.te.expr`, statements and functions in :mod:`autosched.tir.stmt`. This module gathers the
three printers under their old names.
"""

from autosched.te.expr import expr_str
from autosched.tir.stmt import func_str, stmt_str

__all__ = ["expr_str", "func_str", "stmt_str"]
