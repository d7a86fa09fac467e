#!/usr/bin/env bash
# Runs the image that deploy/build-rootfs.sh built from deploy/Dockerfile as the push overlay's
# Deployment runs it, without a container engine or a cluster:
#   - the root filesystem read-only (a read-only bind mount), /tmp a tmpfs, /proc mounted;
#   - the image's USER (non-root) and its ENTRYPOINT + CMD;
#   - /etc/faultline/config.yaml and /etc/faultline/rules/ from `kubectl kustomize
#     deploy/overlays/push` (the ConfigMaps; only http.listen and http.probe_listen are moved to
#     127.0.0.1:0, as tests listen on loopback only), and the Secret faultline-push-token's token
#     at http.token_file;
#   - the in-cluster service account: KUBERNETES_SERVICE_HOST/PORT, and token and ca.crt in
#     /var/run/secrets/kubernetes.io/serviceaccount, for the fake API server serving HTTPS with a
#     certificate of that CA.
# Then a Loki push of an Xid 79 line, with the token, must taint the node, and `faultline
# replay` (the README's first command) must give its 5 decisions inside the image.
#   FL_BUILD=build FL_SOURCE=. tests/image/image_serve.sh OUT     (OUT of build-rootfs.sh; root)
# shellcheck source=tests/e2e/lib.sh disable=SC2154  # image.env sets image_*; eval, command_words
source "$(dirname "$0")/../e2e/lib.sh"
out=$(cd "${1:?usage: image_serve.sh OUT (of deploy/build-rootfs.sh)}" && pwd)
image=$out/image
[[ -x $image/usr/local/bin/faultline && -s $out/image.env ]] || fail "no image in $out"
# shellcheck source=/dev/null  # image_user, image_entrypoint, image_cmd (shell-quoted words)
source "$out/image.env"
eval "command_words=($image_entrypoint $image_cmd)"
[[ ${command_words[*]} == "/usr/local/bin/faultline serve --config /etc/faultline/config.yaml" ]] ||
  fail "image command is '${command_words[*]}', not what deploy/base/deployment.yaml expects"
[[ $image_user != root && $image_user != 0 && $image_user != 0:* ]] ||
  fail "the image runs as root ($image_user)"

export HOME="$tmp/home" KUBECONFIG="$tmp/no-kubeconfig"
mkdir -p "$HOME"
kubectl kustomize "$FL_SOURCE/deploy/overlays/push" |
  kubectl annotate --local -o json -f - faultline.dev/image-check=1 | jq -s '[.[] | if .kind == "List" then .items[] else . end]' \
    >"$tmp/push.json"
configmap() { jq -e --arg p "$1" '[.[] | select(.kind == "ConfigMap" and (.metadata.name | startswith($p)))] | .[0].data' "$tmp/push.json"; }

# The volumes, as the kubelet would mount them.
mkdir -p "$tmp/etc-faultline/rules" "$tmp/serviceaccount"
configmap faultline-config | jq -r '.["config.yaml"]' |
  sed -e 's/listen: "0.0.0.0:8080"/listen: "127.0.0.1:0"/' \
    -e 's/probe_listen: "0.0.0.0:8081"/probe_listen: "127.0.0.1:0"/' >"$tmp/etc-faultline/config.yaml"
grep -q '^  listen: "127.0.0.1:0"' "$tmp/etc-faultline/config.yaml" || fail "no http.listen to move"
grep -q '^  probe_listen: "127.0.0.1:0"' "$tmp/etc-faultline/config.yaml" ||
  fail "no http.probe_listen to move"
