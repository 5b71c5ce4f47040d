"""Search policies and the tuning loop.

>>> best = autosched.tune(task, trials=200, policy="evolutionary", database="tuning.db")   # doctest: +SKIP

Built-in policies: ``random``, ``grid`` (template spaces), ``annealing`` (AutoTVM's simulated annealing
on cost-model scores) and ``evolutionary`` (Ansor). Add one with :func:`register_policy` or, from an
installed package, the entry-point group ``autosched.search_policies``. See ``docs/search.md``.
"""

from autosched.search import annealing, evolutionary, grid, random_search  # noqa: F401 - the built-ins register
from autosched.search.policy import (
    ENTRY_POINT_GROUP,
    SearchPolicy,
    TuneContext,
    check_policy_options,
    get_policy,
    list_policies,
    policy_options,
    register_policy,
    unregister_policy,
)
from autosched.search.scheduler import TaskProgress, tune_tasks
from autosched.search.tune import TuneState, TuningFailed, tune

__all__ = ["ENTRY_POINT_GROUP", "SearchPolicy", "TuneContext", "TuneState", "TuningFailed", "check_policy_options",
           "get_policy", "list_policies", "policy_options", "register_policy", "TaskProgress", "tune", "tune_tasks",
           "unregister_policy"]
