#!/usr/bin/env bash
# fetch --procs on a GPU machine (issue: multi-process scaling): 1, 2, 4, 8
# processes x 8 streams into device memory, 64 MiB and 256 MiB objects, from
# the local backend (page cache) and from s3s-fs on loopback. With one GPU all
# processes share it (a labelled smaller run of the upstream report's shape).
# Binaries from $BIN (default .carry). Prints a short table last.
# Env: PROCS (1,2,4,8), SIZES (64MiB,256MiB), DURATION (3s), SKIP_HTTP.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-procs}
GPUS=$(nvidia-smi -L 2>/dev/null | wc -l)
TAG=${TAG:-gpu-procs-${GPUS}gpu}
COMMON="--sizes ${SIZES:-64MiB,256MiB} --concurrency 8 --procs ${PROCS:-1,2,4,8} --dest device --duration ${DURATION:-3s} --warmup 1s --repeats 1 --prepare"
mkdir -p "$ROOT" results
timeout 280 "$S" fetch --root "$ROOT" $COMMON --tag "$TAG-local" --json > "$ROOT/local.json" || echo "local fetch FAILED"
if [ -z "${SKIP_HTTP:-}" ]; then
  mkdir -p "$ROOT-s3"
  "$BIN/s3s-fs" --host 127.0.0.1 --port 9558 --access-key gpuak --secret-key gpusk-secret "$ROOT-s3" > "$ROOT/s3s.log" 2>&1 &
  SRV=$!; sleep 1
  export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
  timeout 280 "$S" fetch --backend http --endpoint http://127.0.0.1:9558 $COMMON --tag "$TAG-http" --json > "$ROOT/http.json" || echo "http fetch FAILED"
  kill $SRV
fi
python3 - "$ROOT"/local.json "$ROOT"/http.json <<'PY'
import json, sys
print(f'{"backend":8} {"size":>10} {"procs x streams":>15} {"GB/s":>7} {"GB/s/proc":>9} {"ops/s":>8} {"cores":>6} {"witness":>15}')
for f in sys.argv[1:]:
    try: r = json.load(open(f))
    except Exception: continue
    for c in r["results"]:
        s = c["summary"]
        print(f'{r["backend"]:8} {c["size_bytes"]>>20:>7}MiB {c["procs"]:>9} x {c["concurrency"]:<3} {s["throughput_gbps"]["median"]:7.2f} '
              f'{s["per_process_gbps"]["median"]:9.2f} {s["ops_per_s"]["median"]:8.1f} {s["client_cpu_cores"]["median"]:6.2f} {s["witness_verdict"]:>15}')
PY
ls results/fetch-*procs* 2>/dev/null
