#!/usr/bin/env bash
# demo.sh: install dispatch into .venv and run one job on the embedded default (the local
# backend and a SQLite record; no cluster, no root). The job's script fails on its first
# run and succeeds when resubmitted; the policy resubmits on non-zero-exit, so you see a
# recovery, then the status and the history.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
export XDG_STATE_HOME=${XDG_STATE_HOME:-$here/.demo-state}
rm -f "$XDG_STATE_HOME/demo-first-run-done"
D=.venv/bin/dispatch
echo "\$ dispatch plan --backend local --policy examples/demo/policy.toml"
$D plan --backend local --policy examples/demo/policy.toml
echo
echo "\$ dispatch submit --policy examples/demo/policy.toml --wait -- sh examples/demo/flaky-train.sh"
$D submit --policy examples/demo/policy.toml --interval 0.5 --wait -- sh examples/demo/flaky-train.sh 2>&1
job=$($D list --json | .venv/bin/python -c 'import json,sys; print(json.load(sys.stdin)[0]["job_id"])')
echo
echo "\$ dispatch status $job"
$D status "$job"
echo
echo "\$ dispatch history $job"
$D history "$job"
echo
echo "\$ dispatch logs $job"
$D logs "$job"
echo
echo "\$ dispatch logs $job --submission 1 --stderr"
$D logs "$job" --submission 1 --stderr
