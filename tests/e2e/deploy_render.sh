#!/usr/bin/env bash
# Renders deploy/base and every deploy/overlays/* with `kubectl kustomize` (offline, no cluster)
# and checks what the manifests promise: the kinds, the exact RBAC verbs, the pod's security
# settings and probes, ConfigMap wiring, and that the faultline-rules ConfigMap holds exactly
# rules/*.yaml, byte for byte. The collector configs are cross-checked against the faultline
# configs (topics, encoding, partition key, endpoint). With FL_BUILD set and the binary built,
# the rendered configs and rule bank are also loaded by `faultline` itself, and the kafka config
# is served against a librdkafka mock cluster and the test API server (needs kcat, protoc, curl
# and the test tools mock_kafka and fake_apiserver of the build).
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
  # kustomize learned `labels:` in v4.1 (kubectl 1.22): older ones say 'unknown field "labels"'.
  kubectl kustomize "$src/deploy/$1" >"$tmp/out.yaml" 2>"$tmp/kustomize.err" ||
    fail "kubectl kustomize deploy/$1: $(cat "$tmp/kustomize.err") (kubectl 1.22 or later needed)"
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

  # RBAC: exactly the verbs the code needs (sinks/kubernetes/taint_sink.h, leader_elector.h),
  # nothing more.
  expect "$j" "ClusterRole rules are exactly $expected_cluster" \
    "(.[] | select(.kind == \"ClusterRole\") | $flatten_rules) == $expected_cluster"
  expect "$j" "Role rules are exactly $expected_role" \
    "(.[] | select(.kind == \"Role\") | $flatten_rules) == $expected_role"
  # What resourceNames can restrict (all but create) is the one object faultline uses.
  expect "$j" "Role get/update only of the Lease faultline and the ConfigMap faultline-breaker" \
    '[.[] | select(.kind == "Role") | .rules[] | select(any(.verbs[]; . != "create"))
      | .resourceNames] == [["faultline"], ["faultline-breaker"]]'
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
  # The working set measured (a Kafka catch-up under 400 MiB): a lower request gets faultline
  # evicted first under memory pressure.
  expect "$j" "a memory request of the working set (384Mi)" "$c | .resources.requests.memory == \"384Mi\""
  expect "$j" "replicas kept apart: pod anti-affinity on kubernetes.io/hostname" \
    "$d | .spec.template.spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution
       | any(.[]; .podAffinityTerm.topologyKey == \"kubernetes.io/hostname\"
                  and .podAffinityTerm.labelSelector.matchLabels == {\"app.kubernetes.io/name\": \"faultline\"})"
  expect "$j" "container port http = 8080" \
    "$c | any(.ports[]; .name == \"http\" and .containerPort == 8080)"
  expect "$j" "container port probe = 8081" \
    "$c | any(.ports[]; .name == \"probe\" and .containerPort == 8081)"

  # ConfigMap wiring: every configMap volume names a ConfigMap of the render (faultline-config's
  # name hashed, faultline-rules' not: the kubelet updates it in place, and the service reads it
  # again); only the base leaves faultline-config to the overlays.
  local unresolved='[]'
  [[ $2 == 1 ]] && unresolved='["faultline-config"]'
  expect "$j" "configMap volumes reference rendered ConfigMaps (unresolved: $unresolved)" \
    "[.[] | select(.kind == \"ConfigMap\") | .metadata.name] as \$cms
     | [$d | .spec.template.spec.volumes[] | select(.configMap) | .configMap.name] as \$refs
     | (\$refs | length == 2) and ([\$refs[] | select(. as \$n | \$cms | index(\$n) == null)] == $unresolved)"
  expect "$j" "rules ConfigMap mounted at /etc/faultline/rules" \
    "($d | .spec.template.spec.volumes[] | select(.configMap.name // \"\" | . == \"faultline-rules\") | .name) as \$v
     | $c | any(.volumeMounts[]; .name == \$v and .mountPath == \"/etc/faultline/rules\" and .readOnly == true)"

  # PodDisruptionBudget.
  expect "$j" "PDB maxUnavailable 1 selecting the pods" \
    "($d | .spec.template.metadata.labels) as \$l | [.[] | select(.kind == \"PodDisruptionBudget\")
     | .spec.selector.matchLabels as \$sel
     | .spec.maxUnavailable == 1 and (\$sel | length > 0) and (\$l | contains(\$sel))] | all"

  # The rules ConfigMap: one key per rules/*.yaml, identical content.
  local rules_cm='(.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("faultline-rules"))))'
  expect "$j" "one faultline-rules ConfigMap, its name without a hash" \
    "[$rules_cm] | length == 1 and .[0].metadata.name == \"faultline-rules\""
  expect "$j" "faultline-rules keys == rules/*.yaml $rule_keys" \
    "$rules_cm | ((.data // {}) | keys) == $rule_keys and (.binaryData == null)"
  local f
  for f in "${rule_files[@]}"; do
    jq -j --arg k "$f" "$rules_cm | .data[\$k]" "$j" >"$tmp/cm.rule"
    cmp -s "$tmp/cm.rule" "$src/rules/$f" ||
      fail "$(basename "$j" .json): faultline-rules[$f] differs from rules/$f; run deploy/sync-rules.sh"
  done
}

# $1 = render JSON: httpGet /healthz and /readyz on the probe (8081) port, the config's
# http.probe_listen: on the push port they would wait for the push threads, which any client
# can hold, and time out.
check_probes() {
  local c='(.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0])'
  expect "$1" "livenessProbe httpGet /healthz on probe" \
    "$c | .livenessProbe.httpGet | .path == \"/healthz\" and .port == \"probe\""
  expect "$1" "readinessProbe httpGet /readyz on probe" \
    "$c | .readinessProbe.httpGet | .path == \"/readyz\" and .port == \"probe\""
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
  # The boot banner, the recovery signal of reboot-cleared faults, is printed before the
  # collector pod starts: read from the start of the boot, resumed from a stored cursor.
  expect "$1" "journald reads from the start of the boot, its cursor in a storage extension" \
    '. as $c | [.receivers | to_entries[] | select(.key | startswith("journald")) | .value]
     | length > 0 and all(.start_at == "beginning" and (.storage | type == "string")
       and (.storage | in($c.extensions)) and (.storage as $s | $c.service.extensions | index($s)))'
  # Without a job, pod hits count no jobs: the rules that need two jobs never fire.
  expect "$1" "k8sattributes names the pod's job (Job, JobSet, Kubeflow)" \
    '.processors.k8sattributes.extract | (.metadata | index("k8s.job.name"))
     and ([.labels[].tag_name] | index("jobset.sigs.k8s.io/jobset-name")
          and index("training.kubeflow.org/job-name"))'
  expect "$1" "exporters compress with zstd, cheapest for faultline to read" \
    '[.exporters[] | .compression // .producer.compression] | all(. == "zstd")'
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

# kafka: the base's probes (the config's http section serves them), its PDB, no Service.
k="$tmp/kafka.json"
check_probes "$k"
expect "$k" "no Service (Kafka consumer only; /metrics is scraped per pod)" \
  '[.[] | select(.kind == "Service")] | length == 0'
expect "$k" "kafka: the base's rolling update (both replicas Ready, one at a time)" \
  '.[] | select(.kind == "Deployment") | has("strategy") | not'
expect "$k" "kafka: a progress deadline that a catch-up of the retention fits (2 h, not 600 s)" \
  '.[] | select(.kind == "Deployment") | .spec.progressDeadlineSeconds == 7200'
kc="$tmp/kafka.config.json"
expect "$kc" "kafka config: http listens on the container port http (8080)" \
  '.http.listen == "0.0.0.0:8080"'
expect "$kc" "kafka config: probes and metrics on the container port probe (8081), where the probes look" \
  '.http.probe_listen == "0.0.0.0:8081"'
expect "$kc" "kafka config: pushes refused (empty token file)" '.http.token_file == "/dev/null"'
expect "$kc" "kafka config: leader election and the blast-radius guard" \
  '(.kubernetes.leader_election | type == "object") and (.kubernetes.guard.max_tainted > 0)
   and (.kubernetes.guard.max_tainted_percent > 0) and (.kubernetes.guard.max_new > 0)'
expect "$kc" "kafka config: every topic is otlp_proto, the OTel kafka exporter's default" \
  '.kafka.topics | length > 0 and all(.encoding == "otlp_proto")'
# Kernel and pod records share the topic: a `stream: kernel` default would let an unmarked
# record pass for kernel output.
expect "$kc" "kafka config: no topic defaults its records to the kernel stream" \
  '.kafka.topics | all((.stream // "other") != "kernel")'
# librdkafka 2.0.2 pauses fetching for about a second when its pre-fetch queue is full: a new
# pod's catch-up needs a queue of about a second of the topic (README, "The live service").
expect "$kc" "kafka config: a pre-fetch queue of 256 MiB for catch-up" \
  '.kafka.properties["queued.max.messages.kbytes"] == "262144"'
kcol="$tmp/kafka.collector.json"
kafka_exporters='[.exporters | to_entries[] | select(.key | test("^kafka(/|$)"))]'
topics_cfg=$(jq -c '[.kafka.topics[].name] | sort' "$kc")
topics_col=$(jq -c "[${kafka_exporters}[] | .value.logs.topic] | unique" "$kcol")
[[ $topics_cfg == "$topics_col" ]] ||
  fail "kafka: collector exporter topics $topics_col != faultline config topics $topics_cfg"
expect "$kcol" "kafka collector: exporters send otlp_proto, keyed by resource attributes" \
  "$kafka_exporters | length > 0 and all(.value.logs.encoding == \"otlp_proto\"
     and .value.partition_logs_by_resource_attributes == true)"
# The key hashes all resource attributes: every pipeline into Kafka must cut the resource down to
# the node, or one node's pods land in many partitions; first the records take the resource's
# attributes, or pod records would lose k8s.pod.name (and the pod rules).
expect "$kcol" "kafka collector: every Kafka pipeline keys by the node alone, last" \
  '[.processors | to_entries[] | select(.value.log_statements // [] | map(
       if .context == "log" and .statements == ["merge_maps(attributes, resource.attributes, \"upsert\")"] then "copy"
       elif .context == "resource" and .statements == ["keep_keys(attributes, [\"k8s.node.name\"])"] then "cut"
       else "other" end) == ["copy", "cut"])
     | .key] as $keyers
   | [.service.pipelines[] | select(any(.exporters[]; test("^kafka(/|$)")))]
   | length > 0 and all(.processors | .[-1] | IN($keyers[]))'
