"""TVM's ``tvm.autotvm`` names over autosched's template spaces and search, so that AutoTVM's tutorials run:

    @autotvm.template("tutorial/matmul")
    def matmul(N, L, M, dtype):
        ...                                       # the computation, s = te.create_schedule(C.op)
        cfg = autotvm.get_config()
        cfg.define_split("tile_y", y, num_outputs=2)
        yo, yi = cfg["tile_y"].apply(s, C, y)
        return s, [A, B, C]

    task = autotvm.task.create("tutorial/matmul", args=(512, 512, 512, "float32"), target="llvm")
    tuner = autotvm.tuner.XGBTuner(task)
    tuner.tune(n_trial=64, measure_option=autotvm.measure_option(builder="local", runner=autotvm.LocalRunner()),
               callbacks=[autotvm.callback.log_to_file("matmul.log")])
    with autotvm.apply_history_best("matmul.log"):
        s, args = matmul(512, 512, 512, "float32")    # the best schedule of the log

A template becomes a workload (its computation) with an autosched template space (its knobs), so its
configurations are traces like every schedule here, and a record stores the trace, not the configuration.
The log of ``log_to_file`` is autosched's JSON-lines records (``.log``, ``.json`` or ``.jsonl``) and is the
run's database: a second run on it resumes. ``task.extract_from_program`` gives a model's fused kernels, tuned
in the generated (sketch) space, as ``autosched tune --model`` does.
"""

from autosched.autotvm import callback, measure, task, tophub, tuner
from autosched.autotvm.measure import LocalBuilder, LocalRunner, measure_option
from autosched.autotvm.task import FallbackConfig, FallbackContext, get_config, template
from autosched.database.apply import ApplyHistoryBest

#: ``with autotvm.apply_history_best(log):`` builds (te templates called directly, relay.build) use the log's best
apply_history_best = ApplyHistoryBest

__all__ = ["FallbackConfig", "FallbackContext", "LocalBuilder", "LocalRunner", "apply_history_best", "callback",
           "get_config", "measure", "measure_option", "task", "template", "tophub", "tuner"]
