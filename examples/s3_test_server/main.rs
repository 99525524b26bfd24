//! A standalone S3 server for `scripts/smoke.sh` on machines without MinIO:
//! s3s + s3s-fs (the integration tests' server; its listing scoped to the
//! prefix's directory, [`listing`]) on 127.0.0.1, plus MinIO's v3
//! request-traffic metrics at `/minio/metrics/v3/api/requests`
//! (`minio_api_requests_traffic_sent_bytes` / `_received_bytes`, labelled
//! `server="<host:port>"`), served only to a bearer JWT signed as
//! `mc admin prometheus generate` signs it (HS512 with the secret key, `sub` =
//! the access key); anything else gets MinIO's 403. So the smoke run checks the
//! witness's JWT and its counter arithmetic here as it does against MinIO.
//!
//! Usage: `s3_test_server <root-dir> [port] [--requests-max N] [--rdma [--fault MODE]...]`
//! (port 0 or none: any free port). Credentials from `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY`. Prints `endpoint http://127.0.0.1:<port>` once
//! listening; serves until killed.
//!
//! `--rdma` answers requests carrying `x-amz-rdma-token` as an AIStor RDMA
//! server does ([`aistor`]) and counts them at `/minio/metrics/v3/api/rdma`;
//! a client bound to any loopback rail address (127.0.0.x, as the stand-in
//! libs3rdma names them) reaches the 127.0.0.1 listener. `--fault` switches
//! on one fault mode for the run (see [`aistor::Faults::add`]).

mod aistor;
mod listing;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;

use hyper::body::Body as _;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;

/// Response and request body bytes of every S3 request, as MinIO counts them.
#[derive(Default)]
struct Traffic {
    sent: AtomicU64,
    received: AtomicU64,
}

fn header_u64(h: &hyper::HeaderMap, name: &str) -> Option<u64> {
    h.get(name)?.to_str().ok()?.parse().ok()
}

/// Whether `auth` is `Bearer <jwt>` with a valid HS512 signature by `secret` and `sub` = `access`.
fn authorized(auth: Option<&str>, access: &str, secret: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Claims {
        sub: String,
    }
    let Some(token) = auth.and_then(|a| a.strip_prefix("Bearer ")) else { return false };
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS512);
    v.set_required_spec_claims(&["exp", "sub"]);
    jsonwebtoken::decode::<Claims>(token, &jsonwebtoken::DecodingKey::from_secret(secret.as_bytes()), &v).is_ok_and(|t| t.claims.sub == access)
}

type Reply = hyper::Response<s3s::Body>;

/// The command line.
#[derive(Parser)]
#[command(about = "s3s-fs on loopback with MinIO's v3 metrics, and an AIStor-like RDMA mode")]
struct Args {
    /// Directory the objects live in (one subdirectory per bucket); created when missing.
    root: PathBuf,
    /// TCP port; 0: any free port.
    #[arg(default_value_t = 0)]
    port: u16,
    /// Answer `x-amz-rdma-token` requests as AIStor does and count them.
    #[arg(long)]
    rdma: bool,
    /// A fault mode for this run (with --rdma): decline, fail-rail=IP[@N], short=BYTES[@N], stall=SECONDS[@N], http-for=SUBSTRING, no-count, dialect, put-200-501.
    #[arg(long, requires = "rdma")]
    fault: Vec<String>,
    /// S3 requests handled at once; the rest wait their turn, as MinIO's
    /// `api requests_max` makes them (https://min.io/docs/minio/linux/reference/minio-server/settings/core.html),
    /// but with no deadline (MinIO's `requests_deadline` answers 503): one
    /// client that stalls mid-request holds its turn until its connection
    /// closes. A turn ends when the answer's headers are ready, so a GET's
    /// body streams outside it. Keeps thousands of simultaneous requests (a
    /// barrier of 8,192 simulated ranks) within the process's open-file
    /// limit: each request s3s-fs serves holds files open while it runs.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..))]
    requests_max: u32,
}

