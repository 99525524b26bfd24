#!/usr/bin/env python3
"""The real libminiocpp's RDMA branch, end to end, without an RDMA device.

scripts/rdma-e2e.sh runs this. Each scenario starts the test server
(examples/s3_test_server, --rdma: answers x-amz-rdma-token as AIStor does,
moving bytes with process_vm_readv/writev) with its fault modes, then runs
s3rdma through a libminiocpp whose libs3rdma is the stand-in
(tests/standin-s3rdma), into host memory, and checks what the record says
against what the scenario must show. One line per scenario:

  bench  scenario  library  verdict  exit  library return codes  rails  bytes checked  OK|FAIL

and exit 1 when any scenario's outcome is not the expected one. The
library falls back to HTTP inside its own call (a decline, a failed rail, a
stall), so its return codes stay OK in those scenarios: only the server's
counters (the verdict) show the fallback, which is why the witness exists.
Records go
to <results>/test-double/ (s3rdma puts every record made through a stand-in
there); they are never RDMA figures.

Usage: rdma_e2e.py S3RDMA SERVER LIBMINIOCPP FAKE_LIB RESULTS_DIR [--rounds N] [SCENARIO...]
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

S3RDMA, SERVER, LIB, FAKE, RESULTS = sys.argv[1:6]
_rest = sys.argv[6:]
# --rounds N: run the chosen scenarios N times in a row (a flaky scenario
# shows as a count of failed runs, not as one lucky pass).
ROUNDS = 1
if "--rounds" in _rest:
    i = _rest.index("--rounds")
    try:
        ROUNDS = int(_rest[i + 1])
        assert ROUNDS >= 1
    except (IndexError, ValueError, AssertionError):
        raise SystemExit("rdma-e2e: --rounds takes a whole number of 1 or more, e.g. --rounds 5")
    del _rest[i:i + 2]
ONLY = set(_rest)
ACCESS, SECRET = "s3rdma-e2e", "s3rdma-e2e-secret-0123456789"
GIB = 1 << 30


class Server:
    """The test server in RDMA mode with `faults`, on a fresh directory."""

    def __init__(self, faults):
        self.dir = tempfile.mkdtemp(prefix="s3rdma-e2e-")
        args = [SERVER, os.path.join(self.dir, "store"), "0", "--rdma"]
        for f in faults:
            args += ["--fault", f]
        env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET)
        self.log = open(os.path.join(self.dir, "server.log"), "w+")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("endpoint "):
            self.log.seek(0)
            raise SystemExit(f"rdma-e2e: the test server did not start: {line}{self.log.read()}")
        self.endpoint = line.split()[1]

    def bucket(self, name):
        """Create bucket `name` (s3s-fs keeps a bucket as a directory)."""
        os.makedirs(os.path.join(self.dir, "store", name), exist_ok=True)
        return name

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Run:
    """One s3rdma command's outcome: exit code, record (from --json), stderr, wall seconds."""

    def __init__(self, args, server, lib, env, bucket):
        self.stats = os.path.join(server.dir, f"standin-{time.monotonic_ns()}.jsonl")
        e = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS, AWS_SECRET_ACCESS_KEY=SECRET, S3RDMA_STANDIN_STATS=self.stats)
        e.pop("MINIOCPP_LIB", None)
        e.update(env)
        ep = server.endpoint
        common = ["--backend", "rdma", "--endpoint", ep, "--bucket", bucket, "--rdma-lib", lib]
        # s3rdma files a stand-in's records under test-double/ itself; the libminiocpp double's are put there too.
        results = os.path.join(RESULTS, "test-double") if lib == FAKE else RESULTS
        if args[0] != "ingest":  # ingest measures nothing: no witness, no record
            common += ["--metrics-url", f"{ep}/minio/metrics/v3/api/rdma", "--metrics-url", f"{ep}/minio/metrics/v3/api/requests", "--results-dir", results]
        t0 = time.monotonic()
        sub = 2 if args[0] == "ingest" else 1  # `ingest tokens` takes the store flags after both words
        p = subprocess.run([S3RDMA, *args[:sub], *common, *args[sub:]], capture_output=True, text=True, env=e, cwd=server.dir)
        self.wall_s = time.monotonic() - t0
        self.code, self.stderr = p.returncode, p.stderr
        try:
            self.record = json.loads(p.stdout) if "--json" in args else None
        except json.JSONDecodeError:
            self.record = None
        self.stdout = p.stdout

    def standin(self):
        """The stand-in's counts at exit (one line per freed client)."""
        try:
            return [json.loads(l) for l in open(self.stats)]
        except OSError:
            return []


