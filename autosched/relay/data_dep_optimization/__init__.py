"""Optimisations that depend on the weights' values (TVM's ``relay.data_dep_optimization``): a pruned model's
dense layers become sparse ones (``bsr_dense.convert``), after ``simplify_fc_transpose.convert`` has stored
transposed weights the way a dense layer reads them. Each takes a Function (or an IRModule) and its params and
returns the rewritten one with its new params.

    func, params = ddo.simplify_fc_transpose.convert(mod["main"], params)
    func, params = ddo.bsr_dense.convert(func, params, (16, 1), sparsity_threshold=0.8)
"""

from autosched.relay.data_dep_optimization import bsr_dense, simplify_fc_transpose

__all__ = ["bsr_dense", "simplify_fc_transpose"]
