#!/usr/bin/env bash
# The two RDMA engines side by side, in one run, through the stand-in
# libs3rdma and the test server's AIStor-like mode (as scripts/rdma-e2e.sh):
# small-object ops/s (64 KiB, 8 streams), large-object GB/s (64 MiB, 4
# streams) and client CPU per GB, each engine in fresh processes,
# interleaved (libminiocpp, libs3rdma, libminiocpp, ...) for ROUNDS rounds,
# into host memory, the page cache warm on the server (the objects were
# just written). The stand-in moves bytes with process_vm_readv/writev, so
# these are not RDMA speeds; what compares is each engine's own work per
# request (registration, connections, signing, threads).
#
#   scripts/bench-engines.sh [ROUNDS] [RESULTS_DIR]     # default 3 rounds, results/engines
#
# Prints a table of medians (min-max) and the ratios libs3rdma / libminiocpp;
# the records stay in RESULTS_DIR/test-double/ (stand-in records). Needs:
# cargo build --release --workspace --bins --examples, and the real libminiocpp at
# S3RDMA_TEST_MINIOCPP or target/libminiocpp/libminiocpp.so.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
OUT=${2:-results/engines}
BIN=$(cargo metadata --format-version 1 --no-deps 2>/dev/null | python3 -c 'import json,sys;print(json.load(sys.stdin)["target_directory"])')/release
REAL=${S3RDMA_TEST_MINIOCPP:-target/libminiocpp/libminiocpp.so}
for f in "$BIN/s3rdma" "$BIN/examples/s3_test_server" "$BIN/libstandin_s3rdma.so" "$REAL"; do
  [ -f "$f" ] || { echo "bench-engines: $f is missing: cargo build --release --workspace --examples (and scripts/build-libminiocpp.sh)" >&2; exit 1; }
done
LIBDIR=$(mktemp -d)
WORK=$(mktemp -d)
cp "$REAL" "$LIBDIR/libminiocpp.so"
cp "$BIN/libstandin_s3rdma.so" "$LIBDIR/libs3rdma.so.0"
export AWS_ACCESS_KEY_ID=s3rdma-bench AWS_SECRET_ACCESS_KEY=s3rdma-bench-secret-0123456789
"$BIN/examples/s3_test_server" "$WORK/store" 0 --rdma > "$WORK/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$LIBDIR" "$WORK"' EXIT
EP=
for _ in $(seq 1 100); do EP=$(awk '/^endpoint /{print $2}' "$WORK/server.log"); [ -n "$EP" ] && break; sleep 0.1; done
[ -n "$EP" ] || { echo "bench-engines: the test server did not start" >&2; cat "$WORK/server.log" >&2; exit 1; }
mkdir -p "$WORK/store/bench-engines" "$OUT"
OUT=$(cd "$OUT" && pwd)
run() { # engine size streams extra...
  local engine=$1 size=$2 streams=$3; shift 3
  "$BIN/s3rdma" fetch --backend rdma --rdma-engine "$engine" --rdma-lib "$LIBDIR/libminiocpp.so" --endpoint "$EP" --bucket bench-engines \
    --metrics-url "$EP/minio/metrics/v3/api/rdma" --metrics-url "$EP/minio/metrics/v3/api/requests" \
    --sizes "$size" --concurrency "$streams" --objects 16 --dest host --results-dir "$OUT" --tag "engines-$engine" "$@" \
    > /dev/null 2> "$WORK/last.err" || { cat "$WORK/last.err" >&2; exit 1; }
}
# Objects written once, over HTTP, before any timed run.
run libminiocpp 64KiB 1 --prepare --iters 1 --warmup 0s
run libminiocpp 64MiB 1 --prepare --iters 1 --warmup 0s
rm -f "$OUT"/test-double/*engines-libminiocpp*.json
for r in $(seq 1 "$ROUNDS"); do
  for e in libminiocpp libs3rdma; do
    run "$e" 64KiB 8 --duration 3s --warmup 1s
    run "$e" 64MiB 4 --duration 3s --warmup 1s
  done
  echo "bench-engines: round $r of $ROUNDS done" >&2
done
python3 - "$OUT/test-double" <<'PY'
import glob, json, statistics, sys
rows = {}
for f in sorted(glob.glob(sys.argv[1] + "/fetch-rdma-*-engines-*.json")):
    r = json.load(open(f))
    engine = r["tag"].removeprefix("engines-")
    for c in r["results"]:
        s = c["summary"]
        gb = s["throughput_gbps"]["median"]
        cores = s["client_cpu_cores"]["median"]
        rows.setdefault((c["size_bytes"], engine), []).append((s["ops_per_s"]["median"], gb, cores / gb if gb else float("nan"), r["rdma_witness"]["verdict"], f.rsplit("/", 1)[1]))
def fmt(xs):
    return f"{statistics.median(xs):.3g} ({min(xs):.3g}-{max(xs):.3g})"
print(f"{'size':>8} {'engine':<12} {'ops/s':<26} {'GB/s':<26} {'CPU s per GB':<26} verdicts")
med = {}
for (size, engine), v in sorted(rows.items()):
    ops, gb, cpu = [x[0] for x in v], [x[1] for x in v], [x[2] for x in v]
    med[(size, engine)] = (statistics.median(ops), statistics.median(gb), statistics.median(cpu))
    print(f"{size:>8} {engine:<12} {fmt(ops):<26} {fmt(gb):<26} {fmt(cpu):<26} {','.join(sorted(set(x[3] for x in v)))}")
for size in sorted({s for s, _ in med}):
    a, b = med.get((size, "libs3rdma")), med.get((size, "libminiocpp"))
    if a and b:
        print(f"{size:>8} libs3rdma/libminiocpp: ops/s {a[0] / b[0]:.2f}x, GB/s {a[1] / b[1]:.2f}x, CPU per GB {a[2] / b[2]:.2f}x")
print("records:", " ".join(sorted({x[4] for v in rows.values() for x in v})))
PY
