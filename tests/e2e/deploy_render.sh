#!/usr/bin/env bash
# Renders deploy/base and every deploy/overlays/* with `kubectl kustomize` (offline, no cluster)
# and checks what the manifests promise: the kinds, the exact RBAC verbs, the pod's security
# settings and probes, ConfigMap wiring, and that the faultline-rules ConfigMap holds exactly
# rules/*.yaml, byte for byte. The collector configs are cross-checked against the faultline
# configs (topics, endpoint). With FL_BUILD set and the binary built, the rendered configs and
# rule bank are also loaded by `faultline` itself.
# Env: FL_SOURCE = repository root (required); FL_BUILD = build directory (optional).
# YAML -> JSON without a server or python-yaml: `kubectl annotate --local -o json -f -`.
set -eEuo pipefail

fail() {
  echo "FAIL: $*" >&2
  exit 1
}
trap 'fail "line $LINENO: command exited with $?"' ERR

src="${FL_SOURCE:?FL_SOURCE must be the repository root}"
command -v kubectl >/dev/null || fail "kubectl not installed"
command -v jq >/dev/null || fail "jq not installed"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# No user kubeconfig, cache or network: kustomize and --local need none.
export HOME="$tmp/home" KUBECONFIG="$tmp/no-kubeconfig" KUBECACHEDIR="$tmp/kube-cache"
mkdir -p "$HOME"

# YAML stream on stdin -> JSON array of objects on stdout; $1 names the input for errors.
to_json() {
  kubectl annotate --local -o json -f - faultline.dev/render-check=1 2>"$tmp/annotate.err" |
    jq -s '[.[] | if .kind == "List" then .items[] else . end
            | del(.metadata.annotations["faultline.dev/render-check"])]' ||
    fail "$1: YAML to JSON conversion failed: $(cat "$tmp/annotate.err")"
}

# Plain YAML file (not a Kubernetes object) -> JSON, by wrapping it as the spec of one.
yaml_file_json() {
  { printf 'apiVersion: v1\nkind: FaultlineYaml\nmetadata:\n  name: wrapped\nspec:\n'
    sed 's/^/  /' "$1"; } | to_json "${1#"$src/"}" | jq '.[0].spec'
}

render() {  # $1 = dir relative to deploy/, $2 = output JSON
  kubectl kustomize "$src/deploy/$1" >"$tmp/out.yaml" 2>"$tmp/kustomize.err" ||
    fail "kubectl kustomize deploy/$1: $(cat "$tmp/kustomize.err")"
  # Deprecation warnings (e.g. commonLabels) are failures too: keep the layout current.
  [[ ! -s $tmp/kustomize.err ]] || fail "kubectl kustomize deploy/$1 warned: $(cat "$tmp/kustomize.err")"
  to_json "kubectl kustomize deploy/$1" <"$tmp/out.yaml" >"$2"
}

# jq expression over the render must be true; $2 names the check.
expect() {  # $1 = render JSON, $2 = what, $3 = jq filter yielding true/false
  local got
  got=$(jq -r "$3" "$1") || fail "$2: jq error"
  [[ $got == true ]] || fail "$(basename "$1" .json): $2 (got: $got)"
}

