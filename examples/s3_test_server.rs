//! A standalone S3 server for `scripts/smoke.sh` on machines without MinIO:
//! s3s + s3s-fs (the integration tests' server) on 127.0.0.1, plus MinIO's v3
//! request-traffic metrics at `/minio/metrics/v3/api/requests`
//! (`minio_api_requests_traffic_sent_bytes` / `_received_bytes`, labelled
//! `server="<host:port>"`), served only to a bearer JWT signed as
//! `mc admin prometheus generate` signs it (HS512 with the secret key, `sub` =
//! the access key); anything else gets MinIO's 403. So the smoke run checks the
//! witness's JWT and its counter arithmetic here as it does against MinIO.
//!
//! Usage: `s3_test_server <root-dir> [port]` (port 0 or none: any free port).
//! Credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`. Prints
//! `endpoint http://127.0.0.1:<port>` once listening; serves until killed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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

fn metrics(t: &Traffic, server: &str, path: &str, ok: bool) -> Reply {
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
    } else {
        (404, "text/plain", "unknown metrics path\n".to_string())
    };
    hyper::Response::builder().status(status).header("content-type", ctype).body(s3s::Body::from(body)).expect("a valid response")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(root) = args.next() else {
        eprintln!("usage: s3_test_server <root-dir> [port]");
        std::process::exit(2);
    };
    let port: u16 = args.next().map_or(0, |p| p.parse().unwrap_or_else(|_| panic!("port '{p}' is not a number")));
    let access = std::env::var("AWS_ACCESS_KEY_ID").unwrap_or_else(|_| "s3rdma-smoke".into());
    let secret = std::env::var("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|_| "s3rdma-smoke-secret".into());
    std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("{root}: {e}"));
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async move {
        let mut b = S3ServiceBuilder::new(s3s_fs::FileSystem::new(&root).expect("s3s-fs root"));
        b.set_auth(SimpleAuth::from_single(access.clone(), secret.clone()));
        let service = b.build();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.unwrap_or_else(|e| panic!("bind 127.0.0.1:{port}: {e}"));
        let addr = listener.local_addr().expect("addr");
        println!("endpoint http://{addr}");
        let traffic = Arc::new(Traffic::default());
        let (server, creds) = (Arc::new(addr.to_string()), Arc::new((access, secret)));
        let http = ConnBuilder::new(TokioExecutor::new());
        loop {
            let Ok((socket, _)) = listener.accept().await else { continue };
            let (svc, t, server, creds) = (service.clone(), traffic.clone(), server.clone(), creds.clone());
            let handler = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (svc, t, server, creds) = (svc.clone(), t.clone(), server.clone(), creds.clone());
                async move {
                    let path = req.uri().path().to_string();
                    if path.starts_with("/minio/metrics/") {
                        let auth = req.headers().get("authorization").and_then(|v| v.to_str().ok());
                        return Ok::<Reply, s3s::HttpError>(metrics(&t, &server, &path, authorized(auth, &creds.0, &creds.1)));
                    }
                    let h = req.headers();
                    let received = header_u64(h, "x-amz-decoded-content-length").or_else(|| header_u64(h, "content-length")).unwrap_or(0);
                    // A HEAD answer names the object's length but carries no body.
                    let head = req.method() == hyper::Method::HEAD;
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
