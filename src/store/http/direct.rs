//! The `direct` GET path of the http backend: a SigV4-signed ranged GET over
//! plain HTTP/1.1 whose response body is read from the socket straight into
//! the caller's slice.
//!
//! Why our own reader and not a client library: every Rust HTTP client
//! (hyper, and reqwest and the AWS SDK on top of it) reads the socket into its
//! own buffer and hands the body out as chunks, so the body costs two copies:
//! the kernel's, socket to that buffer, and ours, chunk to the destination.
//! Profiled on the 2-core VM (`perf record` of `fetch --backend http`, 64 x
//! 16 MiB from nginx, docs/http-peers.md): the kernel copy was 24 % of the
//! process's CPU samples and the chunk copy (`copy_from_slice` in
//! `HttpStore::stream_into`) 25 %; the SDK's own request handling < 1 %. A
//! reqwest + aws-sigv4 path would keep the chunk copy. Reading into the final
//! buffer leaves only the kernel's copy: the floor the HTTP-peers table
//! measures. Scope is deliberately small: GET only, `http://` only (TLS would
//! put a decrypting copy back), `Content-Length` bodies only (S3 servers send
//! ranged GETs that way; a chunked body is refused with the way out), one
//! request per connection at a time, idle connections pooled. Signing is the
//! `aws-sigv4` crate's, header parsing `httparse`'s (both already under the SDK).

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::flag::{HTTP_GET, READ_TIMEOUT};
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use aws_sigv4::http_request::{PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings, UriPathNormalizationMode, sign};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Characters a key keeps unescaped in the request path: RFC 3986 unreserved
/// plus '/', as S3 expects (AWS SigV4 docs, "Create a canonical request").
const KEY_ESCAPE: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~').remove(b'/');

/// Largest response head accepted (status line + headers), bytes.
const MAX_HEAD: usize = 64 << 10;
/// Largest error body read for its S3 `<Code>`, bytes.
const MAX_ERROR_BODY: usize = 1 << 20;
/// Idle connections kept for reuse.
const MAX_IDLE: usize = 512;
use crate::store::credentials::{note_lifetime, refresh_at};

/// The credentials in use and when they were obtained (for [`refresh_at`]).
#[derive(Debug)]
struct Held {
    credentials: Credentials,
    obtained: SystemTime,
}

/// What went wrong, in terms the http backend maps to its
/// [`StoreError`](crate::error::StoreError)s, which keep it as their source.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DirectError {
    /// The server answered with a non-2xx status; `code` and `message` from the S3 XML error body when it had one.
    #[error("HTTP {status} {code}: {message}")]
    Status {
        /// HTTP status.
        status: u16,
        /// The S3 error code (e.g. NoSuchKey).
        code: String,
        /// The S3 error message.
        message: String,
        /// The server's `Retry-After` (delta-seconds or an HTTP date, RFC 9110 §10.2.3), as a wait from now.
        retry_after: Option<Duration>,
        /// The server's clock (`Date`), when the answer said.
        server_date: Option<SystemTime>,
    },
    /// Connect, read or write failed, or timed out.
    #[error("{0}")]
    Io(String),
    /// The server accepted the request but sent no complete response head within `--read-timeout`.
    #[error("{0}")]
    Timeout(String),
    /// The connection was closed or reset before any of the response arrived
    /// (a pooled connection the server had closed meanwhile, on reuse).
    #[error("{0}")]
    Closed(String),
    /// The response broke HTTP or S3 rules (no Content-Length, chunked body, oversized head, short body ...).
    #[error("{0}")]
    Protocol(String),
    /// Credentials that expired could not be refreshed from their source.
    #[error("{0}")]
    Credentials(String),
}

/// A response whose head has been read; its body is still on the socket.
#[derive(Debug)]
pub struct Response {
    conn: TcpStream,
    /// HTTP status (2xx here: others become [`DirectError::Status`]).
    pub status: u16,
    /// Body length in bytes (`Content-Length`).
    pub content_length: u64,
    /// The `Content-Range` header as sent.
    pub content_range: Option<String>,
    /// The `ETag` header as sent (the object version this part came from).
    pub etag: Option<String>,
    /// Body bytes that arrived with the head (at most a few KiB).
    early: Vec<u8>,
    keep_alive: bool,
    read_timeout: Duration,
}

