#!/usr/bin/env bash
# Checkpoint restores warm and cold on a GPU machine, beside the disk's own
# O_DIRECT read rate, in one run (MLPerf Storage reads checkpoints with the
# caches cleared between write and read; docs/04-checkpoint-benchmark.md):
#   1. ckpt 16 GiB flat from device memory, save + restore, restore warm (the
#      page cache the save left);
#   2. the same with --cold (drop_caches as root, else fadvise, else O_DIRECT:
#      the record says which);
#   3. the disk's read rate with O_DIRECT: fetch --direct of 8 x 1 GiB objects
#      into host memory, 1 and 8 streams; and dd iflag=direct of one of them.
# Records go to RES (default $OUT, else results/); a short table prints last.
# Env: S (.carry/s3rdma), ROOT (/tmp/s3rdma-cold), SIZE (16GiB), REPEATS (2), DEST (device).
set -uo pipefail
cd "$(dirname "$0")/.."
S=${S:-.carry/s3rdma}
ROOT=${ROOT:-/tmp/s3rdma-cold}
RES=${RES:-${OUT:-results}}
SIZE=${SIZE:-16GiB}
DEST=${DEST:-device}
mkdir -p "$ROOT" "$RES"
echo "disk: $(df -h "$ROOT" | tail -1)"
"$S" --version | head -1
for mode in warm cold; do
  timeout 400 "$S" ckpt --root "$ROOT" --sizes "$SIZE" --methods flat --dest "$DEST" --repeats "${REPEATS:-2}" \
    --restore-cache "$mode" --tag "gpu-$mode" --results-dir "$RES" > "$ROOT/ckpt-$mode.txt" 2>&1 || { echo "ckpt $mode FAILED"; tail -5 "$ROOT/ckpt-$mode.txt"; }
done
rm -rf "$ROOT/s3rdma-bench"
timeout 300 "$S" fetch --root "$ROOT" --sizes 1GiB --objects 8 --concurrency 1,8 --duration 3s --direct --prepare --dest host \
  --tag disk-odirect --results-dir "$RES" > "$ROOT/fetch.txt" 2>&1 || { echo "fetch --direct FAILED"; tail -5 "$ROOT/fetch.txt"; }
F=$(find "$ROOT/s3rdma-bench" -type f -size +1000M | head -1)
[ -n "$F" ] && echo "dd iflag=direct of a 1 GiB object: $(dd if="$F" of=/dev/null bs=64M iflag=direct 2>&1 | tail -1)"
rm -rf "$ROOT/s3rdma-bench"
python3 - "$RES" <<'PY'
import glob, json, os, sys
res = sys.argv[1]
recs = sorted(glob.glob(os.path.join(res, "ckpt-local-*-gpu-*.json")) + glob.glob(os.path.join(res, "fetch-local-*-disk-odirect.json")), key=os.path.getmtime)
print(f'{"record":52} {"what":34} {"GB/s (median, range)":>26} {"cache":>34}')
for f in recs[-3:]:
    r = json.load(open(f))
    name = os.path.basename(f)
    if r["benchmark"] == "ckpt":
        for row in r["results"]["rows"]:
            t = row["throughput_gbps"]
            print(f'{name:52} {row["op"] + " " + row["state"]:34} {t["median"]:8.2f} ({t["min"]:.2f}-{t["max"]:.2f}){"":6} {row.get("restore_cache") or "-":>34}')
    else:
        for c in r["results"]:
            t = c["summary"]["throughput_gbps"]
            cell = f'O_DIRECT read {c["size_bytes"] >> 20} MiB x {c["concurrency"]}'
            print(f'{name:52} {cell:34} {t["median"]:8.2f} ({t["min"]:.2f}-{t["max"]:.2f})')
PY
