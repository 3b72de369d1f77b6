#!/usr/bin/env bash
# A real Kubernetes control plane on loopback for dispatch-kubeflow's live tier: etcd,
# kube-apiserver, kube-controller-manager, kube-scheduler, KWOK (the kubelet's stand-in),
# the JobSet controller, the Kubeflow Trainer controller-manager and (with Trainer v2.2) the
# Kueue controller-manager, all built from Go modules by the wrapper modules under
# scripts/gomod/ and started as local processes.
#
#   start-kube.sh            build what is missing, start what is not running, wait until ready
#   start-kube.sh build      only build (once per version set, into the cache)
#   start-kube.sh stop       stop every process this script started (state is kept)
#   start-kube.sh reset      stop and delete the state (etcd data, certificates)
#   start-kube.sh env        print the variables a client needs (KUBECONFIG=...)
#   start-kube.sh apiserver stop|start|freeze|thaw
#                            this run dir's kube-apiserver only (the other processes and
#                            etcd's state stay): stop (SIGTERM, SIGKILL after 5 s; a
#                            frozen one is thawed first), start it again and wait until it
#                            is ready (a frozen one is thawed), freeze (SIGSTOP: its
#                            sockets stay open, calls time out), thaw (SIGCONT)
#
# Idempotent: a second run with everything up only checks it and prints the same env.
# Fails loudly: any step that does not work stops the script with what failed and where
# the log is. Prints how long building and starting took.
#
# Where things go (override by environment):
#   DISPATCH_KUBE_CACHE  build cache, outside the checkout (default /var/cache/dispatch/kube):
#                        gomod/ (GOMODCACHE), gocache/ (GOCACHE), <key>/bin/ (binaries)
#   DISPATCH_KUBE_RUN    runtime state (default /var/tmp/dispatch-kube): pki/, etcd/, logs/,
#                        kubeconfig, endpoint.env
#   DISPATCH_KUBE_PORT_OFFSET  added to every port (default 0): a second instance beside the
#                        default one needs its own DISPATCH_KUBE_RUN and an offset
#   DISPATCH_KUBE_JOBS   parallel compile jobs (default 2), always under nice -n 10
#   DISPATCH_KUBE_KUEUE_PODS_READY_TIMEOUT  Kueue's waitForPodsReady timeout in seconds
#                        (default 30; the Trainer v2.2 plane runs Kueue v0.17.0 with the
#                        queues install.py's kueue_setup names)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOMOD="$HERE/gomod"
CACHE="${DISPATCH_KUBE_CACHE:-/var/cache/dispatch/kube}"
RUN="${DISPATCH_KUBE_RUN:-/var/tmp/dispatch-kube}"
JOBS="${DISPATCH_KUBE_JOBS:-2}"

K8S_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
KWOK_VERSION=v0.8.0
# The Trainer version (DISPATCH_KUBE_TRAINER; the adapter claims 2.0, 2.1 and 2.2), each with
# the JobSet its release requires (its go.mod; but see v2.0.1) and its own wrapper; everything else
# is shared. v2.0.x has no configuration file and always runs its own cert rotator.
TRAINER_VERSION="${DISPATCH_KUBE_TRAINER:-v2.2.0}"
case "$TRAINER_VERSION" in
  v2.2.0) JOBSET_VERSION=v0.11.1 JOBSET_DIR=jobset TRAINER_DIR=trainer TRAINER_STYLE=config ;;
  v2.1.0) JOBSET_VERSION=v0.10.1 JOBSET_DIR=jobset-v0.10.1 TRAINER_DIR=trainer-v2.1.0 TRAINER_STYLE=config ;;
  # (v2.0.1's release pairs JobSet v0.8.2; it runs here against v0.11.1, whose v1alpha2 API
  # is a superset: building a third JobSet did not fit the machine's time)
  v2.0.1) JOBSET_VERSION=v0.11.1 JOBSET_DIR=jobset TRAINER_DIR=trainer-v2.0.1 TRAINER_STYLE=rotator ;;
  *) echo "start-kube: DISPATCH_KUBE_TRAINER=$TRAINER_VERSION is not a version this script builds (v2.2.0, v2.1.0, v2.0.1)" >&2; exit 1 ;;
esac
# Kueue v0.17.0 is the release built against Trainer v2.2.0 and JobSet v0.11.1 (its go.mod):
# its TrainJob integration compiles the Trainer's own runtime code in, so it runs with the
# v2.2 plane only; the older planes run without Kueue.
KUEUE_VERSION=""
[[ "$TRAINER_VERSION" == v2.2.0 ]] && KUEUE_VERSION=v0.17.0

# Every port this control plane listens on, each plus DISPATCH_KUBE_PORT_OFFSET (default 0),
# so a second instance (its own DISPATCH_KUBE_RUN) runs beside the default one.
OFFSET="${DISPATCH_KUBE_PORT_OFFSET:-0}"
[[ "$OFFSET" =~ ^[0-9]+$ ]] && ((OFFSET <= 40000)) \
  || { echo "start-kube: DISPATCH_KUBE_PORT_OFFSET must be a whole number 0..40000, not '$OFFSET'" >&2; exit 1; }
