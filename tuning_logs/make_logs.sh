#!/usr/bin/env bash
# How the shipped logs were made: each built-in workload at its default parameters, 1000 new trials with the
# default policy (evolutionary + XGBoost) and local Ray, into a scratch database, then exported with every
# record (failed ones too, so that a resumed run does not measure them again). Run on a quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
DB=${DB:-/tmp/autosched-tuning-logs.db}
TRIALS=${TRIALS:-1000}
for w in "$@"; do
  autosched tune --workload "$w" --trials "$TRIALS" --db "$DB"
  autosched db export "tuning_logs/$w.jsonl" --workload "$w" --db "$DB"
done
