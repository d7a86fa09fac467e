#!/usr/bin/env bash
# The kafka overlay's replica reads its topic's retention: each pod has its own consumer group
# (group_id-$POD_NAME), which starts at the earliest offset (a new pod, a rollout, a first
# install). That history holds faults that have long cleared: it must rebuild the correlation
# windows, not be written to the nodes again. Served here with the rendered kafka config (only
# the site-specific lines rewritten, as in deploy_render.sh), no other replica holding the Lease:
# five nodes whose GPUs fell off the bus three hours ago and were rebooted ten minutes later, and
# one whose GPU fell off the bus just now. Only the last is tainted; the others are not touched,
# and the blast-radius breaker, which four old faults within its window would trip, stays closed.
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
src=$FL_SOURCE
for tool in kubectl jq kcat protoc curl; do command -v "$tool" >/dev/null || fail "$tool not installed"; done
export HOME="$tmp/home" KUBECONFIG="$tmp/no-kubeconfig" KUBECACHEDIR="$tmp/kube-cache"
mkdir -p "$HOME"
kubectl kustomize "$src/deploy/overlays/kafka" | kubectl annotate --local -o json -f - x=1 |
  jq -s '[.[] | if .kind == "List" then .items[] else . end]' >"$tmp/kafka.json"
jq -r '.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith("faultline-config-")))
       | .data["config.yaml"]' "$tmp/kafka.json" >"$tmp/kafka.config.yaml"

"$FL_BUILD/tests/tools/mock_kafka" --brokers 1 --topic otlp_logs:2 \
  --bootstrap-file "$tmp/bootstrap" >"$tmp/mock.log" 2>&1 &
pids+=($!)
start_apiserver gpu-1,gpu-2,gpu-3,gpu-4,gpu-5,gpu-6
wait_file "$tmp/bootstrap" 20
sed -e "s|^kubernetes:.*\$|kubernetes:\\n  server: \"$api\"|" \
  -e "s|^rules: .*\$|rules: $src/rules|" \
  -e "s|^  listen: \"0.0.0.0:8080\"\$|  listen: \"127.0.0.1:0\"|" \
  -e "s|^  probe_listen: \"0.0.0.0:8081\"\$|  probe_listen: \"127.0.0.1:0\"|" \
  -e "s|^  brokers: .*\$|  brokers: \"$(cat "$tmp/bootstrap")\"|" \
  "$tmp/kafka.config.yaml" >"$tmp/kafka.live.yaml"
[[ $(diff "$tmp/kafka.config.yaml" "$tmp/kafka.live.yaml" | grep -c '^>') == 6 ]] ||
  fail "kafka config: could not rewrite its 5 site-specific lines"

# One otlp_proto message per line, shaped as otel-collector.yaml sends the kernel's.
kernel_message() {  # $1 = node, $2 = Unix seconds, $3 = line; stdout: the message
  protoc --encode=opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest \
    -I "$src/ingest/otlp/proto" opentelemetry/proto/collector/logs/v1/logs_service.proto <<TXT
resource_logs {
  resource { attributes { key: "k8s.node.name" value { string_value: "$1" } } }
  scope_logs { log_records {
    time_unix_nano: ${2}000000000
    body { kvlist_value {
      values { key: "MESSAGE" value { string_value: "$3" } }
      values { key: "_TRANSPORT" value { string_value: "kernel" } }
    } }
  } }
}
TXT
}
xid='NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus'
boot='Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) (gcc-12 (Debian 12.2.0-14) 12.2.0, GNU ld (GNU Binutils for Debian) 2.40) #1 SMP PREEMPT_DYNAMIC Debian 6.1.76-1 (2024-02-01)'
link='e1000e: eth0 NIC Link is Up 1000 Mbps Full Duplex'
now=$(date +%s)
old=$((now - 3 * 3600))
messages=()
for n in 1 2 3 4 5; do
  kernel_message "gpu-$n" $((old + n)) "$xid" >"$tmp/xid-$n.pb"
  kernel_message "gpu-$n" $((old + 600 + n)) "$boot" >"$tmp/boot-$n.pb"
  kernel_message "gpu-$n" $((old + 3600 + n)) "$link" >"$tmp/link-$n.pb"
  messages+=("$tmp/xid-$n.pb" "$tmp/boot-$n.pb" "$tmp/link-$n.pb")