/// Signed ranged GETs against one plain-HTTP endpoint, with a pool of idle connections.
pub struct DirectGet {
    /// `host:port` to connect to.
    addr: String,
    /// `http://host[:port]`, as signed.
    base: String,
    /// `Host` header value (the port omitted when it is 80, as the signer does).
    host_header: String,
    /// The credentials' source, asked again shortly before they expire.
    provider: SharedCredentialsProvider,
    /// The credentials in use (refreshed under this lock, one refresh at a time).
    credentials: tokio::sync::Mutex<Held>,
    region: String,
    /// How far the server's clock is ahead of this host's, milliseconds, as
    /// learnt from a `RequestTimeTooSkewed` answer's `Date`; requests are
    /// signed at local time plus this (what the AWS SDKs do).
    skew_ms: AtomicI64,
    pool: Mutex<Vec<TcpStream>>,
    connect_timeout: Duration,
    read_timeout: Duration,
    attempts: u32,
    /// Retries made, by cause (the store's `get_retries_*` counters).
    pub retries: Retries,
}

/// Longest `Retry-After` this client honours: a server asking for more is an
/// error naming the wait, never a silent minutes-long stall.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Retried attempts of the direct GET, by cause. Retries are counted here,
/// never in a throughput figure: the bytes of a failed attempt are discarded.
#[derive(Debug, Default)]
pub struct Retries {
    /// 5xx answers (503 SlowDown, 500 InternalError).
    pub server: AtomicU64,
    /// Connections that could not be made.
    pub connect: AtomicU64,
    /// Response heads that did not arrive within `--read-timeout`.
    pub timeout: AtomicU64,
    /// Connections reset or broken mid-request.
    pub io: AtomicU64,
}

impl Retries {
    /// `(counter name, value)` pairs for the store's counters.
    pub fn counters(&self) -> [(&'static str, u64); 4] {
        [
            ("get_retries_5xx", self.server.load(Ordering::Relaxed)),
            ("get_retries_connect", self.connect.load(Ordering::Relaxed)),
            ("get_retries_timeout", self.timeout.load(Ordering::Relaxed)),
            ("get_retries_io", self.io.load(Ordering::Relaxed)),
        ]
    }
}

/// How far the clock that read `server` is ahead of this host's now,
/// milliseconds (negative: behind).
pub(super) fn ahead_of_here_ms(server: SystemTime) -> i64 {
    match server.duration_since(SystemTime::now()) {
        Ok(ahead) => ahead.as_millis() as i64,
        Err(behind) => -(behind.duration().as_millis() as i64),
    }
}

/// `Retry-After` as a wait from now: delta-seconds, or an HTTP date (a date
/// in the past is no wait); `None` when it is neither (RFC 9110 §10.2.3).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) {
        // Too many seconds for a u64 is still a wait, longer than any bound.
        return Some(v.parse::<u64>().map_or(Duration::MAX, Duration::from_secs));
    }
    // httpdate: the RFC 9110 date formats, a well-kept crate already under hyper.
    let when = httpdate::parse_http_date(v).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// The wait before retry number `tries` (1-based): 50 ms doubling per retry
/// up to 3.2 s, jittered to 50–100 %; at least `server_says` (Retry-After)
/// plus up to 10 % of it, when the server said.
async fn backoff(tries: u32, server_says: Option<Duration>) {
    use rand::Rng;
    // The thread-local generator is not Send: draw both numbers before the await.
    let (j_own, j_server) = {
        let mut rng = rand::rng();
        (rng.random_range(0.5..=1.0), rng.random_range(0.0..=0.1))
    };
    let own = Duration::from_millis(50 << (tries - 1).min(6)).mul_f64(j_own);
    let wait = match server_says {
        Some(w) => own.max(w + w.mul_f64(j_server)),
        None => own,
    };
    tokio::time::sleep(wait).await;
}

impl std::fmt::Debug for DirectGet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectGet").field("base", &self.base).field("region", &self.region).finish_non_exhaustive()
    }
}

