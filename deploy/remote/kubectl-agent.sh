#!/bin/sh
# An ACP agent in a pod of its own, for --agent-command:
#
#   ACP_BRIDGE_AGENT_COMMAND=/usr/local/lib/acp-bridge/kubectl-agent.sh
#   ACP_BRIDGE_AGENT_ARGS=goose acp      (split into words as a shell splits them)
#   ACP_BRIDGE_AGENT_ENV=AGENT_IMAGE,AGENT_NAMESPACE,AGENT_PROVIDER_SECRET,AGENT_POD_TIMEOUT,KUBECONFIG,KUBERNETES_SERVICE_HOST,KUBERNETES_SERVICE_PORT
#   ACP_BRIDGE_AGENT_START_TIMEOUT=180s
#   AGENT_POD_TIMEOUT=150s
#
# Where kubectl finds the cluster: the daemon passes an agent only the
# variables it lists, so list either
# - KUBECONFIG, a kubeconfig file the agents' user can read; or
# - KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, for the service
#   account of the daemon's pod (in-cluster). The pod must then mount its
#   token (automountServiceAccountToken: true and a serviceAccountName, as
#   deploy/kubernetes/overlays/remote-agents does; the base StatefulSet
#   mounts none), and the account needs the Role of
#   deploy/kubernetes/remote-agents/rbac.yaml in AGENT_NAMESPACE.
# With neither, kubectl would try localhost:8080; this script stops first
# with a message that says what is missing.
#
# Where the pods go: AGENT_NAMESPACE, by default `acp-agents`, a namespace
# of their own. Never the bot's own namespace (the one of the daemon's pod,
# read from its service account), which holds the bot's key Secret: whoever
# may create pods in a namespace may mount its Secrets, and this script
# runs as the agents' user with that right. It refuses to start there.
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
# - is labelled acp-bridge/agent=true for `kubectl get pods -l`, and
#   acp-bridge/owner=<this host's name> (the daemon pod's name in a cluster).
#
# Starting: kubectl waits up to AGENT_POD_TIMEOUT (default 100s) for the pod
# to run. Keep it below --agent-start-timeout (default 120 s), so that a pod
# that cannot start (bad image, missing Secret) fails with kubectl's own
# error on stderr, not as an agent slower to start.
#
# Ending: the daemon ends an agent by closing its stdin (then SIGKILL of
# the process group after a few seconds; at once if the daemon itself was
# SIGKILLed). `kubectl run -i` attaches with stdinOnce, so when the attach
# ends the agent's stdin closes and the agent exits. `--rm` deletes the pod
# when kubectl lives to see that; kubectl killed first cannot, so a watcher
# in a session of its own (out of reach of the process-group kill) deletes
# the pod once this process, whatever ended it, is gone. SIGKILL of the
# daemon can take the watcher down too (its container stops; or, where the
# daemon runs each agent in a PID namespace of its own, that namespace
# ends), so each start also deletes, in the background, this owner's pods
# that already finished.
#
# Needs: kubectl with RBAC to create, attach to, list and delete pods in
# AGENT_NAMESPACE (deploy/kubernetes/remote-agents/rbac.yaml).
set -eu

: "${AGENT_IMAGE:?set AGENT_IMAGE to an image that contains the agent}"
namespace=${AGENT_NAMESPACE:-acp-agents}
# Where a pod's service account is mounted (KUBERNETES_SERVICEACCOUNT_DIR
# only moves it for deploy/verify.sh).
account=${KUBERNETES_SERVICEACCOUNT_DIR:-/var/run/secrets/kubernetes.io/serviceaccount}
provider_secret=${AGENT_PROVIDER_SECRET:-acp-agent-provider}
cpu=${AGENT_CPU:-1}
memory=${AGENT_MEMORY:-1Gi}
pod_timeout=${AGENT_POD_TIMEOUT:-100s}
[ $# -gt 0 ] || { echo "kubectl-agent.sh: give the agent's command line as arguments" >&2; exit 64; }
refuse() { echo "kubectl-agent.sh: $*" >&2; exit 78; }

if [ -z "${KUBECONFIG:-}" ]; then
    [ -n "${KUBERNETES_SERVICE_HOST:-}" ] && [ -n "${KUBERNETES_SERVICE_PORT:-}" ] ||
        refuse "no cluster: list KUBECONFIG, or KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT (in-cluster), in ACP_BRIDGE_AGENT_ENV"
    [ -r "$account/token" ] ||
        refuse "in-cluster, but $account/token cannot be read: the daemon's pod needs a serviceAccountName and automountServiceAccountToken: true (deploy/kubernetes/overlays/remote-agents)"
fi
# The daemon's own namespace holds the bot's key Secret.
bot_namespace=$(cat "$account/namespace" 2>/dev/null || :)
[ "$namespace" != "$bot_namespace" ] ||
    refuse "AGENT_NAMESPACE=$namespace is the bot's own namespace, which holds its key Secret: run the agents' pods in a namespace of their own (default acp-agents)"

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

# Who owns the pod, as a label value: at most 63 of [A-Za-z0-9._-], with an
# alphanumeric at each end.
owner=$(uname -n)
owner=$(printf '%s' "$owner" | tr -c 'A-Za-z0-9._-' '-' | cut -c1-63 |
    sed 's/^[^A-Za-z0-9]*//; s/[^A-Za-z0-9]*$//')
owner=${owner:-unknown}
labels=acp-bridge/agent=true,acp-bridge/owner=$owner

# Finished pods of this owner (left behind when the daemon was SIGKILLed)
# are deleted in the background; a failure here never affects the start.
for phase in Succeeded Failed; do
    kubectl delete pods --namespace "$namespace" --selector "$labels" \
        --field-selector "status.phase=$phase" --wait=false || :
done </dev/null >/dev/null 2>&1 &

# shellcheck disable=SC2016 # expanded by the watcher, not here
setsid sh -c '
    while kill -0 "$1" 2>/dev/null; do sleep 5; done
    kubectl delete pod "$2" --namespace "$3" --ignore-not-found --wait=false
' kubectl-agent-watcher $$ "$pod" "$namespace" </dev/null >/dev/null 2>&1 &

exec kubectl run "$pod" --namespace "$namespace" --image "$AGENT_IMAGE" \
    --labels "$labels" --restart=Never --rm -i --quiet \
    --pod-running-timeout="$pod_timeout" --overrides "$overrides"
