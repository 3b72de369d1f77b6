#!/usr/bin/env bash
# setup.sh: everything dispatch's tests and demo need, on a fresh Debian 12 machine.
# Idempotent; safe to run again.
#
#   bash scripts/setup.sh            .venv with every distribution (editable) + test tools
#   bash scripts/setup.sh services   also, as root: PostgreSQL, a 4-node Slurm on this host
#                                    (munge, MariaDB, slurmdbd, slurmctld, 4 slurmd), started;
#                                    torch in a cached venv for the 2-node torch tests
#
# Environment: PYTHON (default python3), VENV (default .venv).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
say() { printf '[setup +%ss] %s\n' "$SECONDS" "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
    say "creating $VENV"
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --upgrade pip
say "installing the distributions (editable) and the test tools"
"$VENV/bin/python" -m pip install -q \
    -e "./dispatch-core[postgres,ui,functions]" -e ./dispatch-testing -e ./dispatch-slurm -e ./dispatch-kubeflow \
    -e ./dispatch-slurm-testing -e ./dispatch-kubeflow-testing \
    -e ./examples/dispatch-example \
    pytest hypothesis "ruff==0.17.6" "mypy==2.4.1" build selenium

# dispatch ui's browser tests drive Debian's headless Chromium through its chromedriver
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    if [ "$(id -u)" = 0 ]; then
        say "chromium and chromium-driver (the browser tests of dispatch ui)"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
    else
        say "chromium is missing: the browser tests will fail; as root: apt-get install chromium chromium-driver"
    fi
fi

if [ "${1:-}" = services ]; then
    if [ "$(id -u)" != 0 ]; then
        say "services need root (apt-get, daemons); run: sudo bash scripts/setup.sh services"
        exit 2
    fi
    say "PostgreSQL"
    DISPATCH_TEST_POSTGRES=$(bash .ci/start-postgres.sh)
    echo "$DISPATCH_TEST_POSTGRES" > "$VENV/postgres-dsn"
    say "Slurm (4 nodes on this host)"
    bash dispatch-slurm/scripts/start-slurm.sh >&2
    say "torch for the live 2-node torch.distributed tests (wheels cached outside the checkout)"
    bash dispatch-slurm-testing/src/dispatch_slurm_testing/install-torch.sh >/dev/null
fi
say "done"
