#!/usr/bin/env bash
# The read-only benches over http against nginx on the GPU machine: nginx
# serves the local backend's directory as static files
# (sendfile, Range, path-style /<bucket>/<key>, HEAD-bucket answered 200), so
# a GET costs the server a sendfile, not a test server's 4 KiB reads; beside
# them, in the same run, the same reads from the local backend (page cache).
#   1. weights: the 16.06 GB Llama-3.1-8B shape into device memory, local and
#      over http from nginx, 3 repeats each, --verify on the http run.
#   2. fetch: 16 x 256 MiB objects, 1 and 8 streams, into device and host memory.
#   3. PEERS_S3=1: the S3 model loaders against the same nginx, interleaved,
#      warm (the server's page cache): s3rdma weights --backend http and
#      runai-model-streamer's S3 reader at concurrency 8/16/32/64
#      (scripts/peers_weights.py; runai-model-streamer, runai-model-streamer-s3
#      and boto3 must import: carry their wheels, see docs/gpu.md).
#   4. WEIGHTS_VARIANTS="--bounce-buffers 16;--bounce-buffers 64": one more
#      http weights run per ';'-separated flag set, tagged nginx-v1, nginx-v2, ...
#   5. FETCH_VERIFY=N: what --verify costs fetch over http, in place of step 2:
#      per dest, N rounds of the same cell without and with --verify, one
#      after the other (tags nginx-plain-rK, nginx-verify-rK).
#   SKIP_WEIGHTS=1 leaves out step 1.
# nginx from NGINX_KIT (.peers/nginx.tar.xz, made by `NGINX_ONLY=1
# scripts/make-peers-kit.sh`; carry `.peers`) or PATH. Records go to
# RES (default $OUT, else results/); a short table prints last.
# Env: S (.carry/s3rdma), ROOT (/tmp/s3rdma-peers), WORKERS (nginx workers, cores / 4),
#      PEERS_ROUNDS (2), SHAPE (llama-3.1-8b; tiny for a try without a GPU), CONC (fetch streams, "1,8"), DESTS ("device host";
#      the first is weights' destination).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${S:-.carry/s3rdma}
ROOT=${ROOT:-/tmp/s3rdma-peers}
RES=${RES:-${OUT:-results}}
WORKERS=${WORKERS:-$(( $(nproc) / 4 > 0 ? $(nproc) / 4 : 1 ))}
KIT=${NGINX_KIT:-.peers/nginx.tar.xz}
SHAPE=${SHAPE:-llama-3.1-8b}
DESTS=${DESTS:-device host}
WDEST=${DESTS%% *}
W=$(mktemp -d)
if [ -f "$KIT" ]; then
  mkdir -p "$W/kit" && tar -C "$W/kit" -xJf "$KIT"
  NGINX="$W/kit/bin/nginx"
else
  NGINX=$(command -v nginx) || { echo "no nginx: carry $KIT (NGINX_ONLY=1 scripts/make-peers-kit.sh) or install nginx-light"; exit 2; }
fi
mkdir -p "$ROOT" "$RES" "$W/tmp"
M=m/$SHAPE
ls "$ROOT/s3rdma-bench/$M/"*.safetensors > /dev/null 2>&1 || "$S" weights --root "$ROOT" --synth "$SHAPE" --model "$M" > /dev/null
"$S" fetch --root "$ROOT" --sizes 256MiB --objects 16 --concurrency 1 --iters 1 --warmup 0s --prepare --dest host --results-dir "$W" > /dev/null
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cat > "$W/nginx.conf" <<C
worker_processes $WORKERS; daemon off; pid $W/nginx.pid; error_log $W/nginx.err;
user root; events { worker_connections 1024; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path $W/tmp/body; proxy_temp_path $W/tmp/proxy; fastcgi_temp_path $W/tmp/fastcgi;
  uwsgi_temp_path $W/tmp/uwsgi; scgi_temp_path $W/tmp/scgi;
  server { listen 127.0.0.1:$PORT; root $ROOT;
    location ~ ^/[^/]+/?$ { return 200; }
    location / { } } }
