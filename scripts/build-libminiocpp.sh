#!/usr/bin/env bash
# Builds libminiocpp (minio-cpp's C ABI, include/miniocpp/c_api.h) as a shared
# library with RDMA enabled, the way the `rdma` backend loads it:
#
#   scripts/build-libminiocpp.sh SRC_DIR OUT_DIR [HTTPLIB_DIR]
#
# SRC_DIR      a minio-cpp checkout (https://github.com/minio/minio-cpp, v0.6.0
#              or later: RDMA through its vendored libs3rdma). Read only: the
#              build happens under OUT_DIR/build.
# OUT_DIR      receives libminiocpp.so and, beside it, the vendored
#              libs3rdma.so.0 (found through the library's $ORIGIN runpath).
# HTTPLIB_DIR  a directory holding cpp-httplib's httplib.h, version 0.51 or
#              later (Debian 12 ships 0.11, too old); default: let minio-cpp's
#              cmake look for a package (it clones upstream when none is found,
#              which needs the network).
#
# Debian/Ubuntu packages it needs (installed here when missing and run as root):
#   cmake g++ libssl-dev zlib1g-dev nlohmann-json3-dev libpugixml-dev libinih-dev pkg-config
# minio-cpp's cmake asks pkg-config for `cpp-httplib` and for the C++
# INIReader as `inireader` (Debian's file is INIReader.pc): both names are
# provided through a private pkg-config directory under OUT_DIR.
#
# Cross builds: set CMAKE_TOOLCHAIN_FILE (or ARCH=aarch64 with Debian's
# g++-aarch64-linux-gnu and the arm64 -dev packages) and the aarch64 libs3rdma
# that minio-cpp vendors is linked; on an aarch64 host no setting is needed.
# Skips the build when OUT_DIR/libminiocpp.so is newer than every source file.
set -euo pipefail

if [ $# -lt 2 ]; then
  echo "usage: $0 SRC_DIR OUT_DIR [HTTPLIB_DIR]" >&2
  exit 2
fi
SRC=$(cd "$1" && pwd) || { echo "$0: minio-cpp source '$1' not found: pass a minio-cpp checkout" >&2; exit 2; }
mkdir -p "$2"
OUT=$(cd "$2" && pwd)
HTTPLIB=${3:-}
[ -z "$HTTPLIB" ] || HTTPLIB=$(cd "$HTTPLIB" && pwd) || { echo "$0: cpp-httplib directory '$3' not found" >&2; exit 2; }

if [ ! -f "$SRC/include/miniocpp/c_api.h" ]; then
  echo "$0: $SRC has no include/miniocpp/c_api.h: it is not minio-cpp v0.6.0 or later (the C ABI with RDMA)" >&2
  exit 2
fi

if [ -f "$OUT/libminiocpp.so" ] && [ -z "$(find "$SRC" "${HTTPLIB:-$SRC}" -newer "$OUT/libminiocpp.so" -type f -print -quit)" ]; then
  echo "libminiocpp: up to date at $OUT/libminiocpp.so"
  exit 0
fi

need=()
for p in cmake g++ pkg-config patchelf; do command -v "$p" >/dev/null 2>&1 || need+=("$p"); done
for h in /usr/include/openssl/ssl.h /usr/include/zlib.h /usr/include/nlohmann/json.hpp /usr/include/pugixml.hpp /usr/include/INIReader.h; do
  [ -f "$h" ] || need+=("$h")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "libminiocpp: installing build packages (missing: ${need[*]})"
    pkgs="cmake g++ libssl-dev zlib1g-dev nlohmann-json3-dev libpugixml-dev libinih-dev pkg-config patchelf"
    # shellcheck disable=SC2086
    apt-get install -y -qq $pkgs >/dev/null 2>&1 || { apt-get update -qq >/dev/null && apt-get install -y -qq $pkgs >/dev/null; }
  else
    echo "$0: missing ${need[*]}: install cmake g++ libssl-dev zlib1g-dev nlohmann-json3-dev libpugixml-dev libinih-dev pkg-config" >&2
    exit 1
  fi
fi

PC="$OUT/pkgconfig"
mkdir -p "$PC"
if [ -n "$HTTPLIB" ]; then
  [ -f "$HTTPLIB/httplib.h" ] || { echo "$0: no httplib.h in '$HTTPLIB': pass the directory holding cpp-httplib's httplib.h (0.51 or later)" >&2; exit 2; }
  ver=$(sed -n 's/^#define CPPHTTPLIB_VERSION "\(.*\)"/\1/p' "$HTTPLIB/httplib.h")
  [ -n "$ver" ] || { echo "$0: $HTTPLIB/httplib.h does not say its version (CPPHTTPLIB_VERSION)" >&2; exit 2; }
  cat > "$PC/cpp-httplib.pc" <<EOF
Name: cpp-httplib
Description: header-only HTTP library ($HTTPLIB)
Version: $ver
Cflags: -I$HTTPLIB
EOF
fi
# minio-cpp's cmake asks for `inireader`; Debian names the same library INIReader.
sys_pc=$(pkg-config --variable pc_path pkg-config)
if ! pkg-config --exists inireader && pkg-config --exists INIReader; then
  ini=$(IFS=:; for d in $sys_pc; do [ -f "$d/INIReader.pc" ] && echo "$d/INIReader.pc" && break; done)
  sed 's/^Name: .*/Name: inireader/' "$ini" > "$PC/inireader.pc"
fi

args=(-S "$SRC" -B "$OUT/build" -DCMAKE_BUILD_TYPE=Release -DMINIO_CPP_ENABLE_RDMA=ON -DBUILD_SHARED_LIBS=ON
      -DMINIO_CPP_TEST=OFF -DMINIO_CPP_MAKE_DOC=OFF)
if [ "${ARCH:-}" = aarch64 ] && [ "$(uname -m)" != aarch64 ] && [ -z "${CMAKE_TOOLCHAIN_FILE:-}" ]; then
  args+=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64
         -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++
         -DCMAKE_FIND_ROOT_PATH=/usr/aarch64-linux-gnu)
  export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
