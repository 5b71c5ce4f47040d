"""TOPI's ``topi.gpu``: the GPU schedules that are not CUDA-specific in TVM; here the cuda ones (autosched's one
GPU target)."""

from autosched.topi.cuda import *  # noqa: F403 - the same functions under TVM's second name
from autosched.topi.cuda import (  # noqa: F401
    dense_large_batch,
    dense_small_batch,
    schedule_dense_large_batch,
    schedule_dense_small_batch,
)
