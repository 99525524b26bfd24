#!/usr/bin/env bash
# Paste `s3rdma report` over the records listed in results/README-records.txt
# (one path per line; blank lines and lines starting with # are ignored) into
# README.md between <!-- report:begin --> and <!-- report:end -->, each on a
# line of its own, begin first. tests/readme_tables.rs fails when README.md and
# this output differ. README.md is replaced only when everything succeeded.
# Env: S3RDMA (default target/release/s3rdma, built when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${S3RDMA:-}" ]; then
  S=$S3RDMA
  [ -x "$S" ] || { echo "S3RDMA=$S is not an executable: unset it to build target/release/s3rdma" >&2; exit 2; }
else
  S=target/release/s3rdma
  [ -x "$S" ] || cargo build --release --locked -q
fi
mapfile -t FILES < <(sed -e 's/^[[:space:]]*//' -e 's/[[:space:]]*$//' results/README-records.txt | grep -v -e '^$' -e '^#')
[ ${#FILES[@]} -gt 0 ] || { echo "results/README-records.txt lists no records" >&2; exit 2; }
TABLES=$(mktemp); NOTES=$(mktemp); trap 'rm -f "$TABLES" "$NOTES" README.md.tmp' EXIT
"$S" report "${FILES[@]}" > "$TABLES" 2> "$NOTES" || { cat "$NOTES" >&2; exit 1; }
# Every listed file must give rows: a skipped one (not a record, a test double) is a wrong list.
if grep -q "^note: .*skipped" "$NOTES"; then
  cat "$NOTES" >&2
  echo "a record listed in results/README-records.txt was skipped (above): fix the list" >&2
  exit 1
fi
python3 - "$TABLES" <<'PY'
import sys
tables = open(sys.argv[1]).read()
s = open("README.md").read()
begin, end = "<!-- report:begin -->\n", "<!-- report:end -->"
a = s.find(begin)
b = s.find(end, a + len(begin)) if a >= 0 else -1
if a < 0 or b < 0:
    sys.exit(f"README.md needs a line '{begin.strip()}' followed later by a line '{end}': add them where the tables go")
a += len(begin)
with open("README.md.tmp", "w") as f:
    f.write(s[:a] + "\n" + tables + "\n" + s[b:])
PY
mv README.md.tmp README.md
echo "README.md: tables from ${#FILES[@]} records"