C
"$NGINX" -p "$W" -e "$W/nginx.err" -c "$W/nginx.conf" &
NG=$!
trap 'kill $NG 2>/dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 1 50); do (echo > /dev/tcp/127.0.0.1/$PORT) 2>/dev/null && break; sleep 0.1; done
EP=http://127.0.0.1:$PORT
export AWS_ACCESS_KEY_ID=${AWS_ACCESS_KEY_ID:-nginx} AWS_SECRET_ACCESS_KEY=${AWS_SECRET_ACCESS_KEY:-ignores-signatures}
for f in "$ROOT/s3rdma-bench/$M"/*.safetensors; do cat "$f" > /dev/null; done
if [ -z "${SKIP_WEIGHTS:-}" ]; then
  "$S" weights --root "$ROOT" --model "$M" --dest "$WDEST" --repeats 3 --verify --tag nginx-local --results-dir "$RES" > "$W/w-local.txt" 2>&1 || cat "$W/w-local.txt"
  "$S" weights --backend http --endpoint "$EP" --model "$M" --dest "$WDEST" --repeats 3 --verify --tag nginx --results-dir "$RES" > "$W/w-http.txt" 2>&1 || cat "$W/w-http.txt"
fi
touch "$W/w-http.txt"
IFS=';' read -r -a VARIANTS <<< "${WEIGHTS_VARIANTS:-}"
for i in "${!VARIANTS[@]}"; do
  # shellcheck disable=SC2086 # each variant is a list of flags
  "$S" weights --backend http --endpoint "$EP" --model "$M" --dest "$WDEST" --repeats 3 ${VARIANTS[$i]} --tag "nginx-v$((i + 1))" --results-dir "$RES" > "$W/w-http-v$i.txt" 2>&1 || cat "$W/w-http-v$i.txt"
done
if [ -n "${FETCH_VERIFY:-}" ]; then
  for d in $DESTS; do
    for k in $(seq 1 "$FETCH_VERIFY"); do
      for v in plain verify; do
        flag=$([ $v = verify ] && echo --verify || true)
        # shellcheck disable=SC2086 # $flag is empty or one flag
        "$S" fetch --backend http --endpoint "$EP" --sizes 256MiB --objects 16 --concurrency "${CONC:-16}" --duration 3s --no-prepare --dest "$d" $flag \
          --tag "nginx-$v-r$k" --results-dir "$RES" > "$W/f-$v-$d.txt" 2>&1 || cat "$W/f-$v-$d.txt"
      done
    done
  done
fi
[ -n "${FETCH_VERIFY:-}" ] || for d in $DESTS; do
  "$S" fetch --root "$ROOT" --sizes 256MiB --objects 16 --concurrency ${CONC:-1,8} --duration 3s --no-prepare --dest $d --tag nginx-local --results-dir "$RES" > "$W/f-local-$d.txt" 2>&1 || cat "$W/f-local-$d.txt"
  "$S" fetch --backend http --endpoint "$EP" --sizes 256MiB --objects 16 --concurrency ${CONC:-1,8} --duration 3s --no-prepare --dest $d --tag nginx --results-dir "$RES" > "$W/f-http-$d.txt" 2>&1 || cat "$W/f-http-$d.txt"
done
if [ -n "${PEERS_S3:-}" ]; then
  python3 scripts/peers_weights.py --s3rdma "$S" --root "$ROOT" --model "$M" --endpoint "$EP" --bucket s3rdma-bench \
    --loaders s3rdma-http,runai-s3-c8,runai-s3-c16,runai-s3-c32,runai-s3-c64 --caches warm --baseline s3rdma-http \
    --rounds "${PEERS_ROUNDS:-2}" --tag s3-nginx --results-dir "$RES" || echo "peers over S3 FAILED"
fi
cat "$W"/w-http.txt | grep -E "^server|ready" || true
python3 - "$RES" <<'PY'
import glob, json, os, statistics, sys
print(f'{"bench":8} {"backend":7} {"dest":6} {"cell":28} {"GB/s":>6} {"client cores":>12} {"server cores":>12}  record')
def cores(x):
    return "-" if x is None else f"{x:.2f}"
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*-nginx*.json"))):
    r = json.load(open(f))
    if r["benchmark"].startswith("peers"):
        continue  # printed by scripts/peers_weights.py above
    be, dest, name = r["environment"]["store"]["backend"], r["environment"]["dest"], os.path.basename(f)
    if r["benchmark"] == "weights":
        rs = r["results"]["repeats"]
        v = r["results"].get("verified")
        cell = "3 repeats" + (", verified" if v and v["ok"] else "") + (" " + r["tag"] if r.get("tag", "").startswith("nginx-v") else "")
        rows = [(cell, [x["throughput_gbps"] for x in rs], [x["client_cpu_cores"] for x in rs], [x["sampler"].get("server_cpu_cores") for x in rs])]
    else:
        ver = ", verified" if r.get("params", {}).get("verify") else ""
        rows = [(f'{c["size_bytes"] >> 20}MiB x {c["concurrency"]}{ver}', [x["bytes"] / x["sampler"]["wall_s"] / 1e9 for x in c["repeats"]],
                 [x["client_cpu_cores"] for x in c["repeats"]], [x["sampler"].get("server_cpu_cores") for x in c["repeats"]]) for c in r["results"]]
    for cell, g, cc, sc in rows:
        sc = [x for x in sc if x is not None]
        print(f'{r["benchmark"]:8} {be:7} {dest:6} {cell:28} {statistics.median(g):6.2f} {statistics.median(cc):12.2f} {cores(statistics.median(sc) if sc else None):>12}  {name}')
PY
