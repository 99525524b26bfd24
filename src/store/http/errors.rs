//! The http backend's errors: every SDK, status and direct-path failure
//! mapped to one [`StoreError`] that names the bucket or key, the endpoint
//! and the fix (the `object_store` model: backend errors converted into one
//! public error). Part of the http store (`mod.rs`).

use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};

use super::HttpStore;
use super::direct::DirectError;
use crate::error::{AuthProblem, StoreError, never_connected, root_cause};
use crate::flag::{ATTEMPTS, CONNECT_TIMEOUT, ENDPOINT, READ_TIMEOUT};

impl HttpStore {
    /// Map an SDK error to a [`StoreError`] naming the bucket or key, the endpoint and the fix.
    pub(super) fn map_err<E>(&self, op: &'static str, key: &str, err: SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> StoreError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let location = self.endpoint.clone();
        let mapped = match &err {
            SdkError::TimeoutError(_) => self.timed_out(op, key, ""),
            SdkError::DispatchFailure(d) if d.is_timeout() => self.timed_out(op, key, &root_cause(&err)),
            SdkError::DispatchFailure(_) if let Some(problem) = super::tls::certificate_problem(&err) => {
                super::tls::certificate_error(&location, &problem, self.aws.ca_bundle.as_ref())
            }
            SdkError::DispatchFailure(_) if never_connected(&err) => StoreError::Unreachable { location, detail: root_cause(&err), cause: None },
            // rustls's words for an HTTP answer to its TLS handshake.
            SdkError::DispatchFailure(_) if location.starts_with("https://") && root_cause(&err).contains("InvalidContentType") => StoreError::Config(format!(
                "{location} answered the TLS handshake in plain HTTP: that port speaks http://, so pass {ENDPOINT} http://{}",
                location.trim_start_matches("https://")
            )),
            SdkError::DispatchFailure(_) => self.broken(op, key, root_cause(&err)),
            // A HEAD's refusal has no body, so no code: the server's Date tells a clock problem apart.
            SdkError::ServiceError(ctx)
                if ctx.err().code().is_none()
                    && ctx.raw().status().as_u16() == 403
                    && let Some(skew) = ctx.raw().headers().get("date").and_then(skew_from_date)
                    && skew.unsigned_abs() > MAX_SKEW_S =>
            {
                StoreError::Auth {
                    location,
                    detail: format!(
                        "{op} '{key}': HTTP 403 from a server whose clock is {} s {} this host's",
                        skew.unsigned_abs(),
                        if skew > 0 { "ahead of" } else { "behind" }
                    ),
                    problem: AuthProblem::Clock,
                    cause: None,
                }
            }
            // First: a HEAD's answer has no body, and the wait it asks for is the news.
            SdkError::ServiceError(ctx)
                if let Some(wait) = ctx.raw().headers().get("retry-after").and_then(super::direct::parse_retry_after)
                    && wait > super::direct::MAX_RETRY_AFTER =>
            {
                self.asked_to_wait(op, key, ctx.raw().status().as_u16(), ctx.err().code().unwrap_or(""), wait)
            }
            SdkError::ServiceError(ctx) if ctx.err().message().is_none() && ctx.err().code().is_none() => {
                let status = ctx.raw().status().as_u16();
                let msg = match body_snippet(ctx.raw().body().bytes()) {
                    b if b == "(empty)" => "no message (the answer has no body)".to_string(),
                    b => format!("the answer is not S3's error XML; it reads: {b}"),
                };
                self.map_status(op, key, status, "", Some(&msg))
            }
            SdkError::ServiceError(ctx) => self.map_status(op, key, ctx.raw().status().as_u16(), ctx.err().code().unwrap_or(""), ctx.err().message()),
            SdkError::ResponseError(ctx) => StoreError::Other {
                op,
                key: key.into(),
                location,
                detail: format!(
                    "the HTTP {} answer could not be read as S3 XML ({}); it reads: {}",
                    ctx.raw().status().as_u16(),
                    root_cause(&err),
                    body_snippet(ctx.raw().body().bytes())
                ),
                cause: None,
            },
            _ => StoreError::Other { op, key: key.into(), location, detail: root_cause(&err), cause: None },
        };
        // The SDK's error, whole, as the source: its chain reaches the OS's.
        mapped.caused_by(err)
    }

