#!/usr/bin/env bash
# The real libminiocpp's RDMA branch, end to end, on a machine without an RDMA
# device: the library built by scripts/build-libminiocpp.sh, with the stand-in
# libs3rdma (tests/standin-s3rdma) beside it as libs3rdma.so.0 (its $ORIGIN
# runpath loads that one), against the test server in its AIStor-like mode
# (examples/s3_test_server --rdma). Every scenario (healthy, decline, a lost
# rail, a short transfer, a stall, 4 GiB - 1 / 4 GiB / 4 GiB + 1, each bench
# into host memory) prints one line and must show what it is expected to; the
# healthy and decline runs are repeated through the libminiocpp test double
# (tests/fake-miniocpp) to compare the two, and the libs3rdma engine
# (--rdma-engine libs3rdma, library column `engine`) runs healthy, declined,
# lying (no byte count, a count in another dialect, short), stalled past
# 10 s, 4 GiB + 1 in ranges, weights' ranged windows and ckpt (healthy, and
# PUTs declined under HTTP 200), its per-request counts set beside the
# server's. Exit 1 when any does not.
#
#   scripts/rdma-e2e.sh [--rounds N] [SCENARIO...]    # fetch-healthy engine decline mixed lost-rail short ckpt weights tokens-train verify stall 4gib
#
# --rounds N runs the chosen scenarios N times in a row and prints how many
# rounds had a failure (e.g. `scripts/rdma-e2e.sh --rounds 5 4gib ckpt`).
#
# Needs: cargo build --release --workspace --examples (scripts/test.sh does it),
# and the real library at S3RDMA_TEST_MINIOCPP or target/libminiocpp/libminiocpp.so.
# Records go to ${E2E_RESULTS:-a temporary directory}/test-double/.
set -euo pipefail
cd "$(dirname "$0")/.."
REAL=${S3RDMA_TEST_MINIOCPP:-target/libminiocpp/libminiocpp.so}
STANDIN=target/release/libstandin_s3rdma.so
for f in target/release/s3rdma target/release/examples/s3_test_server "$STANDIN" target/release/libfake_miniocpp.so; do
  [ -f "$f" ] || { echo "rdma-e2e: $f is not built: cargo build --release --workspace --examples" >&2; exit 1; }
done
[ -f "$REAL" ] || { echo "rdma-e2e: no real libminiocpp at $REAL: scripts/build-libminiocpp.sh <minio-cpp checkout> target/libminiocpp <httplib dir>" >&2; exit 1; }
# The real library (it needs libs3rdma.so.0 and looks beside itself first)
# beside the stand-in, named as the loader asks for libs3rdma.
readelf -d "$REAL" 2>/dev/null | grep -q 'NEEDED.*libs3rdma.so.0' \
  || { echo "rdma-e2e: $REAL does not link libs3rdma.so.0: not a libminiocpp of the libs3rdma generation (scripts/build-libminiocpp.sh builds one)" >&2; exit 1; }
readelf -d "$REAL" | grep -Eq '(RUNPATH|RPATH).*\$ORIGIN' \
  || { echo "rdma-e2e: $REAL has no \$ORIGIN runpath, so a stand-in beside it would not be loaded (scripts/build-libminiocpp.sh sets it)" >&2; exit 1; }
LIBDIR=target/libminiocpp-standin
mkdir -p "$LIBDIR"
cp "$REAL" "$LIBDIR/libminiocpp.so.tmp" && mv "$LIBDIR/libminiocpp.so.tmp" "$LIBDIR/libminiocpp.so"
cp "$STANDIN" "$LIBDIR/libs3rdma.so.0.tmp" && mv "$LIBDIR/libs3rdma.so.0.tmp" "$LIBDIR/libs3rdma.so.0"
resolved=$(ldd "$LIBDIR/libminiocpp.so" | awk '/libs3rdma/{print $3}')
[ "$(realpath "$resolved")" = "$(realpath "$LIBDIR/libs3rdma.so.0")" ] \
  || { echo "rdma-e2e: $LIBDIR/libminiocpp.so resolves libs3rdma to '$resolved', not the stand-in beside it (its runpath must be \$ORIGIN)" >&2; exit 1; }
if [ -n "${E2E_RESULTS:-}" ]; then
  RESULTS=$E2E_RESULTS
  mkdir -p "$RESULTS"
else
  RESULTS=$(mktemp -d)
  trap 'rm -rf "$RESULTS"' EXIT
fi
python3 scripts/rdma_e2e.py "$(realpath target/release/s3rdma)" "$(realpath target/release/examples/s3_test_server)" \
  "$(realpath "$LIBDIR/libminiocpp.so")" "$(realpath target/release/libfake_miniocpp.so)" "$(realpath "$RESULTS")" "$@"
