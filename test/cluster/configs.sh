#!/usr/bin/env bash
# Writes the component configuration files (containerd, CNI, kubelet, kube-proxy, kubeconfig).
# Rewritten on every `up`, so a changed setting here takes effect on the next start.
source "$(dirname "$0")/lib.sh"

IP="$(node_ip)"
mkdir -p "$CLUSTER_DIR"/{containerd,cni/net.d,cni/ipam,kubelet,config} "$RUN/containerd"

b64() { base64 -w0 < "$1"; }
# write_file PATH: stdin → PATH, touching PATH only when the content changed. Running daemons
# watch some of these files (kube-proxy exits when its config file is rewritten).
write_file() {
  local tmp="$1.new"
  cat > "$tmp"
  if cmp -s "$tmp" "$1"; then rm -f "$tmp"; else mv "$tmp" "$1"; fi
}
# A kubeconfig with embedded credentials, so it can be copied elsewhere and still work.
write_file "$KUBECONFIG_OUT" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: codemode-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority-data: $(b64 "$PKI/ca.crt")
users:
- name: codemode-admin
  user:
    client-certificate-data: $(b64 "$PKI/admin.crt")
    client-key-data: $(b64 "$PKI/admin.key")
contexts:
- name: codemode-test
  context: { cluster: codemode-test, user: codemode-admin }
current-context: codemode-test
YAML
chmod 600 "$KUBECONFIG_OUT"

write_file "$CLUSTER_DIR/config/containerd.toml" <<TOML
version = 2
root = "$CLUSTER_DIR/containerd/root"
state = "$CLUSTER_DIR/containerd/state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "codemode.local/pause:v1"
  # This VM lacks CAP_SYS_RESOURCE: without this every pod sandbox fails to start.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$CLUSTER_DIR/cni/net.d"
TOML

write_file "$CLUSTER_DIR/cni/net.d/10-codemode.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "codemode",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "$CLUSTER_DIR/cni/ipam",
        "ranges": [[{ "subnet": "$POD_CIDR_NODE" }]],
        "routes": [{ "dst": "0.0.0.0/0" }]
      }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
JSON

write_file "$CLUSTER_DIR/config/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# These machines mount cgroup v1, which Kubernetes 1.34 refuses unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $IP
port: 10250
readOnlyPort: 0
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: false }
  x509: { clientCAFile: $PKI/ca.crt }
authorization: { mode: AlwaysAllow }
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
failSwapOn: false
resolvConf: /etc/resolv.conf
maxPods: 250
# Kubernetes has no per-pod process field: the kubelet's pod PID limit sets pids.max of every
# pod's cgroup, so one sandbox's fork bomb cannot exhaust the node's PIDs. The operator's
# canary checks that sandboxes see it (CODEMODE_MAX_PROCESSES, default 128).
podPidsLimit: 128
serializeImagePulls: false
# Images here are imported locally and cannot be pulled again: never garbage-collect them,
# and do not evict on the shared disk of a developer machine.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: { memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%" }
staticPodPath: ""
YAML

write_file "$CLUSTER_DIR/config/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: $POD_CIDR_CLUSTER
hostnameOverride: $NODE_NAME
clientConnection: { kubeconfig: $KUBECONFIG_OUT }
# Leave the host's conntrack sysctls alone (a VM may not allow changing them).
conntrack: { maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s }
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
YAML
