#!/usr/bin/env bash
# Builds the upstream Kubernetes components, kube-router and Helm with Go from the Go module proxy.
# Binaries are cached under $CACHE/bin/<tool>-<version>; a directory with a .complete stamp is reused.
source "$(dirname "$0")/lib.sh"

command -v go >/dev/null || die "Go is not installed; it is needed to build Kubernetes (apt-get install golang-go, or Go >= 1.24)."
mkdir -p "$LOGS"

# build_module NAME MODULE_DIR OUT_DIR LDFLAGS PACKAGES...
build_module() {
  local name="$1" dir="$2" out="$3" ldflags="$4"; shift 4
  if [[ -f "$out/.complete" ]]; then
    return 0
  fi
  log "building $name with Go (first run only, cached afterwards; on 2 cores Kubernetes takes ~10 min, kube-router and Helm ~3 min each)"
  local start=$SECONDS
  mkdir -p "$out"
  (cd "$CLUSTER_SRC/go/$dir" && go build -mod=readonly -trimpath -ldflags "$ldflags" -o "$out/" "$@") \
    >>"$LOGS/build-$name.log" 2>&1 || die "Building $name failed." "$LOGS/build-$name.log"
  touch "$out/.complete"
  log "built $name in $(( SECONDS - start ))s"
}

V="$K8S_VERSION"
K8S_LDFLAGS="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$V"
build_module kubernetes kubernetes "$BIN_K8S" "$K8S_LDFLAGS" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet \
  k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kubectl
build_module kube-router kube-router "$BIN_KUBE_ROUTER" "-s -w" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
build_module helm helm "$BIN_HELM" "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" helm.sh/helm/v3/cmd/helm
