#!/usr/bin/env bash
# Checks the deployment files against the binary they deploy.
#
#   cargo build --locked -p acp-bridge && bash deploy/verify.sh target/debug/acp-bridge
#
# (from the repository root; any path to a built acp-bridge will do.)
#
# - every ACP_BRIDGE_* name used under deploy/ is one the binary knows, the
#   env example lists every one of them with the binary's default, and every
#   example / ConfigMap value is accepted by the binary's parser;
# - the TOML example has a key for every flag, and it (uncommented) and the
#   Kubernetes base's config file are taken by the binary;
# - the systemd unit passes `systemd-analyze verify` (with ExecStart pointed at
#   the binary given, since /usr/local/bin/acp-bridge need not exist here) and
#   keeps its hardening score; stop timeouts exceed the shutdown grace;
# - deploy/remote/kubectl-agent.sh, run against a stand-in kubectl, asks for
#   the pod it promises, in a namespace other than the bot's, and stops with
#   the reason when it has no way to the cluster;
# - the kustomizations render, every YAML file parses, and the rendered
#   StatefulSets keep the properties the deployment relies on.
# A check whose tool is missing is skipped with a message; anything else that
# fails makes the script exit 1.
set -euo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
    echo "usage: bash deploy/verify.sh PATH/TO/acp-bridge" >&2
    echo "  e.g. cargo build --locked -p acp-bridge && bash deploy/verify.sh target/debug/acp-bridge" >&2
    exit 64
fi
bin=$(realpath -- "$1")
[[ -x $bin ]] || { echo "$bin is not an executable" >&2; exit 64; }

deploy=$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd)
unit=$deploy/systemd/acp-bridge.service
env_example=$deploy/env/acp-bridge.env.example
kube=$deploy/kubernetes
configmap=$kube/base/configmap.yaml
toml_example=$deploy/config/acp-bridge.toml.example
kube_config=$kube/base/acp-bridge.toml

work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT

failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
pass() { echo "ok:   $*"; }
skip() { echo "skip: $*"; }

# Seconds of `30`, `30s`, `500ms`, `15m`, `1min`, `2h` (systemd and daemon syntax).
seconds() {
    local text=$1 number unit
    number=${text%%[!0-9]*}
    unit=${text#"$number"}
    [[ -n $number ]] || { echo "not a duration: $text" >&2; return 1; }
    case $unit in
        ""|s|sec) echo "$number" ;;
        ms) echo $((number / 1000)) ;;
        m|min) echo $((number * 60)) ;;
        h) echo $((number * 3600)) ;;
        *) echo "unknown duration unit: $text" >&2; return 1 ;;
    esac
}

# ------------------------------------------------------------------ flags --
help=$("$bin" run --help-long)
# Every ACP_BRIDGE_* the binary mentions: the [env: …] of each flag plus
# ACP_BRIDGE_SECRET_KEY, which exists only as a variable and is named in the
# help of --secret-key-file.
mapfile -t known < <(grep -oE 'ACP_BRIDGE_[A-Z0-9_]+' <<<"$help" | sort -u)
declare -A is_known_name=()
for name in "${known[@]}"; do is_known_name[$name]=1; done
mapfile -t flag_envs < <(grep -oE '\[env: ACP_BRIDGE_[A-Z0-9_]+=' <<<"$help" \
    | sed -E 's/^\[env: //; s/=$//' | sort -u)
