//! AIStor-like answers to S3 requests that carry `x-amz-rdma-token`: the
//! server side of S3 over RDMA, with the one-sided transfer done by
//! `process_vm_writev` (GET: RDMA WRITE into the client's registered memory)
//! and `process_vm_readv` (PUT, UploadPart: RDMA READ out of it), which also
//! serve a client in this process (the kernel checks the address, so a token
//! naming unmapped memory fails the transfer instead of crashing the server). The client is a real libminiocpp
//! whose libs3rdma is the stand-in (`tests/standin-s3rdma`): its tokens name
//! the process (qp field), the address, the size and the rail.
//!
//! Protocol facts this follows, each from minio-cpp `include/miniocpp/rdma.h`
//! unless said: the reply carries `x-amz-rdma-reply` (200 or 206 for a GET,
//! 200 or 204 for a PUT; 501 declines, and the client falls back to HTTP)
//! and `x-amz-rdma-bytes-transferred` (a GET's bytes written; a PUT's bytes read, which this server states too), which the client trusts
//! as the count; the HTTP body is empty (`Content-Length: 0`); a PUT's
//! success is status 200 with an ETag; the object offset of a ranged GET
//! travels in `Range` and the reply is 206. The request is signed SigV4 with
//! the token among its signed headers, so authentication runs first (s3s
//! checks the signature before a custom route is asked).
//!
//! Choices of this server where AIStor's own are not public: a one-sided
//! transfer that fails (a failed rail, a control-plane connection from
//! another address than the token's rail, a copy the kernel refuses) is
//! answered `500` with `x-amz-rdma-reply: 500`, which minio-cpp reads as a
//! failed attempt (-1: it reports the rail and retries with a fresh token);
//! an absent reply header would read as a decline in minio-cpp (501-like)
//! but as a failure in minio-rs (`parse_rdma_reply` returns 0).
//!
//! Counters, at `/minio/metrics/v3/api/rdma` in the exposition format the
//! witness reads, labelled `server` and `api` (GetObject, PutObject,
//! UploadPart): `minio_api_rdma_read_bytes_total` / `_read_ops_total` (GET:
//! server to client), `minio_api_rdma_write_bytes_total` /
//! `_write_ops_total` (PUT, UploadPart), and `minio_api_rdma_errors_total`
//! by `reason`.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::time::Duration;

use bytes::Bytes;
use hyper::http::Extensions;
use hyper::{HeaderMap, Method, StatusCode, Uri};
use s3s::dto::{PutObjectInput, Range, StreamingBlob, UploadPartInput};
use s3s::route::S3Route;
use s3s::{Body, S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};
use standin_s3rdma::token::Token;

/// The TCP peer of a request's connection, put in the request's extensions
/// by the server loop: the control-plane address the rail check compares.
#[derive(Clone, Copy, Debug)]
pub struct PeerAddr(pub SocketAddr);

/// Fault modes, each switched on per run (`--fault`, repeatable).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// Answer every RDMA request `x-amz-rdma-reply: 501`.
    pub decline: bool,
    /// Fail every transfer whose token names this rail, once `after` RDMA
    /// transfers have been served (0: from the first).
    pub fail_rail: Option<(Ipv4Addr, u64)>,
    /// Move this many bytes fewer than asked (at least one byte moves), once
    /// the second count of transfers has been served.
    pub short: Option<(u64, u64)>,
    /// Hold every RDMA request this long before answering, once the second
    /// count of transfers has been served.
    pub stall: Option<(Duration, u64)>,
    /// Keys containing any of these are declined (501): HTTP for them, RDMA for the rest.
    pub http_for: Vec<String>,
    /// Answer success without `x-amz-rdma-bytes-transferred` (as libminiocpp
    /// assumes the whole size arrived then, the count is the client's to miss).
    pub no_count: bool,
    /// Count bytes in `x-amz-rdma-bytes` instead: a dialect a client may not know.
    pub dialect: bool,
    /// Decline PUTs as HTTP 200 with `x-amz-rdma-reply: 501` (the aws-c-s3
    /// fork's spec allows it): a decline, never a success.
    pub put_200_501: bool,
}

