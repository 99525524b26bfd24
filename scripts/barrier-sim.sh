#!/usr/bin/env bash
# The rendezvous simulation behind docs/scaling.md: `s3rdma barrier` with N
# ranks on this host, the leader rendezvous (default) against the listing
# barrier it replaced, on the local backend and against the in-process S3
# server (examples/s3_test_server.rs, s3s-fs). One record per run in OUT_DIR,
# a markdown table last.
#
# Usage: scripts/barrier-sim.sh BIN_DIR OUT_DIR [RANKS...]   (default: 8 64 256)
# BIN_DIR holds s3rdma and s3_test_server (cargo build --release --example s3_test_server).
set -euo pipefail
BIN=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
RANKS=${*:-8 64 256}
# N ranks hold N+ connections to the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
W=$(mktemp -d)
export AWS_ACCESS_KEY_ID=barrier-sim AWS_SECRET_ACCESS_KEY=barrier-sim-secret
mkdir -p "$W/store/sim"
"$BIN/s3_test_server" "$W/store" 0 > "$W/server.log" 2>&1 &
trap 'kill %1 2>/dev/null || true; rm -rf "$W"' EXIT
EP=
for _ in $(seq 1 100); do EP=$(awk '/^endpoint /{print $2}' "$W/server.log"); [ -n "$EP" ] && break; sleep 0.1; done
[ -n "$EP" ] || { echo "s3_test_server did not start: $(cat "$W/server.log")"; exit 1; }
cd "$W"
for n in $RANKS; do
  for how in leader list; do
    # The listing barrier at 256 ranks takes seconds per barrier: fewer of them.
    b=20
    if [ "$how" = list ] && [ "$n" -ge 256 ]; then b=5; fi
    common=(barrier --ranks "$n" --barriers "$b" --rendezvous "$how" --barrier-timeout 3m --results-dir "$OUT")
    # Each run bounded (SIM_RUN_TIMEOUT seconds, default 240), so one slow cell cannot eat the table.
    t=(timeout "${SIM_RUN_TIMEOUT:-240}")
    "${t[@]}" "$BIN/s3rdma" "${common[@]}" --root "$W/local" --tag "sim-local-$how-$n" > "$OUT/local-$how-$n.txt" 2>&1 \
      || echo "local $how $n failed: $(tail -2 "$OUT/local-$how-$n.txt")"
    "${t[@]}" "$BIN/s3rdma" "${common[@]}" --backend http --endpoint "$EP" --bucket sim --tag "sim-http-$how-$n" > "$OUT/http-$how-$n.txt" 2>&1 \
      || echo "http $how $n failed: $(tail -2 "$OUT/http-$how-$n.txt")"
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("barrier-*.json")):
    r = json.loads(f.read_text())
    x, p = r["results"], r["results"]["per_rank_per_barrier"]
    rows.append((r["backend"], x["ranks"], x["rendezvous"], x["barriers"], x["latency"]["p50_ms"], x["latency"]["p99_ms"],
                 x["release"]["p50_ms"], x["release"]["p99_ms"], p["requests_besides_polls"], p["polls"], x["keys_listed_per_barrier"],
                 x["requests_per_barrier"], f.name))
rows.sort(key=lambda t: (t[0], t[1], t[2]))
print("| backend | ranks | rendezvous | barriers | latency p50 ms | p99 ms | release p50 ms | p99 ms | requests/rank/barrier besides polls | polls/rank/barrier | keys listed/barrier | requests/barrier | record |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in rows:
    print("| %s | %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f | %.0f | %s |" % t)
PY