def verdict(rec):
    return (rec or {}).get("rdma_witness", {}).get("verdict", "-")


def codes(rec):
    s = ((rec or {}).get("environment", {}).get("store_stats", {}) or {}).get("in_windows", {})
    if not s:
        return "-"
    if "rdma_requests" in s:  # the libs3rdma engine's own counts, per request
        return "req={} confirmed={} declined={} miscount={} failed={}".format(
            *(s.get(k, 0) for k in ("rdma_requests", "rdma_confirmed_bytes", "rdma_declines", "rdma_miscounted", "rdma_rail_failures")))
    return "calls={} ok={} err={} declined={} invalid={}".format(*(s.get(k, 0) for k in ("rdma_calls", "rdma_ok", "rdma_errors", "rdma_declined", "rdma_invalid")))


def cells(rec):
    """fetch's per-cell verdicts by object size."""
    return {c["size_bytes"]: c["verdict"] for c in (rec or {}).get("rdma_witness", {}).get("cells", [])}


def rails(rec):
    """Healthy rails at the first window's open and the last one's close, as 'open->close of total'."""
    ws = [r for w in (rec or {}).get("rdma_witness", {}).get("windows", []) for r in (w.get("rails") or [])]
    if not ws:
        return "-"
    return f"{ws[0]['open']['healthy']}->{ws[-1]['close']['healthy']}/{ws[-1]['close']['total']}"


RESULTS_LINES = []
FAILED = []


def report(bench, scenario, lib, run, ok, checked, why=""):
    rec = run.record
    line = f"{bench:<8} {scenario:<24} {lib:<8} {verdict(rec):<16} exit={run.code:<2} {codes(rec):<48} rails={rails(rec):<8} {checked:<34} {'OK' if ok else 'FAIL'}"
    print(line, flush=True)
    if not ok:
        FAILED.append(f"{bench} {scenario} ({lib}): {why}\n--- stderr ---\n{run.stderr[-3000:]}")


def expect(bench, scenario, lib, run, checks, checked):
    """Every (condition, what) in checks must hold."""
    bad = [what for cond, what in checks if not cond]
    report(bench, scenario, lib, run, not bad, checked, "; ".join(bad))


def leak_free(run):
    """Every registration the library made was released, on every client the stand-in freed."""
    s = run.standin()
    return bool(s) and all(c["pinned_at_free"] == 0 and c["register_calls"] == c["deregister_calls"] for c in s)


def setup(args, server, lib, bucket):
    """A step that prepares data (ingest, --synth): it must succeed."""
    r = Run(args, server, lib, {}, server.bucket(bucket))
    if r.code != 0:
        raise SystemExit(f"rdma-e2e: setup step {' '.join(args[:3])} failed (exit {r.code}):\n{r.stderr[-3000:]}")


def fetch_args(sizes, extra=(), iters="2"):
    return ["fetch", "--sizes", sizes, "--concurrency", "2", "--iters", iters, "--warmup", "0s", "--prepare", "--verify", "--dest", "host", "--json", *extra]


def want(name):
    return not ONLY or name in ONLY