impl Faults {
    /// Add one `--fault` value: `decline`, `fail-rail=IP[@N]`, `short=BYTES[@N]`,
    /// `stall=SECONDS[@N]` or `http-for=SUBSTRING`; `@N`: from the transfer
    /// after the first N served.
    ///
    /// Errors: an unknown mode or a value that does not parse, naming both.
    pub fn add(&mut self, spec: &str) -> Result<(), String> {
        let (name, value) = spec.split_once('=').unwrap_or((spec, ""));
        let bad = |what: &str| format!("--fault {spec}: {what}");
        match name {
            "decline" => self.decline = true,
            "fail-rail" => {
                let (ip, after) = value.split_once('@').unwrap_or((value, "0"));
                let ip = ip.parse().map_err(|_| bad("fail-rail=IP[@N] wants an IPv4 rail address such as 127.0.0.3"))?;
                let after = after.parse().map_err(|_| bad("the @N after the rail is a count of transfers served first"))?;
                self.fail_rail = Some((ip, after));
            }
            "short" => {
                let (bytes, after) = value.split_once('@').unwrap_or((value, "0"));
                let bytes: u64 = bytes.parse().map_err(|_| bad("short=BYTES[@N] wants a byte count"))?;
                if bytes == 0 {
                    return Err(bad("short=0 moves every byte: give at least 1"));
                }
                self.short = Some((bytes, after.parse().map_err(|_| bad("the @N after the bytes is a count of transfers served first"))?));
            }
            "stall" => {
                let (secs, after) = value.split_once('@').unwrap_or((value, "0"));
                let secs: f64 = secs.parse().map_err(|_| bad("stall=SECONDS[@N] wants a number of seconds"))?;
                let d = Duration::try_from_secs_f64(secs).map_err(|_| bad("stall=SECONDS[@N] wants a number of seconds from 0 up"))?;
                self.stall = Some((d, after.parse().map_err(|_| bad("the @N after the seconds is a count of transfers served first"))?));
            }
            "http-for" if !value.is_empty() => self.http_for.push(value.to_string()),
            "no-count" => self.no_count = true,
            "dialect" => self.dialect = true,
            "put-200-501" => self.put_200_501 = true,
            _ => {
                return Err(bad(
                    "known modes: decline, fail-rail=IP[@N], short=BYTES[@N], stall=SECONDS[@N], http-for=SUBSTRING, no-count, dialect, put-200-501",
                ));
            }
        }
        Ok(())
    }
}

/// What the server counts of its RDMA work.
#[derive(Default)]
pub struct RdmaCounters {
    get_bytes: AtomicU64,
    get_ops: AtomicU64,
    put_bytes: AtomicU64,
    put_ops: AtomicU64,
    part_bytes: AtomicU64,
    part_ops: AtomicU64,
    errors: [AtomicU64; ERRORS.len()],
}

/// Reasons in `minio_api_rdma_errors_total{reason}`, in this order.
const ERRORS: [&str; 6] = ["declined", "rail_failed", "rail_mismatch", "short", "stalled", "copy_failed"];

#[derive(Clone, Copy)]
enum Err {
    Declined = 0,
    RailFailed = 1,
    RailMismatch = 2,
    Short = 3,
    Stalled = 4,
    CopyFailed = 5,
}

impl RdmaCounters {
    fn error(&self, e: Err) {
        self.errors[e as usize].fetch_add(1, SeqCst);
    }

