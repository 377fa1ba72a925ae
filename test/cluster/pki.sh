#!/usr/bin/env bash
# Creates the cluster's CA, serving and client certificates and the service-account key pair with
# openssl. Idempotent: existing files are kept (a new node IP regenerates the apiserver cert).
source "$(dirname "$0")/lib.sh"

IP="$(node_ip)"
mkdir -p "$PKI" "$LOGS"
cd "$PKI"
exec 3>>"$LOGS/pki.log"

gen_ca() {
  [[ -f ca.crt ]] && return 0
  log "creating cluster CA"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 3650 \
    -subj "/CN=codemode-test-cluster-ca" >&3 2>&1 || die "openssl failed creating the CA." "$LOGS/pki.log"
}

# gen_cert NAME SUBJECT EXT_SAN(optional)
gen_cert() {
  local name="$1" subj="$2" san="${3:-}"
  if [[ -f "$name.crt" && ( -z "$san" || "$(cat "$name.san" 2>/dev/null)" == "$san" ) ]]; then
    return 0
  fi
  local ext; ext="$(mktemp)"
  {
    echo "basicConstraints=CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    if [[ -n "$san" ]]; then
      echo "extendedKeyUsage=serverAuth,clientAuth"
      echo "subjectAltName=$san"
    else
      echo "extendedKeyUsage=clientAuth"
    fi
  } > "$ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" -subj "$subj" >&3 2>&1 &&
  openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$name.crt" \
    -days 3650 -extfile "$ext" >&3 2>&1 || die "openssl failed creating the $name certificate." "$LOGS/pki.log"
  rm -f "$ext" "$name.csr"
  printf '%s' "$san" > "$name.san"
}

gen_ca
# One cluster-admin identity for the control-plane components and tests keeps the test cluster
# simple; the apiserver's authorizers (Node, RBAC) are still on for everything else.
gen_cert admin "/O=system:masters/CN=codemode-admin"
gen_cert apiserver "/CN=kube-apiserver" \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost,IP:127.0.0.1,IP:10.96.0.1,IP:$IP"
gen_cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "DNS:$NODE_NAME,DNS:localhost,IP:127.0.0.1,IP:$IP"
if [[ ! -f sa.key ]]; then
  openssl genrsa -out sa.key 2048 >&3 2>&1 && openssl rsa -in sa.key -pubout -out sa.pub >&3 2>&1 ||
    die "openssl failed creating the service-account key." "$LOGS/pki.log"
fi
