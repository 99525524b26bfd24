#!/usr/bin/env bash
# Release archives of s3rdma for Linux on x86_64 and aarch64 (Grace Hopper,
# Grace Blackwell), linked against glibc 2.28 at most, so one binary runs on
# RHEL/Rocky 8 (glibc 2.28), Ubuntu 20.04/22.04/24.04 and Debian 10 and later:
#
#   scripts/release.sh VERSION [--allow-dirty]
#
# VERSION      the package version in Cargo.toml (a leading `v`, as in a tag
#              v0.1.0, is dropped); a different one is refused, because the
#              binary names Cargo.toml's.
# --allow-dirty  build although tracked files differ from the commit. Without
#              it a dirty tree is refused: an archive is built from a commit.
#              With it the binaries say `<commit>-dirty` and the archives are
#              not what that commit alone gives.
#
# Writes, under DIST_DIR (default dist/):
#   s3rdma-VERSION-x86_64-linux-gnu.tar.gz
#   s3rdma-VERSION-aarch64-linux-gnu.tar.gz
#   SHA256SUMS   (sha256sum -c SHA256SUMS; --ignore-missing for one archive)
# each archive holding s3rdma-VERSION-ARCH-linux-gnu/ with the stripped
# binary, LICENSE, NOTICE, README.md and completions/ (bash, zsh, fish, made
# by running the binary of this machine's architecture).
#
# How: cargo-zigbuild with zig as the C compiler and linker, targets
# x86_64-unknown-linux-gnu.2.28 and aarch64-unknown-linux-gnu.2.28 (zig links
# against glibc 2.28's symbol versions), `--release --locked`, debug info off
# and symbols stripped (165 MB of line tables otherwise). CUDA and libminiocpp
# are opened at run time (dlopen), so one binary per architecture serves hosts
# with and without GPUs or RDMA.
#
# Reproducible from the commit: the build date the binary reports and every
# file time in the archives is the commit's date (SOURCE_DATE_EPOCH), owners
# are 0:0, entries sorted, gzip stores no name or time, and the build paths
# (this checkout, the cargo home, the target directory) are remapped out of
# the binary. Same commit and same tool versions (the Rust toolchain, zig and
# cargo-zigbuild pinned below) give the same bytes.
#
# Installs what it needs when missing: zig (PyPI `ziglang`) and cargo-zigbuild
# (PyPI) into a virtualenv under the target directory (CARGO_TARGET_DIR, else
# target/), and the Rust standard library for aarch64 (rustup target add).
# Cost, on 2 cores from a cold target directory: about 6.5 minutes per target
# on an otherwise idle machine; 12 + 8.5 minutes measured while another cargo
# build shared the cores (the second target reuses the first's build scripts
# and proc macros); seconds when nothing changed; the tools, once, under a
# minute.
# scripts/test-release.sh checks the archives.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

ZIGLANG_VERSION=0.15.2
ZIGBUILD_VERSION=0.24.1
GLIBC=2.28
TARGETS=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu)