impl DirectGet {
    /// For `endpoint` (`http://host[:port]`, already checked by the http
    /// backend), signing with `aws`'s region and credentials (asked again from
    /// its provider shortly before they expire). `attempts` counts tries per
    /// request for connect failures and 5xx answers (1 = no retry).
    /// Errors: the endpoint is not plain `http://`.
    pub fn new(endpoint: &str, aws: &super::aws::AwsSetup, connect_timeout: Duration, read_timeout: Duration, attempts: u32) -> Result<Self, String> {
        let url = reqwest::Url::parse(endpoint).map_err(|e| format!("endpoint '{endpoint}': {e}"))?;
        if url.scheme() != "http" {
            return Err(format!("{HTTP_GET} direct reads plain http:// only, not '{endpoint}': use {HTTP_GET} sdk for https"));
        }
        let host = url.host_str().ok_or_else(|| format!("endpoint '{endpoint}' has no host"))?.to_string();
        let port = url.port().unwrap_or(80);
        let host_header = if port == 80 { host.clone() } else { format!("{host}:{port}") };
        Ok(DirectGet {
            addr: format!("{host}:{port}"),
            base: format!("http://{host_header}"),
            host_header,
            provider: aws.provider.clone(),
            // When the set-up obtained them is not known here: counted from now.
            credentials: tokio::sync::Mutex::new(Held { credentials: aws.credentials.clone(), obtained: SystemTime::now() }),
            region: aws.region.clone(),
            skew_ms: AtomicI64::new(0),
            pool: Mutex::new(Vec::new()),
            connect_timeout,
            read_timeout,
            attempts: attempts.max(1),
            retries: Retries::default(),
        })
    }

    /// The credentials to sign with now: those in hand, or fresh ones from the
    /// provider once [`refresh_at`] has come (own code because the SDK's
    /// identity cache is reachable only inside its orchestrator). Credentials
    /// that live under a minute are said once ([`note_lifetime`]).
    async fn identity(&self) -> Result<Identity, DirectError> {
        let mut held = self.credentials.lock().await;
        let now = SystemTime::now();
        if held.credentials.expiry().is_some_and(|t| now >= refresh_at(held.obtained, t)) {
            let fresh = self
                .provider
                .provide_credentials()
                .await
                .map_err(|e| DirectError::Credentials(format!("the credentials expired and could not be refreshed: {}", crate::error::root_cause(&e))))?;
            let obtained = SystemTime::now();
            if fresh.expiry().is_some_and(|t| t <= obtained) {
                return Err(DirectError::Credentials("the credentials were refreshed but are still expired: refresh their source".into()));
            }
            note_lifetime(&fresh, obtained);
            *held = Held { credentials: fresh, obtained };
        }
        Ok(held.credentials.clone().into())
    }

    /// The time to sign with: this host's clock plus the skew learnt from the server.
    fn signing_time(&self) -> SystemTime {
        let skew = self.skew_ms.load(Ordering::Relaxed);
        let now = SystemTime::now();
        if skew >= 0 { now + Duration::from_millis(skew as u64) } else { now - Duration::from_millis(skew.unsigned_abs()) }
    }

    /// From an answer that refused the request's time, the server's clock
    /// offset, when it differs from the one in use by more than a minute
    /// (`None`: not a clock problem, or nothing new to correct).
    fn learn_skew(&self, e: &DirectError) -> Option<i64> {
        let DirectError::Status { status: 403, code, server_date: Some(date), .. } = e else { return None };
        if !matches!(code.as_str(), "RequestTimeTooSkewed" | "RequestExpired" | "SignatureDoesNotMatch" | "InvalidSignatureException") {
            return None;
        }
        let skew = ahead_of_here_ms(*date);
        (skew.abs_diff(self.skew_ms.load(Ordering::Relaxed)) > 60_000).then_some(skew)
    }

    /// The clock difference in use, milliseconds (positive: the server is ahead).
    pub fn skew_ms(&self) -> i64 {
        self.skew_ms.load(Ordering::Relaxed)
    }