    /// A server that asked (`Retry-After`) to wait longer than this tool
    /// waits between attempts: the run stops at once and says so, naming the
    /// wait, instead of stalling or blaming `--attempts`.
    pub(super) fn asked_to_wait(&self, op: &'static str, key: &str, status: u16, code: &str, wait: std::time::Duration) -> StoreError {
        let code = if code.is_empty() { String::new() } else { format!(" {code}") };
        StoreError::Other {
            op,
            key: key.into(),
            location: self.endpoint.clone(),
            detail: format!(
                "HTTP {status}{code}: the server asked to wait {} (Retry-After), more than the {} this tool waits between attempts, so no further request was made: try again later",
                match wait.as_secs_f64().round() as u64 {
                    s if s > 86_400 => "more than a day".to_string(),
                    s => humantime::format_duration(std::time::Duration::from_secs(s)).to_string(),
                },
                humantime::format_duration(super::direct::MAX_RETRY_AFTER)
            ),
            cause: None,
        }
    }

    /// A connection that broke after it was made, after every attempt.
    pub(super) fn broken(&self, op: &'static str, key: &str, cause: String) -> StoreError {
        StoreError::Broken {
            op,
            key: key.into(),
            location: self.endpoint.clone(),
            detail: format!("{cause}; {} attempt(s) ({ATTEMPTS})", self.attempts),
            cause: None,
        }
    }

    /// A request that got no answer in time: which one, how long, which settings.
    pub(super) fn timed_out(&self, op: &'static str, key: &str, cause: &str) -> StoreError {
        let (ct, rt) = (humantime::format_duration(self.connect_timeout), humantime::format_duration(self.read_timeout));
        // The SDK's HTTP client says which wait ran out ("HTTP read timeout
        // occurred after 1s", "HTTP connect timeout ...").
        let wait = if cause.contains("read timeout") {
            format!("connected, but no response within {rt} ({READ_TIMEOUT})")
        } else if cause.contains("connect timeout") {
            format!("no connection within {ct} ({CONNECT_TIMEOUT})")
        } else {
            format!("no connection within {ct} ({CONNECT_TIMEOUT}) or no response within {rt} ({READ_TIMEOUT})")
        };
        StoreError::Timeout {
            op,
            key: key.into(),
            location: self.endpoint.clone(),
            detail: format!("{wait}, {} attempt(s) ({ATTEMPTS})", self.attempts),
            cause: None,
        }
    }

    /// Map an error status (and the S3 error code and message, when the body had
    /// them) to a [`StoreError`]; shared by the SDK and the direct GET path.
    pub(super) fn map_status(&self, op: &'static str, key: &str, status: u16, code: &str, message: Option<&str>) -> StoreError {
        let location = self.endpoint.clone();
        match (status, code) {
            (_, "NoSuchBucket") => StoreError::NoSuchBucket { bucket: self.bucket.clone(), location },
            (_, "NoSuchKey") | (404, _) => StoreError::NotFound { bucket: self.bucket.clone(), key: key.into(), location },
            // Only the later parts of a read carry If-Match (the first part's ETag).
            (412, _) | (_, "PreconditionFailed") => {
                StoreError::Changed { key: key.into(), location, detail: "the server answered 412 to If-Match with the ETag the read began on".into() }
            }
            (
                _,
                "InvalidAccessKeyId"
                | "SignatureDoesNotMatch"
                | "AccessDenied"
                | "ExpiredToken"
                | "InvalidToken"
                | "TokenRefreshRequired"
                | "RequestTimeTooSkewed"
                | "RequestExpired",
            )
            | (401 | 403, _) => {
                let what = if code.is_empty() { format!("HTTP {status}") } else { code.to_string() };
                let msg = message.map(|m| format!(": {m}")).unwrap_or_default();
                StoreError::Auth { location, detail: format!("{op} '{key}': {what}{msg}"), problem: AuthProblem::of_code(code), cause: None }
            }
            // S3 may answer CompleteMultipartUpload (and copies) 200 with an error body.
            (200, _) => StoreError::Other {
                op,
                key: key.into(),
                location,
                detail: format!(
                    "answered HTTP 200 with an error in its body ({}: {}), which is a failure, not a success ({} attempt(s), {ATTEMPTS})",
                    if code.is_empty() { "no code" } else { code },
                    message.unwrap_or("no message"),
                    self.attempts
                ),
                cause: None,
            },
            _ => StoreError::Other {
                op,
                key: key.into(),
                location,
                detail: format!(
                    "HTTP {status}{}{code}: {}{}",
                    if code.is_empty() { "" } else { " " },
                    message.unwrap_or("no message"),
                    // Server errors were retried: say how often, and which flag says so.
                    if status >= 500 { format!(" ({} attempt(s), {ATTEMPTS})", self.attempts) } else { String::new() }
                ),
                cause: None,
            },
        }
    }

