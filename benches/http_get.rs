//! `cargo bench --bench http_get`: the HTTP backend's GET hot path (ranged
//! parts written into slices of one buffer) against an in-process server
//! that answers from memory, so the client, not the server, is what is timed
//! (s3s-fs caps a loopback GET near 125 MiB/s). Prints GB/s and client
//! CPU-seconds per GB (getrusage, this process: the server's share is small
//! but included) per (object size, part size, `--http-get` path) as a median
//! of repeats.
//!
//! Written as a plain `harness = false` bench rather than criterion: one
//! figure per line is all we compare between commits, and criterion's
//! dependency tree would double the dev build on 2 cores. Under `cargo test
//! --all-targets` (no `--bench` argument) it only says how to run it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode, body::Incoming, service::service_fn};
use s3rdma::cli::{Cli, Command};
use s3rdma::mem::Buffer;
use s3rdma::store::{self, ObjectStore};

/// Serve `data` for any path: HEAD, whole GET and `Range: bytes=a-b`.
async fn serve(data: Bytes) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else { continue };
            let data = data.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let data = data.clone();
                    async move {
                        let total = data.len();
                        let range = req.headers().get("range").and_then(|v| v.to_str().ok()).and_then(|v| {
                            let (a, b) = v.strip_prefix("bytes=")?.split_once('-')?;
                            let a: usize = a.parse().ok()?;
                            let b: usize = b.parse::<usize>().ok()?.min(total - 1);
                            Some((a, b))
                        });
                        let mut resp = match range {
                            Some((a, b)) if a <= b && a < total => {
                                let mut r = Response::new(Full::new(data.slice(a..=b)));
                                *r.status_mut() = StatusCode::PARTIAL_CONTENT;
                                r.headers_mut().insert("content-range", format!("bytes {a}-{b}/{total}").parse().expect("header"));
                                r
                            }
                            _ => Response::new(Full::new(data.clone())),
                        };
                        resp.headers_mut().insert("etag", "\"bench\"".parse().expect("header"));
                        Ok::<_, Infallible>(resp)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(hyper_util::rt::TokioIo::new(sock), svc).await;
            });
        }
    });
    addr
}

fn cpu_s() -> f64 {
    // SAFETY: getrusage writes the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable rusage for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("http_get: a benchmark; run it with `cargo bench --bench http_get`");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        println!("{:>10} {:>10} {:>8} {:>8} {:>12}", "object", "part", "get", "GB/s", "CPU-s/GB");
        for ((size, part), get) in [(16usize << 20, "8MiB"), (256 << 20, "8MiB"), (256 << 20, "64MiB")].into_iter().flat_map(|c| [(c, "direct"), (c, "sdk")]) {
            let data = Bytes::from((0..size).map(|i| (i * 31 % 251) as u8).collect::<Vec<u8>>());
            let addr = serve(data.clone()).await;
            let endpoint = format!("http://{addr}");
            let cli = <Cli as clap::Parser>::parse_from([
                "s3rdma",
                "fetch",
                "--backend",
                "http",
                "--endpoint",
                &endpoint,
                "--access-key",
                "bench",
                "--secret-key",
                "bench-secret",
                "--part-size",
                part,
                "--part-concurrency",
                "4",
                "--http-get",
                get,
            ]);
            let Command::Fetch(args) = cli.command else { unreachable!("fetch") };
            let s: Arc<dyn ObjectStore> = Arc::from(store::open(&args.store.config()).expect("store"));
            let mut buf = Buffer::host(size);
            s.get_into("obj", None, &mut buf).await.expect("warm-up GET");
            assert!(buf.as_host().expect("host") == &data[..], "bytes differ");
            let mut runs = Vec::new();
            for _ in 0..7 {
                let n = (1usize << 30) / size;
                let (t0, c0) = (Instant::now(), cpu_s());
                for _ in 0..n {
                    s.get_into("obj", None, &mut buf).await.expect("GET");
                }
                let (wall, cpu) = (t0.elapsed().as_secs_f64(), cpu_s() - c0);
                let gb = (n * size) as f64 / 1e9;
                runs.push((gb / wall, cpu / gb));
            }
            runs.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (gbps, cpu_per_gb) = runs[runs.len() / 2];
            println!("{:>8}Mi {:>10} {get:>8} {gbps:>8.2} {cpu_per_gb:>12.3}", size >> 20, part);
        }
    });
}