    /// The request head of a signed `GET /<bucket>/<key>` for bytes `first..=last`.
    fn request(&self, identity: &Identity, bucket: &str, key: &str, first: u64, last: u64, if_match: Option<&str>) -> Result<Vec<u8>, DirectError> {
        let range = format!("bytes={first}-{last}");
        // If-Match unsigned: SigV4 lets a request carry headers it does not sign.
        let unsigned: Vec<(&str, &str)> = if_match.filter(|e| !e.contains(['\r', '\n'])).map(|e| ("If-Match", e)).into_iter().collect();
        self.head_for(identity, "GET", bucket, key, "", &[("Range", &range)], &unsigned)
    }

    /// The head of a request `method /<bucket>/<key>[?query]` signed by SigV4
    /// with an unsigned payload (`x-amz-content-sha256: UNSIGNED-PAYLOAD`),
    /// `signed` among its signed headers and `unsigned` after them, signed
    /// with the credentials and clock offset in use now: the control-plane
    /// request of S3 over RDMA, whose payload travels by RDMA
    /// (src/store/rdma/libs3rdma). `query` is `name=value&...`, already encoded.
    ///
    /// Errors: [`DirectError::Credentials`] when fresh credentials are
    /// needed and cannot be had; [`DirectError::Protocol`] when signing fails.
    pub async fn signed_head(&self, method: &str, bucket: &str, key: &str, query: &str, signed: &[(&str, &str)]) -> Result<Vec<u8>, DirectError> {
        let identity = self.identity().await?;
        self.head_for(&identity, method, bucket, key, query, signed, &[])
    }

