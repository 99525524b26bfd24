#!/usr/bin/env bash
# weights --verify as staged, on a GPU machine, beside the unverified load
# and InstantTensor (its page-cache backends), in one run, fresh processes
# interleaved over ROUNDS rounds (scripts/peers_weights.py), from the page
# cache and from tmpfs (/dev/shm). Also runs the library's GPU tests (the
# landing checksum's kernel against the host's, a flipped byte in device
# memory) when the test binary is there.
#
#   scripts/gpu-weights-verify.sh            # binaries in .carry
#
# .carry holds s3rdma (or s3rdma.xz) and optionally libtests(.xz) and
# conformance(.xz) (`cargo test --lib --no-run`, `--test conformance`, stripped); .whl holds
# the instanttensor wheel (see the device README for fetching wheels).
# Then fetch --verify beside plain fetch (SKIP_FETCH=1: not), ckpt flat and
# async into device memory (SKIP_CKPT=1: not), and
# scripts/probe_register.py on the page-cache copy (SKIP_PROBE=1: not).
# Builds nothing. Env: ROUNDS (3), CACHES (pagecache tmpfs), LOADERS (peers beside
# the variants), VARIANTS (verify=--verify), OUT (records copied there).
set -uo pipefail
cd "$(dirname "$0")/.."
for f in .carry/*.xz; do [ -e "$f" ] && xz -dkf "$f" && chmod +x "${f%.xz}"; done
if ls .whl/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
S=.carry/s3rdma
if [ -x .carry/libtests ]; then
  echo "== the library's GPU tests"
  .carry/libtests --test-threads 1 --nocapture mem:: bench::weights::hashes bench::fetch::check 2>&1 | grep -E "^test |skipping|panicked|test result" | tail -12
fi
if [ -x .carry/conformance ]; then
  .carry/conformance --test-threads 1 --nocapture local_reader_threads_put_every_byte_in_place 2>&1 | grep -E "^test |SKIP|byte-exact|panicked|test result" | tail -8
fi
ROUNDS=${ROUNDS:-3}
# More s3rdma loaders beside the default, ';'-separated NAME=FLAGS (each one
# s3rdma-NAME in the table), e.g. VARIANTS="verify=--verify;mmap=--file-io mmap".
VARIANT_ARGS=()
IFS=';' read -ra VS <<< "${VARIANTS:-verify=--verify}"
for v in "${VS[@]}"; do VARIANT_ARGS+=(--variant "$v"); done
mkdir -p results
for cache in ${CACHES:-pagecache tmpfs}; do
  case $cache in
    pagecache) ROOT=/tmp/s3rdma-wv ;;
    tmpfs) ROOT=/dev/shm/s3rdma-wv ;;
  esac
  if [ ! -f "$ROOT/s3rdma-bench/m/llama/model.safetensors.index.json" ]; then
    if [ "$cache" = tmpfs ] && [ -d /tmp/s3rdma-wv/s3rdma-bench ]; then
      mkdir -p "$ROOT" && cp -r /tmp/s3rdma-wv/s3rdma-bench "$ROOT/"
    else
      "$S" weights --root "$ROOT" --synth llama-3.1-8b --model m/llama > /dev/null || { echo "synth FAILED"; exit 1; }
    fi
  fi
  echo "== $cache ($ROOT: $(df -hT "$ROOT" | tail -1 | awk '{print $2}'))"
  python3 scripts/peers_weights.py --s3rdma "$S" --root "$ROOT" --model m/llama --rounds "$ROUNDS" --caches warm \
    --loaders "${LOADERS:-s3rdma-default,instanttensor-mmap,instanttensor-buffered}" "${VARIANT_ARGS[@]}" --tag "gpu-verify-$cache"
  # The verified runs' own records (stages, what was checked), and the
  # peers record, as each cache state ends (a run cut short keeps them).
  if [ -n "${OUT:-}" ]; then
    # The last verified and the last unverified s3rdma record of this cache state.
    python3 - "$ROOT/records" "$OUT" "$cache" <<'PY'
import glob, json, os, shutil, sys
last = {}
for f in sorted(glob.glob(os.path.join(sys.argv[1], "weights-*.json"))):
    last["verify" if json.load(open(f))["results"].get("verified") else "default"] = f
for kind, f in last.items():
    shutil.copy(f, os.path.join(sys.argv[2], f"{os.path.basename(f)[:-5]}-{sys.argv[3]}-{kind}.json"))
PY
    cp results/peers-weights-*gpu-verify-"$cache"* "$OUT/" 2>/dev/null
  fi
done
if [ -z "${SKIP_FETCH:-}" ]; then
  # fetch --verify beside plain fetch, same cell, interleaved: 16 objects of
  # 256 MiB from the local backend (page cache), 16 streams, into device and
  # host memory, FETCH_ROUNDS (2) rounds.
  F=/tmp/s3rdma-fv
  "$S" fetch --root "$F" --prepare --sizes 256MiB --concurrency 16 --iters 1 --warmup 0s --results-dir /tmp/fv-prep > /dev/null
  for r in $(seq 1 "${FETCH_ROUNDS:-2}"); do
    for dest in device host; do
      for v in plain verify; do
        "$S" fetch --root "$F" --sizes 256MiB --concurrency 16 --duration 3s --dest "$dest" $([ $v = verify ] && echo --verify) \
          --tag "gpu-fetch-$dest-$v-r$r" > /dev/null 2>&1 || echo "fetch $dest $v FAILED"
      done
    done
  done
  echo "== fetch --verify against plain fetch, same cell (local, page cache, 16 x 256 MiB, 16 streams)"
  python3 - <<'PY'
import glob, json
rows = {}
for f in sorted(glob.glob("results/fetch-local-*gpu-fetch-*.json")):
    r = json.load(open(f))
    _, _, dest, v, rnd = r["tag"].split("-")
    rows.setdefault((dest, rnd), {})[v] = r["results"][0]["summary"]["throughput_gbps"]["median"]
for (dest, rnd), d in sorted(rows.items()):
    if "plain" in d and "verify" in d:
        print(f"{dest:6} {rnd}: plain {d['plain']:6.2f} GB/s, --verify {d['verify']:6.2f} GB/s = {d['verify'] / d['plain']:.2f}x")
PY
fi
if [ -z "${SKIP_PROBE:-}" ]; then
  echo "== page-cache pages registered and copied by DMA, no CPU copy (scripts/probe_register.py)"
  # The smallest shard alone: registering a mapping pins every page, which may be slow.
  timeout 90 python3 scripts/probe_register.py --rounds 1 "$(ls -S /tmp/s3rdma-wv/s3rdma-bench/m/llama/*.safetensors | tail -1)" 2>&1 | tail -8
fi
if [ -z "${SKIP_CKPT:-}" ]; then
  echo "== ckpt flat and async into device memory, 2 GiB (the async save's next step runs on the GPU)"
  timeout 120 "$S" ckpt --root /tmp/s3rdma-ck --sizes 2GiB --methods flat,async --dest device --repeats 1 --tag gpu-async-step 2>&1 | tail -12
fi
# Every record of this run in one file ($OUT takes 8 files at most).
[ -n "${OUT:-}" ] && tar czf "$OUT/records.tgz" results/fetch-local-*gpu-fetch-*.json results/ckpt-*gpu-async-step*.json 2>/dev/null
ls results/peers-weights-*gpu-verify-*
