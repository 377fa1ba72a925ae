#!/usr/bin/env bash
# `npm test`: everything CI runs. Static checks and unit tests first (fast, no cluster), then the
# real single-node cluster (built on first use — see test/cluster/), the integration tables
# (reconcile against its API server), the end-to-end suites against it (with most of the fault
# suite, docs/faults.md), the faults that restart the API server and the kubelet, and finally the
# cluster scripts' own lifecycle test. Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
REPORTS="$(mktemp -d)"
trap 'rm -rf "$REPORTS"' EXIT

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<22||(a===22&&b<19)) { console.error(`Node ${process.version} is too old: run npm ci (it installs Node 22 into node_modules/.bin).`); process.exit(1) }'

step() { printf '\n==== %s\n' "$*"; }

step "static checks: types, lint, formatting, generated CRDs"
tsc -p tsconfig.json --noEmit
eslint .
prettier --check --log-level warn src test bench scripts vitest.config.ts eslint.config.js || { echo 'Formatting differs: run npm run format.'; exit 1; }
tsx scripts/gen-crds.ts --check
tsx scripts/gen-docs.ts --check

run_vitest() {
  local name="$1"; shift
  vitest run "$@" --reporter=default --reporter=json --outputFile.json="$REPORTS/$name.json"
}

step "unit tests"
run_vitest unit --project unit

step "test cluster: bring up (first run builds Kubernetes, kube-router, Helm and images)"
bash test/cluster/up.sh
# The cluster scripts' own names for the kubeconfig and kubectl (lib.sh: CODEMODE_CACHE, CODEMODE_CLUSTER_DIR).
read -r KUBECONFIG KUBECTL < <(bash -c 'source test/cluster/lib.sh && echo "$KUBECONFIG_OUT $BIN_K8S/kubectl"')
export KUBECONFIG
"$KUBECTL" apply --server-side --force-conflicts -f crds/ >/dev/null
"$KUBECTL" wait --for=condition=Established -f crds/ --timeout=60s >/dev/null
# Established is not yet served: the API server builds a CRD's storage on the first request for it
# and answers 429 "storage is (re)initializing" until that storage's watch cache is ready (on a
# fresh machine an integration test's first SandboxRun list failed so). kubectl retries a 429 as
# the server asks, so this waits until every kind is served.
kinds="$("$KUBECTL" get -f crds/ -o jsonpath='{range .items[*]}{.spec.names.plural}.{.spec.group},{end}')"
for i in $(seq 1 120); do
  "$KUBECTL" get "${kinds%,}" -A --request-timeout=10s >/dev/null 2>&1 && break
  [[ $i == 120 ]] && { echo "The API server does not serve the CRDs (${kinds%,}) after 60 s:"; "$KUBECTL" get "${kinds%,}" -A; exit 1; }
  sleep 0.5
done

# A failing phase does not stop the next ones: the summary counts every test. A phase that exits
# non-zero with no failed test in its report (vitest's unhandled errors, go test, the deploy/ check)
# is named to the summary, which counts it as a failure: "0 failed" never ends a red run.
status=0
failed_phases=()
phase_failed() { status=$2; failed_phases+=("$1"); }

step "deploy/ manifest: the chart rendered with its defaults (Helm is there once the cluster is built)"
# The helm e2e test checks this too, half an hour later; a stale copy is told here in seconds.
tsx scripts/render-deploy.ts --check || phase_failed deploy-manifest $?

step "stdio bridge: go test (Go is there once the cluster is built)"
(cd images/stdio-bridge && GOFLAGS=-mod=readonly GOMODCACHE="${CODEMODE_CACHE:-$HOME/.cache/codemode}/go/mod" \
  GOCACHE="${CODEMODE_CACHE:-$HOME/.cache/codemode}/go/build" "$(command -v go || echo /usr/local/go/bin/go)" test -count=1 .) || phase_failed stdio-bridge-go-test $?

step "integration tests: reconcile tables against the API server"
run_vitest integration --project integration || phase_failed integration $?

step "gateway image (built from this checkout, for the deploy/ manifest test)"
bash test/cluster/images/build.sh gateway
(source test/cluster/lib.sh && bash test/cluster/images/import.sh "$CONTAINERD_SOCK")

step "end-to-end tests on the test cluster"
run_vitest e2e --project e2e || phase_failed e2e $?

step "cluster faults: kube-apiserver and kubelet restarted during a run mix"
run_vitest faults-cluster --project faults-cluster || phase_failed faults-cluster $?

step "cluster lifecycle (down/up)"
run_vitest lifecycle --project cluster-lifecycle || phase_failed lifecycle $?

FAILED_PHASES="${failed_phases[*]}" node test/summary.mjs "$REPORTS"/*.json
exit "$status"
