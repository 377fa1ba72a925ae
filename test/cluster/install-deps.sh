#!/usr/bin/env bash
# Installs what the test cluster needs from Debian's packages (containerd, runc, CNI plugins,
# iptables, ipset, ...) and unpacks etcd 3.5 from Debian trixie into the cache WITHOUT adding
# trixie to the system's sources (so nothing, libc included, is upgraded).
source "$(dirname "$0")/lib.sh"

PKGS=(containerd runc containernetworking-plugins iptables ipset conntrack socat debootstrap kmod iproute2 openssl curl ca-certificates)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The datascience image's wheels are fetched and installed by the host's pip (images/build.sh).
python3 -m pip --version >/dev/null 2>&1 || missing+=(python3-pip)
mkdir -p "$LOGS"
if (( ${#missing[@]} )); then
  log "installing Debian packages: ${missing[*]}"
  { apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; } \
    >>"$LOGS/install-deps.log" 2>&1 || die "Installing Debian packages failed." "$LOGS/install-deps.log"
fi

if [[ ! -x "$BIN_ETCD/etcd" ]]; then
  log "fetching etcd-server $ETCD_DEB_VERSION from Debian trixie (unpacked into the cache only)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$tmp/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o Dir::State::status=/dev/null
            -o APT::Sandbox::User=root)
  {
    apt-get "${apt_opts[@]}" update &&
    (cd "$tmp" && apt-get "${apt_opts[@]}" download "etcd-server=$ETCD_DEB_VERSION") &&
    dpkg -x "$tmp"/etcd-server_*.deb "$tmp/x"
  } >>"$LOGS/install-deps.log" 2>&1 || die "Fetching etcd-server from Debian trixie failed." "$LOGS/install-deps.log"
  mkdir -p "$BIN_ETCD"
  install -m 0755 "$tmp/x/usr/bin/etcd" "$BIN_ETCD/etcd"
fi
"$BIN_ETCD/etcd" --version >/dev/null 2>&1 || die "The cached etcd binary does not run." "$LOGS/install-deps.log"

# Prometheus and promtool for the metrics tests (cached like etcd).
bash "$CLUSTER_SRC/install-prometheus.sh" >/dev/null
