//! A real S3 server in-process for tests: `s3s` + `s3s-fs` on 127.0.0.1, port 0,
//! in its own thread and runtime, so every test (sync or async) can use it.

#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

/// Test credentials the server accepts.
pub const ACCESS_KEY: &str = "s3rdma-test-access";
pub const SECRET_KEY: &str = "s3rdma-test-secret-0123456789";

/// A running server.
pub struct S3Server {
    /// `http://127.0.0.1:<port>`
    pub endpoint: String,
    /// The directory s3s-fs serves (one subdirectory per bucket).
    pub root: PathBuf,
}

/// The process-wide server, started on first use.
pub fn server() -> &'static S3Server {
    static SERVER: OnceLock<S3Server> = OnceLock::new();
    SERVER.get_or_init(start)
}

fn start() -> S3Server {
    start_server(None)
}

/// Bytes an S3 server moved, split by who asked: the libminiocpp test double
/// (its requests carry `app/fake-miniocpp` in their user agent: on an RDMA
/// server these are the transfers RDMA would carry) and everyone else (the
/// client's own HTTP: control plane, fallbacks, other tools). Sent = response
/// bodies, received = request bodies (decoded length when aws-chunked), as
/// MinIO's `minio_api_requests_traffic_*_bytes` count them.
#[derive(Default)]
pub struct Traffic {
    pub lib_sent: std::sync::atomic::AtomicU64,
    pub lib_received: std::sync::atomic::AtomicU64,
    pub other_sent: std::sync::atomic::AtomicU64,
    pub other_received: std::sync::atomic::AtomicU64,
}

impl Traffic {
    /// (lib_sent, lib_received, other_sent, other_received) now.
    pub fn now(&self) -> (u64, u64, u64, u64) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.lib_sent.load(SeqCst), self.lib_received.load(SeqCst), self.other_sent.load(SeqCst), self.other_received.load(SeqCst))
    }
}

/// A fresh S3 server of its own (not shared with other tests) that counts its
/// traffic, so a test can mirror it into server metrics ([`mirror_metrics`]).
pub fn counted_server() -> (S3Server, std::sync::Arc<Traffic>) {
    let t = std::sync::Arc::new(Traffic::default());
    (start_server(Some(t.clone())), t)
}

fn header_u64(h: &hyper::HeaderMap, name: &str) -> Option<u64> {
    h.get(name)?.to_str().ok()?.parse().ok()
}

fn start_server(traffic: Option<std::sync::Arc<Traffic>>) -> S3Server {
    use hyper::body::Body as _;
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::Builder::new().prefix("s3rdma-s3s-").tempdir().expect("tempdir").keep();
    let root = dir.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        rt.block_on(async move {
            let fs = s3s_fs::FileSystem::new(&root).expect("s3s-fs root");
            let mut b = S3ServiceBuilder::new(fs);
            b.set_auth(SimpleAuth::from_single(ACCESS_KEY, SECRET_KEY));
            let service = b.build();
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
            tx.send(listener.local_addr().expect("addr")).expect("send addr");
            let http = ConnBuilder::new(TokioExecutor::new());
            loop {
                let Ok((socket, _)) = listener.accept().await else { continue };
                let (svc, traffic) = (service.clone(), traffic.clone());
                let counting = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let (svc, traffic) = (svc.clone(), traffic.clone());
                    let h = req.headers();
                    // The library's own requests: the test double's, or the real minio-cpp's.
                    let lib = h.get("user-agent").and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("fake-miniocpp") || v.contains("minio-cpp"));
                    // A HEAD answer names the object's length but carries no body.
                    let head = req.method() == hyper::Method::HEAD;
                    let received = header_u64(h, "x-amz-decoded-content-length").or_else(|| header_u64(h, "content-length")).unwrap_or(0);
                    async move {
                        let resp = hyper::service::Service::call(&svc, req).await?;
                        if let Some(t) = traffic {
                            let sent =
                                if head { 0 } else { header_u64(resp.headers(), "content-length").or_else(|| resp.body().size_hint().exact()).unwrap_or(0) };
                            let (s, r) = if lib { (&t.lib_sent, &t.lib_received) } else { (&t.other_sent, &t.other_received) };
                            s.fetch_add(sent, SeqCst);
                            r.fetch_add(received, SeqCst);
                        }
                        Ok::<_, s3s::HttpError>(resp)
                    }
                });
                let conn = http.serve_connection(TokioIo::new(socket), counting).into_owned();
                tokio::spawn(async move {
                    let _ = conn.await;
                });
            }
        });
    });
    let addr = rx.recv().expect("server started");
    S3Server { endpoint: format!("http://{addr}"), root: dir }
}

/// A TCP port on 127.0.0.1 that nothing listens on (bound, then released).
pub fn dead_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// One scripted answer of the fake metrics endpoint.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Answer {
    /// 200 with Prometheus text.
    pub fn text(body: impl Into<String>) -> Self {
        Answer { status: 200, content_type: "text/plain; version=0.0.4; charset=utf-8", body: body.into() }
    }
}

