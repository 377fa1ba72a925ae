#!/usr/bin/env bash
# Stops exactly what up.sh started (by PID file, never by name), removes the pod containers,
# unmounts what the kubelet and containerd mounted under the cluster dir, deletes the bridge and
# the iptables chains/ipsets the cluster's components added. Built binaries, images and the
# etcd data stay (the next `up` is fast; `down --purge` also wipes the cluster state).
source "$(dirname "$0")/lib.sh"

PURGE=false
[[ "${1:-}" == "--purge" ]] && PURGE=true

# Pod containers run under containerd shims that outlive containerd: stop them through containerd.
if running containerd; then
  for id in $(ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
  done
  sleep 1
  for id in $(ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
    ctr -a "$CONTAINERD_SOCK" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
  done
fi

for (( i=${#COMPONENTS[@]}-1; i>=0; i-- )); do stop_daemon "${COMPONENTS[$i]}"; done

# Unmount everything mounted below the cluster dir, deepest first.
mapfile -t mounts < <(awk -v d="$CLUSTER_DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | awk '{ print length, $0 }' | sort -rn | cut -d' ' -f2- || true)
for m in "${mounts[@]}"; do umount -l "$m" 2>/dev/null || true; done
# Pod network namespaces the CRI created (containerd names them cni-<uuid>).
for ns in /run/netns/cni-*; do
  [[ -e "$ns" ]] || continue
  umount -l "$ns" 2>/dev/null || true
  rm -f "$ns"
done

ip link show "$BRIDGE" >/dev/null 2>&1 && ip link del "$BRIDGE"
ip link show "$SERVICE_SINK" >/dev/null 2>&1 && ip link del "$SERVICE_SINK"
rm -rf "$CLUSTER_DIR/cni/ipam"

# iptables: chains named KUBE-* (kubelet, kube-proxy, kube-router) and CNI-* (bridge plugin),
# and the rules in built-in chains that jump to them.
for table in filter nat mangle raw; do
  iptables-save -t "$table" 2>/dev/null | grep -E '^-A [A-Z]+ .*-j (KUBE-|CNI-)' | grep -Ev '^-A (KUBE-|CNI-)' |
    sed 's/^-A /-D /' | while read -r rule; do eval "iptables -t $table $rule" 2>/dev/null || true; done || true
  chains="$(iptables-save -t "$table" 2>/dev/null | sed -n 's/^:\(\(KUBE-\|CNI-\)[^ ]*\) .*/\1/p' || true)"
  for chain in $chains; do iptables -t "$table" -F "$chain" 2>/dev/null || true; done
  for chain in $chains; do iptables -t "$table" -X "$chain" 2>/dev/null || true; done
done
for set in $(ipset list -n 2>/dev/null | grep -E '^(KUBE-|kube-router-)' || true); do
  ipset destroy "$set" 2>/dev/null || true
done

if $PURGE; then
  log "purging cluster state in $CLUSTER_DIR (caches in $CACHE/bin and $CACHE/images stay)"
  rm -rf "$CLUSTER_DIR"
fi
log "cluster down"