[[ ${#flag_envs[@]} -gt 0 ]] || fail "no [env: ACP_BRIDGE_…] in \`$bin --help\`: wrong binary?"
is_known() { [[ -n ${is_known_name[$1]:-} ]]; }

# 1. Names used anywhere under deploy/ exist.
while IFS=: read -r file name; do
    is_known "$name" || fail "${file#"$deploy"/} uses $name, which \`acp-bridge --help\` does not know"
done < <(grep -roE 'ACP_BRIDGE_[A-Z0-9_]+' "$deploy" --exclude=verify.sh | sort -u)

# 2. The env example lists every option, at its default when it has one.
# `[default: X]` follows the `[env: NAME=]` line of the same flag.
declare -A defaults=()
while IFS='=' read -r name value; do
    defaults[$name]=$value
done < <(awk '
    /^ +-/ { env = "" }
    match($0, /\[env: ACP_BRIDGE_[A-Z0-9_]+=/) { env = substr($0, RSTART + 6, RLENGTH - 7) }
    env != "" && match($0, /\[default: [^]]*\]/) { print env "=" substr($0, RSTART + 10, RLENGTH - 11); env = "" }
' <<<"$help")
for name in "${known[@]}" RUST_LOG; do
    grep -qE "^#?$name=" "$env_example" \
        || fail "env example has no line for $name"
done
for name in "${!defaults[@]}"; do
    grep -qxF -- "#$name=${defaults[$name]}" "$env_example" \
        || fail "env example: expected the default line #$name=${defaults[$name]}"
done
[[ ${#defaults[@]} -gt 0 ]] || fail "found no [default: …] in --help: the parser above is out of date"

# 3. Values in the env example and the ConfigMap get past the binary's own
# parser. The binary runs with only that one variable set and no key, so
# validation stops it before it connects anywhere; clap's parse errors start
# with `error:`, the daemon's refusals with `acp-bridge:`.
check_value() { # source name value
    local source=$1 name=$2 value=$3 out rc=0
    out=$(cd "$work" && env -i PATH="$PATH" "$name=$value" timeout 10 "$bin" 2>&1 >/dev/null) || rc=$?
    if [[ $rc -eq 0 || $rc -eq 124 ]]; then
        fail "$source: with only $name=$value set the daemon did not refuse to start (rc $rc)"
    elif grep -q '^error:' <<<"$out"; then
        fail "$source: $name=$value is rejected: $(head -n1 <<<"$out")"
    fi
}
checked=0
while IFS='=' read -r name value; do
    case $name in ACP_BRIDGE_SECRET_KEY|ACP_BRIDGE_SECRET_KEY_FILE) continue ;; esac
    [[ -n $value ]] || fail "env example: $name= has an empty value (empty is not unset)"
    check_value "env example" "$name" "$value"
    checked=$((checked + 1))
done < <(sed -nE 's/^#?(ACP_BRIDGE_[A-Z0-9_]+)=(.*)$/\1=\2/p' "$env_example")
while IFS='=' read -r name value; do
    check_value "configmap.yaml" "$name" "$value"
    checked=$((checked + 1))
done < <(sed -nE 's/^  (ACP_BRIDGE_[A-Z0-9_]+): *"?([^"]*)"?$/\1=\2/p' "$configmap")
[[ $failures -eq 0 ]] && pass "${#known[@]} ACP_BRIDGE_* names, ${#defaults[@]} defaults, $checked values match the binary"

grace=$(seconds "${defaults[ACP_BRIDGE_SHUTDOWN_GRACE]:-30s}")
configured_grace=$(sed -nE 's/^  ACP_BRIDGE_SHUTDOWN_GRACE: *"?([^"]*)"?$/\1/p' "$configmap")
[[ -n $configured_grace ]] || configured_grace=$(sed -nE 's/^shutdown-grace *= *"([^"]*)"$/\1/p' "$kube_config")
[[ -z $configured_grace ]] || grace=$(seconds "$configured_grace")

# ------------------------------------------------------------ config file --
# 4. The TOML example has a line `#key = value` for every flag of --help
# (a secret, which the file refuses, is named in a comment `# key …`
# instead; a key named otherwise than its flag, `per-day` in
# [budget.author], has the flag at the end of its comment). Uncommented, it is a file the binary takes, every key counted as
# from the file (`acp-bridge config` says where each value came from); the
# Kubernetes base's config file is taken too.
mapfile -t longs < <(grep -oE '^ {6}--[a-z][a-z-]*' <<<"$help" | sed -E 's/^ +--//' \
    | grep -vxE 'help|help-long|version|config' | sort -u)
for long in "${longs[@]}"; do
    grep -qE "^#?$long = |^# $long |\(--$long\)$" "$toml_example" || fail "TOML example has no key for --$long"
done
# A "<PLACEHOLDER>" (a key without a default) stays commented.
sed -E '/"<[^"]*>"/! s/^#([a-z][a-z-]* = )/\1/' "$toml_example" >"$work/all-keys.toml"
keys_set=$(grep -cE '^[a-z][a-z-]* = ' "$work/all-keys.toml")
taken_from_file() { # source file expected-keys
    local source=$1 file=$2 expected=$3 out rc=0
    out=$(cd "$work" && env -i PATH="$PATH" "$bin" config --config "$file" 2>&1) || rc=$?
    if [[ $rc -ne 0 ]]; then
        fail "$source is refused by the binary: $(head -n1 <<<"$out")"
    elif [[ $(grep -cE '  # file$' <<<"$out") -ne $expected ]]; then
        fail "$source: \`acp-bridge config\` shows $(grep -cE '  # file$' <<<"$out") values from the file, not $expected"
    fi
}
taken_from_file "the TOML example, uncommented" "$work/all-keys.toml" "$keys_set"
taken_from_file "kubernetes/base/acp-bridge.toml" "$kube_config" "$(grep -cE '^[a-z][a-z-]* = ' "$kube_config")"
[[ ${#longs[@]} -gt 0 ]] || fail "found no --flag in --help: the parser above is out of date"
[[ $failures -eq 0 ]] && pass "TOML example: a key for each of ${#longs[@]} flags; it and base/acp-bridge.toml are taken by the binary"

# ---------------------------------------------------------------- systemd --
stop_timeout=$(sed -nE 's/^TimeoutStopSec=(.*)$/\1/p' "$unit")
if [[ -z $stop_timeout ]]; then
    fail "acp-bridge.service sets no TimeoutStopSec"
elif (( $(seconds "$stop_timeout") <= grace )); then
    fail "acp-bridge.service: TimeoutStopSec=$stop_timeout does not exceed the shutdown grace (${grace}s)"
fi

if command -v systemd-analyze >/dev/null; then
    mkdir -p "$work/systemd"
    tmp_unit=$work/systemd/acp-bridge.service
    sed -E "s|^ExecStart=/usr/local/bin/acp-bridge|ExecStart=$bin|" "$unit" >"$tmp_unit"
    grep -q "^ExecStart=$bin" "$tmp_unit" || fail "acp-bridge.service: ExecStart is not /usr/local/bin/acp-bridge"
    rc=0
    out=$(systemd-analyze verify "$tmp_unit" 2>&1) || rc=$?
    # Unknown keys and unparsable values are only warnings to systemd (exit
    # 0); any line about our unit is a failure here. Lines about other units
    # of this machine are shown but not held against us.
    ours=$(grep -F -e "$tmp_unit" -e 'acp-bridge.service' <<<"$out" || true)
    if [[ $rc -ne 0 || -n $ours ]]; then
        fail "systemd-analyze verify (rc $rc):"$'\n'"$out"
    else
        [[ -z $out ]] || echo "$out"
        pass "systemd-analyze verify acp-bridge.service"
    fi
    # Exposure 3.0 ("OK") at most; the unit as shipped scores about 2.5 (the
    # daemon is root with SETUID/SETGID/KILL/SYS_PTRACE, to run its agents as
    # a user of their own).
    if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
        rc=0
        out=$(systemd-analyze security --offline=true --threshold=30 "$tmp_unit" 2>&1) || rc=$?
        score=$(grep -oE 'Overall exposure level for [^:]+: [0-9.]+' <<<"$out" | grep -oE '[0-9.]+$' || true)
        if [[ $rc -ne 0 ]]; then
            fail "systemd-analyze security: exposure ${score:-?} is above 3.0 (hardening was lost)"
        else
            pass "systemd-analyze security: exposure $score"
        fi
    else
        skip "systemd-analyze security --offline (needs systemd >= 250)"
    fi
else
    skip "systemd-analyze not found: acp-bridge.service not verified"
fi

# ----------------------------------------------------------------- remote --
# The wrappers for agents elsewhere parse, and the kubectl one asks for the
# pod it promises: rendered by a stand-in kubectl that prints --overrides.
for script in "$deploy"/remote/*.sh; do
    sh -n "$script" || fail "${script#"$deploy"/} does not parse"
done
mkdir -p "$work/stub"
# A stand-in kubectl: `run` prints --overrides and records --namespace.
cat >"$work/stub/kubectl" <<'STUB'
#!/bin/sh
[ "$1" = run ] || exit 0
for arg; do
    [ "${prev:-}" = --overrides ] && printf '%s' "$arg"
    [ "${prev:-}" = --namespace ] && printf '%s' "$arg" >"$STUB_NAMESPACE_FILE"
    prev=$arg
done
STUB
chmod +x "$work/stub/kubectl"
printf 'apiVersion: v1\nkind: Config\n' >"$work/kubeconfig"
# A pod's service account as kubectl-agent.sh finds it in-cluster: the bot
# runs in the namespace acp-bridge.
mkdir -p "$work/account"
printf 'acp-bridge' >"$work/account/namespace"
printf 'not-a-token' >"$work/account/token"
kubectl_agent() { # env assignments..., then runs the wrapper with `goose acp`
    rm -f "$work/namespace"
    env -i PATH="$work/stub:$PATH" AGENT_IMAGE=registry.example.com/agent:1 \
        STUB_NAMESPACE_FILE="$work/namespace" KUBERNETES_SERVICEACCOUNT_DIR="$work/account" "$@" \
        sh "$deploy/remote/kubectl-agent.sh" goose acp 'it''s "quoted"' 2>&1
}
if pod=$(kubectl_agent KUBECONFIG="$work/kubeconfig") \
    && python3 - "$pod" <<'PY'
import json, sys
spec = json.loads(sys.argv[1])["spec"]
(c,) = spec["containers"]
problems = [what for ok, what in [
    (c["args"] == ["goose", "acp", 'its "quoted"'], "the agent's arguments, quoted"),
    (c["stdin"] and c["stdinOnce"] and not c["tty"], "stdin, stdinOnce, no tty"),
    ("memory" in c["resources"]["limits"] and "cpu" in c["resources"]["limits"], "cpu and memory limits"),
    ([list(e) for e in c["envFrom"]] == [["secretRef"]] and "env" not in c, "only the provider Secret"),
    (spec["automountServiceAccountToken"] is False, "no service account token"),
    (spec["restartPolicy"] == "Never", "restartPolicy Never"),
] if not ok]
for p in problems:
    print(f"FAIL: kubectl-agent.sh pod: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
then pass "deploy/remote: wrappers parse; the agent pod has limits, stdinOnce and only the provider's Secret"
else fail "deploy/remote/kubectl-agent.sh: $pod"
fi
# Where the pods go, and the in-cluster path: by default a namespace of
# their own, never the bot's (which holds its key Secret); in-cluster needs
# the service host, port and a readable token, or it stops with the reason.
remote_ok=1
expect_namespace() { # what, namespace, env...
    local what=$1 want=$2 out got
    shift 2
    out=$(kubectl_agent "$@") || { fail "kubectl-agent.sh ($what) did not start the pod: $out"; remote_ok=0; return; }
    got=$(cat "$work/namespace" 2>/dev/null || echo none)
    [[ $got == "$want" ]] || { fail "kubectl-agent.sh ($what) started the pod in namespace $got, not $want"; remote_ok=0; }
}
expect_refusal() { # what, message, env...
    local what=$1 message=$2 out rc=0
    shift 2
    out=$(kubectl_agent "$@") || rc=$?
    if [[ $rc -ne 78 || $out != *"$message"* || -e $work/namespace ]]; then
        fail "kubectl-agent.sh ($what) must refuse (exit 78, \"$message\"): rc $rc: $out"
        remote_ok=0
    fi
}
in_cluster=(KUBERNETES_SERVICE_HOST=10.0.0.1 KUBERNETES_SERVICE_PORT=443)
expect_namespace "kubeconfig, default namespace" acp-agents KUBECONFIG="$work/kubeconfig"
expect_namespace "in-cluster, default namespace" acp-agents "${in_cluster[@]}"
expect_namespace "in-cluster, AGENT_NAMESPACE" team-agents "${in_cluster[@]}" AGENT_NAMESPACE=team-agents
expect_refusal "the bot's own namespace" "is the bot's own namespace" "${in_cluster[@]}" AGENT_NAMESPACE=acp-bridge
expect_refusal "in-cluster without a token" "cannot be read" "${in_cluster[@]}" KUBERNETES_SERVICEACCOUNT_DIR="$work/no-account"
expect_refusal "no cluster at all" "no cluster" KUBERNETES_SERVICEACCOUNT_DIR="$work/no-account"
[[ $remote_ok -eq 1 ]] && pass "kubectl-agent.sh: pods in acp-agents by default, never the bot's namespace; in-cluster needs host, port and token"

# ------------------------------------------------------------- kubernetes --
if python3 -c 'import yaml' 2>/dev/null; then
    if python3 - "$kube" <<'PY'
import pathlib, sys, yaml
bad = 0
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*.y*ml")):
    try:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        if not docs:
            raise ValueError("no document")
        for doc in docs:
            if not isinstance(doc, dict) or "apiVersion" not in doc or "kind" not in doc:
                raise ValueError("a document without apiVersion/kind")
    except Exception as error:
        print(f"FAIL: {path}: {error}", file=sys.stderr)
        bad += 1
sys.exit(1 if bad else 0)
PY
    then pass "every YAML file under deploy/kubernetes parses"
    else fail "YAML under deploy/kubernetes does not parse"
    fi
else
    skip "python3 yaml module missing: YAML files checked only through kubectl kustomize"
fi

if command -v kubectl >/dev/null; then
    rendered=()
    for dir in "$kube" "$kube"/overlays/*/ "$kube"/remote-agents; do
        dir=${dir%/}
        name=${dir#"$deploy"/}
        out=$work/$(tr / _ <<<"$name").yaml
        if kubectl kustomize "$dir" >"$out" 2>"$work/err"; then
            pass "kubectl kustomize $name"
            rendered+=("$out")
        else
            fail "kubectl kustomize $name: $(cat "$work/err")"
        fi
    done
    # Files no kustomization includes (the Secret example) still have to be
    # valid resources: render each through a throwaway kustomization.
    for file in "$kube"/*.yaml; do
        [[ $(basename "$file") == kustomization.yaml ]] && continue
        mkdir -p "$work/single" && rm -f "$work/single"/*
        cp "$file" "$work/single/resource.yaml"
        printf 'resources:\n  - resource.yaml\n' >"$work/single/kustomization.yaml"
        if kubectl kustomize "$work/single" >/dev/null 2>"$work/err"; then
            pass "kubectl kustomize ${file#"$deploy"/}"
        else
            fail "${file#"$deploy"/}: $(cat "$work/err")"
        fi
    done

    if [[ ${#rendered[@]} -gt 0 ]] && python3 -c 'import yaml' 2>/dev/null; then
        if python3 - "$grace" "${rendered[@]}" <<'PY'
import sys, yaml
grace = int(sys.argv[1])
problems, keys, names = [], {}, {}
launchers, bindings = [], set()
for path in sys.argv[2:]:
    docs = [doc for doc in yaml.safe_load_all(open(path)) if doc]
    pdbs = [doc for doc in docs if doc.get("kind") == "PodDisruptionBudget"]
    ingress_policies = [doc for doc in docs if doc.get("kind") == "NetworkPolicy"
                        and "Ingress" in doc["spec"].get("policyTypes", [])]
    for doc in docs:
        if doc.get("kind") != "StatefulSet":
            continue
        name = doc["metadata"]["name"]
        where = f"{path.rsplit('/', 1)[-1]}: StatefulSet {name}"
        spec = doc["spec"]
        pod = spec["template"]["spec"]
        def need(ok, what):
            if not ok:
                problems.append(f"{where}: {what}")
        main_env = {e["name"]: e.get("value") for c in pod["containers"] if c["name"] == "acp-bridge" for e in c.get("env", [])}
        replicas, shard = spec.get("replicas", 1), main_env.get("ACP_BRIDGE_SHARD")
        if shard is None:
            need(replicas == 1, "replicas must be 1 (one daemon per bot identity), or shards: ACP_BRIDGE_SHARD=auto/<replicas>")
        else:
            # Shards of one bot: each pod's ordinal is its shard index, each
            # has a volume claim of its own, and drains take one at a time.
            need(shard == f"auto/{replicas}", f"ACP_BRIDGE_SHARD={shard} must be auto/{replicas} (replicas)")
            claims = {t["metadata"]["name"] for t in spec.get("volumeClaimTemplates", [])}
            state_mounts = [m["name"] for c in pod["containers"] if c["name"] == "acp-bridge"
                            for m in c.get("volumeMounts", []) if m["mountPath"] == main_env.get("ACP_BRIDGE_STATE_DIR")]
            need(bool(state_mounts) and set(state_mounts) <= claims, "each shard's state dir is a volume claim of its own (volumeClaimTemplates)")
            labels = spec["template"]["metadata"].get("labels", {})
            covering = [p for p in pdbs if p["spec"].get("selector", {}).get("matchLabels", {}).items() <= labels.items()
                        and (p["spec"].get("maxUnavailable") == 1 or p["spec"].get("minAvailable") == replicas - 1)]
            need(bool(covering), "a PodDisruptionBudget selects the shards and lets at most one be down")
        # /metrics is for the scraper only: a policy selects the pod and
        # lets in only chosen peers, only on the metrics port.
        pod_labels = spec["template"]["metadata"].get("labels", {})
        fenced = [p for p in ingress_policies
                  if p["spec"].get("podSelector", {}).get("matchLabels", {}).items() <= pod_labels.items()
                  and all(rule.get("from") and [port.get("port") for port in rule.get("ports", [])] == ["metrics"]
                          for rule in p["spec"].get("ingress", []))]
        need(bool(fenced), "a NetworkPolicy selects the pod and admits only the scraper, only on port metrics")
        need(pod.get("terminationGracePeriodSeconds", 30) > grace,
             f"terminationGracePeriodSeconds must exceed the shutdown grace ({grace}s)")
        psc = pod.get("securityContext", {})
        need("fsGroup" not in psc, "no fsGroup (it would give the agents' group the key and the state)")
        need(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", "seccompProfile RuntimeDefault")
        # Root may keep only what switching to the agent user and stopping
        # the agents take (the layout init container: chown of their dirs).
        allowed_caps = {"acp-bridge": {"SETUID", "SETGID", "KILL"}, "layout": {"CHOWN", "FOWNER"}}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        volumes.update({t["metadata"]["name"]: t for t in spec.get("volumeClaimTemplates", [])})
        main = [c for c in pod["containers"] if c["name"] == "acp-bridge"]
        need(len(main) == 1, "a container named acp-bridge")
        for c in pod["containers"] + pod.get("initContainers", []):
            sc = c.get("securityContext", {})
            cw = f"container {c['name']}"
            need(sc.get("allowPrivilegeEscalation") is False, f"{cw}: allowPrivilegeEscalation false")
            need(sc.get("readOnlyRootFilesystem") is True, f"{cw}: readOnlyRootFilesystem true")
            need(sc.get("capabilities", {}).get("drop") == ["ALL"], f"{cw}: capabilities drop ALL")
            added = set(sc.get("capabilities", {}).get("add", []))
            need(added <= allowed_caps.get(c["name"], set()), f"{cw}: adds capabilities {sorted(added)}")
            for m in c.get("volumeMounts", []):
                need(m["name"] in volumes, f"{cw}: mounts unknown volume {m['name']}")
        for c in main:
            ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            for probe in ("readinessProbe", "livenessProbe"):
                get = c.get(probe, {}).get("httpGet", {})
                need(get.get("path") == "/healthz" and get.get("port") in ports, f"{probe}: httpGet /healthz on a declared port")
            metrics = env.get("ACP_BRIDGE_METRICS_ADDR", "")
            need(metrics.rsplit(":", 1)[-1] == str(ports.get("metrics")), "ACP_BRIDGE_METRICS_ADDR matches the metrics port")
            r, l = c.get("readinessProbe", {}), c.get("livenessProbe", {})
            need(l.get("periodSeconds", 10) * l.get("failureThreshold", 3)
                 > 3 * r.get("periodSeconds", 10) * r.get("failureThreshold", 3),
                 "liveness must be far more lenient than readiness (relay outages must not restart-loop)")
            mounts = {m["mountPath"]: m for m in c.get("volumeMounts", [])}
            # The bot's key, or (NIP-46) the bunker URI that stands for it.
            key_file = env.get("ACP_BRIDGE_SECRET_KEY_FILE") or env.get("ACP_BRIDGE_SIGNER_FILE")
            need(not (env.get("ACP_BRIDGE_SECRET_KEY_FILE") and env.get("ACP_BRIDGE_SIGNER_FILE")),
                 "a key file or a remote signer, not both")
            key_mount = mounts.get(key_file)
            need(key_mount is not None and key_mount.get("readOnly") is True, f"the key file {key_file} is mounted read-only")
            if key_mount:
                secret = volumes.get(key_mount["name"], {}).get("secret", {})
                need(secret.get("defaultMode") == 0o400, "the key Secret's defaultMode is 0400")
                key = secret.get("secretName")
                if key in keys:
                    problems.append(f"{where} and {keys[key]} both use the key Secret {key}: both bots would answer")
                keys[key] = where
            need(any(p == env.get("ACP_BRIDGE_STATE_DIR") for p in mounts), "ACP_BRIDGE_STATE_DIR is a mounted volume")
            need(env.get("ACP_BRIDGE_AGENT_USER") == "acp-agent", "agents run as acp-agent (ACP_BRIDGE_AGENT_USER)")
            cwd, state = env.get("ACP_BRIDGE_CWD") or "", env.get("ACP_BRIDGE_STATE_DIR") or ""
            need(cwd != state and not cwd.startswith(state + "/"), "the agents' ACP_BRIDGE_CWD lies outside the state dir")
            need(any(cwd.startswith(p + "/") for p in mounts), "ACP_BRIDGE_CWD is on a mounted volume")
            need("/tmp" in mounts, "/tmp is mounted (the root file system is read-only)")
            # The config file is a key of a ConfigMap mounted where
            # ACP_BRIDGE_CONFIG says.
            config_file = env.get("ACP_BRIDGE_CONFIG") or ""
            config_dir, _, config_name = config_file.rpartition("/")
            config_mount = mounts.get(config_dir)
            config_map = volumes.get(config_mount["name"], {}).get("configMap", {}).get("name") if config_mount else None
            need(any(d.get("kind") == "ConfigMap" and d["metadata"]["name"] == config_map
                     and config_name in d.get("data", {}) for d in docs),
                 f"ACP_BRIDGE_CONFIG ({config_file or 'unset'}) is a file of a ConfigMap mounted at {config_dir or '?'}")
            need("limits" in c.get("resources", {}) and "memory" in c["resources"]["limits"], "a memory limit")
        # Agents in pods of their own (kubectl-agent.sh): the in-cluster
        # service account is mounted and passed on, and the pods go to a
        # namespace other than the bot's.
        config = {}
        for c in main:
            for source in c.get("envFrom", []):
                ref = source.get("configMapRef", {}).get("name")
                config.update(next((d.get("data", {}) for d in docs
                                    if d.get("kind") == "ConfigMap" and d["metadata"]["name"] == ref), {}))
        if config.get("ACP_BRIDGE_AGENT_COMMAND", "").endswith("kubectl-agent.sh"):
            passed = set(config.get("ACP_BRIDGE_AGENT_ENV", "").split(","))
            need({"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"} <= passed,
                 "kubectl-agent.sh in-cluster: KUBERNETES_SERVICE_HOST and _PORT in ACP_BRIDGE_AGENT_ENV")
            need(pod.get("automountServiceAccountToken") is True and pod.get("serviceAccountName"),
                 "kubectl-agent.sh in-cluster: a serviceAccountName with automountServiceAccountToken true")
            bot_namespace = doc["metadata"].get("namespace", "default")
            agents_namespace = config.get("AGENT_NAMESPACE", "acp-agents")
            need("AGENT_NAMESPACE" not in config or "AGENT_NAMESPACE" in passed, "AGENT_NAMESPACE is passed to the agent")
            need(agents_namespace != bot_namespace,
                 f"the agents' pods must not run in the bot's namespace {bot_namespace}, which holds its key Secret")
            launchers.append((where, bot_namespace, pod.get("serviceAccountName"), agents_namespace))
        if name in names:
            problems.append(f"{where} and {names[name]} share a name")
        names[name] = where
    for doc in docs:
        if doc.get("kind") == "RoleBinding":
            for subject in doc.get("subjects", []):
                if subject.get("kind") == "ServiceAccount":
                    bindings.add((subject.get("namespace"), subject.get("name"), doc["metadata"].get("namespace")))
for where, bot_namespace, account, agents_namespace in launchers:
    if (bot_namespace, account, agents_namespace) not in bindings:
        problems.append(f"{where}: no RoleBinding in {agents_namespace} for its service account {bot_namespace}/{account}")
for p in problems:
    print(f"FAIL: {p}", file=sys.stderr)
sys.exit(1 if problems else 0)
PY
        then pass "rendered StatefulSets: one replica or auto shards with a PDB, own key, hardened, probes on /healthz, metrics fenced by a NetworkPolicy; agents in pods of their own go to a namespace bound for it, not the bot's"
        else fail "rendered StatefulSets (see above)"
        fi
    fi
else
    skip "kubectl not found: kustomizations not rendered"
fi

# -------------------------------------------------------------- container --
dockerfile=$deploy/container/Dockerfile
for line in "ENV ACP_BRIDGE_STATE_DIR=/var/lib/acp-bridge" "ACP_BRIDGE_SECRET_KEY_FILE=/run/secrets/nostr-key" \
    "EXPOSE 9464" 'VOLUME ["/var/lib/acp-bridge", "/var/lib/acp-agent"]' "ACP_BRIDGE_AGENT_USER=acp-agent" \
    "ACP_BRIDGE_CWD=/var/lib/acp-agent/workspace" "--uid 10001"; do
    grep -qF -- "$line" "$dockerfile" || fail "Dockerfile lacks: $line"
done
grep -qx 'target/' "$deploy/container/Dockerfile.dockerignore" 2>/dev/null \
    || fail "container/Dockerfile.dockerignore must exclude target/ from the build context"
toolchain=$(sed -nE 's/^channel *= *"([^"]+)".*/\1/p' "$deploy/../rust-toolchain.toml" 2>/dev/null || true)
if [[ -n $toolchain ]]; then
    grep -qE "^FROM rust:$toolchain-" "$dockerfile" \
        || fail "Dockerfile's rust image is not the rust-toolchain.toml release ($toolchain)"
    grep -qF "RUSTUP_TOOLCHAIN=$toolchain" "$dockerfile" \
        || fail "Dockerfile's RUSTUP_TOOLCHAIN is not the rust-toolchain.toml release ($toolchain)"
fi
# The agent is pinned: no floating "current release" default, and the build
# refuses to guess when none is named.
if grep -qE '^ARG GOOSE_VERSION=$' "$dockerfile" || ! grep -qF 'test -n "${GOOSE_VERSION}"' "$dockerfile"; then
    fail "Dockerfile's with-goose must pin goose: no empty GOOSE_VERSION default, and refuse a build without one"
fi
skip "docker build (needs a docker engine; the Dockerfile is checked only for the lines above)"

echo
if [[ $failures -gt 0 ]]; then
    echo "$failures problem(s)" >&2
    exit 1
fi
echo "deploy/ is consistent with $bin"
