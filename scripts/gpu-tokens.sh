#!/usr/bin/env bash
# tokens on a GPU machine: SIZE (16GiB) of synthetic Llama-3-vocabulary token
# shards, read into device memory from the local disk and from s3s-fs on
# loopback. Binaries from $BIN (default .carry). Prints a short table last.
# Env: SIZE (16GiB), REPEATS (3 local), HTTP_REPEATS (1), BACKENDS (local,http), TOKENS_FLAGS.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}; S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-tokens}; SIZE=${SIZE:-16GiB}; BACKENDS=${BACKENDS:-local,http}
mkdir -p "$ROOT/s3rdma-bench" results
export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
for backend in ${BACKENDS//,/ }; do
  if [ "$backend" = http ]; then
    mkdir -p "$ROOT-s3/s3rdma-bench"
    "$BIN/s3s-fs" --host 127.0.0.1 --port 9559 --access-key gpuak --secret-key gpusk-secret "$ROOT-s3" > "$ROOT/s3s.log" 2>&1 &
    SRV=$!; sleep 1
    B=(--backend http --endpoint http://127.0.0.1:9559 --part-size 64MiB); R=${HTTP_REPEATS:-1}
  else
    B=(--root "$ROOT"); R=${REPEATS:-3}
  fi
  /usr/bin/time -f "ingest tokens $backend: %e s" "$S" ingest tokens "${B[@]}" --synthetic --vocab 128256 --total-bytes "$SIZE" --seq-len 4096 2>&1 | tail -2
  timeout 400 "$S" tokens "${B[@]}" --dest device --repeats "$R" ${TOKENS_FLAGS:-} --tag "gpu-$backend" --json > "$ROOT/$backend.json" 2> "$ROOT/$backend.err" \
    || { echo "tokens $backend FAILED:"; tail -5 "$ROOT/$backend.err"; }
  [ "$backend" = http ] && { kill $SRV; rm -rf "$ROOT-s3"; }
  [ "$backend" = local ] && rm -rf "$ROOT/s3rdma-bench/tokens"
done
python3 - "$ROOT"/local.json "$ROOT"/http.json <<'PY'
import json, sys
print(f'{"backend":8} {"GB":>6} {"tokens/s (min-max)":>30} {"GB/s":>6} {"cores":>6} {"wait s":>7} {"GPUs of 8B":>11} witness')
for f in sys.argv[1:]:
    try: r = json.load(open(f))
    except Exception: continue
    s = r["results"]["summary"]; t = s["tokens_per_s"]
    print(f'{r["backend"]:8} {r["results"]["timed_bytes"]/1e9:6.2f} {t["median"]/1e9:8.3f} B ({t["min"]/1e9:.3f}-{t["max"]/1e9:.3f} B) '
          f'{s["throughput_gbps"]["median"]:6.2f} {s["client_cpu_cores"]["median"]:6.2f} {s["fetch_wait_s"]["median"]:7.3f} '
          f'{r["results"]["gpus_it_could_feed"][0]["gpus_fed"]:11.0f} {r["rdma_witness"]["verdict"]}')
PY
ls results/tokens-*gpu* 2>/dev/null
