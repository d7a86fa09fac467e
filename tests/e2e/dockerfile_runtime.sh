#!/usr/bin/env bash
# The fast check of deploy/Dockerfile's fragile part, against the binary of this build: the runtime
# stage must install, directly or as a dependency, the Debian package of every shared library
# `faultline` loads (ldd). .ci/image builds and runs the whole image (without a container engine).
# shellcheck source=tests/e2e/lib.sh
source "$(dirname "$0")/lib.sh"
libs=$(ldd "$FAULTLINE")  # not piped into grep -q: its early exit would fail the pipeline
if grep -q -E 'libasan|libubsan' <<<"$libs"; then
  echo "sanitizer build: its runtime libraries are not the image's; skipped"
  exit 77  # ctest reports it skipped (SKIP_RETURN_CODE)
fi
dockerfile=$FL_SOURCE/deploy/Dockerfile
# The packages the runtime stage (after `FROM debian:12-slim`) installs.
listed=$(sed -n '/^FROM debian:12-slim/,$p' "$dockerfile" | sed -n '/apt-get install/,/rm -rf/p' |
  tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -v -x -E 'apt-get|install|rm|update' || true)
[[ -n $listed ]] || fail "no runtime package list found in $dockerfile"
closure=$(apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
  --no-replaces --no-enhances $listed | grep -v '^ ' | sort -u)
# In debian:12-slim already: the C and C++ runtimes (apt needs them) and zlib (Priority: required).
base=$'libc6\nlibgcc-s1\nlibstdc++6\nzlib1g'
checked=0
for lib in $(ldd "$FAULTLINE" | awk '/=>/ { print $3 }'); do
  real=$(readlink -f "$lib")
  # Merged /usr: dpkg may know the file under /lib or /usr/lib.
  pkg=$(dpkg -S "$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null || true)
  pkg=${pkg%%:*}
  [[ -n $pkg ]] || fail "no Debian package owns $lib"
  grep -q -x -F "$pkg" <<<"$closure"$'\n'"$base" ||
    fail "$pkg (for $(basename "$lib")) is not installed by the runtime stage of deploy/Dockerfile"
  checked=$((checked + 1))
done
((checked > 10)) || fail "ldd listed only $checked libraries"
echo "runtime stage covers the $checked shared libraries of $FAULTLINE"
