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
                let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
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
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let base = format!("http://{}", listener.local_addr().unwrap());
    let auth_seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = auth_seen.clone();
    let mut script: std::collections::HashMap<String, (Vec<Answer>, usize)> = script.into_iter().map(|(p, a)| (p.to_string(), (a, 0))).collect();
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
            let a = match script.get_mut(&path) {
                Some((answers, i)) => {
                    let a = answers[(*i).min(answers.len() - 1)].clone();
                    *i += 1;
                    a
                }
                None => Answer { status: 404, content_type: "text/plain", body: "no such path".into() },
            };
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