    /// The counters in Prometheus text format, every series labelled `server`.
    pub fn exposition(&self, server: &str) -> String {
        let mut s = String::new();
        let series = [
            ("minio_api_rdma_read_bytes_total", "GetObject", &self.get_bytes),
            ("minio_api_rdma_read_ops_total", "GetObject", &self.get_ops),
            ("minio_api_rdma_write_bytes_total", "PutObject", &self.put_bytes),
            ("minio_api_rdma_write_bytes_total", "UploadPart", &self.part_bytes),
            ("minio_api_rdma_write_ops_total", "PutObject", &self.put_ops),
            ("minio_api_rdma_write_ops_total", "UploadPart", &self.part_ops),
        ];
        let mut last = "";
        for (name, api, v) in series {
            if name != last {
                s += &format!("# TYPE {name} counter\n");
                last = name;
            }
            s += &format!("{name}{{server=\"{server}\",api=\"{api}\"}} {}\n", v.load(SeqCst));
        }
        s += "# TYPE minio_api_rdma_errors_total counter\n";
        for (reason, v) in ERRORS.iter().zip(&self.errors) {
            s += &format!("minio_api_rdma_errors_total{{server=\"{server}\",reason=\"{reason}\"}} {}\n", v.load(SeqCst));
        }
        s
    }
}

/// The s3s custom route that answers every authenticated request carrying a token.
pub struct RdmaRoute {
    fs: s3s_fs::FileSystem,
    root: PathBuf,
    faults: Faults,
    counters: Arc<RdmaCounters>,
    served: AtomicU64,
}

impl RdmaRoute {
    /// A route over the s3s-fs store at `root` (the same directory the S3 service serves).
    pub fn new(root: &Path, faults: Faults, counters: Arc<RdmaCounters>) -> std::io::Result<Self> {
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        Ok(RdmaRoute { fs, root: root.to_path_buf(), faults, counters, served: AtomicU64::new(0) })
    }
}

/// An RDMA reply: `status`, `x-amz-rdma-reply: <reply>`, an empty body.
fn reply(status: u16, reply: u16, extra: &[(&'static str, String)]) -> S3Response<Body> {
    let mut r = S3Response::new(Body::empty());
    r.status = Some(StatusCode::from_u16(status).expect("a valid status"));
    r.headers.insert("x-amz-rdma-reply", reply.into());
    r.headers.insert("content-length", 0.into());
    for (k, v) in extra {
        r.headers.insert(*k, v.parse().expect("header value"));
    }
    r
}

/// Bucket and key of a path-style URI (`/bucket/key...`), percent-decoded.
fn bucket_key(uri: &Uri) -> S3Result<(String, String)> {
    let path = percent_encoding::percent_decode_str(uri.path()).decode_utf8_lossy().into_owned();
    let mut it = path.trim_start_matches('/').splitn(2, '/');
    match (it.next(), it.next()) {
        (Some(b), Some(k)) if !b.is_empty() && !k.is_empty() => Ok((b.to_string(), k.to_string())),
        _ => Err(S3Error::with_message(S3ErrorCode::NotImplemented, "x-amz-rdma-token on a request that names no object")),
    }
}

fn query(uri: &Uri, name: &str) -> Option<String> {
    uri.query()?.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| percent_encoding::percent_decode_str(v).decode_utf8_lossy().into_owned())
    })
}

/// Move `data` into the client's memory at `addr` (RDMA WRITE). The
/// kernel copies and checks the address against the target's mappings, in
/// this process too (a client in the server's own process): a token naming
/// memory that is not mapped is an error (EFAULT), never a crash.
fn write_remote(pid: u32, addr: u64, data: &[u8]) -> std::io::Result<()> {
    let mut done = 0usize;
    while done < data.len() {
        let local = libc::iovec { iov_base: data[done..].as_ptr() as *mut libc::c_void, iov_len: data.len() - done };
        let remote = libc::iovec { iov_base: (addr + done as u64) as *mut libc::c_void, iov_len: data.len() - done };
        // SAFETY: one valid local iovec; the kernel checks the remote one against the target's mappings.
        let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        done += n as usize;
    }
    Ok(())
}

