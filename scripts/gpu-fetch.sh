#!/usr/bin/env bash
# fetch --dest host|pinned|device on a GPU machine, from the local backend
# (page cache) and from an s3s-fs server on loopback, plus the rdma backend
# through the test double into device memory. Binaries come from $BIN
# (default .carry: s3rdma, s3s-fs, libfake_miniocpp.so, built elsewhere).
# Records go to results/; the last thing printed is a short table.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
DATA=${DATA:-/tmp/s3rdma-gpu}
DUR=${DUR:-2s}
mkdir -p "$DATA/s3" results
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$S" verify --root "$DATA/local" --prepare --size 64MiB | grep -E '^\[1\] .*CUDA|RESULT' || true

run() { "$S" fetch "$@" --duration "$DUR" --warmup 500ms --json > "$DATA/last.json" || { echo "FAILED: $*"; return 1; }
  python3 - "$DATA/last.json" "$*" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); env = r["environment"]
for c in r["results"]:
    s = c["summary"]
    print(f'{r["backend"]:5} {env["dest"]:6} {c["size_bytes"]>>20:5}MiB x{c["concurrency"]:<3} '
          f'{s["throughput_gbps"]["median"]:7.2f} GB/s  {s["client_cpu_cores"]["median"]:5.2f} cores  '
          f'{c["summary"]["witness_verdict"]}', file=open("/tmp/s3rdma-gpu-table.txt", "a"))
PY
}
: > /tmp/s3rdma-gpu-table.txt
for dest in host pinned device; do
  run --root "$DATA/local" --prepare --sizes 64MiB,256MiB --concurrency 1,2,4,8,16 --dest "$dest" --tag "gpu-local-$dest"
done
"$BIN/s3s-fs" --host 127.0.0.1 --port 9555 --access-key gpuak --secret-key gpusk-secret "$DATA/s3" > "$DATA/s3s.log" 2>&1 &
SRV=$!
sleep 1
export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
for dest in host device; do
  run --backend http --endpoint http://127.0.0.1:9555 --prepare --sizes 64MiB,256MiB --concurrency 1,4,16 --dest "$dest" --tag "gpu-http-$dest"
done
run --backend rdma --rdma-lib "$BIN/libfake_miniocpp.so" --endpoint http://127.0.0.1:9555 --prepare --sizes 64MiB --concurrency 1,4 --dest device --tag gpu-rdma-fake-device --results-dir results/test-double
kill $SRV
echo "backend dest   size   streams  throughput  client CPU  witness"
cat /tmp/s3rdma-gpu-table.txt
