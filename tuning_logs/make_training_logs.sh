#!/usr/bin/env bash
# How the training logs in tuning_logs/training/ were made: whole tuning runs, every measured record kept
# (failures too), so that the shipped cost model learns to tell slow from fast candidates, not only to order
# the fastest. Each run is `autosched tune` at its defaults (evolutionary + XGBoost) for TRIALS trials on one
# shape; a workload's shapes go into one log, tuning_logs/training/W.jsonl. Several shapes per workload give
# the model sizes, strides and channel counts to generalise over. Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
DB=${DB:-/tmp/autosched-training-logs.db}
TRIALS=${TRIALS:-200}
OUT=tuning_logs/training
mkdir -p "$OUT"
run() {  # run WORKLOAD [--param NAME=VALUE ...]
  local w=$1; shift
  autosched tune --workload "$w" "$@" --trials "$TRIALS" --db "$DB" --backend local --no-compare -q
}
run conv2d
run conv2d --param CI=256 --param CO=256 --param H=14 --param W=14
run conv2d --param CI=256 --param CO=512 --param H=28 --param W=28 --param KH=1 --param KW=1 --param stride=2 --param padding=0
run conv2d_nchwc --param CI=128 --param CO=128 --param H=28 --param W=28
run matmul
run matmul --param M=256 --param N=768 --param K=768
run batch_matmul
run batch_matmul --param B=4 --param M=256 --param N=256 --param K=256
run batch_matmul --param B=12 --param M=128 --param N=64 --param K=128
run dense
run dense --param CI=768 --param CO=3072 --param bias=False
run depthwise_conv2d
run depthwise_conv2d --param C=128 --param H=56 --param W=56 --param stride=2
run depthwise_conv2d_nchwc
run pool2d
run softmax
run softmax --param M=128 --param N=4096
run elementwise
for w in conv2d conv2d_nchwc matmul batch_matmul dense depthwise_conv2d depthwise_conv2d_nchwc pool2d softmax elementwise; do
  autosched db export "$OUT/$w.jsonl" --workload "$w" --db "$DB" -q
done