fn metrics(t: &Traffic, rdma: Option<&aistor::RdmaCounters>, server: &str, path: &str, ok: bool) -> Reply {
    let (status, ctype, body) = if !ok {
        (403, "application/xml", "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access Denied.</Message></Error>".to_string())
    } else if path == "/minio/metrics/v3/api/requests" {
        let (s, r) = (t.sent.load(Ordering::SeqCst), t.received.load(Ordering::SeqCst));
        let body = format!(
            "# HELP minio_api_requests_traffic_sent_bytes Total number of bytes sent\n\
             # TYPE minio_api_requests_traffic_sent_bytes counter\n\
             minio_api_requests_traffic_sent_bytes{{server=\"{server}\",type=\"s3\"}} {s}\n\
             # HELP minio_api_requests_traffic_received_bytes Total number of bytes received\n\
             # TYPE minio_api_requests_traffic_received_bytes counter\n\
             minio_api_requests_traffic_received_bytes{{server=\"{server}\",type=\"s3\"}} {r}\n"
        );
        (200, "text/plain; version=0.0.4; charset=utf-8", body)
    } else if let Some(c) = rdma.filter(|_| path == "/minio/metrics/v3/api/rdma") {
        (200, "text/plain; version=0.0.4; charset=utf-8", c.exposition(server))
    } else {
        (404, "text/plain", "unknown metrics path\n".to_string())
    };
    hyper::Response::builder().status(status).header("content-type", ctype).body(s3s::Body::from(body)).expect("a valid response")
}

fn main() {
    let args = Args::parse();
    // s3s and s3s-fs say why a request failed (an answer of 500 carries no body to a HEAD) at RUST_LOG=s3s=error and up.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("off"));
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(false).with_writer(std::io::stderr).init();
    let mut faults = aistor::Faults::default();
    for f in &args.fault {
        if let Err(e) = faults.add(f) {
            eprintln!("s3_test_server: {e}");
            std::process::exit(2);
        }
    }
    let access = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "s3rdma-smoke".into());
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "s3rdma-smoke-secret".into());
    let root = args.root;
    if let Err(e) = std::fs::create_dir_all(&root) {
        eprintln!("s3_test_server: cannot create {}: {e}", root.display());
        std::process::exit(1);
    }
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let mut b = S3ServiceBuilder::new(listing::Store::new(&root).expect("s3s-fs root"));
        b.set_auth(SimpleAuth::from_single(access.clone(), secret.clone()));
        let rdma = args.rdma.then(|| Arc::new(aistor::RdmaCounters::default()));
        if let Some(c) = &rdma {
            b.set_route(aistor::RdmaRoute::new(&root, faults, c.clone()).expect("s3s-fs root"));
        }
        let service = b.build();
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("s3_test_server: cannot listen on 127.0.0.1:{}: {e}: pick another port (0: any free one)", args.port);
                std::process::exit(1);
            }
        };
        let addr = listener.local_addr().expect("addr");
        println!("endpoint http://{addr}");
        let traffic = Arc::new(Traffic::default());
        let (server, creds) = (Arc::new(addr.to_string()), Arc::new((access, secret)));
        let admitted = Arc::new(tokio::sync::Semaphore::new(args.requests_max as usize));
        let http = ConnBuilder::new(TokioExecutor::new());
        loop {
            let Ok((socket, peer)) = listener.accept().await else { continue };
            let (svc, t, rdma, server, creds, admitted) = (service.clone(), traffic.clone(), rdma.clone(), server.clone(), creds.clone(), admitted.clone());
            let handler = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                let (svc, t, rdma, server, creds, admitted) = (svc.clone(), t.clone(), rdma.clone(), server.clone(), creds.clone(), admitted.clone());
                async move {
                    let path = req.uri().path().to_string();
                    if path.starts_with("/minio/metrics/") {
                        let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok());
                        return Ok::<Reply, s3s::HttpError>(metrics(&t, rdma.as_deref(), &server, &path, authorized(auth, &creds.0, &creds.1)));
                    }
                    req.extensions_mut().insert(aistor::PeerAddr(peer));
                    let h = req.headers();
                    let received = header_u64(h, "x-amz-decoded-content-length").or_else(|| header_u64(h, "content-length")).unwrap_or(0);
                    // A HEAD answer names the object's length but carries no body.
                    let head = req.method() == hyper::Method::HEAD;
                    let _turn = admitted.acquire().await.expect("never closed");
                    let resp = hyper::service::Service::call(&svc, req).await?;
                    let sent = if head { 0 } else { header_u64(resp.headers(), "content-length").or_else(|| resp.body().size_hint().exact()).unwrap_or(0) };
                    t.sent.fetch_add(sent, Ordering::SeqCst);
                    t.received.fetch_add(received, Ordering::SeqCst);
                    Ok(resp)
                }
            });
            let conn = http.serve_connection(TokioIo::new(socket), handler).into_owned();
            tokio::spawn(async move {
                let _ = conn.await;
            });
        }
    });
}
