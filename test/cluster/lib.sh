# Shared settings and helpers for the test cluster scripts. Sourced, not executed.
# Everything the cluster writes lives under $CLUSTER_DIR; built tools are cached under $CACHE/bin.
set -euo pipefail

K8S_VERSION=v1.34.9
KUBE_ROUTER_VERSION=v2.1.0
HELM_VERSION=v3.19.0
ETCD_DEB_VERSION=3.5.16-4

CLUSTER_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$CLUSTER_SRC/../.." && pwd)"
CACHE="${CODEMODE_CACHE:-$HOME/.cache/codemode}"
CLUSTER_DIR="${CODEMODE_CLUSTER_DIR:-$CACHE/cluster}"
BIN_K8S="$CACHE/bin/kubernetes-$K8S_VERSION"
BIN_KUBE_ROUTER="$CACHE/bin/kube-router-$KUBE_ROUTER_VERSION"
BIN_HELM="$CACHE/bin/helm-$HELM_VERSION"
BIN_ETCD="$CACHE/bin/etcd-$ETCD_DEB_VERSION"
KUBECONFIG_OUT="$CLUSTER_DIR/kubeconfig"
PKI="$CLUSTER_DIR/pki"
LOGS="$CLUSTER_DIR/logs"
PIDS="$CLUSTER_DIR/pids"
RUN="$CLUSTER_DIR/run"
CONTAINERD_SOCK="$RUN/containerd/containerd.sock"

NODE_NAME=codemode-node
BRIDGE=codemode0
POD_CIDR_CLUSTER=10.244.0.0/16
POD_CIDR_NODE=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/16
# The Service range's route on the host: a bridge with no ports, which sends nothing anywhere (up.sh).
SERVICE_SINK=codemode-svc0
API_PORT=6443
ETCD_CLIENT=127.0.0.1:23790
ETCD_PEER=127.0.0.1:23800

# The order up starts components in; down stops them in reverse.
COMPONENTS=(etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kube-router)

log() { printf '[cluster] %s\n' "$*" >&2; }

# die SENTENCE [LOGFILE]: one clear sentence and the log to read, then exit non-zero.
die() {
  if [[ -n "${2:-}" ]]; then
    printf '[cluster] ERROR: %s See %s\n' "$1" "$2" >&2
  else
    printf '[cluster] ERROR: %s\n' "$1" >&2
  fi
  exit 1
}

node_ip() {
  local ip
  ip="$(ip -4 route get 192.0.2.1 2>/dev/null | sed -n 's/.* src \([0-9.]*\).*/\1/p' | head -1)"
  if [[ -z "$ip" ]]; then
    ip="$(ip -4 route show default 2>/dev/null | head -1 | sed -n 's/.* src \([0-9.]*\).*/\1/p')"
  fi
  if [[ -z "$ip" ]]; then
    ip="$(hostname -I 2>/dev/null | awk '{print $1}')"
  fi
  [[ -n "$ip" ]] || die "Could not find this machine's IPv4 address for the node (no default route)."
  printf '%s' "$ip"
}

# etcd_size FIELD: dbSize or dbSizeInUse from etcd's status (empty when unreadable).
etcd_size() {
  curl -fsS -X POST "http://$ETCD_CLIENT/v3/maintenance/status" -d '{}' 2>/dev/null | sed -n "s/.*\"$1\":\"\([0-9]*\)\".*/\1/p" || true
}