    /// `host:port` of the endpoint, as a socket connects to it.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    #[allow(clippy::too_many_arguments)] // one request's parts, each its own kind
    fn head_for(
        &self,
        identity: &Identity,
        method: &str,
        bucket: &str,
        key: &str,
        query: &str,
        signed: &[(&str, &str)],
        unsigned: &[(&str, &str)],
    ) -> Result<Vec<u8>, DirectError> {
        let mut path = format!("/{}/{}", utf8_percent_encode(bucket, KEY_ESCAPE), utf8_percent_encode(key, KEY_ESCAPE));
        if !query.is_empty() {
            path.push('?');
            path.push_str(query);
        }
        let mut settings = SigningSettings::default();
        // S3's rules: the path is signed as sent (encoded once, not normalised),
        // and the unsigned-payload marker goes in x-amz-content-sha256.
        settings.percent_encoding_mode = PercentEncodingMode::Single;
        settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
        settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
        let params = v4::SigningParams::builder()
            .identity(identity)
            .region(&self.region)
            .name("s3")
            .time(self.signing_time())
            .settings(settings)
            .build()
            .map_err(|e| DirectError::Protocol(format!("signing parameters: {e}")))?
            .into();
        let uri = format!("{}{path}", self.base);
        let signable = SignableRequest::new(method, uri.as_str(), signed.iter().copied(), SignableBody::UnsignedPayload)
            .map_err(|e| DirectError::Protocol(format!("signing {method} {path}: {e}")))?;
        let (instructions, _) = sign(signable, &params).map_err(|e| DirectError::Protocol(format!("signing {method} {path}: {e}")))?.into_parts();
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\n", self.host_header);
        let agent = [("User-Agent", "s3rdma-direct")];
        for (name, value) in signed.iter().copied().chain(agent).chain(instructions.headers()).chain(unsigned.iter().copied()) {
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        Ok(head.into_bytes())
    }

    async fn connect(&self) -> Result<TcpStream, DirectError> {
        let conn = tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.addr))
            .await
            .map_err(|_| DirectError::Io(format!("connect to {} timed out after {:?}", self.addr, self.connect_timeout)))?
            .map_err(|e| DirectError::Io(format!("connect to {}: {e}", self.addr)))?;
        let _ = conn.set_nodelay(true);
        Ok(conn)
    }

    /// Send a ranged GET of bytes `first..=last` and read the response head.
    /// A pooled connection the server has closed meanwhile is replaced without
    /// counting as an attempt; connect and socket failures, head timeouts
    /// (`--read-timeout` for the whole head) and 5xx answers are retried up to
    /// `attempts` tries, each signed afresh (its own `x-amz-date`), after
    /// 50 ms, 100 ms, ... (each 50–100 % of that, jittered) or, when the
    /// server sends `Retry-After`, at least that long plus up to 10 % more.
    /// Retries are counted in [`DirectGet::retries`].
    ///
    /// Errors: [`DirectError::Status`] for any non-2xx answer (416 included:
    /// the caller decides what an empty object means), also when the server
    /// asks to wait beyond [`MAX_RETRY_AFTER`].
    /// `if_match`: the ETag the object must still have (`If-Match`, unsigned:
    /// SigV4 lets a request carry headers it does not sign).
    pub async fn send(&self, bucket: &str, key: &str, first: u64, last: u64, if_match: Option<&str>) -> Result<Response, DirectError> {
        let mut tries = 0;
        let mut skew_corrected = false;
        loop {
            // Signed per attempt: a retried request carries a fresh date and signature.
            let identity = self.identity().await?;
            let req = self.request(&identity, bucket, key, first, last, if_match)?;
            let pooled = self.take_idle();
            let reused = pooled.is_some();
            let conn = match pooled {
                Some(c) => c,
                None => match self.connect().await {
                    Ok(c) => c,
                    Err(e) => {
                        tries += 1;
                        if tries >= self.attempts {
                            return Err(e);
                        }
                        self.retries.connect.fetch_add(1, Ordering::Relaxed);
                        backoff(tries, None).await;
                        continue;
                    }
                },
            };
            match self.exchange(conn, &req).await {
                Err(DirectError::Closed(_)) if reused => continue, // the server closed it while idle
                // The server refused the request's time: sign again at its clock, once.
                Err(e) if !skew_corrected && let Some(skew) = self.learn_skew(&e) => {
                    skew_corrected = true;
                    self.skew_ms.store(skew, Ordering::Relaxed);
                    tracing::warn!(
                        "the server's clock is {:.0} s {} this host's: signing at its time (check NTP on both)",
                        (skew.abs() as f64) / 1e3,
                        if skew > 0 { "ahead of" } else { "behind" }
                    );
                }
                Err(e @ DirectError::Status { status: 500..=599, .. }) | Err(e @ (DirectError::Io(_) | DirectError::Timeout(_) | DirectError::Closed(_))) => {
                    tries += 1;
                    let asked = match &e {
                        DirectError::Status { retry_after, .. } => *retry_after,
                        _ => None,
                    };
                    if tries >= self.attempts || asked.is_some_and(|w| w > MAX_RETRY_AFTER) {
                        return Err(e);
                    }
                    let counter = match &e {
                        DirectError::Status { .. } => &self.retries.server,
                        DirectError::Timeout(_) => &self.retries.timeout,
                        _ => &self.retries.io,
                    };
                    counter.fetch_add(1, Ordering::Relaxed);
                    backoff(tries, asked).await;
                }
                other => return other,
            }
        }
    }

    /// An I/O error `what`-ing the server: [`DirectError::Closed`] when the
    /// server closed the connection (a retry may take a fresh one), else `Io`.
    fn closed_or(&self, what: &str, e: std::io::Error) -> DirectError {
        use std::io::ErrorKind::{BrokenPipe, ConnectionAborted, ConnectionReset};
        let msg = format!("{what} {}: {e}", self.addr);
        if matches!(e.kind(), BrokenPipe | ConnectionReset | ConnectionAborted) { DirectError::Closed(msg) } else { DirectError::Io(msg) }
    }

    /// Read more of a response head into `buf` by `deadline`; the bytes read
    /// (never 0). `got_any`: whether some of the head came already (a close
    /// is then a protocol error, not a closed idle connection).
    async fn read_head(&self, conn: &mut TcpStream, buf: &mut [u8], deadline: tokio::time::Instant, got_any: bool) -> Result<usize, DirectError> {
        let n = match tokio::time::timeout_at(deadline, conn.read(buf)).await {
            Err(_) => {
                return Err(DirectError::Timeout(format!("{} sent no complete response head within {:?} ({READ_TIMEOUT})", self.addr, self.read_timeout)));
            }
            Ok(Err(e)) if !got_any => return Err(self.closed_or("reading from", e)),
            Ok(Err(e)) => return Err(DirectError::Io(format!("reading from {}: {e}", self.addr))),
            Ok(Ok(n)) => n,
        };
        if n == 0 {
            let msg = format!("{} closed the connection before answering", self.addr);
            return Err(if got_any { DirectError::Protocol(msg) } else { DirectError::Closed(msg) });
        }
        Ok(n)
    }

    async fn exchange(&self, mut conn: TcpStream, req: &[u8]) -> Result<Response, DirectError> {
        conn.write_all(req).await.map_err(|e| self.closed_or("sending to", e))?;
        // --read-timeout bounds the whole head, however slowly it trickles in.
        let deadline = tokio::time::Instant::now() + self.read_timeout;
        let mut buf = vec![0u8; 16 << 10];
        let mut filled = 0;
        let mut got_any = false;
        // After an interim (1xx) head, the bytes already in hand are parsed before reading more.
        let mut reparse = false;
        loop {
            if !reparse {
                if filled == buf.len() {
                    if buf.len() >= MAX_HEAD {
                        return Err(DirectError::Protocol(format!("{}: response head over {} KiB", self.addr, MAX_HEAD >> 10)));
                    }
                    buf.resize(buf.len() * 2, 0);
                }
                let n = self.read_head(&mut conn, &mut buf[filled..], deadline, got_any).await?;
                got_any = true;
                filled += n;
            }
            reparse = false;
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut resp = httparse::Response::new(&mut headers);
            let head_len = match resp.parse(&buf[..filled]) {
                Ok(httparse::Status::Complete(n)) => n,
                Ok(httparse::Status::Partial) => continue,
                Err(e) => return Err(DirectError::Protocol(format!("{}: malformed response: {e}", self.addr))),
            };
            let status = resp.code.unwrap_or(0);
            if (100..200).contains(&status) && status != 101 {
                // An interim answer (100 Continue, 103 Early Hints): the real one follows.
                buf.copy_within(head_len..filled, 0);
                filled -= head_len;
                reparse = filled > 0;
                continue;
            }
            let header = |name: &str| resp.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).and_then(|h| std::str::from_utf8(h.value).ok());
            let chunked = header("transfer-encoding").is_some_and(|v| !v.trim().eq_ignore_ascii_case("identity"));
            let content_length = content_length(resp.headers, &self.addr)?;
            let content_range = header("content-range").map(str::to_string);
            let retry_after = header("retry-after").and_then(parse_retry_after);
            let keep_alive = resp.version == Some(1) && !header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
            let early = buf[head_len..filled].to_vec();
            let r = Response {
                conn,
                status,
                content_length: content_length.unwrap_or(0),
                content_range,
                etag: header("etag").map(str::to_string),
                early,
                keep_alive,
                read_timeout: self.read_timeout,
            };
            if !(200..300).contains(&status) {
                let server_date = header("date").and_then(|d| httpdate::parse_http_date(d.trim()).ok());
                // Only a short Content-Length body is read: S3's XML error.
                let readable = !chunked && content_length.is_some_and(|n| n <= MAX_ERROR_BODY as u64);
                return Err(r.status_error(readable, retry_after, server_date).await);
            }
            if chunked {
                return Err(DirectError::Protocol(format!(
                    "{} sent a chunked body; the direct GET path reads Content-Length bodies only: use {HTTP_GET} sdk",
                    self.addr
                )));
            }
            if content_length.is_none() {
                return Err(DirectError::Protocol(format!("{} answered without Content-Length: use {HTTP_GET} sdk", self.addr)));
            }
            return Ok(r);
        }
    }

    /// Give a connection whose response was read to the end back to the pool,
    /// unless the server said close or sent bytes past the body.
    pub fn recycle(&self, resp: Response) {
        if resp.keep_alive
            && quiet(&resp.conn)
            && let Ok(mut p) = self.pool.lock()
            && p.len() < MAX_IDLE
        {
            p.push(resp.conn);
        }
    }

    /// An idle connection with nothing waiting on it. One with bytes waiting
    /// (a server that sent more than its Content-Length: they would be read
    /// as the next response) or at EOF is dropped, as hyper does.
    fn take_idle(&self) -> Option<TcpStream> {
        loop {
            let conn = self.pool.lock().ok()?.pop()?;
            if quiet(&conn) {
                return Some(conn);
            }
        }
    }
}

