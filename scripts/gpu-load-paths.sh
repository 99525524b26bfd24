#!/usr/bin/env bash
# Where a warm load into GPU memory can go, on the GPU machine, in one call:
#   1. scripts/probe_load_paths.py: the paths from page-cache files to device
#      memory, each alone (pinned ceiling, pread into host, pread into a pinned
#      ring, registered page-cache pages copied directly);
#   2. scripts/peers_weights.py: s3rdma weights (default flags, and VARIANTS)
#      beside InstantTensor (buffered and mmap), fresh processes, interleaved,
#      warm, from disk's page cache and from tmpfs (/dev/shm);
#   3. correctness on the GPU (conformance and unit test binaries carried in
#      $BIN, a tiny model with one bit flipped at rest);
#   4. weights --verify: what proof costs the warm load, device and host;
#   5. FETCH_VERIFY=N: fetch over http from nginx with and without --verify,
#      N rounds (scripts/gpu-nginx-reads.sh; carry .peers/nginx.tar.xz).
# Binaries from $BIN (default .carry), wheels from .whl. Records go to results/.
# Env: SKIP_PROBE, SKIP_PEERS, SKIP_CHECK, SKIP_VERIFY, ROUNDS (3), LOADERS,
#      VARIANTS ("name=flags;..."), TMPFS (1: also /dev/shm), PAGECACHE (1: disk's page cache), PROBE_ROUNDS (2),
#      PROBE_THREADS ("4,8,16"), PROBE_CHUNKS ("16,64", MiB), FETCH_VERIFY.
set -uo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-.carry}
S=$BIN/s3rdma
OUTDIR=${OUT:-/tmp/out}
mkdir -p results "$OUTDIR"
ls .whl/*.whl >/dev/null 2>&1 && python3 -m pip install -q --no-deps --no-index .whl/*.whl 2>&1 | tail -2
nproc; free -g | head -2; df -hT /tmp /dev/shm | tail -2
if [ -z "${SKIP_PROBE:-}" ]; then
  python3 scripts/probe_load_paths.py --dir /tmp/probe --gib 16 --files 4 --rounds "${PROBE_ROUNDS:-2}" \
    --threads "${PROBE_THREADS:-4,8,16}" --chunks-mib "${PROBE_CHUNKS:-16,64}" --out "$OUTDIR/probe.json" 2>&1 | tail -40
  rm -rf /tmp/probe
fi
if [ -z "${SKIP_PEERS:-}" ]; then
  VARGS=()
  IFS=';' read -ra VS <<< "${VARIANTS:-}"
  for v in "${VS[@]}"; do [ -n "$v" ] && VARGS+=(--variant "$v"); done
  roots=()
  [ "${PAGECACHE:-1}" = 1 ] && roots+=(/tmp/s3rdma-w)
  [ "${TMPFS:-1}" = 1 ] && roots+=(/dev/shm/s3rdma-w)
  for r in "${roots[@]}"; do
    mkdir -p "$r"
    [ -f "$r/s3rdma-bench/m/llama/model.safetensors.index.json" ] || "$S" weights --root "$r" --synth llama-3.1-8b --model m/llama > /dev/null
    tag=gpu-warm-$( [ "$r" = /tmp/s3rdma-w ] && echo pagecache || echo tmpfs )
    python3 scripts/peers_weights.py --s3rdma "$S" --root "$r" --model m/llama --rounds "${ROUNDS:-3}" --caches warm \
      --loaders "${LOADERS:-s3rdma-default,instanttensor-buffered,instanttensor-mmap}" "${VARGS[@]}" --tag "$tag" 2>&1 | tail -25
    [ "$r" = /dev/shm/s3rdma-w ] && rm -rf "$r"
  done
  cp results/peers-weights-*gpu-warm* "$OUTDIR/" 2>/dev/null
fi
if [ -z "${SKIP_CHECK:-}" ]; then
  # Correctness on the GPU: the reader threads byte for byte (a conformance
  # test binary carried as $BIN/conformance), fetch --verify's check of
  # device memory (the library's unit test binary, $BIN/unit), then a tiny model loaded and
  # verified with each --file-io, then one bit flipped at rest: --verify must
  # fail (exit 4) with the bytes in device memory and in host memory.
  [ -x "$BIN/conformance" ] && "$BIN/conformance" local_reader --nocapture 2>&1 | grep -E "byte-exact|test result|SKIP|panicked"
  [ -x "$BIN/unit" ] && "$BIN/unit" fetch::check --nocapture 2>&1 | grep -E "flipped byte found|test result|SKIP|panicked"
  T=$(mktemp -d); "$S" weights --root "$T" --synth tiny --model m/t > /dev/null
  for io in pread mmap; do
    "$S" weights --root "$T" --model m/t --dest device --verify --file-io "$io" --results-dir "$T/rec" > "$T/o" 2>&1; rc=$?
    echo "tiny --file-io $io: exit $rc, $(grep -o 'digest ok ([0-9]*)' "$T/o"), $(grep -c '^stages:' "$T/o") stages line"
  done
  python3 - "$T/s3rdma-bench/m/t/model.safetensors" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read()); b[-10] ^= 0x10; open(p, "wb").write(b)
PY
  for d in device host; do
    "$S" weights --root "$T" --model m/t --dest "$d" --verify --results-dir "$T/rec" > /dev/null 2> "$T/e"; rc=$?
    echo "one bit flipped at rest, --dest $d: exit $rc: $(grep -o '[0-9]* difference(s)[^,]*' "$T/e" | head -1)"
  done
  rm -rf "$T"
fi
if [ -z "${SKIP_VERIFY:-}" ] && [ -f /tmp/s3rdma-w/s3rdma-bench/m/llama/model.safetensors.index.json ]; then
  # What proof costs: the warm model loaded and checked against its digest, into device and host memory.
  for d in device host; do
    "$S" weights --root /tmp/s3rdma-w --model m/llama --dest "$d" --verify --repeats 3 --tag "gpu-verify-$d" 2>&1 | grep -E "^│ local|^checked|^stages:|^wrote"
  done
  cp results/weights-local-*gpu-verify* "$OUTDIR/" 2>/dev/null
fi
if [ -n "${FETCH_VERIFY:-}" ]; then
  SHAPE=tiny SKIP_WEIGHTS=1 DESTS="device host" S="$S" RES="$OUTDIR" scripts/gpu-nginx-reads.sh 2>&1 | tail -12
fi