/// Copy `len` bytes of the client's memory at `addr` (RDMA READ), kernel-checked as in [`write_remote`].
fn read_remote(pid: u32, addr: u64, len: usize) -> std::io::Result<Vec<u8>> {
    let mut out = vec![0u8; len];
    let mut done = 0usize;
    while done < len {
        let local = libc::iovec { iov_base: out[done..].as_mut_ptr().cast(), iov_len: len - done };
        let remote = libc::iovec { iov_base: (addr + done as u64) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: as in write_remote.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
        if n <= 0 {
            return Err(std::io::Error::last_os_error());
        }
        done += n as usize;
    }
    Ok(out)
}

/// Chunk of one process_vm call: large enough that syscalls do not dominate.
const CHUNK: u64 = 8 << 20;

impl RdmaRoute {
    /// The object's file under the store's root; a key that climbs out is refused.
    fn object_path(&self, bucket: &str, key: &str) -> S3Result<PathBuf> {
        let rel = Path::new(bucket).join(key);
        if rel.components().any(|c| !matches!(c, Component::Normal(_))) {
            return Err(S3Error::with_message(S3ErrorCode::InvalidArgument, "key is not a plain path"));
        }
        Ok(self.root.join(rel))
    }

    /// Bytes fewer to move in transfer number `served` (0: all of them).
    fn shortfall(&self, served: u64) -> u64 {
        match self.faults.short {
            Some((bytes, after)) if served >= after => {
                self.counters.error(Err::Short);
                bytes
            }
            _ => 0,
        }
    }

    /// GET: write the object's bytes (or the Range's) into the token's memory.
    async fn get(&self, t: Token, bucket: &str, key: &str, range: Option<&str>, short: u64) -> S3Result<S3Response<Body>> {
        let path = self.object_path(bucket, key)?;
        let len = std::fs::metadata(&path).map_err(|_| S3Error::new(S3ErrorCode::NoSuchKey))?.len();
        let span = match range {
            Some(r) => {
                let r = Range::parse(r).map_err(|_| S3Error::new(S3ErrorCode::InvalidRange))?;
                r.check(len).map_err(|_| S3Error::new(S3ErrorCode::InvalidRange))?
            }
            None => 0..len,
        };
        let mut n = (span.end - span.start).min(u64::from(t.size));
        if short > 0 {
            n = n.saturating_sub(short).max(1);
        }
        let moved = tokio::task::spawn_blocking(move || -> std::io::Result<u64> {
            use std::os::unix::fs::FileExt;
            let f = std::fs::File::open(&path)?;
            let mut buf = vec![0u8; CHUNK.min(n) as usize];
            let mut done = 0u64;
            while done < n {
                let m = CHUNK.min(n - done) as usize;
                f.read_exact_at(&mut buf[..m], span.start + done)?;
                write_remote(t.qp, t.addr + done, &buf[..m])?;
                done += m as u64;
            }
            Ok(done)
        })
        .await
        .expect("copy task");
        let Ok(moved) = moved else {
            self.counters.error(Err::CopyFailed);
            return Ok(reply(500, 500, &[]));
        };
        self.counters.get_bytes.fetch_add(moved, SeqCst);
        self.counters.get_ops.fetch_add(1, SeqCst);
        let code = if range.is_some() { 206 } else { 200 };
        Ok(reply(code, code, &self.count(moved)))
    }

    /// PUT or UploadPart: read the token's memory and store it as the object (or part).
    async fn put(&self, req: S3Request<Body>, t: Token, bucket: String, key: String, short: u64) -> S3Result<S3Response<Body>> {
        let mut n = u64::from(t.size);
        if short > 0 {
            n = n.saturating_sub(short).max(1);
        }
        let bytes = match tokio::task::spawn_blocking(move || read_remote(t.qp, t.addr, n as usize)).await.expect("copy task") {
            Ok(b) => Bytes::from(b),
            Err(_) => {
                self.counters.error(Err::CopyFailed);
                return Ok(reply(500, 500, &[]));
            }
        };
        let body = || Some(StreamingBlob::wrap(futures::stream::iter([Ok::<Bytes, std::io::Error>(bytes.clone())])));
        let part = query(&req.uri, "partNumber").zip(query(&req.uri, "uploadId"));
        let etag = if let Some((number, upload_id)) = part {
            let number: i32 = number.parse().map_err(|_| S3Error::new(S3ErrorCode::InvalidArgument))?;
            let input = UploadPartInput::builder()
                .bucket(bucket)
                .key(key)
                .upload_id(upload_id)
                .part_number(number)
                .content_length(Some(n as i64))
                .body(body())
                .build()
                .map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, format!("{e:?}")))?;
            let out = self.fs.upload_part(req.map_input(|_| input)).await?;
            self.counters.part_bytes.fetch_add(n, SeqCst);
            self.counters.part_ops.fetch_add(1, SeqCst);
            out.output.e_tag
        } else {
            let input = PutObjectInput::builder()
                .bucket(bucket)
                .key(key)
                .content_length(Some(n as i64))
                .body(body())
                .build()
                .map_err(|e| S3Error::with_message(S3ErrorCode::InternalError, format!("{e:?}")))?;
            let out = self.fs.put_object(req.map_input(|_| input)).await?;
            self.counters.put_bytes.fetch_add(n, SeqCst);
            self.counters.put_ops.fetch_add(1, SeqCst);
            out.output.e_tag
        };
        let etag = etag.map(|e| format!("\"{}\"", e.value())).unwrap_or_default();
        let mut extra = self.count(n);
        extra.push(("etag", etag));
        Ok(reply(200, 200, &extra))
    }

    /// The byte-count header of a success reply, as the fault modes have it.
    fn count(&self, moved: u64) -> Vec<(&'static str, String)> {
        match (self.faults.no_count, self.faults.dialect) {
            (true, _) => Vec::new(),
            (_, true) => vec![("x-amz-rdma-bytes", moved.to_string())],
            _ => vec![("x-amz-rdma-bytes-transferred", moved.to_string())],
        }
    }
}

