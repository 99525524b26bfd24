#!/usr/bin/env bash
# One smoke run of the built binary against a real S3 endpoint (MinIO in the
# GitHub workflow, the test server examples/s3_test_server.rs in
# scripts/test.sh): every subcommand once, small, and each asserted on what it
# must show, not only on its exit code.
#
#   scripts/smoke.sh ENDPOINT [METRICS_URL]
#
# Credentials: AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY. METRICS_URL (optional)
# is the server's v3 request-traffic group, e.g.
# http://127.0.0.1:9000/minio/metrics/v3/api/requests: with it, an http fetch
# must be `not-applicable` and the server's minio_api_requests_traffic_sent_bytes
# must have grown by at least the payload in the window, read with the bearer
# JWT s3rdma signs from the access and secret key (as `mc admin prometheus
# generate` does), so the JWT path is proven against the server itself.
# S3RDMA (default target/release/s3rdma), S3RDMA_TEST_MODEL (a real
# model.safetensors; default the one scripts/test.sh fetches) and SMOKE_DIR
# (default a fresh temporary directory) may be set.
set -euo pipefail
cd "$(dirname "$0")/.."

ENDPOINT=${1:?usage: scripts/smoke.sh ENDPOINT [METRICS_URL]}
METRICS=${2:-}
: "${AWS_ACCESS_KEY_ID:?set AWS_ACCESS_KEY_ID}" "${AWS_SECRET_ACCESS_KEY:?set AWS_SECRET_ACCESS_KEY}"
S=$(realpath "${S3RDMA:-target/release/s3rdma}")
MODEL=$(realpath "${S3RDMA_TEST_MODEL:-target/test-models/all-minilm-l6-v2/model.safetensors}")
[ -x "$S" ] || { echo "smoke: $S not built (cargo build --release)" >&2; exit 1; }
[ -f "$MODEL" ] || { echo "smoke: no model at $MODEL (scripts/test.sh fetches one; or set S3RDMA_TEST_MODEL)" >&2; exit 1; }
DIR=${SMOKE_DIR:-$(mktemp -d)}
mkdir -p "$DIR" && cd "$DIR"
BUCKET=s3rdma-smoke-$(date +%s)-$$
H=(--backend http --endpoint "$ENDPOINT" --bucket "$BUCKET")
W=()
[ -n "$METRICS" ] && W=(--metrics-url "$METRICS")
step() { echo; echo "== smoke: $*"; }
# check FILE PYTHON-EXPRESSION MESSAGE: evaluate the expression over the JSON
# record `r`; fail with MESSAGE and the record's witness when it is false.
check() {
  python3 - "$@" <<'PY'
import json, sys
path, expr, msg = sys.argv[1], sys.argv[2], sys.argv[3]
r = json.load(open(path))
if not eval(expr, {"r": r}):
    print(f"smoke FAILED: {msg}\n  in {path}: {expr}\n  witness: {json.dumps(r.get('rdma_witness'), indent=1)[:2000]}", file=sys.stderr)
    sys.exit(1)
PY
}
latest() { ls -t results/"$1"-*.json | head -1; }

step "fetch (http, witnessed)"
"$S" fetch "${H[@]}" "${W[@]}" --sizes 1MiB,8MiB --concurrency 1,4 --duration 1s --warmup 0s --prepare --dest host --tag smoke
R=$(latest fetch-http)
check "$R" 'len(r["results"]) == 4 and all(c["summary"]["throughput_gbps"]["median"] > 0 for c in r["results"])' "four cells, each with a throughput"
check "$R" 'all(rep["store_stats"].get("bytes_http", 0) == rep["bytes"] > 0 for c in r["results"] for rep in c["repeats"])' "every payload byte went over the client's HTTP path"
if [ -n "$METRICS" ]; then
  check "$R" 'r["rdma_witness"]["verdict"] == "not-applicable"' "an http fetch with the server's counters readable is not-applicable"
  check "$R" 'r["rdma_witness"]["config"]["auth"] == "generated-jwt"' "the metrics were read with the JWT signed from the keys"
  check "$R" 'all(w["http_sent_bytes"] is not None and w["http_sent_bytes"] >= w["payload_read_bytes"] > 0 for w in r["rdma_witness"]["windows"])' \
    "in every window the server's HTTP sent bytes grew by at least the payload"
else
  check "$R" 'r["rdma_witness"]["verdict"] == "unverified"' "without readable counters nothing is proven"
fi

step "verify (round trips at two sizes)"
"$S" verify "${H[@]}" "${W[@]}" --sizes 4KiB,2MiB --tag smoke
R=$(latest verify-http)
check "$R" 'r["results"]["pass"] and r["results"]["data_match"] and len(r["results"]["probes"]) >= 4' "verify passes with every probe's bytes matching"

step "ckpt save + restore (verified)"
"$S" ckpt "${H[@]}" "${W[@]}" --sizes 32MiB --chunk 8MiB --repeats 1 --dest host --tag smoke
R=$(latest ckpt-http)
check "$R" 'any(x["op"] == "restore" for x in r["results"]["rows"]) and all(x["verified"]["ok"] for x in r["results"]["rows"] if x["op"] == "restore")' "every restore read back the bytes that were saved"

step "ingest tokens + tokens"
"$S" ingest tokens "${H[@]}" --synthetic --total-bytes 16MiB --seq-len 1024 --shard-bytes 4MiB --vocab 32000
"$S" tokens "${H[@]}" "${W[@]}" --dest host --repeats 1 --tag smoke
R=$(latest tokens-http)
check "$R" 'r["results"]["summary"]["tokens_per_s"]["median"] > 0' "tokens/s measured"

step "ingest raw + train --loader-only"
"$S" ingest raw "${H[@]}" --synthetic 128 --classes 4 --size 64 --samples-per-shard 32
"$S" train --loader-only "${H[@]}" "${W[@]}" --dest host --batch-size 16 --crop 56 --steps 10 --warmup 2 --fetch-workers 2 --prefetch-batches 1 --tag smoke
R=$(latest train-http)
check "$R" 'r["results"]["summary"]["images_per_s"]["median"] > 0' "images/s measured"

step "ingest weights (a real model) + weights --verify"
"$S" ingest weights "${H[@]}" --src "$MODEL" --model models/smoke
"$S" weights "${H[@]}" "${W[@]}" --model models/smoke --verify --dest host --tag smoke
R=$(latest weights-http)
check "$R" 'r["results"]["verified"]["ok"] and r["results"]["summary"]["throughput_gbps"]["median"] > 0' "the model loaded and matched the safetensors crate's own reading"

step "report with a plot"
"$S" report results/*.json --plot fetch.svg > report.md
grep -q '^### fetch' report.md && grep -q '^### ckpt' report.md && grep -q '^### weights' report.md || { echo "smoke FAILED: report lacks a section" >&2; cat report.md >&2; exit 1; }
grep -q '<svg' fetch.svg || { echo "smoke FAILED: no plot" >&2; exit 1; }
if grep -q unproven report.md; then echo "smoke FAILED: report shows a verdict its own record does not prove" >&2; cat report.md >&2; exit 1; fi

echo
echo "smoke: PASS against $ENDPOINT${METRICS:+ (witness checked on $METRICS)} in $DIR"
