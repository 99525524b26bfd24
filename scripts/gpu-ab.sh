#!/usr/bin/env bash
# A/B of two s3rdma builds on the GPU machine, interleaved in one run, same
# files, same cache state: docs/gpu.md's weights figure (16.06 GB synthetic
# Llama-3.1-8B, local backend, warm page cache, into device memory with
# `--io-threads 4 --stage-chunk 64MiB --bounce-buffers 32`) and the default
# `fetch` table (local, warm, --dest device; --prepare, as the default directory would). Used to show a refactor lost no
# speed. Binaries: $OLD and $NEW (default .carry/s3rdma-old, .carry/s3rdma-new,
# stripped release builds made here and carried). Records go to results/
# (tags ab-old-*, ab-new-*); a short table is printed last. Builds before
# 144c282 count weights' --bounce-buffers per shard (32 there is 128 for 4 shards).
set -uo pipefail
cd "$(dirname "$0")/.."
OLD=${OLD:-.carry/s3rdma-old}
NEW=${NEW:-.carry/s3rdma-new}
ROUNDS=${ROUNDS:-3}
ROOT=${ROOT:-/tmp/s3rdma-ab}
mkdir -p "$ROOT" results
[ -f "$ROOT/s3rdma-bench/m/llama/model.safetensors.index.json" ] || "$NEW" weights --root "$ROOT" --synth llama-3.1-8b --model m/llama >/dev/null
# One untimed load puts every shard in the page cache (warm for both builds).
"$NEW" weights --root "$ROOT" --model m/llama --dest host --results-dir "$ROOT/scratch" >/dev/null 2>&1
W="--root $ROOT --model m/llama --dest device --repeats 3 --concurrency 4 --io-threads 4 --stage-chunk 64MiB --bounce-buffers 32"
F="--root $ROOT-fetch --prepare --duration 2s"
for r in $(seq 1 "$ROUNDS"); do
  # Alternate which build goes first.
  if [ $((r % 2)) -eq 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    bin=$OLD; [ "$b" = new ] && bin=$NEW
    "$bin" weights $W --tag "ab-$b-weights" >/dev/null 2>"$ROOT/err-$b-w-$r" || echo "weights $b round $r FAILED: $(tail -2 "$ROOT/err-$b-w-$r")"
    "$bin" fetch $F --tag "ab-$b-fetch" >/dev/null 2>"$ROOT/err-$b-f-$r" || echo "fetch $b round $r FAILED: $(tail -2 "$ROOT/err-$b-f-$r")"
  done
done
python3 - <<'PY'
import glob, json, statistics
def recs(b, bench):
    out = []
    for f in sorted(glob.glob(f"results/{bench}-local-*-ab-{b}-{bench}*.json")):
        out.append((f, json.load(open(f))))
    return out
print("weights (16.06 GB -> device, warm): per-run median wall s over 3 repeats")
med = {}
for b in ("old", "new"):
    walls = [r["results"]["summary"]["wall_s"]["median"] for _, r in recs(b, "weights")]
    commit = recs(b, "weights")[0][1]["tool"]["git_commit"] if walls else "?"
    med[b] = statistics.median(walls) if walls else float("nan")
    print(f"  {b} ({commit}): runs {['%.3f' % w for w in walls]} median {med[b]:.3f} s ({16.06 / med[b]:.2f} GB/s)")
print(f"  new/old wall ratio: {med['new'] / med['old']:.3f}")
print("fetch default (local, warm, device): median GB/s over runs per cell")
cells = {}
for b in ("old", "new"):
    for _, r in recs(b, "fetch"):
        for c in r["results"]:
            cells.setdefault((c["size_bytes"], c["concurrency"]), {}).setdefault(b, []).append(c["summary"]["throughput_gbps"]["median"])
print(f"  {'size':>10} {'streams':>7} {'old GB/s':>9} {'new GB/s':>9} {'new/old':>7}")
for (size, conc), v in sorted(cells.items()):
    o, n = statistics.median(v.get("old", [float('nan')])), statistics.median(v.get("new", [float('nan')]))
    print(f"  {size:>10} {conc:>7} {o:9.2f} {n:9.2f} {n / o:7.3f}")
PY
