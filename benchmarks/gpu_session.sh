#!/usr/bin/env bash
# The GPU measurements of issue 45, prepared for a short loan of a GPU machine: each step has a time cap, so a
# chosen set of steps fits one call, and everything it prints lands in $OUT (else ./gpu-results): session.log, the benchmarks'
# JSON files and tune.db (the ResNet-50 records), at most 8 files.
#
#   bash benchmarks/gpu_session.sh wheels                 # HERE, before the loan: what the GPU machine lacks
#   bash benchmarks/gpu_session.sh env tests kernels fp16 models   # THERE, plan A, one call: 560 s of caps
#   bash benchmarks/gpu_session.sh env tune               # THERE, plan B, one call: ResNet-50 tuned, 570 s of caps
#
# A loan is 15 minutes of device time, start-up included: one plan per loan (the first call starts the machine,
# a minute or more). Plan A ran on an H200 on 2026-11-27 (docs/gpu.md); plan B has not run yet.
#
# Steps (caps in seconds, overridable as CAP_<step>=N):
#   env      the GPU, driver, clocks and package versions (10)
#   tests    pytest -n 8 on every tests/test_gpu*.py: the real-GPU tests run instead of skipping (90)
#   kernels  bench_gpu.py: matmul 1024 (200 trials) and conv2d (64 trials) tuned, against PyTorch (280)
#   tune     ResNet-50: built untuned, `autosched tune --model ... --target cuda` for $TUNE_BUDGET (default
#            7m; $TUNE_HELPERS feature helpers, default 6 of the 16 cores: they also draw the search's samples),
#            built with those records; each against PyTorch eager (560)
#   fp16     bench_gpu.py --workloads matmul1024_fp16: the tensor-core kernel, 64 trials (60)
#   models   bench_gpu_models.py untuned: ResNet-50, BERT-base, GPT-2-small (120; 76 s on the H200)
#
# Wheels: the GPU machine's Python (3.12) has PyTorch, numpy, llvmlite, onnx and onnxruntime but not
# xgboost, SQLAlchemy or platformdirs; `wheels` downloads them into .whl/ (ignored by git: carry it), and
# every other step installs them into /tmp/site first when .whl/ is there. Ray is not needed: the steps use
# local workers.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-results}
mkdir -p "$OUT"
LOG=$OUT/session.log

wheels() {  # on the development machine: the device's missing packages, pinned to what is installed here
    local pins=() pkg
    for pkg in xgboost sqlalchemy platformdirs; do
        local v
        v=$(python3 -m pip show "$pkg" 2>/dev/null | sed -n 's/^Version: //p')
        [ -n "$v" ] || { echo "gpu_session: $pkg is not installed here; pip install -e . first" >&2; exit 2; }
        [ "$pkg" = xgboost ] && pkg=xgboost-cpu  # the same module without CUDA's libraries: 6 MB, not 300
        pins+=("$pkg==$v")
    done
    rm -rf .whl && mkdir -p .whl
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 --platform any -d .whl "${pins[@]}" || exit 1
    grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
    ls -l .whl
}

if [ "${1:-}" = wheels ]; then wheels; exit; fi
if [ $# -eq 0 ]; then sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2; fi

for step in "$@"; do  # every step known before any runs
    case $step in env|tests|kernels|tune|fp16|models) ;;
    *) echo "gpu_session: unknown step '$step' (wheels, env, tests, kernels, tune, fp16, models)" >&2; exit 2 ;;
    esac
done

if compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        .whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export AUTOSCHED_DB=/tmp/autosched-gpu-session.db  # not the user data directory of the loaned machine

env_info() {  # what the numbers were measured on
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw \
        --format=csv
    python3 -m pip list 2>/dev/null | grep -iE "^(torch|llvmlite|numpy|onnx|onnxruntime|xgboost|sqlalchemy) "
    python3 -c "from autosched.runtime.cuda import device_info; print(device_info())"
}
export -f env_info

run() {  # run STEP CAP CMD...: the command under its cap, its output in the log, its status in the summary
    local step=$1 cap=$2; shift 2
    local var="CAP_$step"; cap=${!var:-$cap}
    echo "=== $step (cap ${cap}s): $*" | tee -a "$LOG"
    local t0=$SECONDS
    timeout --signal=INT --kill-after=30 "$cap" "$@" 2>&1 | tee -a "$LOG"
    local rc=$?
    echo "=== $step: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"  # (124: stopped at its cap)
}

for step in "$@"; do
    case $step in
    env)
        run env 10 bash -c env_info ;;
    tests)
        run tests 90 python3 -m pytest -q -n 8 -p no:cacheprovider tests/test_gpu.py tests/test_gpu_host.py \
            tests/test_gpu_space.py tests/test_gpu_banks.py tests/test_gpu_relay.py tests/test_gpu_tensor_core.py ;;
    kernels)
        run kernels 280 bash -c "python3 benchmarks/bench_gpu.py --trials 200 --workloads matmul1024 --out '$OUT/k1' \
            && python3 benchmarks/bench_gpu.py --trials 64 --workloads conv2d --out '$OUT/k2'"
        for d in k1 k2; do [ -f "$OUT/$d/gpu.json" ] && mv "$OUT/$d/gpu.json" "$OUT/kernels_$d.json"; rmdir "$OUT/$d" 2>/dev/null; done ;;
    tune)
        run tune 560 bash -c "python3 -c 'import sys; sys.path.insert(0, \"tests\"); import onnx, _onnx_models; onnx.save(_onnx_models.make_resnet50(image=224), \"/tmp/resnet50.onnx\")' \
            && python3 benchmarks/bench_gpu_models.py --models resnet50 --json '$OUT/resnet50_untuned.json' \
            && AUTOSCHED_FEATURE_HELPERS=${TUNE_HELPERS:-6} python3 -m autosched tune --model /tmp/resnet50.onnx --target cuda --time-budget ${TUNE_BUDGET:-7m} --backend local --db '$OUT/tune.db' \
            && python3 benchmarks/bench_gpu_models.py --models resnet50 --database '$OUT/tune.db' --json '$OUT/resnet50_tuned.json'" ;;
    fp16)
        run fp16 60 python3 benchmarks/bench_gpu.py --trials 64 --workloads matmul1024_fp16 --out "$OUT/f"
        [ -f "$OUT/f/gpu.json" ] && mv "$OUT/f/gpu.json" "$OUT/fp16.json"; rmdir "$OUT/f" 2>/dev/null ;;
    models)
        run models 120 python3 benchmarks/bench_gpu_models.py --json "$OUT/models.json" ;;
    esac
done
grep "^=== .*: exit" "$LOG"