ETCD_PORT=$((23790 + OFFSET))
ETCD_PEER_PORT=$((23800 + OFFSET))
API_PORT=$((16443 + OFFSET))
KCM_PORT=$((16457 + OFFSET))
SCHED_PORT=$((16459 + OFFSET))
JOBSET_WEBHOOK_PORT=$((19443 + OFFSET))
JOBSET_HEALTH_PORT=$((18081 + OFFSET))
TRAINER_WEBHOOK_PORT=$((19444 + OFFSET))
TRAINER_HEALTH_PORT=$((18082 + OFFSET))
KUEUE_WEBHOOK_PORT=$((19445 + OFFSET))
KUEUE_HEALTH_PORT=$((18083 + OFFSET))
declare -A PORTS_OF=(
  [etcd]="$ETCD_PORT $ETCD_PEER_PORT" [kube-apiserver]="$API_PORT"
  [kube-controller-manager]="$KCM_PORT" [kube-scheduler]="$SCHED_PORT" [kwok]=""
  [jobset-controller]="$JOBSET_WEBHOOK_PORT $JOBSET_HEALTH_PORT"
  [trainer-controller-manager]="$TRAINER_WEBHOOK_PORT $TRAINER_HEALTH_PORT"
  [kueue-controller-manager]="$KUEUE_WEBHOOK_PORT $KUEUE_HEALTH_PORT"
)
NODES="${DISPATCH_KUBE_NODES:-4}"
# Kueue's waitForPodsReady timeout, in seconds (written into its configuration)
KUEUE_PODS_READY_TIMEOUT="${DISPATCH_KUBE_KUEUE_PODS_READY_TIMEOUT:-30}"

export GOMODCACHE="$CACHE/gomod" GOCACHE="$CACHE/gocache" GOTOOLCHAIN=local GOFLAGS=-mod=readonly
export GOPROXY="${GOPROXY:-https://proxy.golang.org,direct}"

