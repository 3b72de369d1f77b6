#!/usr/bin/env bash
# test.sh: set up everything (as root on a fresh Debian 12 machine: Slurm, PostgreSQL,
# the virtualenv) and run every test of every distribution. The one test command.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh services
export DISPATCH_TEST_POSTGRES=${DISPATCH_TEST_POSTGRES:-$(cat .venv/postgres-dsn)}
.venv/bin/ruff check .
# mypy --strict on every distribution's source, not only the core (issue 9)
for src in dispatch-core/src/dispatch dispatch-slurm/src/dispatch_slurm \
    dispatch-kubeflow/src/dispatch_kubeflow dispatch-testing/src/dispatch_testing \
    dispatch-slurm-testing/src/dispatch_slurm_testing \
    dispatch-kubeflow-testing/src/dispatch_kubeflow_testing; do
    .venv/bin/mypy --strict --no-error-summary "$src"
done
.venv/bin/python -m pytest "$@"
if [ $# -eq 0 ]; then
    # the conformance kit's live tier against the real Slurm started above (issue 5)
    .venv/bin/dispatch-conformance slurm --live -q
fi