impl Response {
    /// Read the body into `dst`, which must be exactly `content_length` bytes.
    /// Returns when the first body byte was in hand.
    ///
    /// Errors: [`DirectError::Protocol`] when `dst` and the body differ in
    /// length or the server closes early (with the count received),
    /// also on socket errors and read timeouts (named "body broke after N bytes").
    pub async fn read_into(&mut self, dst: &mut [u8]) -> Result<Instant, DirectError> {
        if dst.len() as u64 != self.content_length {
            return Err(DirectError::Protocol(format!("body is {} bytes, {} were expected", self.content_length, dst.len())));
        }
        let early = self.early.len();
        if early > dst.len() {
            return Err(DirectError::Protocol(format!("server sent more than the {} bytes of its Content-Length", dst.len())));
        }
        dst[..early].copy_from_slice(&self.early);
        self.early.clear();
        let mut first = (early > 0).then(Instant::now);
        let mut off = early;
        while off < dst.len() {
            let n = read_timed(&mut self.conn, &mut dst[off..], self.read_timeout)
                .await
                .map_err(|e| DirectError::Protocol(format!("body broke after {off} of {} bytes: {e}", dst.len())))?;
            if n == 0 {
                return Err(DirectError::Protocol(format!("server closed the connection after {off} of {} body bytes", dst.len())));
            }
            first.get_or_insert_with(Instant::now);
            off += n;
        }
        Ok(first.unwrap_or_else(Instant::now))
    }
}