# die may run inside a probe whose output is discarded: it writes to the saved stderr (fd 3)
exec 3>&2
die() { echo "start-kube: $*" >&3; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

command -v go >/dev/null || die "no go command on PATH (Go 1.26 is needed)"
command -v openssl >/dev/null || die "no openssl (apt-get install openssl)"
GO_VERSION="$(go env GOVERSION)"

# The cache key: every pinned version and the exact module graph (go.sum) of each wrapper.
# (the five wrapper dirs named in this order, the order the key has always hashed them in;
# Kueue's last, so a plane without Kueue keeps the key it had)
KEY_DIRS=(etcd "$JOBSET_DIR" kubernetes kwok "$TRAINER_DIR")
[[ -n "$KUEUE_VERSION" ]] && KEY_DIRS+=(kueue)
KEY_HASH="$(cd "$GOMOD" && cat "${KEY_DIRS[@]/%//go.mod}" "${KEY_DIRS[@]/%//go.sum}" | sha256sum | cut -c1-10)"
KEY="k8s${K8S_VERSION#v}-etcd${ETCD_VERSION#v}-kwok${KWOK_VERSION#v}-jobset${JOBSET_VERSION#v}-trainer${TRAINER_VERSION#v}${KUEUE_VERSION:+-kueue${KUEUE_VERSION#v}}-${GO_VERSION}-${KEY_HASH}"
BIN="$CACHE/$KEY/bin"

# name  wrapper-dir  package  extra-ldflags
COMPONENTS=(
  "etcd|etcd|go.etcd.io/etcd/server/v3|"
  "kube-apiserver|kubernetes|k8s.io/kubernetes/cmd/kube-apiserver|k8s"
  "kube-controller-manager|kubernetes|k8s.io/kubernetes/cmd/kube-controller-manager|k8s"
  "kube-scheduler|kubernetes|k8s.io/kubernetes/cmd/kube-scheduler|k8s"
  "kwok|kwok|sigs.k8s.io/kwok/cmd/kwok|"
  "jobset-controller|$JOBSET_DIR|sigs.k8s.io/jobset|"
  "trainer-controller-manager|$TRAINER_DIR|github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager|"
)
[[ -n "$KUEUE_VERSION" ]] && COMPONENTS+=("kueue-controller-manager|kueue|sigs.k8s.io/kueue/cmd/kueue|")

k8s_ldflags() {
  local minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
  local out="-s -w" key val
  for kv in "gitVersion=$K8S_VERSION" "gitMajor=1" "gitMinor=$minor" \
            "gitTreeState=clean" "buildDate=1970-01-01T00:00:00Z"; do
    key="${kv%%=*}"; val="${kv#*=}"
    out+=" -X k8s.io/client-go/pkg/version.$key=$val -X k8s.io/component-base/version.$key=$val"
  done
  echo "$out"
}

stamp_of() {  # name dir pkg: what a binary is built from (a binary is reused only when equal)
  local wrapper
  wrapper="$(cat "$GOMOD/$2/go.mod" "$GOMOD/$2/go.sum" | sha256sum | cut -c1-16)"
  echo "$1 $3 wrapper=$2:$wrapper $GO_VERSION recipe=$RECIPE"
}

# How every binary is compiled (part of each binary's stamp: a change rebuilds). Static,
# no paths, no symbol tables or DWARF in the output.
RECIPE="cgo0-trimpath-sw"
NICE="${DISPATCH_KUBE_NICE:-10}"

build() {
  mkdir -p "$BIN" "$CACHE/logs"
  local start failed=() name dir pkg extra row
  start="$(now)"
  # one build per version set at a time: a second `build` or a `start` waits for the first
  exec 9>"$CACHE/$KEY.lock"
  if ! flock -n 9; then
    echo "start-kube: a build of $KEY is under way (status: $(cat "$CACHE/$KEY.status" 2>/dev/null)); waiting for it"
    flock 9
    echo "start-kube: the other build ended after $(took "$start") s"
  fi
  local token="${DISPATCH_KUBE_BUILD_TOKEN:-$$}"
  echo "running $token since $(date -u +%FT%TZ)" >"$CACHE/$KEY.status"

  # What is missing, by wrapper module (one `go build` per module builds all its binaries
  # in one action graph); a binary another key built from the same wrapper files and
  # recipe is linked, not rebuilt.
  local -A want=() pkgs=() ldf=()
  local order=() other
  for row in "${COMPONENTS[@]}"; do
    IFS='|' read -r name dir pkg extra <<<"$row"
    if [[ -x "$BIN/$name" ]]; then
      [[ -f "$BIN/.$name.stamp" ]] || stamp_of "$name" "$dir" "$pkg" >"$BIN/.$name.stamp"
      continue
    fi
    for other in "$CACHE"/*/bin/."$name".stamp; do
      [[ -f "$other" && -x "${other%/*}/$name" ]] || continue
      if [[ "$(cat "$other")" == "$(stamp_of "$name" "$dir" "$pkg")" ]]; then
        ln -f "${other%/*}/$name" "$BIN/$name" && cp "$other" "$BIN/.$name.stamp"
        echo "start-kube: $name: same wrapper and recipe as ${other%/bin/*}; linked"
        break
      fi
    done
    [[ -x "$BIN/$name" ]] && continue
    [[ -n "${want[$dir]:-}" ]] || order+=("$dir")
    want[$dir]+="$name "
    pkgs[$dir]+="$pkg "
    ldf[$dir]="-s -w"
    [[ "$extra" == k8s ]] && ldf[$dir]="$(k8s_ldflags)"
  done
  if ((${#order[@]} == 0)); then
    echo "ok $token $(date -u +%FT%TZ)" >"$CACHE/$KEY.status"
    return 0
  fi

  # Downloads are network-bound and compiling is CPU-bound: fetch every module's graph at
  # once, in the background, while the first modules compile.
  local -A dl=() dl_t=()
  for dir in "${order[@]}"; do
    dl_t[$dir]="$(now)"
    (cd "$GOMOD/$dir" && nice -n "$NICE" go mod download && took "${dl_t[$dir]}" >"$CACHE/logs/download-$KEY-$dir.took") \
      >"$CACHE/logs/download-$KEY-$dir.log" 2>&1 &
    dl[$dir]=$!
  done
  local all="${want[*]}"
  echo "start-kube: building ${all//  / }for $KEY (nice $NICE, -p $JOBS; logs $CACHE/logs/*-$KEY-*.log)"

  local log t out names
  for dir in "${order[@]}"; do
    names="${want[$dir]% }"
    if ! wait "${dl[$dir]}"; then
      echo "start-kube: DOWNLOAD FAILED for $names (module $dir); the go command said:" >&2
      tail -n 20 "$CACHE/logs/download-$KEY-$dir.log" >&2
      failed+=($names)
      continue
    fi
    echo "start-kube: modules of $dir downloaded in $(cat "$CACHE/logs/download-$KEY-$dir.took") s (all modules' downloads ran at once)"
    log="$CACHE/logs/build-$KEY-$dir.log"
    t="$(now)"
    out="$BIN/.tmp-$dir"
    rm -rf "$out"; mkdir -p "$out"
    # shellcheck disable=SC2086  # the package list is words
    if (cd "$GOMOD/$dir" && CGO_ENABLED=0 nice -n "$NICE" go build -p "$JOBS" -trimpath \
          -ldflags "${ldf[$dir]}" -o "$out/" ${pkgs[$dir]}) >"$log" 2>&1; then
      for row in "${COMPONENTS[@]}"; do
        IFS='|' read -r name _ pkg _ <<<"$row"
        [[ " ${want[$dir]}" == *" $name "* ]] || continue
        local built="${pkg##*/}"
        [[ "$built" =~ ^v[0-9]+$ ]] && { built="${pkg%/*}"; built="${built##*/}"; }
        [[ -x "$out/$built" ]] || { echo "start-kube: go build wrote no $out/$built" >&2; failed+=("$name"); continue; }
        mv "$out/$built" "$BIN/$name"
        stamp_of "$name" "$dir" "$pkg" >"$BIN/.$name.stamp"
      done
      echo "start-kube: built $names in $(took "$t") s"
    else
      echo "start-kube: BUILD FAILED: $names (module $dir); the go command said:" >&2
      tail -n 20 "$log" >&2
      failed+=($names)
    fi
    rm -rf "$out"
  done
  # CPU seconds of everything the build ran (go, compile, link: children this shell waited
  # for), the figure that does not depend on how loaded the machine was
  # (`times` in this shell, not in a pipeline's subshell, which has no children yet)
  local cpu
  times >"$CACHE/logs/times-$KEY.$$"
  cpu="$(tail -n 1 "$CACHE/logs/times-$KEY.$$" | awk '{ n = 0; for (i = 1; i <= 2; i++) { split($i, t, /[ms]/); n += t[1] * 60 + t[2] } printf "%.0f", n }')"
  rm -f "$CACHE/logs/times-$KEY.$$"
  echo "start-kube: build of $KEY took $(took "$start") s wall, $cpu CPU s (binaries in $BIN; load $(cut -d' ' -f1-3 /proc/loadavg))"
  if ((${#failed[@]})); then
    echo "failed $token $(date -u +%FT%TZ): ${failed[*]}" >"$CACHE/$KEY.status"
    die "these components did not build (blocked): ${failed[*]}; logs in $CACHE/logs"
  fi
  echo "ok $token $(date -u +%FT%TZ)" >"$CACHE/$KEY.status"
}

build_background() {  # start `build` detached (nice 19), return once it holds the lock
  mkdir -p "$CACHE/logs"
  local log="$CACHE/logs/build-$KEY.log" token="bg-$$-$RANDOM" pid
  # setsid makes it its own session, hence (with the kernel's autogroup scheduling, on by
  # default) its own scheduling group, where a process's nice counts only against the
  # group's own processes: the group's nice is set too (/proc/self/autogroup), or the
  # build would take an equal share of the CPU from the tests it runs beside
  DISPATCH_KUBE_BUILD_TOKEN="$token" DISPATCH_KUBE_NICE=19 \
    setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 bash "$0" build' \
    "${BASH_SOURCE[0]}" >"$log" 2>&1 </dev/null 3>&- 8>&- 9>&- &
  pid=$!
  for _ in $(seq 100); do
    grep -qs " $token " "$CACHE/$KEY.status" && break
    [[ -d "/proc/$pid" ]] || break
    sleep 0.1
  done
  echo "start-kube: building $KEY in the background (pid $pid, nice 19); log $log"
  echo "start-kube: \`start-kube.sh start\` waits for it; \`start-kube.sh build\` too"
}

# ---------------------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------------------
PKI="$RUN/pki"
LOGS="$RUN/logs"
PIDS="$RUN/pids"
KUBECONFIG_FILE="$RUN/kubeconfig"
API="https://127.0.0.1:$API_PORT"
INSTALL="$HERE/../src/dispatch_kubeflow_testing/live/install.py"
PYTHON="${DISPATCH_KUBE_PYTHON:-}"
if [[ -z "$PYTHON" ]]; then
  for candidate in "$HERE/../../.venv/bin/python" "$(command -v python3 || true)"; do
    [[ -x "$candidate" ]] && { PYTHON="$candidate"; break; }
  done
fi
# KWOK's flags. The nodes' address is 127.0.0.1: whatever the API server sends to a
# "kubelet" (logs, exec, proxy) stays on loopback, where nothing answers for it.
KWOK_ARGS=(--kubeconfig "$KUBECONFIG_FILE" --config "$RUN/kwok.yaml"
  --manage-nodes-with-label-selector dispatch.dev/kwok=managed
  --node-lease-duration-seconds 8 --cidr 10.244.0.0/16 --node-ip 127.0.0.1 --v WARN)
# Processes started in the order they must come up (and stopped in reverse).
PROCESSES=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok jobset-controller trainer-controller-manager)
[[ -n "$KUEUE_VERSION" ]] && PROCESSES+=(kueue-controller-manager)

mod_dir() {  # the module's own source tree in the module cache, as the Trainer's Makefile does
  (cd "$GOMOD/$1" && go list -m -f '{{.Dir}}' "$2")
}

running() {  # is the process we started under this name alive, and is it that program?
  # (by name, not by path: processes started from an older build of the cache keep
  # serving until `stop`; a new build never starts a second copy on the same ports)
  local pidfile="$PIDS/$1.pid" pid exe
  [[ -f "$pidfile" ]] || return 1
  pid="$(cat "$pidfile")"
  [[ -n "$pid" && -d "/proc/$pid" ]] || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [[ "${exe##*/}" == "$1" ]]
}

all_running() {
  local name
  for name in "${PROCESSES[@]}"; do running "$name" || return 1; done
}

port_free() {  # port: nobody listens on it (a clash with another instance fails here, loudly)
  ! (exec 2>/dev/null; echo >"/dev/tcp/127.0.0.1/$1")
}

check_key() {  # a run dir runs one version set: refuse another while it runs
  if [[ -f "$RUN/key" && "$(cat "$RUN/key")" != "$KEY" ]] && ! none_running; then
    die "$RUN runs $(cat "$RUN/key"); asked for $KEY (stop it first, or use another DISPATCH_KUBE_RUN)"
  fi
  echo "$KEY" >"$RUN/key"
}

none_running() {
  local name
  for name in "${PROCESSES[@]}"; do running "$name" && return 1; done
  return 0
}

check_offset() {  # this run dir's processes listen where they were started, not elsewhere
  local was
  if [[ -f "$RUN/port-offset" ]]; then
    was="$(cat "$RUN/port-offset")"
    if [[ "$was" != "$OFFSET" ]]; then
      local name
      for name in "${PROCESSES[@]}"; do
        running "$name" && die "$RUN was started with DISPATCH_KUBE_PORT_OFFSET=$was and is running; \
asked for $OFFSET (stop it first, or use another DISPATCH_KUBE_RUN)"
      done
    fi
  fi
  echo "$OFFSET" >"$RUN/port-offset"
}

launch() {  # name args...: start one process in its own session, log to $LOGS/name.log
  local name="$1"; shift
  if running "$name"; then return 0; fi
  local port
  for port in ${PORTS_OF[$name]}; do
    port_free "$port" || die "cannot start $name: port $port is taken by a process this run \
dir ($RUN) did not start; another instance? (set DISPATCH_KUBE_PORT_OFFSET and DISPATCH_KUBE_RUN)"
  done
  echo "start-kube: starting $name"
  # the daemons must not keep the build/start locks (fds 8, 9) or the saved stderr (3)
  (cd "$RUN" && exec setsid "$BIN/$name" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null 3>&- 8>&- 9>&-) &
  local pid=$!
  echo "$pid" >"$PIDS/$name.pid"
  # until the subshell has exec'd the program, /proc/$pid/exe is still bash (a loaded
  # machine shows it): wait for the exec, so that `running` means the program
  for _ in $(seq 100); do
    [[ -d "/proc/$pid" ]] || break
    [[ "$(readlink "/proc/$pid/exe" 2>/dev/null)" == */"$name" ]] && break
    sleep 0.05
  done
}

wait_for() {  # what seconds command...: poll until the command succeeds
  local what="$1" limit="$2" t; shift 2
  t="$(now)"
  until "$@" >/dev/null 2>&1; do
    if awk -v a="$t" -v b="$(now)" -v l="$limit" 'BEGIN { exit !(b - a > l) }'; then
      die "$what not ready after ${limit}s; see $LOGS/ (last lines below)
$(for f in "$LOGS"/*.log; do echo "== $f"; tail -n 8 "$f"; done)"
    fi
    sleep 0.3
  done
}

alive_and() {  # name command...: the process is alive and the probe answers
  local name="$1"; shift
  running "$name" || die "$name exited; last lines of $LOGS/$name.log:
$(tail -n 30 "$LOGS/$name.log")"
  "$@"
}

kcurl() { curl -sf --max-time 3 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$@"; }
probe() { curl -sfk --max-time 3 "$@"; }

cert() {  # name subject extensions: a key and a certificate signed by this run dir's CA
  openssl req -newkey rsa:2048 -nodes -keyout "$PKI/$1.key" -out "$PKI/$1.csr" \
    -subj "$2" 2>/dev/null
  printf '%s\n' "$3" >"$PKI/$1.ext"
  openssl x509 -req -in "$PKI/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -CAcreateserial -days 3650 -out "$PKI/$1.crt" -extfile "$PKI/$1.ext" 2>/dev/null
}

# What Trainer v2.0.x's rotator expects (its defaults: Service, namespace, Secret, the
# ValidatingWebhookConfiguration it injects the CA into, a fixed cert dir under /tmp)
TRAINER_ROTATOR_NS=kubeflow-system
TRAINER_ROTATOR_DNS="kubeflow-trainer-controller-manager.$TRAINER_ROTATOR_NS.svc"
TRAINER_ROTATOR_SECRET=kubeflow-trainer-webhook-cert
TRAINER_ROTATOR_WEBHOOK=validator.trainer.kubeflow.org
KUEUE_METRICS_CERTS=/etc/kueue/metrics/certs

make_pki() {
  mkdir -p "$PKI"
  [[ -f "$PKI/done" ]] || make_base_pki
  if [[ -n "$KUEUE_VERSION" && ! -f "$RUN/kueue-certs/tls.key" ]]; then
    # Kueue's internal cert management is off: it reads the script's certificate from
    # its webhook cert dir, as JobSet and the Trainer do
    mkdir -p "$RUN/kueue-certs"
    cp "$PKI/webhook.crt" "$RUN/kueue-certs/tls.crt"
    cp "$PKI/webhook.key" "$RUN/kueue-certs/tls.key"
  fi
  if [[ -n "$KUEUE_VERSION" && ! -f "$KUEUE_METRICS_CERTS/tls.key" ]]; then
    # with its cert management off, Kueue v0.17 loads a metrics certificate from a fixed
    # path at start (cmd/kueue/main.go) even with its metrics server off, and exits
    # without one: any certificate will do (a Secret's mount in a cluster)
    mkdir -p "$KUEUE_METRICS_CERTS"
    cp "$PKI/webhook.crt" "$KUEUE_METRICS_CERTS/tls.crt"
    cp "$PKI/webhook.key" "$KUEUE_METRICS_CERTS/tls.key"
  fi
  if [[ "$TRAINER_STYLE" == rotator && ! -f "$PKI/trainer-rotator.crt" ]]; then
    # Trainer v2.0.x keeps its own rotator on: it adopts a Secret whose CA is valid for
    # the name kubeflow-trainer-ca and whose certificate is valid for its Service name,
    # so the ones given to it name those (and 127.0.0.1, where the API server calls it)
    openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$PKI/trainer-rotator-ca.key" \
      -out "$PKI/trainer-rotator-ca.crt" -subj "/O=kubeflow-trainer/CN=kubeflow-trainer-ca" \
      -addext "subjectAltName=DNS:kubeflow-trainer-ca" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,digitalSignature,keyEncipherment" 2>/dev/null
    # (its rotator parses the CA key as PKCS#1 only)
    openssl rsa -in "$PKI/trainer-rotator-ca.key" -traditional -out "$PKI/trainer-rotator-ca.key" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout "$PKI/trainer-rotator.key" -out "$PKI/trainer-rotator.csr" \
      -subj "/CN=$TRAINER_ROTATOR_DNS" 2>/dev/null
    printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:$TRAINER_ROTATOR_DNS" "extendedKeyUsage=serverAuth" \
      >"$PKI/trainer-rotator.ext"
    openssl x509 -req -in "$PKI/trainer-rotator.csr" -CA "$PKI/trainer-rotator-ca.crt" \
      -CAkey "$PKI/trainer-rotator-ca.key" -CAcreateserial -days 3650 -out "$PKI/trainer-rotator.crt" \
      -extfile "$PKI/trainer-rotator.ext" 2>/dev/null
  fi
}

make_base_pki() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -keyout "$PKI/ca.key" -out "$PKI/ca.crt" \
    -subj "/CN=dispatch-kube-ca" 2>/dev/null
  cert apiserver "/CN=kube-apiserver" \
    "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth"
  cert admin "/O=system:masters/CN=dispatch-admin" "extendedKeyUsage=clientAuth"
  cert webhook "/CN=dispatch-kube-webhooks" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth"
  openssl genrsa -out "$PKI/sa.key" 2048 2>/dev/null
  openssl rsa -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null
  # Both controllers read tls.crt/tls.key from their webhook cert dir (cert management off).
  for dir in "$RUN/jobset-certs" "$RUN/trainer-tmp/k8s-webhook-server/serving-certs"; do
    mkdir -p "$dir"
    cp "$PKI/webhook.crt" "$dir/tls.crt"
    cp "$PKI/webhook.key" "$dir/tls.key"
  done
  touch "$PKI/done"
}

write_configs() {
  cat >"$KUBECONFIG_FILE" <<KC
apiVersion: v1
kind: Config
clusters:
- name: dispatch-kube
  cluster:
    server: $API
    certificate-authority: $PKI/ca.crt
users:
- name: dispatch-admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: dispatch-kube
  context: {cluster: dispatch-kube, user: dispatch-admin, namespace: default}
current-context: dispatch-kube
KC
  cat >"$RUN/jobset-config.yaml" <<CFG
apiVersion: config.jobset.x-k8s.io/v1alpha1
kind: Configuration
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
webhook:
  port: $JOBSET_WEBHOOK_PORT
  host: 127.0.0.1
  certDir: $RUN/jobset-certs
metrics:
  bindAddress: "0"
health:
  healthProbeBindAddress: 127.0.0.1:$JOBSET_HEALTH_PORT
CFG
  cat >"$RUN/trainer-config.yaml" <<CFG
apiVersion: config.trainer.kubeflow.org/v1alpha1
kind: Configuration
health:
  healthProbeBindAddress: 127.0.0.1:$TRAINER_HEALTH_PORT
  readinessEndpointName: readyz
  livenessEndpointName: healthz
metrics:
  bindAddress: "0"
  secureServing: false
webhook:
  port: $TRAINER_WEBHOOK_PORT
  host: 127.0.0.1
leaderElection:
  leaderElect: false
certManagement:
  enable: false
CFG
  cp "$HERE/kube/kwok-stages.yaml" "$RUN/kwok.yaml"
  [[ -n "$KUEUE_VERSION" ]] || return 0
  # Kueue: the TrainJob integration alone (the webhooks installed are that integration's
  # and Kueue's own objects'); waitForPodsReady with a short timeout and one requeue, so
  # a TrainJob whose pods never become ready is evicted (PodsReadyTimeout), requeued
  # once and then deactivated (RequeuingLimitExceeded) within a test's wait; the 10 s
  # backoff keeps it evicted long enough for a client's poll to see it. Only
  # TrainJobs with a queue-name label are Kueue's (manageJobsWithoutQueueName is off).
  cat >"$RUN/kueue-config.yaml" <<CFG
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$KUEUE_HEALTH_PORT
metrics:
  bindAddress: "0"
webhook:
  port: $KUEUE_WEBHOOK_PORT
  host: 127.0.0.1
  certDir: $RUN/kueue-certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
waitForPodsReady:
  timeout: ${KUEUE_PODS_READY_TIMEOUT}s
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffLimitCount: 1
    backoffBaseSeconds: 10
    backoffMaxSeconds: 20
integrations:
  frameworks:
  - trainer.kubeflow.org/trainjob
CFG
}

start() {
  local t0 t
  [[ -n "$PYTHON" ]] || die "no Python to install the manifests with (set DISPATCH_KUBE_PYTHON)"
  "$PYTHON" -c 'import yaml' 2>/dev/null || die "$PYTHON has no PyYAML (pip install pyyaml)"
  mkdir -p "$RUN" "$LOGS" "$PIDS"
  exec 8>"$RUN/start.lock"
  flock 8
  check_offset
  check_key
  t="$(now)"
  if all_running; then
    echo "start-kube: every process of $RUN is running; no build needed"
  else
    build
  fi
  local build_s; build_s="$(took "$t")"
  t0="$(now)"
  make_pki
  # KWOK reads its stages once: a running KWOK whose stages changed in the checkout is
  # restarted (it keeps no state; pods and nodes are the API server's)
  local kwok_changed=""
  if running kwok && { ! cmp -s "$HERE/kube/kwok-stages.yaml" "$RUN/kwok.yaml" \
      || [[ "$(cat "$RUN/kwok.args" 2>/dev/null)" != "${KWOK_ARGS[*]}" ]]; }; then
    kwok_changed=1
  fi
  write_configs
  echo "${KWOK_ARGS[*]}" >"$RUN/kwok.args"
  if [[ -n "$kwok_changed" ]]; then
    echo "start-kube: kwok-stages.yaml or kwok's flags changed since kwok started: restarting kwok"
    stop_one kwok
  fi
  local jobset_dir trainer_dir kueue_dir="" kueue_crds=() namespaces=()
  jobset_dir="$(mod_dir "$JOBSET_DIR" sigs.k8s.io/jobset)"
  trainer_dir="$(mod_dir "$TRAINER_DIR" github.com/kubeflow/trainer/v2)"
  if [[ -n "$KUEUE_VERSION" ]]; then
    kueue_dir="$(mod_dir kueue sigs.k8s.io/kueue)"
    kueue_crds=("$kueue_dir/config/components/crd/bases")
    namespaces=(--namespaces kueue-system)
  fi
  local secret=()
  if [[ "$TRAINER_STYLE" == rotator ]]; then
    secret=(--tls-secret "$TRAINER_ROTATOR_NS/$TRAINER_ROTATOR_SECRET" "$PKI/trainer-rotator-ca.crt"
            "$PKI/trainer-rotator-ca.key" "$PKI/trainer-rotator.crt" "$PKI/trainer-rotator.key")
  fi

  launch etcd --name dispatch-kube --data-dir "$RUN/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "dispatch-kube=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync --quota-backend-bytes 2147483648 --log-level warn
  wait_for etcd 30 alive_and etcd curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"

  launch_apiserver

  "$PYTHON" "$INSTALL" --kubeconfig "$KUBECONFIG_FILE" base \
    --crds "$jobset_dir/config/components/crd/bases" "$trainer_dir/manifests/base/crds" "${kueue_crds[@]}" \
    --nodes "$NODES" "${namespaces[@]}" "${secret[@]}" >>"$LOGS/install.log" 2>&1 || die "installing CRDs and nodes failed: $(tail -n 20 "$LOGS/install.log")"

  launch kube-controller-manager --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
    --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
    --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
    --use-service-account-credentials=false \
    --node-monitor-period 2s --node-monitor-grace-period 10s --node-startup-grace-period 20s \
    --concurrent-gc-syncs 5 --v 1
  launch kube-scheduler --kubeconfig "$KUBECONFIG_FILE" \
    --authentication-kubeconfig "$KUBECONFIG_FILE" --authorization-kubeconfig "$KUBECONFIG_FILE" \
    --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false --v 1
  launch kwok "${KWOK_ARGS[@]}"
  launch jobset-controller --kubeconfig "$KUBECONFIG_FILE" --config "$RUN/jobset-config.yaml" \
    --zap-log-level info
  local trainer_name=()
  if [[ "$TRAINER_STYLE" == config ]]; then
    # TMPDIR: controller-runtime's default webhook cert dir is $TMPDIR/k8s-webhook-server/serving-certs
    TMPDIR="$RUN/trainer-tmp" launch trainer-controller-manager --kubeconfig "$KUBECONFIG_FILE" \
      --config "$RUN/trainer-config.yaml"
  else
    # flags only; its rotator waits for the Secret to appear in its fixed cert dir (a
    # kubelet's volume mount in a cluster; written here: one v2.0.x instance per machine)
    local rotator_dir=/tmp/k8s-webhook-server/serving-certs
    mkdir -p "$rotator_dir"
    cp "$PKI/trainer-rotator-ca.crt" "$rotator_dir/ca.crt"
    cp "$PKI/trainer-rotator.crt" "$rotator_dir/tls.crt"
    cp "$PKI/trainer-rotator.key" "$rotator_dir/tls.key"
    TMPDIR=/tmp launch trainer-controller-manager --kubeconfig "$KUBECONFIG_FILE" \
      --leader-elect=false --metrics-bind-address 0 \
      --health-probe-bind-address "127.0.0.1:$TRAINER_HEALTH_PORT" \
      --webhook-server-port "$TRAINER_WEBHOOK_PORT"
    trainer_name=(--trainer-validating-name "$TRAINER_ROTATOR_WEBHOOK" --trainer-ca "$PKI/trainer-rotator-ca.crt")
  fi
  wait_for kube-controller-manager 60 alive_and kube-controller-manager probe "https://127.0.0.1:$KCM_PORT/healthz"
  wait_for kube-scheduler 60 alive_and kube-scheduler probe "https://127.0.0.1:$SCHED_PORT/healthz"
  wait_for jobset-controller 90 alive_and jobset-controller curl -sf --max-time 2 "http://127.0.0.1:$JOBSET_HEALTH_PORT/readyz"
  if [[ "$TRAINER_STYLE" == rotator ]]; then
    # its rotator reports ready only once it has injected its CA into its webhook
    # configuration, which must therefore exist first (the runtimes come after, below)
    "$PYTHON" "$INSTALL" --kubeconfig "$KUBECONFIG_FILE" webhooks --ca "$PKI/ca.crt" \
      --jobset "$jobset_dir/config/components/webhook/manifests.yaml" "https://127.0.0.1:$JOBSET_WEBHOOK_PORT" \
      --trainer "$trainer_dir/manifests/base/webhook/manifests.yaml" "https://127.0.0.1:$TRAINER_WEBHOOK_PORT" \
      "${trainer_name[@]}" >>"$LOGS/install.log" 2>&1 || die "installing webhooks failed: $(tail -n 20 "$LOGS/install.log")"
  fi
  wait_for trainer-controller-manager 90 alive_and trainer-controller-manager curl -sf --max-time 2 "http://127.0.0.1:$TRAINER_HEALTH_PORT/readyz"

  "$PYTHON" "$INSTALL" --kubeconfig "$KUBECONFIG_FILE" webhooks \
    --ca "$PKI/ca.crt" \
    --jobset "$jobset_dir/config/components/webhook/manifests.yaml" "https://127.0.0.1:$JOBSET_WEBHOOK_PORT" \
    --trainer "$trainer_dir/manifests/base/webhook/manifests.yaml" "https://127.0.0.1:$TRAINER_WEBHOOK_PORT" \
    --runtimes "$trainer_dir/manifests/base/runtimes/torch_distributed.yaml" "${trainer_name[@]}" \
    >>"$LOGS/install.log" 2>&1 || die "installing webhooks and runtimes failed: $(tail -n 20 "$LOGS/install.log")"
  wait_for "nodes Ready (kwok)" 60 alive_and kwok "$PYTHON" "$INSTALL" --kubeconfig "$KUBECONFIG_FILE" ready --nodes "$NODES"

  if [[ -n "$KUEUE_VERSION" ]]; then
    # after the Trainer's runtimes: Kueue's TrainJob integration reads them
    launch kueue-controller-manager --config "$RUN/kueue-config.yaml" --kubeconfig "$KUBECONFIG_FILE" \
      --feature-gates VisibilityOnDemand=false --zap-log-level info
    wait_for kueue-controller-manager 120 alive_and kueue-controller-manager \
      curl -sf --max-time 2 "http://127.0.0.1:$KUEUE_HEALTH_PORT/readyz"
    "$PYTHON" "$INSTALL" --kubeconfig "$KUBECONFIG_FILE" kueue --ca "$PKI/ca.crt" \
      --webhooks "$kueue_dir/config/components/webhook/manifests.yaml" "https://127.0.0.1:$KUEUE_WEBHOOK_PORT" \
      --crd-dir "$kueue_dir/config/components/crd" \
      >>"$LOGS/install.log" 2>&1 || die "installing Kueue's webhooks and queues failed: $(tail -n 20 "$LOGS/install.log")"
  fi

  cat >"$RUN/endpoint.env" <<ENV
KUBECONFIG=$KUBECONFIG_FILE
DISPATCH_KUBEFLOW_KUBECONFIG=$KUBECONFIG_FILE
DISPATCH_KUBEFLOW_TRAINER_VERSION=$(v="${TRAINER_VERSION#v}"; echo "${v%.*}")
DISPATCH_KUBE_API=$API
DISPATCH_KUBE_RUN=$RUN
DISPATCH_KUBE_PORT_OFFSET=$OFFSET
DISPATCH_KUBE_BIN=$BIN
DISPATCH_KUBE_VERSIONS=kubernetes=$K8S_VERSION,etcd=$ETCD_VERSION,kwok=$KWOK_VERSION,jobset=$JOBSET_VERSION,trainer=$TRAINER_VERSION${KUEUE_VERSION:+,kueue=$KUEUE_VERSION}
DISPATCH_KUBE_KUEUE_PODS_READY_TIMEOUT=${KUEUE_VERSION:+$KUEUE_PODS_READY_TIMEOUT}
ENV
  echo "start-kube: build check took ${build_s} s; start took $(took "$t0") s"
  echo "start-kube: ready: $API (kubeconfig $KUBECONFIG_FILE; env in $RUN/endpoint.env)"
}

launch_apiserver() {  # start kube-apiserver (unless it runs) and wait until it is ready
  launch kube-apiserver --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
    --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
    --client-ca-file "$PKI/ca.crt" --authorization-mode RBAC \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
    --service-cluster-ip-range 10.0.0.0/24 --allow-privileged \
    --default-not-ready-toleration-seconds 10 --default-unreachable-toleration-seconds 10 \
    --endpoint-reconciler-type none \
    --cert-dir "$RUN/apiserver-certs" --profiling=false --v 1
  wait_for kube-apiserver 120 alive_and kube-apiserver kcurl "$API/readyz"
}

frozen() {  # pid: the process is stopped (SIGSTOP)
  [[ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" == T ]]
}

apiserver() {  # stop|start|freeze|thaw: this run dir's kube-apiserver only
  exec 8>"$RUN/start.lock"
  flock 8
  local pid=""
  running kube-apiserver && pid="$(cat "$PIDS/kube-apiserver.pid")"
  case "${1:-}" in
    stop)
      # (a frozen one is thawed first, so it can take its SIGTERM)
      stop_one kube-apiserver ;;
    start)
      if [[ -n "$pid" ]] && frozen "$pid"; then
        kill -CONT "$pid"
        echo "start-kube: thawed kube-apiserver ($pid)"
      fi
      [[ -f "$PKI/done" ]] || die "$RUN was never started (no certificates): run start-kube.sh start"
      [[ -n "$pid" ]] || { check_offset; check_key; }
      launch_apiserver
      echo "start-kube: kube-apiserver answers at $API" ;;
    freeze)
      [[ -n "$pid" ]] || die "kube-apiserver of $RUN is not running"
      kill -STOP "$pid"
      echo "start-kube: froze kube-apiserver ($pid): SIGSTOP" ;;
    thaw)
      [[ -n "$pid" ]] || die "kube-apiserver of $RUN is not running"
      kill -CONT "$pid"
      echo "start-kube: thawed kube-apiserver ($pid): SIGCONT" ;;
    *) die "apiserver: give stop, start, freeze or thaw, not '${1:-}'" ;;
  esac
}

stop_one() {
  local name="$1" pid
  if running "$name"; then
    pid="$(cat "$PIDS/$name.pid")"
    kill -CONT "$pid" 2>/dev/null || true
    kill "$pid"
    for _ in $(seq 50); do [[ -d "/proc/$pid" ]] || break; sleep 0.1; done
    [[ -d "/proc/$pid" ]] && kill -9 "$pid"
    echo "start-kube: stopped $name ($pid)"
  fi
  rm -f "$PIDS/$name.pid"
}

stop() {
  local i
  for ((i = ${#PROCESSES[@]} - 1; i >= 0; i--)); do stop_one "${PROCESSES[$i]}"; done
}

# Everything above only defines; the one line below runs. A long run (a background build)
# has then read the whole file, so an edit of the script cannot change what it does next.
main() {
  case "${1:-start}" in
    build) if [[ "${2:-}" == --background ]]; then build_background; else build; fi ;;
    start) start ;;
    stop) stop ;;
    reset) stop; rm -rf "$RUN"; echo "start-kube: removed $RUN" ;;
    apiserver) mkdir -p "$LOGS" "$PIDS"; apiserver "${2:-}" ;;
    env) [[ -f "$RUN/endpoint.env" ]] || die "not started ($RUN/endpoint.env missing)"; cat "$RUN/endpoint.env" ;;
    *) die "unknown command ${1}: use build, start, stop, reset, env or apiserver" ;;
  esac
}
main "$@"; exit $?
