#!/bin/sh
# An ACP agent in a pod of its own, for --agent-command:
#
#   ACP_BRIDGE_AGENT_COMMAND=/usr/local/lib/acp-bridge/kubectl-agent.sh
#   ACP_BRIDGE_AGENT_ARGS=goose acp
#   ACP_BRIDGE_AGENT_ENV=AGENT_IMAGE,AGENT_NAMESPACE,AGENT_PROVIDER_SECRET,KUBECONFIG
#   ACP_BRIDGE_AGENT_START_TIMEOUT=90s
#
# ACP is stdio, so `kubectl run -i` carries it: the daemon talks to this
# script's stdin/stdout, kubectl attaches them to the pod's. The pod:
# - runs the image AGENT_IMAGE (with the agent in it) and the arguments
#   given to this script (the agent's command line);
# - gets the provider's credentials from the Secret AGENT_PROVIDER_SECRET
#   (envFrom) and nothing else: no bot key, no state dir, no service
#   account token (the bot's pod and volume are out of its reach);
# - has resource limits (AGENT_CPU, AGENT_MEMORY), so a runaway tool hits
#   its own limit, not the bot's;
# - is labelled acp-bridge/agent=true for `kubectl get pods -l`.
#
# Ending: the daemon ends an agent by closing its stdin (then SIGKILL of
# the process group after a few seconds; at once if the daemon itself was
# SIGKILLed). `kubectl run -i` attaches with stdinOnce, so when the attach
# ends the agent's stdin closes and the agent exits. `--rm` deletes the pod
# when kubectl lives to see that; kubectl killed first cannot, so a watcher
# in a session of its own (out of reach of the process-group kill) deletes
# the pod once this process, whatever ended it, is gone.
#
# Needs: kubectl with RBAC to create, attach to and delete pods in
# AGENT_NAMESPACE (KUBECONFIG or the daemon pod's service account).
set -eu

: "${AGENT_IMAGE:?set AGENT_IMAGE to an image that contains the agent}"
namespace=${AGENT_NAMESPACE:-default}
provider_secret=${AGENT_PROVIDER_SECRET:-acp-agent-provider}
cpu=${AGENT_CPU:-1}
memory=${AGENT_MEMORY:-1Gi}
[ $# -gt 0 ] || { echo "kubectl-agent.sh: give the agent's command line as arguments" >&2; exit 64; }

# A pod name kubectl accepts (lowercase, digits, dashes), unique per start.
pod=acp-agent-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')

# The pod as JSON, since `kubectl run` has no flags for envFrom or limits.
args_json=$(printf '%s\n' "$@" | sed 's/\\/\\\\/g; s/"/\\"/g; s/.*/"&"/' | paste -sd, -)
overrides=$(cat <<JSON
{"apiVersion":"v1","spec":{
  "automountServiceAccountToken":false,
  "enableServiceLinks":false,
  "restartPolicy":"Never",
  "securityContext":{"runAsNonRoot":true,"seccompProfile":{"type":"RuntimeDefault"}},
  "containers":[{
    "name":"$pod","image":"$AGENT_IMAGE","args":[$args_json],
    "stdin":true,"stdinOnce":true,"tty":false,
    "envFrom":[{"secretRef":{"name":"$provider_secret"}}],
    "resources":{"requests":{"cpu":"$cpu","memory":"$memory"},"limits":{"cpu":"$cpu","memory":"$memory"}},
    "securityContext":{"allowPrivilegeEscalation":false,"capabilities":{"drop":["ALL"]}}
  }]}}
JSON
)

setsid sh -c '
    while kill -0 "$1" 2>/dev/null; do sleep 5; done
    kubectl delete pod "$2" --namespace "$3" --ignore-not-found --wait=false
' kubectl-agent-watcher $$ "$pod" "$namespace" </dev/null >/dev/null 2>&1 &

exec kubectl run "$pod" --namespace "$namespace" --image "$AGENT_IMAGE" \
    --labels acp-bridge/agent=true --restart=Never --rm -i --quiet \
    --pod-running-timeout=5m --overrides "$overrides"
