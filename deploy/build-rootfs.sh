#!/usr/bin/env bash
# Builds deploy/Dockerfile without a container engine, for machines that have none (CI here):
# each `FROM debian:12[-slim]` stage starts from a debootstrap'd Debian 12 (minbase, as the
# official images are built), RUN runs under chroot, COPY copies from the build context (the
# repository minus deploy/Dockerfile.dockerignore) or from an earlier stage. The final stage's
# root is left in OUT/image, with its USER, ENTRYPOINT and CMD in OUT/image.env (shell variables
# image_user, image_entrypoint, image_cmd). tests/image/image_serve.sh runs it.
#
#   deploy/build-rootfs.sh OUT      (root, Debian's mirror reachable; about 3-5 min on 2 cores)
#   env: DEBIAN_MIRROR (default: the mirror of this machine's apt sources)
#
# Only the instructions the Dockerfile uses are understood (FROM, COPY, RUN, WORKDIR, USER,
# ENTRYPOINT, CMD); any other refuses with its line number, so the two cannot drift apart quietly.
# `tar -C OUT/image -c . | docker import -c "USER ..." - faultline` turns the result into an image.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dockerfile=$src/deploy/Dockerfile
out=${1:?usage: build-rootfs.sh OUT}
# The mirror this machine's apt uses (deb822 or one-line sources), else Debian's CDN.
host_mirror() {
  { sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/*.sources 2>/dev/null
    sed -n 's/^deb \(\[[^]]*\] \)\{0,1\}\([a-z]*:[^ ]*\) bookworm .*/\2/p' /etc/apt/sources.list 2>/dev/null
  } | awk '$1 !~ /security/ { print $1; exit }' || true
}
mirror=${DEBIAN_MIRROR:-$(host_mirror)}
mirror=${mirror:-http://deb.debian.org/debian}
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ $(id -u) == 0 ]] || { echo "build-rootfs.sh: needs root (debootstrap, chroot)" >&2; exit 2; }
missing=()
for tool in debootstrap jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
if ((${#missing[@]})); then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
fi

# The build context: the repository without what the .dockerignore names (patterns are relative
# to the context root; a trailing / only says "directory").
rm -rf "$out/context" && mkdir -p "$out/context"
excludes=()
while read -r pattern; do
  [[ -z $pattern || $pattern == \#* ]] && continue
  excludes+=("--exclude=./${pattern%/}")
done <"$src/deploy/Dockerfile.dockerignore"
tar -C "$src" --anchored "${excludes[@]}" -cf - . | tar -C "$out/context" -xf -

# One debootstrap, copied for each stage.
base_tar=$out/debian12-minbase.tar
if [[ ! -s $base_tar ]]; then
  rm -rf "$out/base"
  debootstrap --variant=minbase bookworm "$out/base" "$mirror" >"$out/debootstrap.log" 2>&1 ||
    { tail -20 "$out/debootstrap.log" >&2; exit 1; }
  tar -C "$out/base" -cf "$base_tar" . && rm -rf "$out/base"
fi

declare -A stage_root  # stage name or index -> root directory
root="" workdir=/ user=root entrypoint="" cmd="" stages=0
die() { echo "$dockerfile:$lineno: $*" >&2; exit 1; }
# The exec form ["a", "b"] as a shell-quoted word list.
exec_form() { jq -r 'map(@sh) | join(" ")' <<<"$1" || die "not an exec-form JSON array: $1"; }
# COPY SRC DST: a directory's contents go into DST; a file goes to DST, or into it when DST ends
# with / or is a directory (Docker's rules for one source).
copy() {
  local from=$1 to=$2
  [[ $to == /* ]] || to=$workdir/$to
  if [[ -d $from ]]; then
    mkdir -p "$root$to" && cp -a "$from/." "$root$to/"
  elif [[ -e $from ]]; then
    if [[ $to == */ || -d $root$to ]]; then mkdir -p "$root$to" && cp -a "$from" "$root$to/"
    else mkdir -p "$(dirname "$root$to")" && cp -a "$from" "$root$to"; fi
  else
    die "COPY source $from does not exist"
  fi
}
run() {
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    chroot "$root" /bin/sh -c "mkdir -p '$workdir' && cd '$workdir' && $1" </dev/null || die "RUN failed"
}

lineno=0 start=0 text=""
while IFS= read -r line || [[ -n $line ]]; do
  lineno=$((lineno + 1))
  [[ -z $text && ( $line =~ ^[[:space:]]*# || -z ${line//[[:space:]]/} ) ]] && continue
  ((start)) || start=$lineno
  if [[ $line == *\\ ]]; then text+="${line%\\} "; continue; fi
  text+=$line
  read -r op args <<<"$text"
  at=$lineno lineno=$start
  case ${op^^} in
    FROM)
      read -r image as name <<<"$args"
      [[ $image == debian:12 || $image == debian:12-slim ]] || die "base image $image is not Debian 12"
      root=$out/stage$stages
      rm -rf "$root" && mkdir -p "$root" && tar -C "$root" -xf "$base_tar"
      stage_root[$stages]=$root
      [[ ${as^^} == AS && -n $name ]] && stage_root[$name]=$root
      stages=$((stages + 1)) workdir=/ user=root entrypoint="" cmd=""
      echo "== FROM $image (stage $((stages - 1))${name:+ $name})" ;;
    COPY)
      read -r -a words <<<"$args"
      base=$out/context
      if [[ ${words[0]} == --from=* ]]; then
        base=${stage_root[${words[0]#--from=}]:-} && [[ -n $base ]] || die "no stage ${words[0]#--from=}"
        words=("${words[@]:1}")
      fi
      ((${#words[@]} == 2)) || die "COPY takes one source and one destination here"
      echo "== COPY ${words[*]}"
      copy "$base/${words[0]#/}" "${words[1]}" ;;
    RUN) echo "== RUN ${args:0:100}"; run "$args" ;;
    WORKDIR) workdir=$args; mkdir -p "$root$workdir" ;;
    USER) user=$args ;;
    ENTRYPOINT) entrypoint=$(exec_form "$args") ;;
    CMD) cmd=$(exec_form "$args") ;;
    *) die "instruction $op is not understood by build-rootfs.sh" ;;
  esac
  lineno=$at start=0 text=""
done <"$dockerfile"

rm -rf "$out/image" && mv "$root" "$out/image"
rm -f "$out/image/etc/resolv.conf"
for i in $(seq 0 $((stages - 2))); do rm -rf "$out/stage$i"; done
printf 'image_user=%q\nimage_entrypoint=%q\nimage_cmd=%q\n' "$user" "$entrypoint" "$cmd" >"$out/image.env"
echo "image root: $out/image ($(du -sh "$out/image" | cut -f1)); $(cat "$out/image.env" | tr '\n' ' ')"