def scenario_fetch_healthy(lib, libname, env):
    with Server([]) as s:
        r = Run(fetch_args("1MiB,3MiB", ["--require-rdma"]), s, lib, env, "e2e-fetch")
        if libname == "real":
            checks = [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"),
                      (codes(r.record).startswith("calls=8 ok=8 err=0"), "8 library calls, all OK"), (leak_free(r), "no registration left pinned")]
        else:
            # The double moves bytes over HTTP while it claims RDMA: the server's counters say so.
            checks = [(r.code == 3, "exit 3: the double's bytes went over HTTP"), (verdict(r.record) == "full-fallback", "full-fallback")]
        expect("fetch", "healthy", libname, r, checks, "--verify: every byte matched")
        if libname == "real":
            print("         witness: " + json.dumps({k: r.record["rdma_witness"].get(k) for k in ("verdict", "reason")})[:400])


def scenario_fetch_decline(lib, libname, env):
    with Server(["decline"]) as s:
        r = Run(fetch_args("1MiB", ["--require-rdma"]), s, lib, env, "e2e-decline")
        checks = [(r.code == 3, "exit 3 under --require-rdma"), (verdict(r.record) == "full-fallback", "full-fallback"),
                  ("RDMA not proven" in r.stderr, "says RDMA was not proven")]
        if libname == "real":
            checks.append((leak_free(r), "no registration left pinned"))
        expect("fetch", "decline-501", libname, r, checks, "--verify: every byte matched")


def scenario_http_for_one_key(lib):
    # Keys of the 3 MiB cell are answered over HTTP, the 1 MiB cell's over RDMA.
    with Server(["http-for=3145728"]) as s:
        r = Run(fetch_args("1MiB,3MiB"), s, lib, {}, "e2e-mixed")
        c = cells(r.record)
        expect("fetch", "rdma-one-key-http-other", "real", r,
               [(r.code == 0, "exit 0"), (c.get(1 << 20) == "rdma-verified", "the 1 MiB key's cell over RDMA"),
                (c.get(3 << 20) == "full-fallback", "the 3 MiB key's cell over HTTP"), (verdict(r.record) == "full-fallback", "the run: its worst cell")],
               "--verify; 1MiB " + str(c.get(1 << 20)) + ", 3MiB " + str(c.get(3 << 20)))


def scenario_lost_rail(lib, rails_env, scenario, want_verdicts, want_code):
    # The rail fails after --prepare's 4 PUTs and the window's first 4 GETs: mid-run.
    with Server(["fail-rail=127.0.0.3@8" if "127.0.0.3" in rails_env else "fail-rail=127.0.0.2@8"]) as s:
        r = Run(fetch_args("1MiB", ["--require-rdma"], iters="8"), s, lib, {"S3RDMA_DEVICE": rails_env}, "e2e-rail")
        st = r.standin()
        lost = bool(st) and st[-1]["failures_reported"] > 0
        expect("fetch", scenario, "real", r,
               [(r.code == want_code, f"exit {want_code}"), (verdict(r.record) in want_verdicts, f"verdict in {want_verdicts}"),
                (lost, "the library reported the failing rail"), (rails(r.record) != "-", "the record's rails show the windows")],
               f"failures reported={st[-1]['failures_reported'] if st else '-'}")


def scenario_short(lib):
    # GETs 4 KiB short once --prepare's 4 PUTs are in: the library reports success and the size it was handed.
    with Server(["short=4096@4"]) as s:
        r = Run(fetch_args("1MiB"), s, lib, {}, "e2e-short")
        expect("fetch", "short-get", "real", r,
               [(r.code == 4, "exit 4: the bytes that never arrived are caught"), ("differs" in r.stderr and "nothing of this run is counted" in r.stderr, "says the data differ")],
               "--verify: stale tail found")
    # Every PUT 4 KiB short: the library reports the save whole; the restore's checksums must catch it.
    with Server(["short=4096"]) as s:
        a = ["ckpt", "--sizes", "5000000", "--chunk", "1MiB", "--methods", "flat", "--dest", "host", "--json"]
        r = Run(a, s, lib, {}, s.bucket("e2e-short-put"))
        expect("ckpt", "short-put", "real", r,
               [(r.code in (1, 4), "the restore refuses the short chunks"), ("manifest" in r.stderr or "chunk" in r.stderr, "names the manifest or chunk it refused")],
               "restore refused the short object")


