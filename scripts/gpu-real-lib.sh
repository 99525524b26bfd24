#!/usr/bin/env bash
# The rdma backend through the real libminiocpp (minio-cpp v0.6.0, libs3rdma
# generation) on a GPU machine without an RDMA NIC: the library says RDMA is
# unavailable and every transfer takes its HTTP fallback, into and out of GPU
# device memory. Against examples/s3_test_server (s3s-fs with MinIO-style
# request counters). Each run must be byte-exact and never rdma-verified:
#
#   fetch   --dest device
#   ckpt    --methods flat,async --dest device, a size that is not a multiple
#           of --chunk (the short last chunk: restore checks every checksum)
#   weights --synth then --verify --dest device
#   verify  --sizes 4KiB,64MiB (FAIL naming "RDMA unavailable", exit 3)
#
#   scripts/gpu-real-lib.sh KIT_DIR OUT_DIR
#
# KIT_DIR holds s3rdma, s3_test_server, libminiocpp.so and the libraries it
# needs that the GPU machine may lack (libs3rdma.so.0, libINIReader.so.0,
# libinih.so.1, libpugixml.so.1), all found through libminiocpp's $ORIGIN
# runpath. Built here by scripts/build-libminiocpp.sh; builds nothing.
set -uo pipefail
KIT=$(realpath "$1"); OUT=$(realpath "$2")
W=$(mktemp -d)
export AWS_ACCESS_KEY_ID=gpu-real AWS_SECRET_ACCESS_KEY=gpu-real-secret
"$KIT/s3_test_server" "$W/store" 0 > "$W/server.log" 2>&1 &
trap 'kill %1 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do EP=$(awk '/^endpoint /{print $2}' "$W/server.log"); [ -n "$EP" ] && break; sleep 0.1; done
M="$EP/minio/metrics/v3/api/requests"
L="$KIT/libminiocpp.so"
# libINIReader finds libinih through the loader path, not libminiocpp's runpath.
export LD_LIBRARY_PATH="$KIT${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
S="$KIT/s3rdma"
common=(--backend rdma --rdma-lib "$L" --endpoint "$EP" --bucket gpu --metrics-url "$M")
cd "$W"
run() { # name, args...
  local name=$1; shift
  "$S" "$@" > "$OUT/$name.txt" 2>&1
  echo "exit $?" >> "$OUT/$name.txt"
  echo "== $name: $(tail -1 "$OUT/$name.txt")"
}
run fetch fetch "${common[@]}" --prepare --dest device --sizes 64MiB,256MiB --concurrency 4 --iters 2 --tag gpu-real-lib
run ckpt ckpt "${common[@]}" --dest device --sizes 1GB --chunk 64MiB --methods flat,async --tag gpu-real-lib
run synth weights "${common[@]}" --synth tiny --model m/real --shard-size 16MB
run weights weights "${common[@]}" --model m/real --verify --dest device --repeats 2 --tag gpu-real-lib
run verify verify "${common[@]}" --sizes 4KiB,64MiB --tag gpu-real-lib
cp results/*.json "$OUT/" 2>/dev/null
echo
echo "== summary"
for f in fetch ckpt weights verify; do
  echo "-- $f"; grep -h "^RESULT\|^witness\|ok (\|verified\|^exit\|libs3rdma\|generation\|holds .* bytes" "$OUT/$f.txt" | grep -v "^RDMA disabled" | head -8
done
