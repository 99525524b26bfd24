#!/usr/bin/env bash
# Peers on a GPU machine: one run, same files, interleaved, warm
# and cold, into GPU memory; every figure lands in results/.
#   1. weights: a synthetic Llama-3.1-8B (16.06 GB, 4 shards) loaded by
#      s3rdma (default and tuned flags), safetensors, fastsafetensors (its
#      O_DIRECT default and buffered) and runai-model-streamer
#      (scripts/peers_weights.py), plus the disk's own parallel O_DIRECT read
#      rate (4 dd readers, one per shard) for the cold ratio.
#   2. ckpt: a 16 GiB Adam-shaped state in device memory, flat vs async
#      (stall = snapshot into pinned memory; wall = until durable), restore verified.
# Binaries from $BIN (default .carry); Python wheels of the peers from .whl
# (install them first: see the device README). Prints short tables last.
# Env: ROUNDS (2), SKIP_WEIGHTS, SKIP_CKPT, CKPT_SIZE (16GiB), LOADERS, CACHES,
#      VARIANTS (more s3rdma loaders, "name=flags;name=flags"; default: the old
#      fixed defaults and deep O_DIRECT / page-cache queues for cold reads),
#      CKPT_PEERS (set: also scripts/peers_ckpt.py, torch.save / DCP save,
#      load and async_save beside s3rdma flat/async, at CKPT_PEERS_SIZE, 4GiB).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
ROOT=${ROOT:-/tmp/s3rdma-peers}
mkdir -p "$ROOT" results
echo "disk: $(df -hT "$ROOT" | tail -1)"
if [ -z "${SKIP_WEIGHTS:-}" ]; then
  [ -f "$ROOT/s3rdma-bench/m/llama/model.safetensors.index.json" ] || "$S" weights --root "$ROOT" --synth llama-3.1-8b --model m/llama > /dev/null
  sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || echo "drop_caches refused: the harness falls back to fadvise"
  T0=$(date +%s.%N)
  for f in "$ROOT"/s3rdma-bench/m/llama/*.safetensors; do dd if="$f" of=/dev/null bs=64M iflag=direct status=none & done; wait
  T1=$(date +%s.%N)
  BYTES=$(cat "$ROOT"/s3rdma-bench/m/llama/*.safetensors | wc -c)
  python3 -c "import sys; b,t=int(sys.argv[1]),float(sys.argv[3])-float(sys.argv[2]); print(f'disk: 4 parallel dd O_DIRECT 64MiB readers, cold: {b/1e9:.2f} GB in {t:.2f} s = {b/t/1e9:.2f} GB/s')" "$BYTES" "$T0" "$T1"
  VARIANTS=${VARIANTS-old=--io-threads 1 --stage-chunk 8MiB --bounce-buffers 16;deep=--io-threads 8 --stage-chunk 64MiB --bounce-buffers 64;direct-deep=--direct --io-threads 8 --stage-chunk 64MiB --bounce-buffers 64}
  VARGS=()
  IFS=';' read -ra VS <<< "$VARIANTS"
  for v in "${VS[@]}"; do [ -n "$v" ] && VARGS+=(--variant "$v"); done
  python3 scripts/peers_weights.py --s3rdma "$S" --root "$ROOT" --model m/llama --rounds "${ROUNDS:-2}" ${LOADERS:+--loaders "$LOADERS"} ${CACHES:+--caches "$CACHES"} "${VARGS[@]}" --tag gpu
fi
if [ -z "${SKIP_CKPT:-}" ]; then
  DD=$(dd if=/dev/zero of="$ROOT/dd.bin" bs=64M count=64 oflag=direct conv=fsync 2>&1 | tail -1); rm -f "$ROOT/dd.bin"
  echo "disk: dd 4 GiB O_DIRECT + fsync: $DD"
  timeout 400 "$S" ckpt --root "$ROOT" --sizes "${CKPT_SIZE:-16GiB}" --methods flat,async --dest device --repeats 2 --tag gpu-async --json > "$ROOT/ckpt.json" \
    || echo "ckpt FAILED"
  python3 - "$ROOT/ckpt.json" <<'PY'
import json, sys
try: r = json.load(open(sys.argv[1]))
except Exception as e: sys.exit(f"no ckpt record: {e}")
print(f'{"method":7} {"op":8} {"GB":>6} {"stall s":>8} {"durable/wall s":>15} {"GB/s":>6} verified')
for row in r["results"]["rows"]:
    v = row["verified"]; vs = "-" if v is None else ("ok" if v["ok"] else "MISMATCH")
    print(f'{row["method"]:7} {row["op"]:8} {row["bytes"]/1e9:6.2f} {row["stall_s"]["median"]:8.3f} {row["wall_s"]["median"]:15.3f} {row["throughput_gbps"]["median"]:6.2f} {vs}')
PY
fi
if [ -n "${CKPT_PEERS:-}" ]; then
  python3 scripts/peers_ckpt.py --s3rdma "$S" --dir "$ROOT/ckpt-peers" --size "${CKPT_PEERS_SIZE:-4GiB}" --rounds "${CKPT_PEERS_ROUNDS:-1}" --tag gpu
fi
ls results/peers-ckpt-* results/peers-weights-* results/ckpt-*gpu-async* 2>/dev/null
