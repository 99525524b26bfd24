#!/usr/bin/env bash
# The HTTP-peers table on the GPU machine (docs/http-peers.md). Unpacks
# .peers/kit.tar.xz (made here by scripts/make-peers-kit.sh; carry `.peers`),
# installs the carried wheels into /tmp, and runs scripts/bench_http_peers.py
# with s3rdma rows into host and device memory, over both GET paths.
# Results go to $OUT/results (the device's return folder) or results/.
# Extra arguments go to bench_http_peers.py, e.g. --concurrency 8 --repeats 5.
set -euo pipefail
cd "$(dirname "$0")/.."
KIT=${KIT:-.peers/kit.tar.xz}
[ -f "$KIT" ] || { echo "no $KIT: run scripts/make-peers-kit.sh here first, then carry .peers"; exit 2; }
K=/tmp/s3rdma-peers-kit
rm -rf "$K" && mkdir -p "$K"
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="tar")' "$KIT" "$K"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$K/site" "$K"/whl/*.whl
export PATH="$K/bin:$PATH" PYTHONPATH="$K/site${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
RES="${OUT:-.}/results"
python3 scripts/bench_http_peers.py --s3rdma "$K/bin/s3rdma" --s3s-fs "$K/bin/s3s-fs" --results-dir "$RES" \
  --extra "s3rdma-device=--dest device" --extra "s3rdma-sdk=--http-get sdk" \
  --extra "s3rdma-sdk-device=--http-get sdk --dest device" "$@"