done
kernel_message gpu-6 $((now - 5)) "$xid" >"$tmp/xid-6.pb"
kcat -P -b "$(cat "$tmp/bootstrap")" -t otlp_logs -p 0 "${messages[@]}" "$tmp/xid-6.pb" 2>"$tmp/kcat.log"

POD_NAME=faultline-new "$FAULTLINE" serve --config "$tmp/kafka.live.yaml" \
  >"$tmp/decisions.jsonl" 2>"$tmp/serve.log" &
serve=$!
pids+=("$serve")
tainted() { curl -fsS "$api/api/v1/nodes/$1" | jq '[.spec.taints[]? | select(.key == "faultline.dev/faulty")] | length'; }
for _ in $(seq 300); do [[ $(tainted gpu-6) == 1 ]] && break; sleep 0.1; done
[[ $(tainted gpu-6) == 1 ]] ||
  fail "gpu-6, whose GPU fell off the bus just now, is not tainted: $(grep -i 'breaker\|taint' "$tmp/serve.log" | head -5)"
sleep 1  # anything queued after gpu-6's taint has been sent by now
written=$(curl -fsS "$api/_test/requests" |
  jq -r '.[] | select(.method == "PATCH" and (.path | test("^/api/v1/nodes/gpu-[1-5]"))) | .path' | sort -u)
[[ -z $written ]] ||
  fail "nodes that recovered hours ago were written to: $(echo "$written" | tr '\n' ' ')"
[[ $(curl -s -o /dev/null -w '%{http_code}' "$api/api/v1/namespaces/faultline/configmaps/faultline-breaker") == 404 ]] ||
  fail "the retention's old faults tripped the breaker: $(curl -fsS "$api/api/v1/namespaces/faultline/configmaps/faultline-breaker" | jq -c .data)"
# Ready once caught up, not before: a rolling update replaces the next old replica only when this
# one could lead. A second replica whose broker never answers never catches up.
probe_port() { sed -n 's/.*endpoints on 127\.0\.0\.1:\([0-9]*\) (probe_listen).*/\1/p' "$1" | tail -1; }
readyz() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$1/readyz"; }
[[ $(readyz "$(probe_port "$tmp/serve.log")") == 200 ]] || fail "caught up, yet /readyz is not 200"
sed -e "s|^  brokers: .*\$|  brokers: \"127.0.0.1:1\"|" "$tmp/kafka.live.yaml" >"$tmp/stuck.yaml"
POD_NAME=faultline-stuck "$FAULTLINE" serve --config "$tmp/stuck.yaml" \
  >"$tmp/stuck.jsonl" 2>"$tmp/stuck.log" &
pids+=($!)
wait_listening "$tmp/stuck.log"
[[ -n $(probe_port "$tmp/stuck.log") ]] || fail "no probe_listen port in stuck.log"
[[ $(readyz "$(probe_port "$tmp/stuck.log")") == 503 ]] ||
  fail "a replica that has not caught up with Kafka is Ready"
# SIGTERM while Kafka is down: the replica exits on its own within the pod's grace period (30 s,
# deploy/base/deployment.yaml), its pipeline drained, rather than being killed waiting for the group
# coordinator to take its final commit.
kill "${pids[0]}" && wait "${pids[0]}" || true  # mock_kafka
kill -TERM "$serve"
for _ in $(seq 300); do kill -0 "$serve" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$serve" 2>/dev/null; then fail "serve still running 30 s after a SIGTERM while Kafka was down"; fi
wait "$serve" || fail "serve exited $? after a SIGTERM while Kafka was down"
grep -q 'stopped: ' "$tmp/serve.log" || fail "serve did not drain its pipeline on SIGTERM"
echo "PASS: a replica reading the retention tainted only the live fault (gpu-6); the 5 cleared ones were left alone; Ready once caught up; exits on SIGTERM with Kafka down"
