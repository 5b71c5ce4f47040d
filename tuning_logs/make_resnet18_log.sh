#!/usr/bin/env bash
# How tuning_logs/resnet18.jsonl was made: the ResNet-18-shaped model of benchmarks/bench_e2e.py (batch 1,
# 224x224; tests/_onnx_models.make_resnet18, seeded random weights: the tasks depend on shapes, not weights),
# every task tuned with the task scheduler (`autosched tune --model`, default policy and cost model, local
# Ray) for a wall-clock budget, as a user tunes a model, then exported compact: the BEST (default 32) fastest
# successful records of each kernel, so that the log stays under 1 MB. Run on a quiet machine; the shipped log:
# BUDGET=12m (the CPU it was made on is named in tuning_logs/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
DB=${DB:-/tmp/autosched-resnet18.db}
BUDGET=${BUDGET:-20m}
BEST=${BEST:-32}
MODEL=${MODEL:-/tmp/autosched-resnet18.onnx}
python -c "import sys, onnx; sys.path.insert(0, 'tests'); import _onnx_models as m; \
onnx.save(m.make_resnet18(batch=1, image=224), sys.argv[1])" "$MODEL"
autosched tune --model "$MODEL" --shape data=1,3,224,224 --time-budget "$BUDGET" --db "$DB"
autosched db export tuning_logs/resnet18.jsonl --workload relay.fused --best "$BEST" --db "$DB"
