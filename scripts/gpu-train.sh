#!/usr/bin/env bash
# train (and its ingest) on a GPU machine: ResNet-50 via tch on a synthetic
# ImageNet-shaped set, raw and jpeg layouts, from the local disk and from
# s3s-fs on loopback. Binaries from $BIN (default .carry): s3rdma (ingest),
# s3rdma-train (built with --features train), s3s-fs. libtorch comes from this
# machine's PyTorch (LD_PRELOAD of libtorch_cuda.so: tch alone does not load it).
# With TRAIN_FLAGS=--loader-only and no s3rdma-train, the default build (s3rdma)
# runs: the input pipeline needs no libtorch.
# Prints a short table last.
# Env: IMAGES (32768), STEPS (200), WARMUP (10), BATCH (256), REPEATS (3),
#      LAYOUTS (raw,jpeg), BACKENDS (local,http), RANKS (unset: one process),
#      TRAIN_FLAGS (extra flags, e.g. --loader-only), TAG (gpu), SKIP_INGEST (reuse the sets of an earlier run).
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
ROOT=${ROOT:-/tmp/s3rdma-train}
IMAGES=${IMAGES:-32768}; STEPS=${STEPS:-200}; WARMUP=${WARMUP:-10}; BATCH=${BATCH:-256}; REPEATS=${REPEATS:-3}
LAYOUTS=${LAYOUTS:-raw,jpeg}; BACKENDS=${BACKENDS:-local,http}; TAG=${TAG:-gpu}
TRAIN_BIN=$BIN/s3rdma-train
[ -x "$TRAIN_BIN" ] || [[ ${TRAIN_FLAGS:-} != *--loader-only* ]] || TRAIN_BIN=$BIN/s3rdma
TORCH_LIB=$(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
mkdir -p "$ROOT/s3rdma-bench" results
RANKS_FLAG=${RANKS:+--ranks $RANKS}
if [[ $BACKENDS == *http* ]]; then
  mkdir -p "$ROOT-s3/s3rdma-bench"
  "$BIN/s3s-fs" --host 127.0.0.1 --port 9558 --access-key gpuak --secret-key gpusk-secret "$ROOT-s3" > "$ROOT/s3s.log" 2>&1 &
  SRV=$!; sleep 1
fi
export AWS_ACCESS_KEY_ID=gpuak AWS_SECRET_ACCESS_KEY=gpusk-secret
for backend in ${BACKENDS//,/ }; do
  if [ "$backend" = http ]; then B=(--backend http --endpoint http://127.0.0.1:9558 --part-size 64MiB); else B=(--root "$ROOT"); fi
  for layout in ${LAYOUTS//,/ }; do
    if [ -n "${SKIP_INGEST:-}" ]; then
      :
    elif [ "$layout" = raw ]; then
      /usr/bin/time -f "ingest raw $backend: %e s" "$BIN/s3rdma" ingest raw "${B[@]}" --synthetic "$IMAGES" --classes 100 --size 256 2>&1 | tail -2
    else
      /usr/bin/time -f "ingest jpeg $backend: %e s" "$BIN/s3rdma" ingest jpeg "${B[@]}" --synthetic "$IMAGES" --classes 100 --synthetic-size 500x375 2>&1 | tail -2
    fi
    timeout "${TRAIN_TIMEOUT:-540}" env LD_LIBRARY_PATH="$TORCH_LIB" LD_PRELOAD="$TORCH_LIB/libtorch_cuda.so" "$TRAIN_BIN" train "${B[@]}" --layout "$layout" \
      --steps "$STEPS" --warmup "$WARMUP" --batch-size "$BATCH" --repeats "$REPEATS" $RANKS_FLAG ${TRAIN_FLAGS:-} \
      --tag "$TAG-$layout-$backend${RANKS:+-ranks$RANKS}" --json > "$ROOT/$layout-$backend.json" 2> "$ROOT/$layout-$backend.err" \
      || { echo "train $layout $backend FAILED:"; tail -5 "$ROOT/$layout-$backend.err"; }
    # On the lent machine, keep each record as soon as it exists (a later step may run out of time).
    [ -n "${OUT:-}" ] && mkdir -p "$OUT/results" && cp results/train-*"$TAG"* "$OUT/results/" 2>/dev/null
  done
done
[ -n "${SRV:-}" ] && kill $SRV
python3 - "$ROOT"/*.json <<'PY'
import json, sys
print(f'{"layout":6} {"backend":7} {"ranks":>5} {"s for steps (min-max)":>24} {"images/s":>9} {"step s":>7} {"wait s":>7} {"h2d s":>6} {"aug s":>6} {"comp s":>7} {"GB/s":>6} {"host cores":>10} {"loss first->last":>17} witness')
for f in sys.argv[1:]:
    try: r = json.load(open(f))
    except Exception: continue
    s = r["results"]["summary"]; p = r["params"]; w = s["wall_s"]
    lf, ll = s.get("loss_first"), s.get("loss_last")
    loss = f'{lf:.3f}->{ll:.3f}' if lf is not None else "-"
    print(f'{p["layout"]:6} {r["backend"]:7} {p["ranks"]:5} {w["median"]:8.2f} ({w["min"]:.2f}-{w["max"]:.2f}) {s["images_per_s"]["median"]:9.0f} '
          f'{s["step_s_median"]["median"]:7.4f} {s["fetch_wait_s"]["median"]:7.2f} {s["h2d_s"]["median"]:6.2f} {s["augment_s"]["median"]:6.2f} '
          f'{s["compute_s"]["median"]:7.2f} {s["read_gbps"]["median"]:6.2f} {s["host_cpu_cores"]["median"]:10.1f} {loss:>17} {r["rdma_witness"]["verdict"]}')
PY
ls results/train-*"$TAG"* 2>/dev/null
