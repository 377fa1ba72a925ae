#!/usr/bin/env bash
# Brings the single-node test cluster up: installs/builds what is missing, starts what is not
# running, waits for a Ready node and the default ServiceAccount, writes $KUBECONFIG_OUT.
# Idempotent: a second run with everything up only re-checks.
source "$(dirname "$0")/lib.sh"

[[ "$(id -u)" == 0 ]] || die "The test cluster needs root (it runs containerd, the kubelet and iptables)."
T0=$SECONDS
mkdir -p "$LOGS" "$PIDS"

bash "$CLUSTER_SRC/install-deps.sh"
bash "$CLUSTER_SRC/build.sh"
bash "$CLUSTER_SRC/images/build.sh" pause sandbox
# The data-science sandbox image (issue 12): the datascience e2e tests run sessions on it.
bash "$CLUSTER_SRC/images/build.sh" datascience
# stdio UpstreamServers: our bridge and the filesystem server the e2e tests run behind it.
bash "$CLUSTER_SRC/images/build.sh" stdio-bridge mcp-filesystem
bash "$CLUSTER_SRC/pki.sh"
bash "$CLUSTER_SRC/configs.sh"
IP="$(node_ip)"

# Pod traffic is routed and bridged through the host's netfilter (kube-proxy, kube-router).
sysctl -qw net.ipv4.ip_forward=1
[[ -e /proc/sys/net/bridge/bridge-nf-call-iptables ]] && sysctl -qw net.bridge.bridge-nf-call-iptables=1
# A ClusterIP is only an address kube-proxy's NAT rules rewrite to a pod's. A connection they do
# not rewrite (a Service whose rules are not written yet, or are lost) followed the default route
# off this machine, where something else may answer it: in a CI run, a connection opened to a new
# Service before its rules were written got HTTP 404s from a stranger. The Service range is routed to a bridge with no
# ports instead (this kernel has no dummy devices; kube-proxy's ipvs mode uses one the same way):
# rewritten packets are routed again to their pod, the rest find no neighbour and the connection
# fails here ("no route to host", after ~3 s). `src` keeps the source address the default route gave.
ip link show "$SERVICE_SINK" >/dev/null 2>&1 || ip link add "$SERVICE_SINK" type bridge
ip link set "$SERVICE_SINK" up
ip route replace "$SERVICE_CIDR" dev "$SERVICE_SINK" src "$IP"

start_daemon etcd "$BIN_ETCD/etcd" --name default --data-dir "$CLUSTER_DIR/etcd" \
  --listen-client-urls "http://$ETCD_CLIENT" --advertise-client-urls "http://$ETCD_CLIENT" \
  --listen-peer-urls "http://$ETCD_PEER" --initial-advertise-peer-urls "http://$ETCD_PEER" \
  --initial-cluster "default=http://$ETCD_PEER" --listen-metrics-urls "" --log-level warn
wait_for "etcd healthy" 60 "$LOGS/etcd.log" curl -fsS "http://$ETCD_CLIENT/health"
etcd_defragment_if_sparse

start_daemon containerd /usr/bin/containerd --config "$CLUSTER_DIR/config/containerd.toml"
wait_for "containerd serving" 60 "$LOGS/containerd.log" ctr -a "$CONTAINERD_SOCK" version
bash "$CLUSTER_SRC/images/import.sh" "$CONTAINERD_SOCK" >>"$LOGS/images-import.log" 2>&1 ||
  die "Importing the local images into containerd failed." "$LOGS/images-import.log"

start_daemon kube-apiserver "$BIN_K8S/kube-apiserver" \
  --etcd-servers "http://$ETCD_CLIENT" --bind-address 0.0.0.0 --advertise-address "$IP" \
  --secure-port "$API_PORT" --service-cluster-ip-range "$SERVICE_CIDR" \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/admin.crt" --kubelet-client-key "$PKI/admin.key" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --service-account-issuer https://kubernetes.default.svc.cluster.local \
  --authorization-mode Node,RBAC --allow-privileged=true --profiling=false \
  --enable-admission-plugins NodeRestriction --event-ttl 1h \
  --kubelet-preferred-address-types InternalIP,Hostname
curl_api() { curl -fsS --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "https://127.0.0.1:$API_PORT$1"; }
wait_for "kube-apiserver ready" 120 "$LOGS/kube-apiserver.log" curl_api /readyz

# Started only after the apiserver's /readyz passes: earlier, its controllers can give up.
start_daemon kube-controller-manager "$BIN_K8S/kube-controller-manager" \
  --kubeconfig "$KUBECONFIG_OUT" --authentication-kubeconfig "$KUBECONFIG_OUT" --authorization-kubeconfig "$KUBECONFIG_OUT" \
  --bind-address 127.0.0.1 --leader-elect=false --service-account-private-key-file "$PKI/sa.key" \
  --root-ca-file "$PKI/ca.crt" --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --allocate-node-cidrs=true --cluster-cidr "$POD_CIDR_CLUSTER" --node-cidr-mask-size 24 \
  --service-cluster-ip-range "$SERVICE_CIDR" --use-service-account-credentials=false
