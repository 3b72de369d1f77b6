#!/usr/bin/env bash
# test.sh: set up everything (as root on a fresh Debian 12 machine: Slurm, PostgreSQL,
# a Kubernetes control plane built from Go modules, the virtualenv) and run every test of
# every distribution. The one test command.
#
# With pytest arguments it runs only those (and no live kit, no Kubernetes control plane;
# a -m of your own replaces the one below, e.g. -m "live(server='kubeflow')" once it is up).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
KUBE=dispatch-kubeflow-testing/scripts/start-kube.sh
SLURM=dispatch-slurm/scripts/start-slurm.sh
SLURM_MATRIX="26.05.3 24.11.7"
OLD_TRAINERS="v2.0.1 v2.1.0"
everything=$([ $# -eq 0 ] && echo yes || echo no)
say() { printf '[test +%ss] %s\n' "$SECONDS" "$*" >&2; }

if [ "$everything" = yes ]; then
    # The live Kubeflow tier's control plane (issue 11) is compiled from Go modules: a cold
    # build is the longest step of a fresh machine, so it starts first, detached, at the
    # lowest priority in its own scheduling group, and overlaps everything below. On a warm
    # machine (binaries cached under /var/cache/dispatch/kube) it returns at once.
    bash "$KUBE" build --background
    # The Slurm releases besides Debian's 22.05 that the live tier runs on here (the
    # newest and the oldest one still supported; 25.11.7 runs in `tox -e slurm-matrix`):
    # built from their release tarballs, also detached at the lowest priority. Without
    # the tarballs the matrix below says so in one line and skips them.
    for version in $SLURM_MATRIX; do
        if SLURM_VERSION=$version bash "$SLURM" env >/dev/null 2>&1; then
            SLURM_VERSION=$version bash "$SLURM" build --background
        fi
    done
fi
bash scripts/setup.sh services
export DISPATCH_TEST_POSTGRES=${DISPATCH_TEST_POSTGRES:-$(cat .venv/postgres-dsn)}
.venv/bin/ruff check --no-cache .
.venv/bin/ruff format --check --no-cache .
# mypy --strict on every distribution's source, not only the core (issue 9)
for src in dispatch-core/src/dispatch dispatch-slurm/src/dispatch_slurm \
    dispatch-kubeflow/src/dispatch_kubeflow dispatch-testing/src/dispatch_testing \
    dispatch-slurm-testing/src/dispatch_slurm_testing \
    dispatch-kubeflow-testing/src/dispatch_kubeflow_testing; do
    .venv/bin/mypy --strict --no-error-summary "$src"
done
# Live tests carry the marker live(server=...). The Slurm ones run here, against the Slurm
# started above; the Kubeflow ones need the control plane, so they run after, below.
.venv/bin/python -m pytest --durations=20 -m "not live(server='kubeflow')" "$@"
[ "$everything" = yes ] || exit 0

# The live tiers. The Slurm kit (against the Slurm started above) and the Kubeflow live
# tier (against the real control plane) use different machines' worth of daemons and
# mostly wait on them, so they run side by side; the Kubeflow tier's output is kept in a
# log and printed after, so each reads whole.
kube_log=$(mktemp /tmp/dispatch-kube-live.XXXXXX.log)
(
    set -e
    say "Kubernetes control plane (waits for the build started above)"
    bash "$KUBE"
    # the older Trainer releases the kit also runs on (below), built now, in the background,
    # while the live tier runs: after the default plane's build they share its compiled
    # Kubernetes in the Go cache (started beside it on a cold machine, all three would
    # compile Kubernetes at once)
    for trainer in $OLD_TRAINERS; do
        DISPATCH_KUBE_TRAINER=$trainer bash "$KUBE" build --background
    done
    say "Kubeflow live tier: the adapter's live tests and the promises on the real controllers"
    .venv/bin/python -m pytest -q -p no:cacheprovider -m "live(server='kubeflow')" \
        dispatch-kubeflow/tests dispatch-kubeflow-testing/tests
    say "the conformance kit's live tier against the real control plane"
    .venv/bin/dispatch-conformance kubeflow --live -q
    # Trainer 2.0.1 and 2.1.0: the kit alone, each on a plane of its own beside the
    # default one (own state and ports), stopped after
    offset=6000
    for trainer in $OLD_TRAINERS; do
        say "the conformance kit's live tier on Trainer $trainer"
        export DISPATCH_KUBE_TRAINER=$trainer DISPATCH_KUBE_PORT_OFFSET=$offset \
            DISPATCH_KUBE_RUN=/var/tmp/dispatch-kube-$trainer
        bash "$KUBE" start
        rc=0
        .venv/bin/dispatch-conformance kubeflow --live -q || rc=$?
        bash "$KUBE" stop
        unset DISPATCH_KUBE_TRAINER DISPATCH_KUBE_PORT_OFFSET DISPATCH_KUBE_RUN
        [ "$rc" = 0 ]
        offset=$((offset + 1000))
    done
) >"$kube_log" 2>&1 &
kube_pid=$!
# The other Slurm releases, side by side: each its own 4-node cluster beside the 22.05 one
# (own ports, state and job ids), running the live kit and the live tests of what changed
# between releases (the endings, multi-node endings and lost nodes, the warning, scripts,
# arrays); every live test runs on each release in `tox -e slurm-matrix`. Output is kept in
# a log per release, like the Kubeflow tier's.
matrix_tests="test_slurm_live_endings.py test_slurm_live_multinode.py test_slurm_live_node.py
    test_slurm_live_warning.py test_slurm_live_script.py test_slurm_live_arrays.py"
matrix_pids=()
matrix_logs=()
for version in $SLURM_MATRIX; do
    log=$(mktemp "/tmp/dispatch-slurm-$version.XXXXXX.log")
    PYTHON=.venv/bin/python MATRIX_TESTS=$matrix_tests \
        bash dispatch-slurm/scripts/slurm-matrix.sh "$version" >"$log" 2>&1 &
    matrix_pids+=($!)
    matrix_logs+=("$log")
done
say "the conformance kit's live tier against the real Slurm 22.05 (issue 5)"
slurm_rc=0
.venv/bin/dispatch-conformance slurm --live -q || slurm_rc=$?
kube_rc=0
wait "$kube_pid" || kube_rc=$?
matrix_rc=0
for pid in "${matrix_pids[@]}"; do wait "$pid" || matrix_rc=1; done
say "Kubeflow live tier output:"
cat "$kube_log"
for log in "${matrix_logs[@]}"; do
    say "Slurm live tier output ($log):"
    cat "$log"
done
say "live Slurm 22.05 kit: exit $slurm_rc; live Kubeflow tier: exit $kube_rc;" \
    "live Slurm $SLURM_MATRIX: exit $matrix_rc"
[ "$slurm_rc" = 0 ] && [ "$kube_rc" = 0 ] && [ "$matrix_rc" = 0 ]