def scenario_stall(lib):
    # Stalls from the first GET on, after --prepare's one PUT.
    with Server(["stall=30@1"]) as s:
        a = ["fetch", "--sizes", "1MiB", "--objects", "1", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--verify", "--dest", "host", "--json"]
        r = Run(a, s, lib, {}, "e2e-stall")
        # The timed GET waits out two attempts of minio-cpp's 10 s total timeout (kRDMATimeoutSecs), then goes over HTTP.
        lat = [rep["latency_ms"]["max_ms"] / 1e3 for c in (r.record or {}).get("results", []) for rep in c["repeats"]]
        expect("fetch", "stall", "real", r,
               [(r.code == 0, "exit 0: the HTTP fallback carries the bytes"), (verdict(r.record) == "full-fallback", "full-fallback"),
                (bool(lat) and all(20 <= x <= 25 for x in lat), f"each GET within 2 attempts x 10 s + 5 s: {lat}")],
               f"GET {max(lat or [0]):.1f} s (2x10 s bound)")


def scenario_4gib(lib):
    with Server([]) as s:
        sizes = f"{4 * GIB - 1},{4 * GIB},{4 * GIB + 1}"
        a = ["fetch", "--sizes", sizes, "--objects", "1", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--verify", "--dest", "host", "--json"]
        r = Run(a + ["--require-rdma"], s, lib, {}, "e2e-4gib")
        expect("fetch", "4GiB-require-rdma", "real", r,
               [(r.code == 3, "exit 3 before any transfer"), ("4294967296" in r.stderr and "--sizes" in r.stderr, "names the size and the fix")],
               "refused up front")
        r = Run(a, s, lib, {}, "e2e-4gib")
        c = cells(r.record)
        expect("fetch", "4GiB-1/4GiB/4GiB+1", "real", r,
               [(r.code == 0, "exit 0"), (c.get(4 * GIB - 1) == "rdma-verified", "4 GiB - 1 over RDMA"),
                (c.get(4 * GIB) == "full-fallback" and c.get(4 * GIB + 1) == "full-fallback", "4 GiB and 4 GiB + 1 over HTTP")],
               "--verify; " + " ".join(f"4GiB{k - 4 * GIB:+d}:{v}" for k, v in sorted(c.items())))
        scenario_engine_4gib(s, lib)


def scenario_ckpt(lib):
    with Server([]) as s:
        a = ["ckpt", "--sizes", "5000000", "--chunk", "1MiB", "--methods", "flat,async", "--dest", "host", "--json", "--require-rdma"]
        r = Run(a, s, lib, {}, s.bucket("e2e-ckpt"))
        rows = (r.record or {}).get("results", {}).get("rows", [])
        restores = [x for x in rows if x.get("op") == "restore"]
        ok = len(restores) == 2 and all(x.get("verified", {}).get("ok") for x in restores)
        expect("ckpt", "healthy-flat+async", "real", r,
               [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"), (ok, "both restores match their checksums"),
                ("err=0 declined=0 invalid=0" in codes(r.record), "every library call OK"),
                (leak_free(r), "no registration left pinned")],
               "restore: every chunk checksum")


def scenario_weights(lib):
    with Server([]) as s:
        setup(["weights", "--synth", "tiny", "--model", "m/e2e", "--shard-size", "16MB"], s, lib, "e2e-weights")
        r = Run(["weights", "--model", "m/e2e", "--verify", "--dest", "host", "--json", "--require-rdma"], s, lib, {}, "e2e-weights")
        expect("weights", "ranged-require-rdma", "real", r,
               [(r.code == 3, "exit 3 before the load"), ("ranged GETs" in r.stderr and "PR #258" in r.stderr, "names the reason")], "refused up front")
        r = Run(["weights", "--model", "m/e2e", "--verify", "--dest", "host", "--json"], s, lib, {}, "e2e-weights")
        v = (r.record or {}).get("results", {}).get("verified", {}).get("ok")
        expect("weights", "ranged-windows", "real", r,
               [(r.code == 0, "exit 0"), (verdict(r.record) == "full-fallback", "full-fallback: ranged reads go over HTTP"), (v is True, "--verify matched the digest")],
               "--verify: digest matched")


def scenario_tokens_train(lib):
    with Server([]) as s:
        setup(["ingest", "tokens", "--synthetic", "--total-bytes", "4MiB", "--seq-len", "1024", "--shard-bytes", "1MiB"], s, lib, "e2e-tokens")
        r = Run(["tokens", "--dest", "host", "--batch-seqs", "16", "--repeats", "1", "--json", "--require-rdma"], s, lib, {}, "e2e-tokens")
        expect("tokens", "healthy", "real", r, [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified")],
               f"bytes {(r.record or {}).get('results', {}).get('repeats', [{}])[0].get('bytes')}")
        setup(["ingest", "raw", "--synthetic", "64", "--classes", "4", "--size", "32", "--samples-per-shard", "16"], s, lib, "e2e-raw")
        t = ["train", "--loader-only", "--dest", "host", "--batch-size", "8", "--crop", "24", "--steps", "6", "--warmup", "1", "--repeats", "1", "--json", "--require-rdma",
             "--fetch-workers", "1", "--prefetch-batches", "1"]
        r = Run(t, s, lib, {}, "e2e-raw")
        expect("train", "loader-healthy", "real", r, [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified")],
               f"images {(r.record or {}).get('results', {}).get('repeats', [{}])[0].get('images')}")


def scenario_verify(lib):
    with Server([]) as s:
        r = Run(["verify", "--prepare", "--sizes", "16MiB,64MiB"], s, lib, {}, "e2e-verify")
        result = next((l for l in r.stdout.splitlines() if l.startswith("RESULT: ")), "-")
        report("verify", "healthy", "real", r, r.code == 0 and result.startswith("RESULT: PASS"), result[:34], f"expected PASS, got {result}")
        print("         " + "\n         ".join(l for l in r.stdout.splitlines() if "registration" in l.lower()))


# The libs3rdma engine (--rdma-engine libs3rdma: libs3rdma bound directly,
# src/store/rdma/libs3rdma), given the same libminiocpp path: it loads the
# libs3rdma.so.0 beside it, here the stand-in.
ENGINE = ["--rdma-engine", "libs3rdma"]


def two_sided(rec):
    """Over the timed windows: (client's bytes confirmed by RDMA replies, server's RDMA bytes,
    client's declines, server's RDMA error count)."""
    rec = rec or {}
    st = rec.get("environment", {}).get("store_stats", {}).get("in_windows", {})
    ws = rec.get("rdma_witness", {}).get("windows", [])
    server = sum((w.get("rdma_read_bytes") or 0) + (w.get("rdma_write_bytes") or 0) for w in ws)
    errors = sum((w.get("rdma_series") or {}).get("minio_api_rdma_errors_total", 0) for w in ws)
    return st.get("rdma_confirmed_bytes"), int(server), st.get("rdma_declines"), int(errors)


def engine_fetch(lib, faults, scenario, checks_of, extra=(), iters="2", sizes="1MiB,3MiB"):
    with Server(faults) as s:
        r = Run(fetch_args(sizes, [*ENGINE, *extra], iters=iters), s, lib, {}, "e2e-engine")
        client, server, declines, errors = two_sided(r.record)
        st = (r.record or {}).get("environment", {}).get("store_stats", {}).get("in_windows", {})
        expect("fetch", scenario, "engine", r, checks_of(r, client, server, declines, errors, st),
               f"client {client} B / server {server} B RDMA")


def scenarios_engine_fetch(lib):
    engine_fetch(lib, [], "healthy", lambda r, c, s, d, e, st: [
        (r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"),
        (c == s and c and c > 0, "the client's confirmed bytes equal the server's RDMA bytes"),
        (st.get("rdma_registration_ns", 0) > 0, "registration measured"), (leak_free(r), "every registration released")], extra=["--require-rdma"])
    engine_fetch(lib, ["decline"], "decline-501", lambda r, c, s, d, e, st: [
        (r.code == 3, "exit 3 under --require-rdma"), (verdict(r.record) == "full-fallback", "full-fallback"),
        (d == e and d and d > 0, f"the client's declines ({d}) equal the server's ({e})"), (c == 0, "nothing confirmed by RDMA")], extra=["--require-rdma"])
    engine_fetch(lib, ["no-count"], "reply-without-count", lambda r, c, s, d, e, st: [
        (r.code == 0, "exit 0: every byte read again over HTTP"), (verdict(r.record) != "rdma-verified", "never rdma-verified"),
        (c == 0 and s > 0, "the lie is visible: the server counts RDMA the client never confirmed"),
        (st.get("rdma_miscounted", 0) == st.get("rdma_requests", -1), "every reply miscounted")])
    engine_fetch(lib, ["dialect"], "count-in-a-dialect", lambda r, c, s, d, e, st: [
        (r.code == 0, "exit 0"), (verdict(r.record) != "rdma-verified", "never rdma-verified"),
        ("x-amz-rdma-bytes, not x-amz-rdma-bytes-transferred" in r.stderr, "the dialect named in a warning")])
    engine_fetch(lib, ["short=4096"], "short-get", lambda r, c, s, d, e, st: [
        (r.code == 0, "exit 0: short replies read again over HTTP, --verify matched"), (verdict(r.record) != "rdma-verified", "never rdma-verified"),
        (c == 0 and s > 0, "the short bytes are the server's alone"), (st.get("rdma_miscounted", 0) > 0, "short replies counted")])


def scenario_engine_stall(lib):
    # Stalls of 12 s on every RDMA GET: past libminiocpp's fixed 10 s, within the engine's 30 s + size.
    with Server(["stall=12@0"]) as s:
        a = ["fetch", "--sizes", "1MiB", "--objects", "1", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--prepare", "--verify", "--dest", "host", "--json", *ENGINE]
        r = Run(a, s, lib, {}, "e2e-stall")
        expect("fetch", "stall-12s", "engine", r,
               [(r.code == 0, "exit 0"), (verdict(r.record) == "rdma-verified", "rdma-verified: a slow transfer is not abandoned at 10 s")],
               f"wall {r.wall_s:.1f} s")


def scenario_engine_4gib(s, lib):
    """4 GiB + 1 over RDMA in ranges, reading the object scenario_4gib prepared on server `s`."""
    a = ["fetch", "--sizes", f"{4 * GIB + 1}", "--objects", "1", "--concurrency", "1", "--iters", "1", "--warmup", "0s", "--verify",
         "--dest", "host", "--json", "--require-rdma", *ENGINE]
    r = Run(a, s, lib, {}, "e2e-4gib")
    client, server, _, _ = two_sided(r.record)
    expect("fetch", "4GiB+1-in-ranges", "engine", r,
           [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"),
            (client == server == 4 * GIB + 1, f"client {client} = server {server} = 4 GiB + 1")], "--verify; ranges of at most 1 GiB")


def scenario_engine_weights(lib):
    with Server([]) as s:
        setup(["weights", "--synth", "tiny", "--model", "m/e2e", "--shard-size", "16MB"], s, lib, "e2e-weights")
        r = Run(["weights", "--model", "m/e2e", "--verify", "--dest", "host", "--json", "--require-rdma", *ENGINE], s, lib, {}, "e2e-weights")
        v = (r.record or {}).get("results", {}).get("verified", {}).get("ok")
        client, server, _, _ = two_sided(r.record)
        expect("weights", "ranged-require-rdma", "engine", r,
               [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"), (v is True, "--verify matched the digest"),
                (client == server and client, "the client's confirmed bytes equal the server's")], "--verify: digest matched")


def scenario_engine_ckpt(lib):
    for faults, scenario in (([], "healthy-flat+async"), (["put-200-501"], "put-declined-under-200")):
        with Server(faults) as s:
            a = ["ckpt", "--sizes", "5000000", "--chunk", "1MiB", "--methods", "flat,async", "--dest", "host", "--json", *ENGINE]
            r = Run(a + ([] if faults else ["--require-rdma"]), s, lib, {}, s.bucket("e2e-ckpt"))
            rows = (r.record or {}).get("results", {}).get("rows", [])
            ok = len([x for x in rows if x.get("op") == "restore" and x.get("verified", {}).get("ok")]) == 2
            client, server, declines, errors = two_sided(r.record)
            if faults:
                checks = [(r.code == 0, "exit 0: declined PUTs go over HTTP"), (ok, "both restores match their checksums"),
                          (verdict(r.record) != "rdma-verified", "the saves are not RDMA"), (declines == errors and declines, f"client declines {declines} = server {errors}")]
            else:
                checks = [(r.code == 0, "exit 0 under --require-rdma"), (verdict(r.record) == "rdma-verified", "rdma-verified"), (ok, "both restores match"),
                          (client == server and client, f"client {client} = server {server}"), (leak_free(r), "every registration released")]
            expect("ckpt", scenario, "engine", r, checks, "restore: every chunk checksum")


SCENARIOS = ["fetch-healthy", "engine", "decline", "mixed", "lost-rail", "short", "ckpt", "weights", "tokens-train", "verify", "stall", "4gib"]


def main():
    unknown = sorted(ONLY - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"rdma-e2e: unknown scenario(s) {', '.join(unknown)}: choose from {' '.join(SCENARIOS)}")
    print(f"{'bench':<8} {'scenario':<24} {'library':<8} {'verdict':<16} {'exit':<7} {'library return codes':<48} {'rails':<14} {'bytes checked':<34} outcome")
    real, double = LIB, FAKE
    fake_env = {"FAKE_MINIOCPP_RDMA_AVAILABLE": "1", "FAKE_MINIOCPP_RAILS": "2,2"}
    runs = {
        "fetch-healthy": [lambda: scenario_fetch_healthy(real, "real", {}), lambda: scenario_fetch_healthy(double, "double", fake_env)],
        "engine": [lambda: scenarios_engine_fetch(real)],
        "decline": [lambda: scenario_fetch_decline(real, "real", {}), lambda: scenario_fetch_decline(double, "double", fake_env)],
        "mixed": [lambda: scenario_http_for_one_key(real)],
        "lost-rail": [lambda: scenario_lost_rail(real, "127.0.0.2,127.0.0.3", "lost-1-of-2-rails", ("rdma-verified",), 0),
                      lambda: scenario_lost_rail(real, "127.0.0.2", "lost-only-rail", ("partial-fallback",), 3)],
        "short": [lambda: scenario_short(real)],
        "ckpt": [lambda: scenario_ckpt(real), lambda: scenario_engine_ckpt(real)],
        "weights": [lambda: scenario_weights(real), lambda: scenario_engine_weights(real)],
        "tokens-train": [lambda: scenario_tokens_train(real)],
        "verify": [lambda: scenario_verify(real)],
        "stall": [lambda: scenario_stall(real), lambda: scenario_engine_stall(real)],
        "4gib": [lambda: scenario_4gib(real)],
    }
    failed_rounds = 0
    for n in range(1, ROUNDS + 1):
        before = len(FAILED)
        t0 = time.monotonic()
        for name in SCENARIOS:
            if want(name):
                for run in runs[name]:
                    run()
        failed_rounds += len(FAILED) > before
        if ROUNDS > 1:
            print(f"rdma-e2e: round {n} of {ROUNDS}: {len(FAILED) - before} scenario run(s) failed, {time.monotonic() - t0:.0f} s", flush=True)
    if ROUNDS > 1:
        print(f"rdma-e2e: {ROUNDS} rounds, {failed_rounds} with a failure, {len(FAILED)} failed scenario run(s) in all")
    if FAILED:
        print("\n".join(["", "rdma-e2e: FAILED:"] + FAILED), file=sys.stderr)
        sys.exit(1)
    print("rdma-e2e: every scenario as expected")


main()
