#!/usr/bin/env bash
# demo.sh: install dispatch-core (and nothing else: the local backend is part of it) into
# its own virtual environment, and run one job on the embedded default (the local backend
# and a SQLite record; no cluster, no root). The job's script fails on its first run and
# succeeds when resubmitted; the policy resubmits on non-zero-exit, so you see a recovery,
# then the status and the history.
#
# Environment: PYTHON (default python3), DEMO_VENV (default .demo-venv), XDG_STATE_HOME
# (default .demo-state: the demo's record and job output).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
PYTHON=${PYTHON:-python3}
DEMO_VENV=${DEMO_VENV:-$here/.demo-venv}
if [ ! -x "$DEMO_VENV/bin/python" ]; then
    "$PYTHON" -m venv "$DEMO_VENV"
fi
echo "installing dispatch-core into $DEMO_VENV" >&2
"$DEMO_VENV/bin/python" -m pip install -q ./dispatch-core
export XDG_STATE_HOME=${XDG_STATE_HOME:-$here/.demo-state}
rm -f "$XDG_STATE_HOME/demo-first-run-done"
D=$DEMO_VENV/bin/dispatch
echo "\$ dispatch backends"
$D backends
echo
echo "\$ dispatch plan --backend local --policy examples/demo/policy.toml"
$D plan --backend local --policy examples/demo/policy.toml
echo
echo "\$ dispatch submit --policy examples/demo/policy.toml --wait -- sh examples/demo/flaky-train.sh"
$D submit --policy examples/demo/policy.toml --interval 0.5 --wait -- sh examples/demo/flaky-train.sh 2>&1
job=$($D list --json | "$DEMO_VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)[0]["job_id"])')
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
