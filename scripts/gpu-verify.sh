#!/usr/bin/env bash
# verify's GPU-Direct probe on a GPU machine (docs/gpu.md): `verify --sizes`
# over http (device memory staged through pinned buffers) and over rdma
# through the libminiocpp test double (device pointers handed to the library,
# which claims RDMA but moves the bytes over HTTP: the witness must say
# full-fallback and RESULT must not be a GPU-Direct PASS), both against
# examples/s3_test_server with its MinIO-style request counters.
#
#   scripts/gpu-verify.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds s3rdma, libfake_miniocpp.so and s3_test_server, built
# elsewhere (the GPU machine has no cargo). Builds nothing.
set -euo pipefail
BIN=$(realpath "$1"); OUT=$(realpath "$2")
W=$(mktemp -d)
export AWS_ACCESS_KEY_ID=gpu-verify AWS_SECRET_ACCESS_KEY=gpu-verify-secret
"$BIN/s3_test_server" "$W/store" 0 > "$W/server.log" 2>&1 &
trap 'kill %1 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do EP=$(awk '/^endpoint /{print $2}' "$W/server.log"); [ -n "$EP" ] && break; sleep 0.1; done
M="$EP/minio/metrics/v3/api/requests"
cd "$W"
set +e
"$BIN/s3rdma" verify --backend http --endpoint "$EP" --bucket gpu --prepare --metrics-url "$M" --sizes 4KiB,64MiB,1GiB --tag gpu-http | tee "$OUT/verify-http.txt"
echo "exit $?" | tee -a "$OUT/verify-http.txt"
FAKE_MINIOCPP_RDMA_AVAILABLE=1 "$BIN/s3rdma" verify --backend rdma --rdma-lib "$BIN/libfake_miniocpp.so" --endpoint "$EP" --bucket gpu \
  --metrics-url "$M" --sizes 4KiB,64MiB,1GiB --tag gpu-rdma-fake | tee "$OUT/verify-rdma-fake.txt"
echo "exit $?" | tee -a "$OUT/verify-rdma-fake.txt"
set -e
cp results/*.json "$OUT/"
echo; echo "== summary"; grep -h "^RESULT\|^exit" "$OUT"/verify-*.txt
