#!/usr/bin/env bash
# test.sh: set up everything (as root on a fresh Debian 12 machine: Slurm, PostgreSQL,
# a Kubernetes control plane built from Go modules, the virtualenv) and run every test of
# every distribution. The one test command.
#
# With pytest arguments it runs only those (and no live kit, no Kubernetes control plane;
# a -m of your own replaces the one below, e.g. -m "live(server='kubeflow')" once it is up).
#
# Without arguments, after the linters, everything runs side by side, each on daemons of
# its own, since most of it waits on daemons and only the offline tests need the CPU:
#   - the offline tests (-m "not live"), in two pytest runs: dispatch-core's first areas in
#     the foreground, every other test path beside them (they mostly wait on the
#     processes, servers and databases they start, and each uses its own);
#   - Slurm 22.05: dispatch-slurm's live tests, then the conformance kit's live tier (the
#     kit preempts, loses nodes and stops slurmctld: it cannot share a cluster with them);
#   - Slurm 25.11.7: the flapping-controller test, which stops and freezes slurmctld
#     (on 22.05 after the kit when 25.11.7 cannot run here);
#   - Slurm 26.05.3 and 24.11.7: the kit and the live tests of what changed between
#     releases, each on its own cluster;
#   - Kubeflow: the control plane, its live tier and the kit, and beside them the kit on
#     the older Trainer releases, each on a plane of its own.
# Every part but the offline tests writes a log, printed whole once all have ended.
set -euo pipefail
# Started with SIGINT ignored (`cmd &` from a script, a service manager), every process
# below would inherit that, and the tests that stop a command with Ctrl-C would wait in
# vain: start over with the default (bash cannot reset a signal ignored on entry).
ignored=$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status 2>/dev/null || echo 0)
if [ $((16#${ignored:-0} & 2)) -ne 0 ] && [ -z "${DISPATCH_TEST_SIGNALS_RESET:-}" ]; then
    export DISPATCH_TEST_SIGNALS_RESET=1
    exec python3 -c 'import os, signal, sys
for name in ("SIGINT", "SIGQUIT", "SIGPIPE", "SIGXFSZ"):  # Python ignores the last two
    signal.signal(getattr(signal, name), signal.SIG_DFL)
os.execvp("bash", ["bash", *sys.argv[1:]])' "$0" "$@"
fi
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
KUBE=dispatch-kubeflow-testing/scripts/start-kube.sh
SLURM=dispatch-slurm/scripts/start-slurm.sh
SLURM_MATRIX="26.05.3 24.11.7"
FLAP_SLURM=25.11.7
FLAP_TESTS=test_slurm_live_flapping.py
OLD_TRAINERS="v2.0.1 v2.1.0"
everything=$([ $# -eq 0 ] && echo yes || echo no)
say() { printf '[test +%ss] %s\n' "$SECONDS" "$*" >&2; }
usable() { SLURM_VERSION=$1 bash "$SLURM" env >/dev/null 2>&1; }

if [ "$everything" = yes ]; then
    # The live Kubeflow tier's control plane is compiled from Go modules: a cold build is
    # the longest step of a fresh machine, so it starts first, detached, at the lowest
    # priority in its own scheduling group, and overlaps everything below. On a warm
    # machine (binaries cached under /var/cache/dispatch/kube) it returns at once.
    bash "$KUBE" build --background
    # The Slurm releases besides Debian's 22.05 that the live tier runs on here (the
    # newest and the oldest one still supported, and 25.11.7 for the flapping test; every
    # live test runs on each in `tox -e slurm-matrix`): built from their release tarballs,
    # also detached at the lowest priority. Without the tarballs the matrix below says so
    # in one line and skips them.
    for version in $SLURM_MATRIX $FLAP_SLURM; do
        if usable "$version"; then
            SLURM_VERSION=$version bash "$SLURM" build --background
        fi
    done
fi
bash scripts/setup.sh services
export DISPATCH_TEST_POSTGRES=${DISPATCH_TEST_POSTGRES:-$(cat .venv/postgres-dsn)}
.venv/bin/ruff check --no-cache .
.venv/bin/ruff format --check --no-cache .
# mypy --strict on every distribution's source, not only the core
for src in dispatch-core/src/dispatch dispatch-slurm/src/dispatch_slurm \
    dispatch-kubeflow/src/dispatch_kubeflow dispatch-testing/src/dispatch_testing \
    dispatch-slurm-testing/src/dispatch_slurm_testing \
    dispatch-kubeflow-testing/src/dispatch_kubeflow_testing; do
    .venv/bin/mypy --strict --no-error-summary "$src"
done
# Live tests carry the marker live(server=...). With arguments: the offline tests and the
# Slurm ones (against the Slurm started above); the Kubeflow ones need the control plane.
if [ "$everything" = no ]; then
    exec .venv/bin/python -m pytest --durations=20 -m "not live(server='kubeflow')" "$@"
fi

logs=()
pids=()
# background NAME COMMAND...: run COMMAND with its output in a log of its own; in a
# subshell, since bash runs a simple command put in the background with SIGINT ignored,
# and tests interrupt the commands they start with SIGINT (Ctrl-C)
background() {
    local name=$1 log
    shift
    log=$(mktemp "/tmp/dispatch-test-$name.XXXXXX.log")
    say "$name: started (log $log)"
    ("$@") >"$log" 2>&1 &
    pids+=($!)
    logs+=("$name:$log")
}

kube_part() {
    set -e
    say "Kubernetes control plane (waits for the build started above)"
    bash "$KUBE"
    # the older Trainer releases the kit also runs on (below), built now, in the background:
    # after the default plane's build they share its compiled Kubernetes in the Go cache
    # (started beside it on a cold machine, all three would compile Kubernetes at once)
    for trainer in $OLD_TRAINERS; do
        DISPATCH_KUBE_TRAINER=$trainer bash "$KUBE" build --background
    done
    # their kits run beside the default plane's live tier and kit (each plane its own
    # state and ports), with their output kept in a log printed after
    local old_log old_pid rc=0 old_rc=0
    old_log=$(mktemp /tmp/dispatch-test-kube-old.XXXXXX.log)
    (old_trainers_part) >"$old_log" 2>&1 &
    old_pid=$!
    say "Kubeflow live tier: the adapter's live tests and the promises on the real controllers"
    .venv/bin/python -m pytest -q --durations=20 -m "live(server='kubeflow')" \
        dispatch-kubeflow/tests dispatch-kubeflow-testing/tests || rc=$?
    say "the conformance kit's live tier against the real control plane"
    .venv/bin/dispatch-conformance kubeflow --live -q || rc=$?
    wait "$old_pid" || old_rc=$?
    say "the older Trainer releases' kits (exit $old_rc):"
    cat "$old_log"
    [ "$rc" = 0 ] && [ "$old_rc" = 0 ]
}

# Trainer 2.0.1 and 2.1.0: the kit alone, each on a plane of its own beside the default
# one (own state and ports), one after the other, each stopped after
old_trainers_part() {
    set -e
    local offset=6000 rc
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
}

# The flapping test stops and freezes slurmctld: on a cluster of its own, or on 22.05
# once nothing else uses it
flap_here=$(usable "$FLAP_SLURM" && echo "$FLAP_SLURM" || echo 22.05)

slurm_2205_part() {
    local rc=0
    say "Slurm 22.05: dispatch-slurm's live tests"
    .venv/bin/python -m pytest --durations=20 -m "live(server='slurm')" \
        --ignore="dispatch-slurm/tests/$FLAP_TESTS" || rc=1
    say "Slurm 22.05: the conformance kit's live tier"
    .venv/bin/dispatch-conformance slurm --live -q || rc=1
    if [ "$flap_here" = 22.05 ]; then
        say "Slurm 22.05: the flapping test ($FLAP_SLURM cannot run here)"
        .venv/bin/python -m pytest --durations=20 -m "live(server='slurm')" \
            "dispatch-slurm/tests/$FLAP_TESTS" || rc=1
    fi
    return $rc
}

# the offline tests' first half, run in the foreground below; the second half is the
# rest of every test path (a new one lands there). The areas are chosen so the halves'
# test durations are about even (905 s and 909 s, summed per area from one run).
offline_first="dispatch-core/tests/cli dispatch-core/tests/client dispatch-core/tests/config
    dispatch-core/tests/core dispatch-core/tests/docs dispatch-core/tests/endings
    dispatch-core/tests/functions dispatch-core/tests/notify dispatch-core/tests/plugins
    dispatch-core/tests/reliability"
offline_rest=()
for path in $offline_first; do offline_rest+=("--ignore=$path"); done

background kubeflow kube_part
background slurm-22.05 slurm_2205_part
background offline-rest .venv/bin/python -m pytest --durations=20 -m "not live" \
    "${offline_rest[@]}"
if [ "$flap_here" != 22.05 ]; then
    background "slurm-$FLAP_SLURM" env PYTHON=.venv/bin/python MATRIX_TESTS=$FLAP_TESTS \
        MATRIX_KIT=no MATRIX_PYTEST_ARGS=--durations=20 \
        bash dispatch-slurm/scripts/slurm-matrix.sh "$FLAP_SLURM"
fi
# The other Slurm releases: each its own 4-node cluster beside the 22.05 one (own ports,
# state and job ids), running the live kit and the live tests of what changed between
# releases (the endings, multi-node endings and lost nodes, the warning, scripts, arrays);
# every live test runs on each release in `tox -e slurm-matrix`.
matrix_tests="test_slurm_live_endings.py test_slurm_live_multinode.py test_slurm_live_node.py
    test_slurm_live_warning.py test_slurm_live_script.py test_slurm_live_arrays.py"
for version in $SLURM_MATRIX; do
    background "slurm-$version" env PYTHON=.venv/bin/python MATRIX_TESTS="$matrix_tests" \
        MATRIX_PYTEST_ARGS=--durations=20 bash dispatch-slurm/scripts/slurm-matrix.sh \
        "$version"
done

say "offline tests: dispatch-core's first areas"
offline_rc=0
.venv/bin/python -m pytest --durations=20 -m "not live" $offline_first || offline_rc=$?
say "offline tests, first areas: exit $offline_rc; waiting for the other parts"
results=("offline-first: exit $offline_rc")
failed=$offline_rc
for i in "${!pids[@]}"; do
    rc=0
    wait "${pids[$i]}" || rc=$?
    name=${logs[$i]%%:*}
    say "$name output (${logs[$i]#*:}):"
    cat "${logs[$i]#*:}"
    results+=("$name: exit $rc")
    [ "$rc" = 0 ] || failed=1
done
say "results: ${results[*]}"
[ "$failed" = 0 ]
