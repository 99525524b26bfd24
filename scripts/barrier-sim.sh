#!/usr/bin/env bash
# The rendezvous simulation behind docs/scaling.md: `s3rdma barrier` with N
# ranks on this host, the leader rendezvous (default) against the listing
# barrier it replaced, on the local backend and against the project's S3
# test server (examples/s3_test_server/, s3s-fs), started here as a process
# of its own. One record per run in OUT_DIR, and a markdown table last of
# every barrier record in OUT_DIR (give each run a fresh OUT_DIR). Exits 1
# when any run failed, 2 on bad arguments.
#
# Usage: scripts/barrier-sim.sh BIN_DIR OUT_DIR [RANKS[:PER]...]   (default: 8 64 256)
#   RANKS:PER runs RANKS ranks as RANKS/PER processes of PER ranks each
#   (`--ranks-per-process`), for worlds one host cannot start processes for.
#   SIM_RENDEZVOUS (default "leader list") and SIM_STORES (default
#   "local http"; "rdma-mode" is the http backend against the server started
#   with --rdma, its AIStor-like mode) pick the cells; SIM_BARRIERS (20) and
#   SIM_WARMUP (2) the timed and untimed barriers per run; SIM_BARRIER_TIMEOUT
#   (3m) the --barrier-timeout.
# BIN_DIR holds s3rdma, and s3_test_server in BIN_DIR/examples (where
# `cargo build --release --example s3_test_server` puts it) or in BIN_DIR.
set -euo pipefail
usage() { echo "usage: scripts/barrier-sim.sh BIN_DIR OUT_DIR [RANKS[:PER]...]  (e.g. target/release out 8 64 1024:16)" >&2; exit 2; }
[ $# -ge 2 ] || usage
[ -d "$1" ] || { echo "BIN_DIR '$1' is not a directory: give the one holding s3rdma (target/release)" >&2; exit 2; }
BIN=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
RANKS=${*:-8 64 256}
for cell in $RANKS; do
  [[ $cell =~ ^[1-9][0-9]*(:[1-9][0-9]*)?$ ]] || { echo "'$cell' is not RANKS or RANKS:PER (positive whole numbers, e.g. 1024 or 8192:64)" >&2; exit 2; }
done
for how in ${SIM_RENDEZVOUS:-leader list}; do
  case $how in leader|list) ;; *) echo "SIM_RENDEZVOUS: unknown rendezvous '$how' (leader, list)" >&2; exit 2;; esac
done
for store in ${SIM_STORES:-local http}; do
  case $store in local|http|rdma-mode) ;; *) echo "SIM_STORES: unknown store '$store' (local, http, rdma-mode)" >&2; exit 2;; esac
done
[ -x "$BIN/s3rdma" ] || { echo "no s3rdma in $BIN: cargo build --release, then give target/release" >&2; exit 2; }
SERVER=$BIN/examples/s3_test_server
[ -x "$SERVER" ] || SERVER=$BIN/s3_test_server
case " ${SIM_STORES:-local http} " in
  *" http "*|*" rdma-mode "*)
    [ -x "$SERVER" ] || { echo "no s3_test_server in $BIN/examples or $BIN: cargo build --release --example s3_test_server" >&2; exit 2; }
    echo "server: $SERVER ($(date -r "$SERVER" -u +%FT%TZ))" >&2;;