# etcd_defragment_if_sparse: defragment etcd's database when most of it is free pages. The API server
# compacts old revisions every 5 minutes, but the file never shrinks by itself: a day of benches
# (each writes hundreds of MB of run outputs) left a 700 MB database with 17 MB in use, and an
# etcd that kept a quarter of a core busy on an idle cluster. Defragmenting blocks etcd for about
# a second per 700 MB, so only when the database is at least CODEMODE_ETCD_DEFRAG_MIN_BYTES
# (128 MiB) and less than half of it is in use.
etcd_defragment_if_sparse() {
  local size used min="${CODEMODE_ETCD_DEFRAG_MIN_BYTES:-134217728}"
  size="$(etcd_size dbSize)"
  used="$(etcd_size dbSizeInUse)"
  [[ -n "$size" && -n "$used" ]] || { log "etcd status unreadable: not defragmenting"; return 0; }
  (( size >= min && used * 2 < size )) || return 0
  log "etcd database $(( size >> 20 )) MiB, $(( used >> 20 )) MiB in use: defragmenting"
  curl -fsS -X POST "http://$ETCD_CLIENT/v3/maintenance/defragment" -d '{}' >/dev/null ||
    die "Defragmenting etcd failed." "$LOGS/etcd.log"
  log "etcd database now $(( $(etcd_size dbSize) >> 20 )) MiB"
}

pid_of() { local f="$PIDS/$1.pid"; [[ -f "$f" ]] && cat "$f" || true; }

# running NAME: true when the process recorded in NAME's PID file is alive and is still the
# program we started (guards against PID reuse after a reboot).
running() {
  local pid exe
  pid="$(pid_of "$1")"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 1
  exe="$(readlink "/proc/$pid/exe" 2>/dev/null || true)"
  [[ "$exe" == *"$1"* ]]
}

# start NAME BINARY ARGS...: start a daemon in the background with its own log and PID file.
start_daemon() {
  local name="$1"; shift
  if running "$name"; then
    log "$name already running (pid $(pid_of "$name"))"
    return 0
  fi
  mkdir -p "$LOGS" "$PIDS"
  log "starting $name"
  setsid "$@" >>"$LOGS/$name.log" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" > "$PIDS/$name.pid"
  # Until the exec is done /proc/PID/exe names setsid (or bash): on a busy machine that took more
  # than 0.3 s once, for the kubelet, and a daemon that was up was reported as exited. Wait up to
  # 5 s for the program, and still give a process that exits at once 0.3 s to show it.
  local i
  for i in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || die "$name exited right after starting." "$LOGS/$name.log"
    running "$name" && break
    sleep 0.1
  done
  sleep 0.3
  running "$name" || die "$name exited right after starting." "$LOGS/$name.log"
}

# stop_daemon NAME: TERM the process in NAME's PID file (KILL after 10 s) and remove the file.
stop_daemon() {
  local name="$1" pid
  if running "$name"; then
    pid="$(pid_of "$name")"
    log "stopping $name (pid $pid)"
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$PIDS/$name.pid"
}

# What kube-proxy programs into iptables once it has synced: the Service portals (with the
# kubernetes Service itself) and its forwarding rules.
proxy_rules_ready() {
  iptables -t nat -S PREROUTING 2>/dev/null | grep -q -- '-j KUBE-SERVICES' &&
    iptables -t nat -S KUBE-SERVICES 2>/dev/null | grep -q 'default/kubernetes:https' &&
    iptables -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-FORWARD'
}

# What kube-router's network-policy controller programs: the jumps into its pod firewall chains.
router_rules_ready() {
  iptables -S FORWARD 2>/dev/null | grep -q -- '-j KUBE-ROUTER-FORWARD' &&
    iptables -S OUTPUT 2>/dev/null | grep -q -- '-j KUBE-ROUTER-OUTPUT'
}

# wait_for DESCRIPTION TIMEOUT_S LOGFILE CMD...: poll CMD until it succeeds.
wait_for() {
  local what="$1" timeout="$2" logfile="$3"; shift 3
  local start=$SECONDS
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS - start > timeout )); then
      die "Timed out after ${timeout}s waiting for $what." "$logfile"
    fi
    sleep 0.5
  done
  log "$what ($(( SECONDS - start ))s)"
}

kubectl_() { "$BIN_K8S/kubectl" --kubeconfig "$KUBECONFIG_OUT" "$@"; }