    /// A ranged GET answered with `got` bytes where `want` were asked for:
    /// short is [`StoreError::ShortBody`], long is named as such.
    pub(super) fn wrong_length(&self, key: &str, got: u64, want: u64) -> StoreError {
        if got < want {
            return self.short(key, got, want);
        }
        StoreError::Other {
            op: "GET",
            key: key.into(),
            location: self.endpoint.clone(),
            detail: format!("the server announced {got} bytes for a ranged GET of {want}"),
            cause: None,
        }
    }

    /// Map a direct-path error (see [`DirectError`]).
    pub(super) fn map_direct(&self, key: &str, e: DirectError) -> StoreError {
        self.map_direct_kind(key, &e).caused_by(e)
    }

    /// [`HttpStore::map_direct`]'s choice of kind and words.
    fn map_direct_kind(&self, key: &str, e: &DirectError) -> StoreError {
        match e.clone() {
            DirectError::Status { status, code, retry_after: Some(wait), .. } if wait > super::direct::MAX_RETRY_AFTER => {
                self.asked_to_wait("GET", key, status, &code, wait)
            }
            DirectError::Status { status, code, message, .. } => self.map_status("GET", key, status, &code, Some(&message)),
            DirectError::Io(detail) if detail.starts_with("connect to ") => StoreError::Unreachable { location: self.endpoint.clone(), detail, cause: None },
            DirectError::Io(detail) | DirectError::Closed(detail) => self.broken("GET", key, detail),
            DirectError::Timeout(detail) => StoreError::Timeout {
                op: "GET",
                key: key.into(),
                location: self.endpoint.clone(),
                detail: format!("{detail}, {} attempt(s) ({ATTEMPTS})", self.attempts),
                cause: None,
            },
            DirectError::Protocol(detail) => StoreError::Other { op: "GET", key: key.into(), location: self.endpoint.clone(), detail, cause: None },
            DirectError::Credentials(detail) => StoreError::Auth { location: self.endpoint.clone(), detail, problem: AuthProblem::Token, cause: None },
        }
    }

    /// A body that ended after `got` of `expected` bytes.
    pub(super) fn short(&self, key: &str, got: u64, expected: u64) -> StoreError {
        StoreError::ShortBody { key: key.into(), location: self.endpoint.clone(), got, expected }
    }
}

/// The first 200 characters of an answer's body, for messages (`(empty)`,
/// or `(streamed)` when the client did not keep it).
fn body_snippet(body: Option<&[u8]>) -> String {
    match body {
        None => "(streamed)".into(),
        Some([]) => "(empty)".into(),
        Some(b) => {
            let text = String::from_utf8_lossy(&b[..b.len().min(200)]).replace(['\n', '\r'], " ");
            format!("'{}'{}", text.trim(), if b.len() > 200 { "..." } else { "" })
        }
    }
}

/// The request-time difference S3 accepts, seconds (AWS S3 API reference,
/// `RequestTimeTooSkewed`: 15 minutes).
const MAX_SKEW_S: u64 = 15 * 60;

/// How far the clock in an HTTP `Date` header is ahead of this host's, seconds
/// (negative: behind); `None` when the header is not an HTTP date.
fn skew_from_date(date: &str) -> Option<i64> {
    let server = httpdate::parse_http_date(date.trim()).ok()?;
    Some(super::direct::ahead_of_here_ms(server) / 1000)
}