fi
[ -n "${CMAKE_TOOLCHAIN_FILE:-}" ] && args+=("-DCMAKE_TOOLCHAIN_FILE=$CMAKE_TOOLCHAIN_FILE")

# Build from a private copy of the source (a few MB): the checkout stays
# untouched, and a vendored libs3rdma.so link that git stored as a text file
# naming its target (a checkout without symlink support) is made a link again;
# the linker otherwise reads it as a linker script and fails.
rm -rf "$OUT/src" && mkdir -p "$OUT/src" && cp -a "$SRC/." "$OUT/src/" && chmod -R u+w "$OUT/src"
for f in "$OUT"/src/vendor/s3rdma/lib/*/libs3rdma.so; do
  if [ -f "$f" ] && [ ! -L "$f" ] && [ "$(head -c 4 "$f")" != $'\x7fELF' ]; then
    target=$(cat "$f")
    case "$target" in libs3rdma.so*) ln -sf "$target" "$f" ;; *) echo "$0: $f is neither a library nor a link to one" >&2; exit 1 ;; esac
  fi
done
args[1]="$OUT/src"

export PKG_CONFIG_PATH="$PC${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
start=$(date +%s)
rm -f "$OUT/build/CMakeCache.txt"  # pkg-config answers are cached: a new HTTPLIB_DIR must be seen
cmake "${args[@]}" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log" >&2; echo "$0: cmake configure failed (log: $OUT/cmake.log)" >&2; exit 1; }
cmake --build "$OUT/build" --target miniocpp -j "$(nproc)" >> "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log" >&2; echo "$0: build failed (log: $OUT/cmake.log)" >&2; exit 1; }

lib=$(find "$OUT/build" -maxdepth 1 -name 'libminiocpp.so*' -type f | head -1)
[ -n "$lib" ] || { echo "$0: the build made no libminiocpp.so (log: $OUT/cmake.log)" >&2; exit 1; }
arch=${ARCH:-$(uname -m)}
cp "$lib" "$OUT/libminiocpp.so.tmp" && mv "$OUT/libminiocpp.so.tmp" "$OUT/libminiocpp.so"
cp -L "$OUT/src/vendor/s3rdma/lib/$arch/libs3rdma.so.0" "$OUT/libs3rdma.so.0"
# The build's runpath names the source tree; the copy finds libs3rdma beside itself.
if command -v patchelf >/dev/null 2>&1; then patchelf --set-rpath '$ORIGIN' "$OUT/libminiocpp.so"; fi
echo "libminiocpp: built $OUT/libminiocpp.so in $(( $(date +%s) - start )) s (minio-cpp $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo "$SRC"), libs3rdma beside it)"