/// True when nothing can be read from `conn` right now: no surplus bytes, no EOF, no error.
fn quiet(conn: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(conn.try_read(&mut probe), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}

async fn read_timed(conn: &mut TcpStream, dst: &mut [u8], timeout: Duration) -> std::io::Result<usize> {
    match tokio::time::timeout(timeout, conn.read(dst)).await {
        Ok(r) => r,
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, format!("no data for {timeout:?} ({READ_TIMEOUT})"))),
    }
}

/// The text of the first `<name>...</name>` in an S3 XML error body.
fn xml_field(xml: &str, name: &str) -> Option<String> {
    let open = format!("<{name}>");
    let start = xml.find(&open)? + open.len();
    let end = xml[start..].find(&format!("</{name}>"))? + start;
    Some(xml[start..end].trim().to_string())
}

#[cfg(test)]
#[path = "direct_tests.rs"]
mod tests;
/// The one Content-Length of a response head (`None` without one); several
/// that agree count as one.
///
/// Errors: [`DirectError::Protocol`] for one that is not a number, or several that differ.
fn content_length(headers: &[httparse::Header<'_>], addr: &str) -> Result<Option<u64>, DirectError> {
    let lengths: Vec<&str> =
        headers.iter().filter(|h| h.name.eq_ignore_ascii_case("content-length")).map(|h| std::str::from_utf8(h.value).unwrap_or("?").trim()).collect();
    match lengths.as_slice() {
        [] => Ok(None),
        [first, rest @ ..] if rest.iter().all(|v| v == first) => {
            first.parse::<u64>().map(Some).map_err(|_| DirectError::Protocol(format!("{addr} sent an invalid Content-Length '{first}'")))
        }
        more => Err(DirectError::Protocol(format!("{addr} sent conflicting Content-Length headers {more:?}"))),
    }
}

impl Response {
    /// The error of a non-2xx answer: its status, and S3's `Code` and
    /// `Message` from the body when it is `readable` (a short one).
    async fn status_error(mut self, readable: bool, retry_after: Option<Duration>, server_date: Option<std::time::SystemTime>) -> DirectError {
        let body = if readable {
            let mut b = vec![0u8; self.content_length as usize];
            // A broken error body still leaves the status to report.
            let _ = self.read_into(&mut b).await;
            b
        } else {
            Vec::new()
        };
        let text = String::from_utf8_lossy(&body);
        DirectError::Status {
            status: self.status,
            code: xml_field(&text, "Code").unwrap_or_default(),
            message: xml_field(&text, "Message").unwrap_or_else(|| "no message".into()),
            retry_after,
            server_date,
        }
    }
}