# Concurrent produce calls let a node's batches land in its partition out of order.
expect "$kcol" "kafka collector: one batch in flight, so a node's lines land in order" \
  "$kafka_exporters | length > 0 and all(.value.sending_queue.num_consumers == 1)"
# A record over the producer's max_message_bytes is refused and dropped: batches must be cut by
# bytes below it (a batch processor counts records).
expect "$kcol" "kafka collector: batches cut by bytes under the producer's max_message_bytes" \
  "$kafka_exporters | length > 0 and all(. as \$e | .value.sending_queue.batch | .sizer == \"bytes\"
     and .max_size > 0 and .max_size < (\$e.value.producer.max_message_bytes // 1000000))"

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
expect "$pc" "push config: probes and metrics on the container port probe (8081), where the probes look" \
  '.http.probe_listen == "0.0.0.0:8081"'
expect "$pc" "push config: leader election and the blast-radius guard" \
  '(.kubernetes.leader_election | type == "object") and (.kubernetes.guard.max_tainted > 0)
   and (.kubernetes.guard.max_tainted_percent > 0) and (.kubernetes.guard.max_new > 0)'
expect "$pc" "push config: no kafka source" 'has("kafka") | not'
# Without a token any pod reaching the Service pushes a forged kernel line for any node and
# taints it. The token comes from a Secret the operator creates: none is in the repository, and
# it is a whole-volume mount (a subPath mount would not follow a rotated token).
expect "$pc" "push config: pushes need a bearer token (http.token_file, not /dev/null)" \
  '.http.token_file | type == "string" and startswith("/") and . != "/dev/null"'
token_dir=$(jq -r '.http.token_file | sub("/[^/]*$"; "")' "$pc")
token_key=$(jq -r '.http.token_file | sub("^.*/"; "")' "$pc")
expect "$p" "push: Secret faultline-push-token key $token_key mounted whole at $token_dir" \
  "(.[] | select(.kind == \"Deployment\") | .spec.template.spec) as \$s
   | (\$s.volumes[] | select(.secret.secretName // \"\" | . == \"faultline-push-token\")) as \$v
   | any(\$v.secret.items[]; .key == \"token\" and .path == \"$token_key\")
     and (\$v.secret.optional // false) == false
     and (\$s.containers[0].volumeMounts | any(.name == \$v.name and .mountPath == \"$token_dir\"
          and .readOnly == true and (has(\"subPath\") | not)))"
expect "$p" "push: no Secret rendered (the operator creates the token)" \
  '[.[] | select(.kind == "Secret")] | length == 0'
# Memory of the push path (README "Push: Loki and OTLP/HTTP"): queue_bytes, plus per server
# thread a body being received and its inflated copy, plus max_body_bytes of bodies decoding at
# once, each needing up to 15 times its body (Loki JSON) with its records and labels up to 16
# times, plus about 16 MiB for the process (rules, RE2 sets, correlator state). Those arrays are
# vectors bounded by their size: one that doubles holds its old and new copies, up to 3 times the
# 16. That worst case must fit the container's memory limit, or a flood gets the pod OOM-killed
# and the records it answered 2xx for are lost.
mib=$((1 << 20))
limit=$(jq -r '.[] | select(.kind == "Deployment") | .spec.template.spec.containers[0].resources.limits.memory' "$p")
case $limit in
  *Mi) limit_mib=${limit%Mi} ;;
  *Gi) limit_mib=$((${limit%Gi} * 1024)) ;;
  *) fail "push: memory limit $limit is neither Mi nor Gi" ;;
esac
read -r queue threads body < <(jq -r '[.queue_bytes // 268435456, .http.threads // 4,
                                       .http.max_body_bytes // 67108864] | @tsv' "$pc")
bound_mib=$(((queue + threads * 2 * body + (15 + 16) * body) / mib + 16))
growth_mib=$((2 * 16 * body / mib))
((bound_mib + growth_mib <= limit_mib)) ||
  fail "push: memory bound $bound_mib MiB (README \"Push\": queue $((queue / mib)), $threads threads x 2 x $((body / mib)), 31 x $((body / mib)), process 16) + $growth_mib MiB of record arrays doubling is over the limit of $limit"
expect "$tmp/push.collector.json" "push collector: otlphttp to the Service on 4318" \
  '[.exporters | to_entries[] | select(.key | startswith("otlphttp")) | .value.endpoint]
   == ["http://faultline.faultline.svc:4318"]'
expect "$tmp/push.collector.json" "push collector: otlphttp sends the push token from its env" \
  '[.exporters | to_entries[] | select(.key | startswith("otlphttp")) | .value.headers.Authorization]
   == ["Bearer ${env:FAULTLINE_PUSH_TOKEN}"]'
# faultline answers 413 to a body over max_body_bytes, and the exporter drops a batch on 413
# without retrying: batches must be cut by bytes below it (a batch processor counts records).
expect "$tmp/push.collector.json" "push collector: batches cut by bytes under faultline's max_body_bytes ($body)" \
  "[.exporters | to_entries[] | select(.key | startswith(\"otlphttp\")) | .value.sending_queue.batch]
   | length > 0 and all(.sizer == \"bytes\" and .max_size > 0 and .max_size <= $body)"
# Concurrent requests let a node's batches arrive out of order.
expect "$tmp/push.collector.json" "push collector: one request in flight, so a node's lines arrive in order" \
  '[.exporters | to_entries[] | select(.key | startswith("otlphttp")) | .value.sending_queue.num_consumers]
   | length > 0 and all(. == 1)'
expect "$tmp/push.collector.json" "push collector: no batch processor (it cuts by record count)" \
  '[.service.pipelines[].processors[] | select(test("^batch(/|$)"))] | length == 0'

# --- the binary accepts what the manifests mount (optional: needs a build) ---
fl="${FL_BUILD:-}/faultline"
if [[ -n ${FL_BUILD:-} && -x $fl ]]; then
  # Lay the rules ConfigMap out as the kubelet does (files are symlinks into ..data/).
  vol="$tmp/rules-volume"
  mkdir -p "$vol/..2025_01_01_00_00_00.000000000"
  ln -s ..2025_01_01_00_00_00.000000000 "$vol/..data"
  for f in "${rule_files[@]}"; do
    jq -j --arg k "$f" '.[] | select(.kind == "ConfigMap" and .metadata.name == "faultline-rules")
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

  # The kafka config served for real, changed only where a cluster differs from 127.0.0.1:
  # brokers (a librdkafka mock cluster), the API server (the fake one), the listen address, the
  # rules directory. As a follower (another holder owns the Lease) it must answer /healthz and
  # /readyz with 200 (the base's probes), refuse pushes, decode otlp_proto messages shaped as
  # otel-collector.yaml sends them (resource = k8s.node.name only, pod attributes on the
  # records), decide the kernel Xid on gpu-1 and not the pod's Xid on gpu-2, write nothing, and
  # taint gpu-1 once the Lease is released to it.
  for tool in kcat protoc curl; do command -v "$tool" >/dev/null || fail "$tool not installed"; done
  for tool in mock_kafka fake_apiserver; do
    [[ -x $FL_BUILD/tests/tools/$tool ]] || fail "$FL_BUILD/tests/tools/$tool not built"
  done
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"' EXIT
  wait_file() {  # $1 = file, $2 = seconds
    for _ in $(seq $(($2 * 10))); do [[ -s $1 ]] && return 0; sleep 0.1; done
    fail "$1 not written within $2 s"
  }
  "$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic otlp_logs:2 \
    --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
  pids+=($!)
  "$FL_BUILD/tests/tools/fake_apiserver" --port 0 --port-file "$tmp/apiport" --nodes gpu-1,gpu-2 \
    --labels nvidia.com/gpu.present=true 2>"$tmp/apiserver.log" &
  pids+=($!)
  wait_file "$tmp/bootstrap" 20
  wait_file "$tmp/apiport" 20
  api="http://127.0.0.1:$(cat "$tmp/apiport")"
  lease="$api/apis/coordination.k8s.io/v1/namespaces/faultline/leases/faultline"
  holder() { curl -fsS "$lease" | jq -r '.spec.holderIdentity'; }
  # Held for the whole test: nothing renews it, and the replica takes it once expired (the
  # release below hands it over).
  now=$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)
  curl -fsS -X POST -H 'Content-Type: application/json' "${lease%/faultline}" -d '{
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "faultline"},
    "spec": {"holderIdentity": "faultline-other", "leaseDurationSeconds": 3600,
             "acquireTime": "'"$now"'", "renewTime": "'"$now"'", "leaseTransitions": 0}}' >/dev/null

  # serve_rendered WHAT POD_NAME SED LINE: WHAT's rendered config ($tmp/WHAT.config.yaml) with
  # the lines a cluster changes rewritten (the API server $api, the rules directory $vol, both
  # listen addresses to 127.0.0.1:0, and sed expression SED, which must give line LINE) and
  # nothing else, served as pod POD_NAME in the background: decisions to stdout as in the pod
  # ($tmp/WHAT-decisions.jsonl), log $tmp/WHAT-serve.log. Sets serve_pid, http and probe.
  serve_rendered() {
    local what=$1 pod=$2 expr=$3 site_line=$4 line port probe_port
    sed -e "s|^kubernetes:.*\$|kubernetes:\\n  server: \"$api\"|" \
      -e "s|^rules: .*\$|rules: $vol|" \
      -e "s|^  listen: \"0.0.0.0:8080\"\$|  listen: \"127.0.0.1:0\"|" \
      -e "s|^  probe_listen: \"0.0.0.0:8081\"\$|  probe_listen: \"127.0.0.1:0\"|" \
      -e "$expr" "$tmp/$what.config.yaml" >"$tmp/$what.live.yaml"
    for line in "  server: \"$api\"" "rules: $vol" '  listen: "127.0.0.1:0"' '  probe_listen: "127.0.0.1:0"' "$site_line"; do
      grep -qxF "$line" "$tmp/$what.live.yaml" || fail "$what config: could not rewrite to '$line'"
    done
    [[ $(diff "$tmp/$what.config.yaml" "$tmp/$what.live.yaml" | grep -c '^>') == 6 ]] ||
      fail "$what config: rewrote more than the 5 site-specific lines: $(diff "$tmp/$what.config.yaml" "$tmp/$what.live.yaml")"
    POD_NAME=$pod "$fl" serve --config "$tmp/$what.live.yaml" \
      >"$tmp/$what-decisions.jsonl" 2>"$tmp/$what-serve.log" &
    serve_pid=$!
    pids+=("$serve_pid")
    for _ in $(seq 600); do grep -q 'listening on' "$tmp/$what-serve.log" && break; sleep 0.1; done
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$what-serve.log" | tail -1)
    [[ -n $port ]] || fail "$what config: serve did not listen: $(cat "$tmp/$what-serve.log")"
    http="http://127.0.0.1:$port"
    probe_port=$(sed -n 's/.*health and metrics endpoints on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/$what-serve.log" | tail -1)
    [[ -n $probe_port ]] || fail "$what config: serve did not listen for probes: $(cat "$tmp/$what-serve.log")"
    probe="http://127.0.0.1:$probe_port"
  }
  brokers="  brokers: \"$(cat "$tmp/bootstrap")\""
  serve_rendered kafka faultline-test "s|^  brokers: .*\$|$brokers|" "$brokers"
  code() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
  [[ $(code "$probe/healthz") == 200 ]] || fail "kafka config: /healthz is not 200"
  # Ready while another replica holds the Lease, once caught up with the topic (a few seconds:
  # the mock coordinator's join delay).
  for _ in $(seq 300); do [[ $(code "$probe/readyz") == 200 ]] && break; sleep 0.1; done
  [[ $(code "$probe/readyz") == 200 ]] || fail "kafka config: /readyz is not 200 on a follower that caught up"
  [[ $(holder) == faultline-other ]] || fail "kafka config: the Lease moved before the test released it"
  push='{"streams":[{"stream":{"node":"gpu-2","transport":"kernel"},"values":[["1700000000000000000","NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus"]]}]}'
  [[ $(code -X POST -H 'Content-Type: application/json' -d "$push" "$http/loki/api/v1/push") == 401 ]] ||
    fail "kafka config: a push without the (empty) token is not refused with 401"

  xid='NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus'
  encode() {  # stdin: text ExportLogsServiceRequest; $1 = output
    protoc --encode=opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest \
      -I "$src/ingest/otlp/proto" opentelemetry/proto/collector/logs/v1/logs_service.proto >"$1"
  }
  node_attr() { echo "attributes { key: \"k8s.node.name\" value { string_value: \"$1\" } }"; }
  encode "$tmp/kernel.pb" <<TXT
resource_logs {
  resource { $(node_attr gpu-1) }
  scope_logs { log_records {
    time_unix_nano: 1700000000000000000
    $(node_attr gpu-1)
    body { kvlist_value {
      values { key: "MESSAGE" value { string_value: "$xid" } }
      values { key: "_TRANSPORT" value { string_value: "kernel" } }
      values { key: "_HOSTNAME" value { string_value: "ip-10-0-0-1" } }
    } }
  } }
}
TXT
  encode "$tmp/pod.pb" <<TXT
resource_logs {
  resource { $(node_attr gpu-2) }
  scope_logs { log_records {
    time_unix_nano: 1700000000000000000
    $(node_attr gpu-2)
    attributes { key: "k8s.pod.name" value { string_value: "evil-0" } }
    attributes { key: "k8s.namespace.name" value { string_value: "default" } }
    attributes { key: "log.iostream" value { string_value: "stdout" } }
    body { string_value: "$xid" }
  } }
}
TXT
  # One partition, the pod's message first: once gpu-1 is decided, the pod's record has been
  # through the pipeline too.
  kcat -P -b "$(cat "$tmp/bootstrap")" -t otlp_logs -p 0 "$tmp/pod.pb" "$tmp/kernel.pb" 2>"$tmp/kcat.log"
  taints_decided() { jq -r 'select(.action == "taint") | "\(.node) \(.rule)"' "$tmp/kafka-decisions.jsonl" | sort; }
  for _ in $(seq 600); do [[ -n $(taints_decided) ]] && break; sleep 0.1; done
  metrics=$(curl -fsS "$probe/metrics")
  grep -qx 'faultline_kafka_messages_total{topic="otlp_logs"} 2' <<<"$metrics" &&
    grep -qx 'faultline_kafka_malformed_total{topic="otlp_logs"} 0' <<<"$metrics" ||
    fail "kafka config: expected 2 otlp_logs messages, none malformed: $(grep kafka_ <<<"$metrics")"
  tainted() { curl -fsS "$api/api/v1/nodes/$1" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length'; }
  [[ $(taints_decided) == 'gpu-1 xid-fatal' ]] ||
    fail "kafka config: decisions $(cat "$tmp/kafka-decisions.jsonl"), expected gpu-1 xid-fatal only: $(tail -5 "$tmp/kafka-serve.log")"
  [[ $(tainted gpu-1) == 0 ]] || fail "kafka config: a follower wrote a taint"
  # Release the Lease as client-go's ReleaseOnCancel does: the replica takes it at its next retry.
  # The update names the version it replaces, as an API server refuses a Lease PUT without one.
  rv=$(curl -fsS "$lease" | jq -r .metadata.resourceVersion)
  curl -fsS -X PUT -H 'Content-Type: application/json' "$lease" -d '{
    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
    "metadata": {"name": "faultline", "resourceVersion": "'"$rv"'"},
    "spec": {"holderIdentity": "", "leaseDurationSeconds": 1, "leaseTransitions": 0}}' >/dev/null
  for _ in $(seq 600); do [[ $(tainted gpu-1) == 1 ]] && break; sleep 0.1; done
  [[ $(holder) == faultline-test ]] || fail "kafka config: the replica did not take the released Lease"
  [[ $(tainted gpu-1) == 1 && $(tainted gpu-2) == 0 ]] ||
    fail "kafka config: after takeover gpu-1 tainted: $(tainted gpu-1), gpu-2: $(tainted gpu-2)"
  [[ $(code "$probe/readyz") == 200 ]] || fail "kafka config: /readyz is not 200 on the leader"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "kafka config: serve exited non-zero after SIGTERM: $(tail -5 "$tmp/kafka-serve.log")"
  echo "faultline served the rendered kafka config: probes 200 as follower and leader, push 401, otlp_proto kernel Xid tainted gpu-1 after takeover, pod Xid ignored"

  # The push config served for real, changed only where a cluster differs: the API server (a
  # new fake one: nothing tainted), the listen address, the rules directory and the token file
  # (the Secret's mount). A push without the token or with another one, on either path, must get
  # 401, be counted and taint nothing: else any pod reaching the Service taints any node with a
  # forged kernel line. The same pushes with the token are taken.
  "$FL_BUILD/tests/tools/fake_apiserver" --port 0 --port-file "$tmp/push-apiport" \
    --nodes gpu-1,gpu-2 --labels nvidia.com/gpu.present=true 2>"$tmp/push-apiserver.log" &
  pids+=($!)
  wait_file "$tmp/push-apiport" 20
  api="http://127.0.0.1:$(cat "$tmp/push-apiport")"
  echo test-push-token >"$tmp/push-token"
  serve_rendered push faultline-push "s|^  token_file: .*\$|  token_file: $tmp/push-token|" \
    "  token_file: $tmp/push-token"
  # Push-only: Ready once it holds the Lease.
  for _ in $(seq 200); do [[ $(code "$probe/readyz") == 200 ]] && break; sleep 0.1; done
  [[ $(code "$probe/readyz") == 200 ]] || fail "push config: /readyz is not 200: $(tail -5 "$tmp/push-serve.log")"
  [[ $(code "$probe/healthz") == 200 ]] || fail "push config: /healthz is not 200"
  loki=(-X POST -H 'Content-Type: application/json' -d "$push" "$http/loki/api/v1/push")
  otlp_body='{"resourceLogs":[{"resource":{"attributes":[{"key":"k8s.node.name","value":{"stringValue":"gpu-2"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000000","body":{"stringValue":"hello"}}]}]}]}'
  otlp=(-X POST -H 'Content-Type: application/json' -d "$otlp_body" "$http/v1/logs")
  for auth in '' 'Bearer wrong-token'; do
    got_loki=$(code -H "Authorization: $auth" "${loki[@]}")
    got_otlp=$(code -H "Authorization: $auth" "${otlp[@]}")
    [[ $got_loki == 401 && $got_otlp == 401 ]] ||
      fail "push config: a push with Authorization '$auth' got $got_loki (Loki) and $got_otlp (OTLP), not 401"
  done
  metrics=$(curl -fsS "$probe/metrics")
  grep -qx 'faultline_push_requests_rejected_total{reason="unauthorized"} 4' <<<"$metrics" ||
    fail "push config: 4 pushes without the token not counted: $(grep -e push_requests -e records_total <<<"$metrics")"
  ! grep -q '^faultline_records_total{source="http"' <<<"$metrics" ||
    fail "push config: records taken from pushes without the token: $(grep records_total <<<"$metrics")"
  [[ $(tainted gpu-2) == 0 ]] || fail "push config: a push without the token tainted gpu-2"
  [[ $(code -H 'Authorization: Bearer test-push-token' "${otlp[@]}") == 200 ]] ||
    fail "push config: an OTLP push with the token is not taken"
  [[ $(code -H 'Authorization: Bearer test-push-token' "${loki[@]}") == 204 ]] ||
    fail "push config: a Loki push with the token is not taken"
  for _ in $(seq 600); do [[ $(tainted gpu-2) == 1 ]] && break; sleep 0.1; done
  [[ $(tainted gpu-2) == 1 && $(tainted gpu-1) == 0 ]] ||
    fail "push config: the push with the token: gpu-2 tainted: $(tainted gpu-2), gpu-1: $(tainted gpu-1)"
  # The probe port serves no pushes, token or not.
  [[ $(code -H 'Authorization: Bearer test-push-token' -X POST -H 'Content-Type: application/json' \
       -d "$push" "$probe/loki/api/v1/push") == 404 ]] || fail "push config: the probe port took a push"
  kill -TERM "$serve_pid"
  wait "$serve_pid" || fail "push config: serve exited non-zero after SIGTERM: $(tail -5 "$tmp/push-serve.log")"
  echo "faultline served the rendered push config: Loki and OTLP pushes without the token or with another 401 and counted, with it taken (Xid tainted gpu-2)"
else
  echo "FL_BUILD/faultline not built: skipping the binary's load of the rendered config"
fi

echo "PASS: rendered base and overlays (${overlays[*]}); ${#rule_files[@]} rule files in faultline-rules"
