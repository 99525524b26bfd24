#!/usr/bin/env bash
# Paste `s3rdma report` over the records listed in results/README-records.txt
# into README.md between <!-- report:begin --> and <!-- report:end -->.
# tests/readme_tables.rs fails when README.md and this output differ.
# Env: S3RDMA (target/release/s3rdma; built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
S=${S3RDMA:-target/release/s3rdma}
[ -x "$S" ] || cargo build --release --locked -q
mapfile -t FILES < <(grep -v '^\s*$' results/README-records.txt)
TABLES=$(mktemp); trap 'rm -f "$TABLES" README.md.tmp' EXIT
"$S" report "${FILES[@]}" > "$TABLES"
python3 - "$TABLES" <<'PY'
import sys
tables = open(sys.argv[1]).read()
s = open("README.md").read()
begin, end = "<!-- report:begin -->\n", "<!-- report:end -->"
a, b = s.index(begin) + len(begin), s.index(end)
with open("README.md.tmp", "w") as f:
    f.write(s[:a] + "\n" + tables + "\n" + s[b:])
PY
mv README.md.tmp README.md
echo "README.md: tables from ${#FILES[@]} records"