#[async_trait::async_trait]
impl S3Route for RdmaRoute {
    fn is_match(&self, _method: &Method, _uri: &Uri, headers: &HeaderMap, _extensions: &mut Extensions) -> bool {
        headers.contains_key("x-amz-rdma-token")
    }

    async fn call(&self, req: S3Request<Body>) -> S3Result<S3Response<Body>> {
        let value = req.headers.get("x-amz-rdma-token").and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let t = Token::decode(&value).map_err(|e| S3Error::with_message(S3ErrorCode::InvalidArgument, format!("x-amz-rdma-token: {e}")))?;
        let (bucket, key) = bucket_key(&req.uri)?;
        let f = &self.faults;
        if f.decline || f.http_for.iter().any(|s| key.contains(s.as_str())) {
            self.counters.error(Err::Declined);
            return Ok(reply(501, 501, &[]));
        }
        if f.put_200_501 && req.method == Method::PUT {
            self.counters.error(Err::Declined);
            return Ok(reply(200, 501, &[]));
        }
        // The control plane must come from the token's rail (minio-cpp binds
        // its socket there), or the server's transfer has no path back.
        let peer = req.extensions.get::<PeerAddr>().map(|p| p.0.ip());
        if t.rail.is_some_and(|r| peer != Some(r.into())) {
            self.counters.error(Err::RailMismatch);
            return Ok(reply(500, 500, &[]));
        }
        let served = self.served.fetch_add(1, SeqCst);
        if let Some((d, after)) = f.stall
            && served >= after
        {
            self.counters.error(Err::Stalled);
            tokio::time::sleep(d).await;
        }
        if let Some((rail, after)) = f.fail_rail
            && t.rail == Some(rail)
            && served >= after
        {
            self.counters.error(Err::RailFailed);
            return Ok(reply(500, 500, &[]));
        }
        match req.method {
            Method::GET => {
                let range = req.headers.get("range").and_then(|v| v.to_str().ok()).map(str::to_string);
                self.get(t, &bucket, &key, range.as_deref(), self.shortfall(served)).await
            }
            Method::PUT => {
                let short = self.shortfall(served);
                self.put(req, t, bucket, key, short).await
            }
            _ => {
                self.counters.error(Err::Declined);
                Ok(reply(501, 501, &[]))
            }
        }
    }
}