start_daemon kube-scheduler "$BIN_K8S/kube-scheduler" --kubeconfig "$KUBECONFIG_OUT" \
  --authentication-kubeconfig "$KUBECONFIG_OUT" --authorization-kubeconfig "$KUBECONFIG_OUT" \
  --bind-address 127.0.0.1 --leader-elect=false
# The kubelet reads its config file only at start: one running from before a change in
# configs.sh (e.g. podPidsLimit) would keep the old settings forever. The config's hash is kept
# next to its PID file; a running kubelet started from another config (or with no hash recorded,
# i.e. by an older up.sh) is restarted. Its pods keep running meanwhile; new pods get the new
# settings (an existing pod's cgroup keeps the limits it was created with).
KUBELET_CONFIG_HASH="$(sha256sum "$CLUSTER_DIR/config/kubelet.yaml" | cut -d' ' -f1)"
if running kubelet && [[ "$(cat "$PIDS/kubelet.config-sha256" 2>/dev/null || true)" != "$KUBELET_CONFIG_HASH" ]]; then
  log "the kubelet runs with an older kubelet.yaml: restarting it"
  stop_daemon kubelet
fi
# A running kubelet that stopped renewing its node Lease is restarted: seen after the fault
# suite's kube-apiserver and kubelet restarts ("failed to update lease"), the node turned NotReady
# while every daemon looked running, and every later test failed.
lease_age() {
  local t
  t="$(kubectl_ get lease -n kube-node-lease "$NODE_NAME" -o jsonpath='{.spec.renewTime}' 2>/dev/null)" && [[ -n "$t" ]] || return 1
  echo $(( $(date +%s) - $(date -d "$t" +%s) ))
}
if running kubelet && age="$(lease_age)" && (( age > 60 )); then
  log "the kubelet has not renewed its node lease for ${age}s: restarting it"
  stop_daemon kubelet
fi
KUBELET_SINCE="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
running kubelet && KUBELET_SINCE=""
start_daemon kubelet "$BIN_K8S/kubelet" --config "$CLUSTER_DIR/config/kubelet.yaml" \
  --kubeconfig "$KUBECONFIG_OUT" --hostname-override "$NODE_NAME" --node-ip "$IP" \
  --root-dir "$CLUSTER_DIR/kubelet"
# Recorded only for a kubelet this config started (or one already running with it).
echo "$KUBELET_CONFIG_HASH" > "$PIDS/kubelet.config-sha256"
# kube-proxy and kube-router both write the filter table. Started together (after `down` removed
# their chains) they raced: kube-proxy's first sync failed ("Chain 'KUBE-PROXY-FIREWALL' does not
# exist") and the node was left without Service portals and without the NetworkPolicy jumps —
# pods reached neither kubernetes.default nor were stopped by a deny-all policy, while every
# daemon looked healthy. So kube-router starts once kube-proxy's rules are in place, and a running
# pair whose rules are missing is restarted.
if running kube-proxy && running kube-router && ! { proxy_rules_ready && router_rules_ready; }; then
  log "the iptables rules of kube-proxy or kube-router are missing: restarting both"
  stop_daemon kube-router
  stop_daemon kube-proxy
fi
start_daemon kube-proxy "$BIN_K8S/kube-proxy" --config "$CLUSTER_DIR/config/kube-proxy.yaml"
# kube-proxy retries a failed sync after 30 s: the timeout leaves room for one retry.
wait_for "kube-proxy rules in iptables" 90 "$LOGS/kube-proxy.log" proxy_rules_ready
# kube-router runs only its network-policy controller: NetworkPolicies are ENFORCED (iptables + ipset).
start_daemon kube-router "$BIN_KUBE_ROUTER/kube-router" --kubeconfig "$KUBECONFIG_OUT" \
  --hostname-override "$NODE_NAME" --run-firewall=true --run-router=false --run-service-proxy=false \
  --enable-cni=false --metrics-port 0 --health-port 20244
wait_for "kube-router rules in iptables" 90 "$LOGS/kube-router.log" router_rules_ready

# Ready, and (when this run started the kubelet) reported by the new kubelet, not left over in
# etcd from before the last `down`.
node_ready() {
  local s
  s="$(kubectl_ get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}')"
  [[ "${s%% *}" == True ]] || return 1
  [[ -z "$KUBELET_SINCE" || ! "${s#* }" < "$KUBELET_SINCE" ]]
}
wait_for "node $NODE_NAME Ready" 180 "$LOGS/kubelet.log" node_ready
wait_for "default ServiceAccount exists" 120 "$LOGS/kube-controller-manager.log" kubectl_ get serviceaccount default -n default
log "cluster up in $(( SECONDS - T0 ))s — KUBECONFIG=$KUBECONFIG_OUT"
