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
# Architectures: minio-cpp vendors libs3rdma for x86_64 and aarch64 and links
# the one of the target (CMAKE_SYSTEM_PROCESSOR); the copy placed beside
# libminiocpp.so is chosen by the machine the built library is for, so the
# same command works on an x86_64 host and on an aarch64 host (Grace Hopper,
# Grace Blackwell) with no setting. Cross builds from x86_64: ARCH=aarch64 with
# Debian's g++-aarch64-linux-gnu and the arm64 -dev packages
# (dpkg --add-architecture arm64; apt-get install libssl-dev:arm64
# zlib1g-dev:arm64 libpugixml-dev:arm64 libinih-dev:arm64), or a
# CMAKE_TOOLCHAIN_FILE of your own.
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

# ARCH=aarch64 on another host: Debian's cross compiler, and pkg-config answers
# for the arm64 libraries (set before any pkg-config question below).
CROSS=
if [ "${ARCH:-}" = aarch64 ] && [ "$(uname -m)" != aarch64 ] && [ -z "${CMAKE_TOOLCHAIN_FILE:-}" ]; then
  CROSS=aarch64-linux-gnu
  missing=()
  command -v aarch64-linux-gnu-g++ >/dev/null 2>&1 || missing+=(g++-aarch64-linux-gnu)
  for l in libssl.so libz.so libpugixml.so libINIReader.so; do
    [ -e "/usr/lib/aarch64-linux-gnu/$l" ] || missing+=("$l for arm64")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "$0: ARCH=aarch64 cross build: missing ${missing[*]}: dpkg --add-architecture arm64 && apt-get update &&" \
      "apt-get install g++-aarch64-linux-gnu libssl-dev:arm64 zlib1g-dev:arm64 libpugixml-dev:arm64 libinih-dev:arm64" >&2
    exit 1
  fi
  export PKG_CONFIG_LIBDIR=/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig
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
if [ -n "$CROSS" ]; then
  args+=(-DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64
         -DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++
         -DCMAKE_FIND_ROOT_PATH=/usr/aarch64-linux-gnu)
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
# The libs3rdma beside it is the one for the machine the library was built for
# (this host's, ARCH's, or a toolchain file's): the vendor directory's names.
case "$(readelf -h "$lib" 2>/dev/null | sed -n 's/^ *Machine: *//p')" in
  *X86-64*) arch=x86_64 ;;
  *AArch64*) arch=aarch64 ;;
  *) arch=${ARCH:-$(uname -m)} ;;
esac
[ -f "$OUT/src/vendor/s3rdma/lib/$arch/libs3rdma.so.0" ] || { echo "$0: minio-cpp vendors no libs3rdma for $arch (vendor/s3rdma/lib/$arch)" >&2; exit 1; }
cp "$lib" "$OUT/libminiocpp.so.tmp" && mv "$OUT/libminiocpp.so.tmp" "$OUT/libminiocpp.so"
cp -L "$OUT/src/vendor/s3rdma/lib/$arch/libs3rdma.so.0" "$OUT/libs3rdma.so.0"
# The build's runpath names the source tree; the copy finds libs3rdma beside itself.
if command -v patchelf >/dev/null 2>&1; then patchelf --set-rpath '$ORIGIN' "$OUT/libminiocpp.so"; fi
echo "libminiocpp: built $OUT/libminiocpp.so for $arch in $(( $(date +%s) - start )) s (minio-cpp $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo "$SRC"), libs3rdma beside it)"