# The rule bank, sorted file names.
mapfile -t rule_files < <(cd "$src/rules" && ls -1 -- *.yaml | LC_ALL=C sort)
[[ ${#rule_files[@]} -gt 0 ]] || fail "no rules/*.yaml"
rule_keys=$(printf '%s\n' "${rule_files[@]}" | jq -R . | jq -sc .)

# ClusterRole and Role rules, flattened to "group/resource:verb", sorted.
expected_cluster='["/events:create","/events:patch","/nodes/status:patch","/nodes:get","/nodes:list","/nodes:patch"]'
expected_role='["/configmaps:create","/configmaps:get","coordination.k8s.io/leases:create","coordination.k8s.io/leases:get","coordination.k8s.io/leases:update"]'
flatten_rules='[.rules[] | .apiGroups[] as $g | .resources[] as $r | .verbs[] as $v
                | "\($g)/\($r):\($v)"] | unique'

check_common() {  # $1 = render JSON, $2 = number of ConfigMaps expected, $3 = replicas, $4 = PDBs
  local j=$1
  for kind in Namespace ServiceAccount ClusterRole ClusterRoleBinding Role RoleBinding \
              Deployment; do
    expect "$j" "exactly one $kind" "[.[] | select(.kind == \"$kind\")] | length == 1"
  done
  expect "$j" "$4 PodDisruptionBudget(s)" "[.[] | select(.kind == \"PodDisruptionBudget\")] | length == $4"
  expect "$j" "$2 ConfigMap(s)" "[.[] | select(.kind == \"ConfigMap\")] | length == $2"
  expect "$j" "Namespace is faultline" '.[] | select(.kind == "Namespace") | .metadata.name == "faultline"'
  expect "$j" "namespaced objects live in faultline" \
    '[.[] | select(.kind | IN("Namespace","ClusterRole","ClusterRoleBinding") | not)
     | .metadata.namespace] | all(. == "faultline")'

  # RBAC: exactly the verbs the code needs (protocols.md 4.6), nothing more.
  expect "$j" "ClusterRole rules are exactly $expected_cluster" \
    "(.[] | select(.kind == \"ClusterRole\") | $flatten_rules) == $expected_cluster"
  expect "$j" "Role rules are exactly $expected_role" \
    "(.[] | select(.kind == \"Role\") | $flatten_rules) == $expected_role"
  local sa='.subjects == [{"kind":"ServiceAccount","name":"faultline","namespace":"faultline"}]'
  expect "$j" "ClusterRoleBinding binds the ClusterRole to the ServiceAccount" \
    ".[] | select(.kind == \"ClusterRoleBinding\")
     | .roleRef.kind == \"ClusterRole\" and .roleRef.name == \"faultline\" and $sa"
  expect "$j" "RoleBinding binds the Role to the ServiceAccount" \
    "(.[] | select(.kind == \"Role\") | .metadata.name) as \$role
     | .[] | select(.kind == \"RoleBinding\") | .roleRef.kind == \"Role\" and .roleRef.name == \$role and $sa"
  expect "$j" "ServiceAccount is faultline" '.[] | select(.kind == "ServiceAccount") | .metadata.name == "faultline"'

  # Deployment basics.
  local d='(.[] | select(.kind == "Deployment"))'
  local c="($d | .spec.template.spec.containers | if length == 1 then .[0] else error(\"containers: \\(length)\") end)"
  expect "$j" "replicas $3" "$d | .spec.replicas == $3"
  expect "$j" "POD_NAME from the downward API (Lease identity)" \
    "$c | any(.env[]?; .name == \"POD_NAME\" and .valueFrom.fieldRef.fieldPath == \"metadata.name\")"
  expect "$j" "serviceAccountName faultline" "$d | .spec.template.spec.serviceAccountName == \"faultline\""
  expect "$j" "image faultline:latest" "$c | .image == \"faultline:latest\""
  expect "$j" "args serve --config /etc/faultline/config.yaml" \
    "$c | .args == [\"serve\",\"--config\",\"/etc/faultline/config.yaml\"]"
  expect "$j" "selector matches the pod labels" \
    "$d | .spec.selector.matchLabels as \$s | .spec.template.metadata.labels | contains(\$s)"

  # Security context: pod and container level.
  local p="($d | .spec.template.spec.securityContext)"
  expect "$j" "pod runAsNonRoot, runAsUser 65532, seccomp RuntimeDefault" \
    "$p | .runAsNonRoot == true and .runAsUser == 65532 and .seccompProfile.type == \"RuntimeDefault\""
  expect "$j" "container securityContext locked down" \
    "$c | .securityContext | .runAsNonRoot == true and .runAsUser == 65532
       and .readOnlyRootFilesystem == true and .allowPrivilegeEscalation == false
       and .capabilities.drop == [\"ALL\"] and .seccompProfile.type == \"RuntimeDefault\""
  expect "$j" "no privileged or added capabilities" \
    "$c | (.securityContext.privileged // false) == false and (.securityContext.capabilities.add // []) == []"
  expect "$j" "resources requests and limits for cpu and memory" \
    "$c | .resources | (.requests | has(\"cpu\") and has(\"memory\")) and (.limits | has(\"cpu\") and has(\"memory\"))"
  expect "$j" "container port http = 8080" \
    "$c | any(.ports[]; .name == \"http\" and .containerPort == 8080)"

  # ConfigMap wiring: every configMap volume names a ConfigMap of the render (hashed names);
  # only the base leaves faultline-config to the overlays.
  local unresolved='[]'
  [[ $2 == 1 ]] && unresolved='["faultline-config"]'
  expect "$j" "configMap volumes reference rendered ConfigMaps (unresolved: $unresolved)" \
    "[.[] | select(.kind == \"ConfigMap\") | .metadata.name] as \$cms
     | [$d | .spec.template.spec.volumes[] | select(.configMap) | .configMap.name] as \$refs
     | (\$refs | length == 2) and ([\$refs[] | select(. as \$n | \$cms | index(\$n) == null)] == $unresolved)"
  expect "$j" "rules ConfigMap mounted at /etc/faultline/rules" \
    "($d | .spec.template.spec.volumes[] | select(.configMap.name // \"\" | startswith(\"faultline-rules-\")) | .name) as \$v
     | $c | any(.volumeMounts[]; .name == \$v and .mountPath == \"/etc/faultline/rules\" and .readOnly == true)"

  # PodDisruptionBudget.
  expect "$j" "PDB maxUnavailable 1 selecting the pods" \
    "($d | .spec.template.metadata.labels) as \$l | [.[] | select(.kind == \"PodDisruptionBudget\")
     | .spec.selector.matchLabels as \$sel
     | .spec.maxUnavailable == 1 and (\$sel | length > 0) and (\$l | contains(\$sel))] | all"

  # The rules ConfigMap: one key per rules/*.yaml, identical content.
  local rules_cm='(.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("faultline-rules-"))))'
  expect "$j" "one faultline-rules-<hash> ConfigMap" "[$rules_cm] | length == 1"
  expect "$j" "faultline-rules keys == rules/*.yaml $rule_keys" \
    "$rules_cm | ((.data // {}) | keys) == $rule_keys and (.binaryData == null)"
  local f
  for f in "${rule_files[@]}"; do
    jq -j --arg k "$f" "$rules_cm | .data[\$k]" "$j" >"$tmp/cm.rule"
    cmp -s "$tmp/cm.rule" "$src/rules/$f" ||
      fail "$(basename "$j" .json): faultline-rules[$f] differs from rules/$f; run deploy/sync-rules.sh"
  done
}

check_probes() {  # $1 = render JSON: httpGet /healthz and /readyz on the http (8080) port
  local c='(.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0])'
  expect "$1" "livenessProbe httpGet /healthz on http" \
    "$c | .livenessProbe.httpGet | .path == \"/healthz\" and .port == \"http\""
  expect "$1" "readinessProbe httpGet /readyz on http" \
    "$c | .readinessProbe.httpGet | .path == \"/readyz\" and .port == \"http\""
}

check_config() {  # $1 = render JSON, $2 = overlay; config ConfigMap == overlays/$2/config.yaml
  local j=$1
  local cfg_cm='(.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("faultline-config-"))))'
  expect "$j" "one faultline-config-<hash> ConfigMap with key config.yaml" \
    "[$cfg_cm] | length == 1 and ((.[0].data // {}) | keys) == [\"config.yaml\"]"
  jq -j "$cfg_cm | .data[\"config.yaml\"]" "$j" >"$tmp/$2.config.yaml"
  cmp -s "$tmp/$2.config.yaml" "$src/deploy/overlays/$2/config.yaml" ||
    fail "$2: faultline-config[config.yaml] differs from deploy/overlays/$2/config.yaml"
  local d='(.[] | select(.kind == "Deployment") | .spec.template.spec)'
  expect "$j" "config.yaml mounted at /etc/faultline/config.yaml" \
    "($d | .volumes[] | select(.configMap.name // \"\" | startswith(\"faultline-config-\")) | .name) as \$v
     | $d | .containers[0].volumeMounts | any(.name == \$v and .mountPath == \"/etc/faultline/config.yaml\" and .subPath == \"config.yaml\")"
  yaml_file_json "$tmp/$2.config.yaml" >"$tmp/$2.config.json"
  expect "$tmp/$2.config.json" "config rules: /etc/faultline/rules" '.rules == "/etc/faultline/rules"'
  expect "$tmp/$2.config.json" "config kubernetes: in-cluster (no server)" \
    '.kubernetes | type == "object" and (has("server") | not)'
}

check_collector() {  # $1 = collector config JSON: every pipeline component is defined
  expect "$1" "collector pipelines reference defined components" \
    '. as $c | [.service.pipelines[] | (.receivers[] | in($c.receivers)),
                (.processors[] | in($c.processors)), (.exporters[] | in($c.exporters))] | all'
  expect "$1" "collector reads the kernel via journald dmesg and pods via filelog+container" \
    '(.receivers | to_entries | any(.key | startswith("journald")) and any(.value.dmesg == true))
     and (.receivers | to_entries | any(.key | startswith("filelog"))
          and any(.value.operators // [] | any(.type == "container")))'
  expect "$1" "k8sattributes filtered on KUBE_NODE_NAME" \
    '.processors.k8sattributes.filter.node_from_env_var == "KUBE_NODE_NAME"'
  expect "$1" "resource processor upserts k8s.node.name" \
    '[.processors | to_entries[] | select(.key | startswith("resource")) | .value.attributes[]
      | select(.key == "k8s.node.name")] | length > 0'
}

# --- base ---
render base "$tmp/base.json"
check_common "$tmp/base.json" 1 2 1
check_probes "$tmp/base.json"
expect "$tmp/base.json" "no Service in base" '[.[] | select(.kind == "Service")] | length == 0'

# --- every overlay ---
overlays=()
for dir in "$src"/deploy/overlays/*/; do overlays+=("$(basename "$dir")"); done
[[ " ${overlays[*]} " == *" kafka "* && " ${overlays[*]} " == *" push "* ]] ||
  fail "expected overlays kafka and push, found: ${overlays[*]}"
for o in "${overlays[@]}"; do
  render "overlays/$o" "$tmp/$o.json"
  # push: no PDB (only the Lease holder is Ready; see overlays/push/kustomization.yaml).
  check_common "$tmp/$o.json" 2 2 "$([[ $o == push ]] && echo 0 || echo 1)"
  check_config "$tmp/$o.json" "$o"
  [[ -f $src/deploy/overlays/$o/otel-collector.yaml ]] || fail "$o: no otel-collector.yaml"
  yaml_file_json "$src/deploy/overlays/$o/otel-collector.yaml" >"$tmp/$o.collector.json"
  check_collector "$tmp/$o.collector.json"
done

# kafka: works with today's binary, so no probes until the push server (issue 3) serves them.
k="$tmp/kafka.json"
expect "$k" "no Service (Kafka consumer only)" '[.[] | select(.kind == "Service")] | length == 0'
expect "$k" "no probes until issue 3 (overlay patch)" \
  '.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0]
   | has("livenessProbe") or has("readinessProbe") | not'
kc="$tmp/kafka.config.json"
expect "$kc" "kafka config: leader election and the blast-radius guard" \
  '(.kubernetes.leader_election | type == "object") and (.kubernetes.guard.max_tainted > 0)
   and (.kubernetes.guard.max_tainted_percent > 0) and (.kubernetes.guard.max_new > 0)'
expect "$kc" "kafka config: topics use today's decoders (raw|json)" \
  '.kafka.topics | length > 0 and all(.encoding | IN("raw", "json"))'
expect "$kc" "kafka config: a raw kernel topic and a json pod topic" \
  '(.kafka.topics | any(.encoding == "raw" and .stream == "kernel"))
   and (.kafka.topics | any(.encoding == "json" and .stream == "pod"))'
kcol="$tmp/kafka.collector.json"
topics_cfg=$(jq -c '[.kafka.topics[].name] | sort' "$kc")
topics_col=$(jq -c '[.exporters | to_entries[] | select(.key | startswith("kafka")) | .value.logs.topic] | sort' "$kcol")
[[ $topics_cfg == "$topics_col" ]] ||
  fail "kafka: collector exporter topics $topics_col != faultline config topics $topics_cfg"
expect "$kcol" "kafka collector: exporters use raw encoding (otlp_proto is not decoded yet)" \
  '[.exporters | to_entries[] | select(.key | startswith("kafka")) | .value.logs.encoding] | all(. == "raw")'
expect "$kcol" "kafka collector: node header on every exporter (raw drops resources)" \
  '[.exporters | to_entries[] | select(.key | startswith("kafka")) | .value.record_headers.node]
   | all(. == "${env:KUBE_NODE_NAME}")'
node_headers=$(jq -c '[.kafka.topics[].node_header] | unique' "$kc")
[[ $node_headers == '["node"]' ]] || fail "kafka: faultline node_header $node_headers != [\"node\"]"

# push: Service with Loki push 3100 and OTLP/HTTP 4318 onto the one listener (port http, 8080).
p="$tmp/push.json"
check_probes "$p"
expect "$p" "exactly one Service" '[.[] | select(.kind == "Service")] | length == 1'
expect "$p" "Service ports 3100 loki-push and 4318 otlp-http onto http" \
  '.[] | select(.kind == "Service") | [.spec.ports[] | {name, port, targetPort}] | sort_by(.port)
   == [{"name":"loki-push","port":3100,"targetPort":"http"},
       {"name":"otlp-http","port":4318,"targetPort":"http"}]'
expect "$p" "Service selects the pods and targets declared container ports" \
  '(.[] | select(.kind == "Deployment") | .spec.template) as $t
   | .[] | select(.kind == "Service") | .spec.selector as $sel
   | ($t.metadata.labels | contains($sel)) and ($sel | length > 0)
     and all(.spec.ports[].targetPort; . as $n | $t.spec.containers[0].ports | any(.name == $n))'
# Readiness follows the Lease, so rollouts replace every pod at once and probes are frequent.
expect "$p" "push: rolling update with maxUnavailable 100% (a new pod is Ready only as leader)" \
  '.[] | select(.kind == "Deployment") | .spec.strategy
   | .type == "RollingUpdate" and .rollingUpdate.maxUnavailable == "100%"'
expect "$p" "push: readiness probed every 2 s" \
  '.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].readinessProbe.periodSeconds == 2'
pc="$tmp/push.config.json"
expect "$pc" "push config: listens on the container port http (8080)" '.http.listen == "0.0.0.0:8080"'
expect "$pc" "push config: leader election and the blast-radius guard" \
  '(.kubernetes.leader_election | type == "object") and (.kubernetes.guard.max_tainted > 0)
   and (.kubernetes.guard.max_tainted_percent > 0) and (.kubernetes.guard.max_new > 0)'
expect "$pc" "push config: no kafka source" 'has("kafka") | not'
expect "$tmp/push.collector.json" "push collector: otlphttp to the Service on 4318" \
  '[.exporters | to_entries[] | select(.key | startswith("otlphttp")) | .value.endpoint]
   == ["http://faultline.faultline.svc:4318"]'

# --- the binary accepts what the manifests mount (optional: needs a build) ---
fl="${FL_BUILD:-}/faultline"
if [[ -n ${FL_BUILD:-} && -x $fl ]]; then
  # Lay the rules ConfigMap out as the kubelet does (files are symlinks into ..data/).
  vol="$tmp/rules-volume"
  mkdir -p "$vol/..2025_01_01_00_00_00.000000000"
  ln -s ..2025_01_01_00_00_00.000000000 "$vol/..data"
  for f in "${rule_files[@]}"; do
    jq -j --arg k "$f" '.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("faultline-rules-")))
                        | .data[$k]' "$tmp/kafka.json" >"$vol/..data/$f"
    ln -s "..data/$f" "$vol/$f"
  done
  "$fl" rules test "$vol" >"$tmp/rules-test.out" 2>&1 ||
    fail "faultline rules test on the rules ConfigMap: $(cat "$tmp/rules-test.out")"
  # The kafka config loads (kafka section, librdkafka properties, taint). `kubernetes:` without
  # a server means in-cluster, unavailable here: point it at an unused address; replay sends
  # nothing.
  sed 's|^kubernetes:.*$|kubernetes:\n  server: "http://127.0.0.1:9"|' "$tmp/kafka.config.yaml" >"$tmp/kafka.local.yaml"
  grep -q '^  server: "http' "$tmp/kafka.local.yaml" || fail "kafka config: no 'kubernetes:' line to rewrite"
  "$fl" replay --config "$tmp/kafka.local.yaml" --rules "$vol" --decisions "$tmp/decisions" \
    >"$tmp/replay.out" 2>&1 || fail "faultline does not load the kafka config: $(cat "$tmp/replay.out")"
  # The push config too (its http section is parsed and checked; replay does not listen).
  sed 's|^kubernetes:.*$|kubernetes:\n  server: "http://127.0.0.1:9"|' "$tmp/push.config.yaml" >"$tmp/push.local.yaml"
  "$fl" replay --config "$tmp/push.local.yaml" --rules "$vol" --decisions "$tmp/decisions" \
    >"$tmp/replay.out" 2>&1 || fail "faultline does not load the push config: $(cat "$tmp/replay.out")"
  echo "faultline loaded the rendered rules ConfigMap, kafka and push configs ($(cat "$tmp/rules-test.out"))"
else
  echo "FL_BUILD/faultline not built: skipping the binary's load of the rendered config"
fi

echo "PASS: rendered base and overlays (${overlays[*]}); ${#rule_files[@]} rule files in faultline-rules"
