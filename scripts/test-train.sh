#!/usr/bin/env bash
# The `train` feature's tests (libtorch via tch), separate from scripts/test.sh
# because they need PyTorch 2.11.0 (the CUDA 13 wheel: 531 MB download, 4.6 GB
# installed, about 1 m 48 s) and a libtorch build of the crate (about 4.5 min of
# tch/torch-sys on 2 cores) - together they would take CI past its budget.
# Installs torch==2.11.0 into a virtualenv (TORCH_VENV, default
# target/torch-2.11.0) unless LIBTORCH names a libtorch directory.
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x "$HOME/.cargo/bin/cargo" ] && export PATH="$HOME/.cargo/bin:$PATH"
if [ -z "${LIBTORCH:-}" ]; then
  VENV=${TORCH_VENV:-target/torch-2.11.0}
  if [ ! -x "$VENV/bin/python3" ] || ! "$VENV/bin/python3" -c 'import torch; assert torch.__version__.startswith("2.11.0")' 2>/dev/null; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install --quiet torch==2.11.0
  fi
  export PATH="$PWD/$VENV/bin:$PATH" LIBTORCH_USE_PYTORCH=1
  TORCH_LIB=$("$VENV/bin/python3" -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib"))')
else
  TORCH_LIB=$LIBTORCH/lib
fi
export LD_LIBRARY_PATH="$TORCH_LIB:${LD_LIBRARY_PATH:-}"
cargo test --release --locked --features train --test cli train_ "$@"
