#!/usr/bin/env bash
# slurm-matrix.sh: dispatch-slurm's live tier and the conformance kit's live tier on each
# Slurm release start-slurm.sh runs, one after the other, each on its own 4-node cluster
# (own ports, state and config; the built ones beside the 22.05 one).
#
#   slurm-matrix.sh [VERSION...]     default: 22.05 24.11.7 25.11.7 26.05.3
#
# A release built from a tarball is skipped, in one line, when the tarball is absent
# (DISPATCH_SLURM_SOURCES, default shared/slurm/src beside the checkout). Prints one
# result line per release and exits non-zero when any release failed.
#
# Environment: PYTHON (default: python, e.g. tox's), CONFORMANCE (default:
# dispatch-conformance beside PYTHON), MATRIX_TESTS (the live test files or node ids to
# run, relative to dispatch-slurm/tests; default: all of them), MATRIX_PYTEST_ARGS (more
# pytest arguments), MATRIX_KIT (no: the live tests only, without the live kit).
set -uo pipefail

HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ROOT=$(cd "$HERE/../.." && pwd)
START=$HERE/start-slurm.sh
PYTHON=${PYTHON:-python}
CONFORMANCE=${CONFORMANCE:-$(dirname "$(command -v "$PYTHON")")/dispatch-conformance}
VERSIONS=("$@")
((${#VERSIONS[@]})) || VERSIONS=(22.05 24.11.7 25.11.7 26.05.3)

say() { printf '[slurm-matrix] %s\n' "$*"; }
kit_words=" and live kit"
[[ ${MATRIX_KIT:-yes} != no ]] || kit_words=
results=()
failed=0

# start every build first, in the background at the lowest priority: the 22.05 run
# overlaps them
for version in "${VERSIONS[@]}"; do
  [[ $version == 22.05 ]] && continue
  SLURM_VERSION=$version bash "$START" env >/dev/null 2>&1 && SLURM_VERSION=$version bash "$START" build --background || true
done

for version in "${VERSIONS[@]}"; do
  started=$SECONDS
  if [[ $version != 22.05 ]] && ! SLURM_VERSION=$version bash "$START" env >/dev/null 2>&1; then
    line=$(SLURM_VERSION=$version bash "$START" env 2>&1 | tail -n 1)
    results+=("$version: skipped: $line")
    say "$version: skipped: $line"
    continue
  fi
  say "$version: starting its cluster (builds it first when not cached)"
  if ! SLURM_VERSION=$version bash "$START" start; then
    results+=("$version: FAILED to start (see above)")
    failed=1
    continue
  fi
  (
    # shellcheck disable=SC1090
    eval "$(SLURM_VERSION=$version bash "$START" env)"
    rc=0
    # shellcheck disable=SC2086
    tests=()
    for t in ${MATRIX_TESTS:-.}; do tests+=("$ROOT/dispatch-slurm/tests/$t"); done
    "$PYTHON" -m pytest -q -p no:cacheprovider -m "live(server='slurm')" "${tests[@]}" \
      ${MATRIX_PYTEST_ARGS:-} || rc=1
    if [[ ${MATRIX_KIT:-yes} != no ]]; then
      "$CONFORMANCE" slurm --live -q || rc=$((rc + 2))
    fi
    exit $rc
  )
  rc=$?
  case $rc in
    0) outcome="passed: live tests$kit_words" ;;
    1) outcome="FAILED: live tests${kit_words:+ (the live kit passed)}" ;;
    2) outcome="FAILED: live kit (the live tests passed)" ;;
    *) outcome="FAILED: live tests and live kit" ;;
  esac
  ((rc == 0)) || failed=1
  results+=("$version: $outcome in $((SECONDS - started)) s")
done

say "results:"
for line in "${results[@]}"; do say "  $line"; done
exit $failed