/// A tiny HTTP endpoint that answers each path with the next scripted answer
/// for that path (repeating the last one), and remembers every request's
/// Authorization header. Plain std networking on 127.0.0.1: enough for a
/// scrape, and no server framework to configure.
pub struct ScriptedMetrics {
    pub base: String,
    pub auth_seen: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

pub fn scripted_metrics(script: Vec<(&'static str, Vec<Answer>)>) -> ScriptedMetrics {
    let mut script: std::collections::HashMap<String, (Vec<Answer>, usize)> = script.into_iter().map(|(p, a)| (p.to_string(), (a, 0))).collect();
    metrics_server(move |path| match script.get_mut(path) {
        Some((answers, i)) => {
            let a = answers[(*i).min(answers.len() - 1)].clone();
            *i += 1;
            a
        }
        None => Answer { status: 404, content_type: "text/plain", body: "no such path".into() },
    })
}

/// A metrics endpoint answering each request's path with `answer(path)`.
pub fn metrics_server(mut answer: impl FnMut(&str) -> Answer + Send + 'static) -> ScriptedMetrics {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let auth_seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = auth_seen.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
            loop {
                let mut h = String::new();
                if reader.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                    break;
                }
                if h.to_ascii_lowercase().starts_with("authorization:") {
                    seen.lock().unwrap().push(h[14..].trim().to_string());
                }
            }
            let a = answer(&path);
            let _ = write!(
                conn,
                "HTTP/1.1 {} X\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{}",
                a.status,
                a.content_type,
                a.body.len(),
                a.body
            );
        }
    });
    ScriptedMetrics { base, auth_seen }
}

/// What the mirrored server says its traffic was (see [`mirror_metrics`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mirror {
    /// (a) RDMA carried every transfer the library was handed: the double's
    /// bytes are RDMA bytes, only the rest is HTTP.
    TrueRdma,
    /// (b) Everything went over HTTP: RDMA counters flat.
    Fallback,
    /// (c) This client fell back (all bytes HTTP) while another client's RDMA
    /// traffic grew the RDMA counters by exactly as much.
    SharedWindow,
    /// (d) Two nodes; the one that took half the library's transfers over RDMA is
    /// listed under two URLs, the other (which fell back) is not listed.
    HalfListedTwice,
}

/// Metrics of a [`counted_server`] as a MinIO AIStor server would report them
/// in `mode`, at `<base>/rdma` and `<base>/requests` (and, for
/// [`Mirror::HalfListedTwice`], the same node again at `<base>/alias/...`).
/// Every series carries `server="n1:9000"`. Returns the metrics URLs to pass.
pub fn mirror_metrics(t: std::sync::Arc<Traffic>, mode: Mirror) -> (ScriptedMetrics, Vec<String>) {
    let m = metrics_server(move |path| {
        let (ls, lr, os, or) = t.now();
        let (rdma_r, rdma_w, http_s, http_r) = match mode {
            Mirror::TrueRdma => (ls, lr, os, or),
            Mirror::Fallback => (0, 0, ls + os, lr + or),
            Mirror::SharedWindow => (ls, lr, ls + os, lr + or),
            Mirror::HalfListedTwice => (ls / 2, lr / 2, os, or),
        };
        let body = if path.ends_with("/rdma") {
            format!(
                "# TYPE minio_api_rdma_read_bytes_total counter\n\
                 minio_api_rdma_read_bytes_total{{server=\"n1:9000\"}} {rdma_r}\n\
                 minio_api_rdma_write_bytes_total{{server=\"n1:9000\"}} {rdma_w}\n"
            )
        } else if path.ends_with("/requests") {
            format!(
                "minio_api_requests_traffic_sent_bytes{{server=\"n1:9000\",type=\"s3\"}} {http_s}\n\
                 minio_api_requests_traffic_received_bytes{{server=\"n1:9000\",type=\"s3\"}} {http_r}\n"
            )
        } else {
            return Answer { status: 404, content_type: "text/plain", body: "no such path".into() };
        };
        Answer::text(body)
    });
    let mut urls = vec![format!("{}/rdma", m.base), format!("{}/requests", m.base)];
    if mode == Mirror::HalfListedTwice {
        urls.extend([format!("{}/alias/rdma", m.base), format!("{}/alias/requests", m.base)]);
    }
    (m, urls)
}

/// The fake libminiocpp (tests/fake-miniocpp), built on first use. It is built
/// together with the main crate (`--workspace`) so both share one feature set
/// and cargo does not compile the SDK twice.
pub fn fake_lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        // A prebuilt copy (e.g. carried to a GPU machine with the test binary).
        if let Some(p) = std::env::var_os("FAKE_MINIOCPP_LIB") {
            return PathBuf::from(p);
        }
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| root.join("target"));
        let lib = target.join("release/libfake_miniocpp.so");
        if !lib.exists() {
            let st = std::process::Command::new(env!("CARGO")).args(["build", "--release", "--workspace"]).current_dir(&root).status().expect("run cargo");
            assert!(st.success(), "building tests/fake-miniocpp failed");
        }
        assert!(lib.exists(), "{} missing after the build", lib.display());
        lib
    })
    .clone()
}
pub mod faultproxy;
pub mod tls;

/// The real libminiocpp (minio-cpp v0.6.0 or later, RDMA through libs3rdma),
/// from `S3RDMA_TEST_MINIOCPP`: scripts/test.sh builds it with
/// scripts/build-libminiocpp.sh from `S3RDMA_MINIOCPP_SRC`. Without it a test
/// returns `None` after printing how to provide it; under `CI=true` it fails
/// instead, so CI can never pass without running these tests.
pub fn real_lib(test: &str) -> Option<PathBuf> {
    let lib = std::env::var_os("S3RDMA_TEST_MINIOCPP").map(PathBuf::from).filter(|p| p.exists());
    if lib.is_none() {
        let how = "build it with `scripts/build-libminiocpp.sh <minio-cpp checkout> target/libminiocpp <dir holding httplib.h>` \
                   and set S3RDMA_TEST_MINIOCPP=target/libminiocpp/libminiocpp.so (scripts/test.sh does both when S3RDMA_MINIOCPP_SRC names a checkout)";
        assert!(std::env::var("CI").as_deref() != Ok("true"), "{test}: the real libminiocpp is missing under CI=true: {how}");
        eprintln!("SKIP {test}: the real libminiocpp is not built: {how}");
    }
    lib
}
