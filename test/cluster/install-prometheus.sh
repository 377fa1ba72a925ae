#!/usr/bin/env bash
# Unpacks Prometheus and promtool from Debian bookworm's `prometheus` package into the cache (as
# install-deps.sh does for etcd): a private package list, `apt-get download` and `dpkg -x`, so
# nothing is installed on the system and no service is started. Idempotent and cached; prints the
# directory holding `prometheus` and `promtool` on stdout. Used by the metrics tests (the alert
# rules' promtool unit tests and the e2e scrape) and run by install-deps.sh.
source "$(dirname "$0")/lib.sh"

# bookworm's build runs on bookworm and anything newer (glibc is backwards compatible).
PROMETHEUS_SUITE=bookworm
BIN_PROMETHEUS="$CACHE/bin/prometheus-$PROMETHEUS_SUITE"

if [[ ! -x "$BIN_PROMETHEUS/prometheus" || ! -x "$BIN_PROMETHEUS/promtool" ]]; then
  mkdir -p "$LOGS"
  log "fetching prometheus from Debian $PROMETHEUS_SUITE (unpacked into the cache only)"
  tmp="$(mktemp -d)"
  trap 'rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/lists/partial" "$tmp/cache/archives/partial"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $PROMETHEUS_SUITE main" > "$tmp/sources.list"
  apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
            -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache" -o Dir::State::status=/dev/null
            -o APT::Sandbox::User=root)
  {
    apt-get "${apt_opts[@]}" update &&
    (cd "$tmp" && apt-get "${apt_opts[@]}" download prometheus) &&
    dpkg -x "$tmp"/prometheus_*.deb "$tmp/x"
  } >>"$LOGS/install-deps.log" 2>&1 || die "Fetching prometheus from Debian $PROMETHEUS_SUITE failed." "$LOGS/install-deps.log"
  mkdir -p "$BIN_PROMETHEUS"
  install -m 0755 "$tmp/x/usr/bin/prometheus" "$tmp/x/usr/bin/promtool" "$BIN_PROMETHEUS/"
fi
"$BIN_PROMETHEUS/promtool" --version >/dev/null 2>&1 || die "The cached promtool binary does not run." "$LOGS/install-deps.log"
printf '%s\n' "$BIN_PROMETHEUS"
