#!/usr/bin/env bash
# How the shipped logs were made: each built-in workload at its default parameters, 1000 new trials with the
# default policy (evolutionary + XGBoost) and local Ray, into a scratch database, then exported compact: the
# BEST (default 600) fastest successful records, so that each log stays under 1 MB and still applies, seeds a
# search and trains the shipped cost model (autosched/cli/train_pretrained.py). Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
DB=${DB:-/tmp/autosched-tuning-logs.db}
TRIALS=${TRIALS:-1000}
BEST=${BEST:-600}
for w in "$@"; do
  autosched tune --workload "$w" --trials "$TRIALS" --db "$DB"
  autosched db export "tuning_logs/$w.jsonl" --workload "$w" --best "$BEST" --db "$DB"
done