# The Secret faultline-push-token, as the overlay mounts it at the directory of http.token_file.
token_file=$(sed -n 's|^  token_file: \(/etc/faultline/.*\)$|\1|p' "$tmp/etc-faultline/config.yaml")
[[ -n $token_file ]] || fail "no http.token_file under /etc/faultline in the push config"
mkdir -p "$tmp/etc-faultline/$(dirname "${token_file#/etc/faultline/}")"
echo image-push-token >"$tmp/etc-faultline/${token_file#/etc/faultline/}"
configmap faultline-rules >"$tmp/rules.json"
for f in $(jq -r 'keys[]' "$tmp/rules.json"); do
  jq -r --arg f "$f" '.[$f]' "$tmp/rules.json" >"$tmp/etc-faultline/rules/$f"
done
make_cluster_ca
cp "$tmp/ca.crt" "$tmp/serviceaccount/ca.crt"
echo "image-test-token" >"$tmp/serviceaccount/token"
echo faultline >"$tmp/serviceaccount/namespace"
chmod -R a+rX "$tmp/etc-faultline" "$tmp/serviceaccount"
chmod a+x "$tmp"

# The container's root: mount points made as a runtime makes them, then the image read-only.
# Debian's /var/run is a link to /run: resolve it inside the image, never on this machine.
sa_dir=/var/run/secrets/kubernetes.io/serviceaccount
if [[ -L $image/var/run ]]; then
  link=$(readlink "$image/var/run")
  [[ $link == /* ]] || link=/var/$link
  sa_dir=$link/secrets/kubernetes.io/serviceaccount
fi
mkdir -p "$image/etc/faultline" "$image$sa_dir"
root=$tmp/root
mkdir -p "$root"
mounted=()
mnt() {  # mount ARGS... TARGET
  mount "$@" || fail "mount $*"
  mounted=("${*: -1}" "${mounted[@]}")
}
unmount_all() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait
  for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  # Never let cleanup's rm -rf reach through a mount that is still there into the image.
  if grep -q -F " $root" /proc/mounts; then
    echo "WARNING: mounts left under $root; $tmp kept" >&2
    tmp=/nonexistent/faultline-image-test
  fi
}
trap 'unmount_all; cleanup' EXIT
mnt --bind "$image" "$root"
mount -o remount,bind,ro "$root" || fail "read-only remount of $root"
mnt -t proc proc "$root/proc"
mnt -t tmpfs -o size=64m tmpfs "$root/tmp"
mnt --bind -o ro "$tmp/etc-faultline" "$root/etc/faultline"
mnt --bind -o ro "$tmp/serviceaccount" "$root$sa_dir"
if touch "$root/usr/local/bin/write-check" 2>/dev/null; then fail "the root is writable"; fi

start_tls_apiserver gpu-1,gpu-2

# A command in the container: the pod's environment only, the image's user, its root.
in_image=(env -i POD_NAME=faultline-0 KUBERNETES_SERVICE_HOST=127.0.0.1
  KUBERNETES_SERVICE_PORT="$(cat "$tmp/port")" "$(command -v chroot)" --userspec="$image_user" "$root")

# The README's first command, in the image.
"${in_image[@]}" /usr/local/bin/faultline replay >"$tmp/replay.jsonl" 2>"$tmp/replay.log" || fail "replay"
[[ $(wc -l <"$tmp/replay.jsonl") == 5 ]] || fail "replay in the image: $(wc -l <"$tmp/replay.jsonl") decisions"

# The config writes decisions to /dev/stdout, which reopens fd 1: make it a pipe owned by the
# image's user, as runc hands a container its stdio.
mkfifo "$tmp/stdout"
chown "$image_user" "$tmp/stdout"
cat "$tmp/stdout" >"$tmp/decisions.jsonl" &
pids+=($!)
"${in_image[@]}" "${command_words[@]}" >"$tmp/stdout" 2>"$tmp/serve.log" &
serve_pid=$!
pids+=("$serve_pid")
wait_listening "$tmp/serve.log"
# env and chroot exec, so the background job is faultline itself.
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$serve_pid/status")
[[ $uid == "${image_user%%:*}" ]] || fail "serve runs as uid $uid, not the image's USER $image_user"
grep -q -F "rules from /etc/faultline/rules" "$tmp/serve.log" ||
  fail "serve did not say it loaded the rules ConfigMap: $(head -3 "$tmp/serve.log")"

# /readyz: the rules are loaded, the API server answers and this replica holds the Lease.
for _ in $(seq 100); do
  [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") == 200 ]] && break
  sleep 0.1
done
[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz") == 200 ]] ||
  fail "/readyz: $(curl -s "http://127.0.0.1:$port/readyz")"
curl -fsS -H 'Content-Type: application/json' -H 'Authorization: Bearer image-push-token' --data-binary \
  "{\"streams\":[{\"stream\":{\"node\":\"gpu-1\",\"transport\":\"kernel\"},\"values\":[[\"$(date +%s%N)\",\"NVRM: Xid (PCI:0000:44:00): 79, GPU has fallen off the bus\"]]}]}" \
  "http://127.0.0.1:$port/loki/api/v1/push" || fail "push"
taint() { api_get /api/v1/nodes/gpu-1 | jq -cS '[.spec.taints[]? | select(.key == "faultline.dev/faulty") | del(.timeAdded)]'; }
for _ in $(seq 100); do [[ $(taint) != '[]' ]] && break; sleep 0.1; done
taint | jq -e '. == [{key: "faultline.dev/faulty", value: "true", effect: "NoSchedule"}]' >/dev/null ||
  fail "gpu-1: $(taint)"
api_get /_test/requests | jq -e '[.[] | select(.authorization != "Bearer probe")] | length > 0 and
  all(.[]; .authorization == "Bearer image-test-token")' >/dev/null ||
  fail "requests without the service account token"
[[ $(api_get /api/v1/nodes/gpu-2 | jq '.spec.taints // [] | length') == 0 ]] || fail "gpu-2 tainted"
jq -e 'select(.node == "gpu-1" and .action == "taint")' "$tmp/decisions.jsonl" >/dev/null ||
  fail "no taint decision on stdout: $(cat "$tmp/decisions.jsonl")"
kill -TERM "$serve_pid"
wait "$serve_pid" || fail "serve exited with $? on SIGTERM"
echo "image: $(du -sh "$image" | cut -f1), runs as $image_user on a read-only root; replay 5 decisions;" \
  "serve with the push overlay's ConfigMaps tainted gpu-1 over TLS with the service account"