usage() { echo "usage: $0 VERSION [--allow-dirty]" >&2; exit 2; }
VERSION='' ALLOW_DIRTY=''
for a in "$@"; do
  case "$a" in
    --allow-dirty) ALLOW_DIRTY=1 ;;
    -h | --help) usage ;;
    -*) echo "$0: unknown flag $a" >&2; usage ;;
    *) [ -z "$VERSION" ] || usage; VERSION=${a#v} ;;
  esac
done
[ -n "$VERSION" ] || usage

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "$0: cargo not found: install Rust (https://rustup.rs)" >&2
    exit 1
  fi
fi

CRATE_VERSION=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' Cargo.toml | head -1)
if [ "$VERSION" != "$CRATE_VERSION" ]; then
  echo "$0: version $VERSION is not Cargo.toml's ($CRATE_VERSION): set version = \"$VERSION\" in Cargo.toml, commit, then release" >&2
  exit 2
fi

git rev-parse --git-dir >/dev/null 2>&1 || { echo "$0: not a git checkout: a release is built from a commit" >&2; exit 2; }
COMMIT=$(git rev-parse HEAD)
DIRTY=$(git status --porcelain --untracked-files=no)
if [ -n "$DIRTY" ]; then
  if [ -z "$ALLOW_DIRTY" ]; then
    echo "$0: tracked files differ from commit ${COMMIT:0:12}:" >&2
    printf '  %s\n' "${DIRTY//$'\n'/$'\n'  }" >&2
    echo "$0: commit them (a release is built from a commit), or pass --allow-dirty for a build of the working tree" >&2
    exit 2
  fi
  echo "release: --allow-dirty: building the working tree, which differs from commit ${COMMIT:0:12};" \
    "the binaries say ${COMMIT:0:12}-dirty and the archives are not reproducible from the commit" >&2
fi
# The commit's date, not the clock's: the binary's build date and every time in the archives.
SOURCE_DATE_EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR=$(cd "$CARGO_TARGET_DIR" && pwd)
DIST=${DIST_DIR:-dist}
mkdir -p "$DIST"
DIST=$(cd "$DIST" && pwd)

# Tools: zig and cargo-zigbuild from PyPI in a virtualenv; its python3 first on
# PATH, so cargo-zigbuild finds zig as `python3 -m ziglang`.
TOOLS=$CARGO_TARGET_DIR/release-tools
if ! "$TOOLS/bin/cargo-zigbuild" --version 2>/dev/null | grep -qx "cargo-zigbuild $ZIGBUILD_VERSION" \
  || [ "$("$TOOLS/bin/python3" -m ziglang version 2>/dev/null)" != "$ZIGLANG_VERSION" ]; then
  echo "release: installing ziglang $ZIGLANG_VERSION and cargo-zigbuild $ZIGBUILD_VERSION into $TOOLS"
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIGLANG_VERSION" "cargo-zigbuild==$ZIGBUILD_VERSION"
fi
export PATH="$TOOLS/bin:$PATH"
installed=$(rustup target list --installed)
for t in "${TARGETS[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done

# The release build only: no debug info, symbols stripped, and the build paths
# mapped to fixed names in what the Rust and C compilers embed (panic
# locations, __FILE__), so the binary does not depend on where it was built.
export CARGO_PROFILE_RELEASE_DEBUG=0 CARGO_PROFILE_RELEASE_STRIP=symbols
CARGO_HOME_DIR=$(cd "${CARGO_HOME:-$HOME/.cargo}" && pwd)
maps=("$ROOT=/build/s3rdma" "$CARGO_HOME_DIR=/cargo" "$CARGO_TARGET_DIR=/target")
rustflags=() cflags=
for m in "${maps[@]}"; do
  rustflags+=("--remap-path-prefix=$m")
  cflags+=" -ffile-prefix-map=$m"
done
CARGO_ENCODED_RUSTFLAGS=$(IFS=$'\x1f'; echo "${rustflags[*]}")
export CARGO_ENCODED_RUSTFLAGS CFLAGS="${CFLAGS:-}$cflags" CXXFLAGS="${CXXFLAGS:-}$cflags"

max_glibc() { readelf -V -W "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/^GLIBC_//' | sort -uV | tail -1; }
host_arch=$(uname -m)
declare -A BIN SECS
for t in "${TARGETS[@]}"; do
  start=$(date +%s)
  echo "release: cargo zigbuild --release --locked --target $t.$GLIBC"
  cargo zigbuild --release --locked -p s3rdma --bin s3rdma --target "$t.$GLIBC"
  SECS[$t]=$(($(date +%s) - start))
  bin=$CARGO_TARGET_DIR/$t/release/s3rdma
  [ -x "$bin" ] || { echo "$0: the build made no $bin" >&2; exit 1; }
  need=$(max_glibc "$bin")
  if [ -z "$need" ] || [ "$(printf '%s\n%s\n' "$need" "$GLIBC" | sort -V | tail -1)" != "$GLIBC" ]; then
    echo "$0: $bin needs GLIBC_${need:-?}, above the $GLIBC baseline" >&2
    exit 1
  fi
  if readelf -S -W "$bin" | grep -Eq '\.(symtab|debug_[a-z]+) '; then
    echo "$0: $bin still has symbols or debug info (CARGO_PROFILE_RELEASE_STRIP had no effect)" >&2
    exit 1
  fi
  BIN[$t]=$bin
  echo "release: $t built in ${SECS[$t]} s: $(stat -c %s "$bin") bytes, needs GLIBC_$need at most"
done

# Completions from the binary this machine can run.
runner=
for t in "${TARGETS[@]}"; do [ "${t%%-*}" = "$host_arch" ] && runner=${BIN[$t]}; done
[ -n "$runner" ] || { echo "$0: none of the binaries runs on this $host_arch machine, so none can write the completions" >&2; exit 1; }

STAGE=$CARGO_TARGET_DIR/release-stage
rm -rf "$STAGE"
archives=()
for t in "${TARGETS[@]}"; do
  name=s3rdma-$VERSION-${t%%-*}-linux-gnu
  dir=$STAGE/$name
  mkdir -p "$dir/completions"
  install -m 0755 "${BIN[$t]}" "$dir/s3rdma"
  install -m 0644 LICENSE NOTICE README.md "$dir/"
  "$runner" completions bash > "$dir/completions/s3rdma.bash"
  "$runner" completions zsh > "$dir/completions/_s3rdma"
  "$runner" completions fish > "$dir/completions/s3rdma.fish"
  chmod 0644 "$dir"/completions/*
  chmod 0755 "$dir" "$dir/completions"
  tar --sort=name --format=gnu --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
    -C "$STAGE" -cf - "$name" | gzip -n -9 > "$DIST/$name.tar.gz.tmp"
  mv "$DIST/$name.tar.gz.tmp" "$DIST/$name.tar.gz"
  archives+=("$name.tar.gz")
done
(cd "$DIST" && sha256sum "${archives[@]}" > SHA256SUMS.tmp && mv SHA256SUMS.tmp SHA256SUMS)

echo "release: s3rdma $VERSION from ${COMMIT:0:12}${DIRTY:+ (working tree, dirty)}, dated $(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ):"
for t in "${TARGETS[@]}"; do
  f=s3rdma-$VERSION-${t%%-*}-linux-gnu.tar.gz
  echo "  $DIST/$f  $(stat -c %s "$DIST/$f") bytes  (built in ${SECS[$t]} s, needs GLIBC_$(max_glibc "${BIN[$t]}") at most)"
done
echo "  $DIST/SHA256SUMS"
sed 's/^/    /' "$DIST/SHA256SUMS"