esac
FAILED=0
# N ranks hold N+ connections to the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
W=$(mktemp -d)
[ -z "${SIM_KEEP:-}" ] || echo "SIM_KEEP: servers and their logs kept in $W" >&2
export AWS_ACCESS_KEY_ID=barrier-sim AWS_SECRET_ACCESS_KEY=barrier-sim-secret
# One server per mode: plain s3s-fs, and the AIStor-like --rdma mode.
start_server() { # VAR DIR [ARGS...]: the endpoint into VAR; the server stays this shell's job
  local var=$1 d=$2; shift 2
  mkdir -p "$d/store/sim"
  "$SERVER" "$d/store" 0 "$@" > "$d/server.log" 2>&1 &
  local ep=
  for _ in $(seq 1 100); do ep=$(awk '/^endpoint /{print $2}' "$d/server.log"); [ -n "$ep" ] && break; sleep 0.1; done
  [ -n "$ep" ] || { echo "s3_test_server did not start: $(cat "$d/server.log")" >&2; exit 1; }
  printf -v "$var" '%s' "$ep"
}
trap 'kill $(jobs -p) 2>/dev/null || true; [ -n "${SIM_KEEP:-}" ] || rm -rf "$W"' EXIT
STORES=${SIM_STORES:-local http}
EP= EP_RDMA=
case " $STORES " in *" http "*) start_server EP "$W/plain";; esac
case " $STORES " in *" rdma-mode "*) start_server EP_RDMA "$W/aistor" --rdma;; esac
cd "$W"
for cell in $RANKS; do
  n=${cell%%:*} per=1
  [ "$cell" != "$n" ] && per=${cell#*:}
  for how in ${SIM_RENDEZVOUS:-leader list}; do
    # The listing barrier at 256 ranks takes seconds per barrier: fewer of them.
    b=${SIM_BARRIERS:-20}
    if [ "$how" = list ] && [ "$n" -ge 256 ]; then b=5; fi
    common=(barrier --ranks "$n" --ranks-per-process "$per" --barriers "$b" --warmup "${SIM_WARMUP:-2}" --rendezvous "$how" --barrier-timeout "${SIM_BARRIER_TIMEOUT:-3m}" --results-dir "$OUT")
    # Each run bounded (SIM_RUN_TIMEOUT seconds, default 240), so one slow cell cannot eat the table.
    t=(timeout "${SIM_RUN_TIMEOUT:-240}")
    for store in $STORES; do
      name="$store-$how-$n-x$per"
      case $store in
        local) args=(--root "$W/local");;
        http) args=(--backend http --endpoint "$EP" --bucket sim);;
        rdma-mode) args=(--backend http --endpoint "$EP_RDMA" --bucket sim);;
      esac
      if ! "${t[@]}" "$BIN/s3rdma" "${common[@]}" "${args[@]}" --tag "sim-$name" > "$OUT/$name.txt" 2>&1; then
        FAILED=1
        echo "$name failed (whole output: $OUT/$name.txt):" >&2
        grep -v ' DEBUG \| TRACE ' "$OUT/$name.txt" | grep -m 3 -i 'error\|timed out\|killed' >&2 || tail -3 "$OUT/$name.txt" >&2
      fi
    done
  done
done
python3 - "$OUT" <<'PY'
import json, pathlib, re, sys
rows = []
for f in sorted(pathlib.Path(sys.argv[1]).glob("barrier-*.json")):
    r = json.loads(f.read_text())
    x, p = r["results"], r["results"]["per_rank_per_barrier"]
    tag = r.get("tag") or ""
    rows.append((re.sub(r"^sim-(.*?)-(leader|list)-.*$", r"\1", tag) if tag.startswith("sim-") else r["backend"], x["ranks"], r["params"].get("ranks_per_process", 1), x["rendezvous"], x["barriers"], x["latency"]["p50_ms"], x["latency"]["p99_ms"],
                 x["release"]["p50_ms"], x["release"]["p99_ms"], p["requests_besides_polls"], p["polls"], x["keys_listed_per_barrier"],
                 x["requests_per_barrier"], f.name))
rows.sort(key=lambda t: (t[0], t[1], t[2], t[3]))
print("| store | ranks | ranks/process | rendezvous | barriers | latency p50 ms | p99 ms | release p50 ms | p99 ms | requests/rank/barrier besides polls | polls/rank/barrier | keys listed/barrier | requests/barrier | record |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in rows:
    print("| %s | %d | %d | %s | %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.0f | %.0f | %s |" % t)
PY
exit $FAILED
