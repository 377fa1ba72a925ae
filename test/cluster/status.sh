#!/usr/bin/env bash
# Prints each component's state, whether kube-proxy's and kube-router's iptables rules are in
# place and, when the API answers, the node. Exit 0 only if all run and the rules are there.
source "$(dirname "$0")/lib.sh"

ok=true
for name in "${COMPONENTS[@]}"; do
  if running "$name"; then
    printf '%-24s running (pid %s)\n' "$name" "$(pid_of "$name")"
  else
    printf '%-24s stopped\n' "$name"
    ok=false
  fi
done
for rules in proxy router; do
  if "${rules}_rules_ready"; then
    printf '%-24s in place\n' "kube-$rules rules"
  else
    printf '%-24s MISSING (npm run cluster:up restarts kube-proxy and kube-router)\n' "kube-$rules rules"
    ok=false
  fi
done
# The Service range's route (up.sh): elsewhere, connections kube-proxy does not rewrite leave the machine.
if ip -4 route show "$SERVICE_CIDR" 2>/dev/null | grep -q " dev $SERVICE_SINK "; then
  printf '%-24s to %s\n' "service range route" "$SERVICE_SINK"
else
  printf '%-24s MISSING (npm run cluster:up adds it)\n' "service range route"
  ok=false
fi
echo "kubeconfig: $KUBECONFIG_OUT"
echo "logs:       $LOGS"
if running kube-apiserver && [[ -x "$BIN_K8S/kubectl" ]]; then
  kubectl_ get nodes -o wide 2>/dev/null || ok=false
fi
$ok
