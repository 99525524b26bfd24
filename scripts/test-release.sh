#!/usr/bin/env bash
# Checks the release archives scripts/release.sh wrote:
#
#   scripts/test-release.sh [DIST_DIR]      (default dist/)
#
# For every archive SHA256SUMS lists: the checksum (sha256sum -c); the
# archive's contents (the binary, LICENSE, NOTICE, README.md, completions for
# bash, zsh and fish); that the binary is stripped; the highest GLIBC_ symbol
# version it needs (readelf; it fails above 2.28, the oldest glibc the
# releases serve: RHEL/Rocky 8); then it runs the binary: `--version` (naming
# the version, the commit and the archive's target), `fetch` on the local
# backend (two object sizes, two concurrencies, a few GETs per stream) and
# `verify --prepare` on the local backend, which must say PASS. A binary of
# another architecture runs under qemu user emulation (aarch64:
# `qemu-aarch64-static -L /usr/aarch64-linux-gnu`, Debian/Ubuntu packages
# qemu-user-static and libc6-arm64-cross, installed here with apt-get when
# missing and run as root). It ends with each binary's highest GLIBC version
# and each fetch table (the aarch64 one as measured under qemu: its figures
# are the emulator's, not the hardware's).
#
# Cost: about 2 seconds on 2 cores once the qemu packages are there (most of
# it the aarch64 binary under qemu), about 15 seconds with their install. Not
# part of scripts/test.sh because the archives it checks take about 12 to 14
# minutes of build on 2 cores (scripts/release.sh).
set -euo pipefail
DIST=${1:-dist}
[ -d "$DIST" ] || { echo "$0: no directory $DIST: run scripts/release.sh VERSION first" >&2; exit 2; }
DIST=$(cd "$DIST" && pwd)
[ -f "$DIST/SHA256SUMS" ] || { echo "$0: no $DIST/SHA256SUMS: run scripts/release.sh VERSION first" >&2; exit 2; }
BASELINE=2.28

echo "== checksums ($DIST/SHA256SUMS)"
(cd "$DIST" && sha256sum -c SHA256SUMS)
mapfile -t ARCHIVES < <(awk '{sub(/^\*/, "", $2); print $2}' "$DIST/SHA256SUMS")
[ ${#ARCHIVES[@]} -gt 0 ] || { echo "$0: $DIST/SHA256SUMS lists no archive" >&2; exit 1; }

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
host_arch=$(uname -m)

# The qemu user emulator and the target's loader and libc for a foreign binary.
need_qemu() {
  local arch=$1 qemu=qemu-$1-static sysroot=/usr/$1-linux-gnu pkgs
  pkgs="qemu-user-static libc6-$([ "$arch" = aarch64 ] && echo arm64 || echo "$arch")-cross"
  if ! command -v "$qemu" >/dev/null 2>&1 || [ ! -d "$sysroot/lib" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "== installing $pkgs (apt-get) to run the $arch binary under emulation" >&2
      # shellcheck disable=SC2086
      apt-get install -y -qq $pkgs >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >/dev/null; }
    else
      echo "$0: the $arch binary needs $qemu and $sysroot: install the packages $pkgs (sudo apt-get install $pkgs), or run this as root" >&2
      exit 1
    fi
  fi
  echo "$qemu -L $sysroot"
}

declare -A GLIBC_OF FETCH_OF
ARCHS=()
for archive in "${ARCHIVES[@]}"; do
  name=${archive%.tar.gz}
  arch=${name%-linux-gnu}
  arch=${arch##*-}
  version=${name#s3rdma-}
  version=${version%-"$arch"-linux-gnu}
  echo "== $archive ($arch, version $version)"
  mkdir -p "$WORK/$arch"
  tar -xzf "$DIST/$archive" -C "$WORK/$arch"
  dir=$WORK/$arch/$name
  for f in s3rdma LICENSE NOTICE README.md completions/s3rdma.bash completions/_s3rdma completions/s3rdma.fish; do
    [ -s "$dir/$f" ] || { echo "$0: $archive lacks $name/$f" >&2; exit 1; }
  done
  bash -n "$dir/completions/s3rdma.bash" || { echo "$0: $archive: completions/s3rdma.bash is not valid bash" >&2; exit 1; }
  bin=$dir/s3rdma
  if readelf -S -W "$bin" | grep -Eq '\.(symtab|debug_[a-z]+) '; then
    echo "$0: $archive: the binary is not stripped (symbols or debug info)" >&2
    exit 1
  fi
  machine=$(readelf -h "$bin" | sed -n 's/^ *Machine: *//p')
  case "$arch:$machine" in
    x86_64:*X86-64* | aarch64:*AArch64*) ;;
    *) echo "$0: $archive holds a binary for '$machine', not $arch" >&2; exit 1 ;;
  esac

  glibc=$(readelf -V -W "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -1)
  [ -n "$glibc" ] || { echo "$0: $archive: the binary names no GLIBC_ version (not linked against glibc?)" >&2; exit 1; }
  echo "highest GLIBC_ symbol version needed: GLIBC_$glibc"
  if [ "$(printf '%s\n%s\n' "$glibc" "$BASELINE" | sort -V | tail -1)" != "$BASELINE" ]; then
    echo "$0: $archive: the binary needs GLIBC_$glibc, above the GLIBC_$BASELINE baseline" >&2
    exit 1
  fi

  run=()
  if [ "$arch" != "$host_arch" ]; then
    read -r -a run <<<"$(need_qemu "$arch")"
    echo "running it under ${run[*]}"
  fi
  "${run[@]}" "$bin" --version | tee "$WORK/$arch.version"
  grep -q "^s3rdma $version (" "$WORK/$arch.version" || { echo "$0: $archive: --version does not name version $version" >&2; exit 1; }
  grep -q "^target: *$arch-unknown-linux-gnu$" "$WORK/$arch.version" || { echo "$0: $archive: --version does not name the target $arch-unknown-linux-gnu" >&2; exit 1; }
  short=$("${run[@]}" "$bin" -V)
  [ "$short" = "$(head -1 "$WORK/$arch.version")" ] || { echo "$0: $archive: -V ('$short') differs from --version's first line" >&2; exit 1; }

  data=$WORK/data-$arch
  start=$(date +%s%N)
  "${run[@]}" "$bin" fetch --backend local --root "$data" --prepare --sizes 1MiB,4MiB --concurrency 1,2 --objects 2 \
    --iters 4 --warmup 0s --results-dir "$WORK/results-$arch" > "$WORK/$arch.fetch" 2>&1 \
    || { cat "$WORK/$arch.fetch" >&2; echo "$0: $archive: fetch failed (output above)" >&2; exit 1; }
  fetch_ms=$((($(date +%s%N) - start) / 1000000))
  cat "$WORK/$arch.fetch"
  ls "$WORK/results-$arch"/fetch-local-*.json >/dev/null 2>&1 || { echo "$0: $archive: fetch wrote no record" >&2; exit 1; }

  "${run[@]}" "$bin" verify --backend local --root "$data" --prepare --sizes 1MiB,16MiB --results-dir "$WORK/results-$arch" \
    > "$WORK/$arch.verify" 2>&1 || { cat "$WORK/$arch.verify" >&2; echo "$0: $archive: verify --prepare failed (output above)" >&2; exit 1; }
  grep '^RESULT: PASS' "$WORK/$arch.verify" || { cat "$WORK/$arch.verify" >&2; echo "$0: $archive: verify did not PASS" >&2; exit 1; }

  ARCHS+=("$arch")
  GLIBC_OF[$arch]=$glibc
  FETCH_OF[$arch]="fetch on the local backend, $arch$([ ${#run[@]} -gt 0 ] && echo ", under ${run[0]} (emulated: not the hardware's figures)") in $((fetch_ms / 1000)).$(printf %03d $((fetch_ms % 1000))) s:
$(cat "$WORK/$arch.fetch")"
done

echo
echo "== summary: every archive checks out"
for arch in "${ARCHS[@]}"; do
  echo "$arch: highest GLIBC_ version needed GLIBC_${GLIBC_OF[$arch]} (baseline GLIBC_$BASELINE)"
done
for arch in "${ARCHS[@]}"; do
  echo
  echo "${FETCH_OF[$arch]}"
done
