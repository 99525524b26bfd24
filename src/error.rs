//! Error types and their mapping to exit codes.
//!
//! Exit codes (README.md, "Exit codes"): 0 ok, 1 runtime error, 2 usage error,
//! 3 witness verdict failed `--require-rdma`, 4 data verification mismatch.

use std::ops::Range;

/// The underlying error a [`StoreError`] came from, kept whole for
/// [`std::error::Error::source`] (the `object_store` model: each backend's
/// own errors converted into one public error that keeps them as its source).
pub type Cause = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error from an [`crate::store::ObjectStore`] operation.
///
/// Every message names the object or bucket and where it was looked for (the
/// endpoint URL or the local directory). The flags that fix it are the CLI
/// layer's to add when it prints the error (`cli::message`).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The bucket does not exist and the caller did not ask to create it.
    #[error("bucket '{bucket}' does not exist at {location}")]
    NoSuchBucket {
        /// The bucket.
        bucket: String,
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
    },
    /// The object does not exist.
    #[error("object '{key}' not found in bucket '{bucket}' at {location}")]
    NotFound {
        /// The bucket.
        bucket: String,
        /// The object key.
        key: String,
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
    },
    /// The server refused the credentials or the request's signature.
    #[error("access denied by {location} ({detail})")]
    Auth {
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
        /// What the server or the OS said.
        detail: String,
        /// Which part of the request the server refused, as far as its answer tells.
        problem: AuthProblem,
        /// The error this one came from, where a library or the OS gave one
        /// (the S3 SDK's, the direct GET path's, the RDMA library's): the
        /// chain [`std::error::Error::source`] walks. `detail` says it in words.
        #[source]
        cause: Option<Cause>,
    },
    /// The endpoint could not be reached (connection refused, DNS, timeout).
    #[error("cannot reach {location} ({detail})")]
    Unreachable {
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
        /// What the server or the OS said.
        detail: String,
        /// The error this one came from, where a library or the OS gave one
        /// (the S3 SDK's, the direct GET path's, the RDMA library's): the
        /// chain [`std::error::Error::source`] walks. `detail` says it in words.
        #[source]
        cause: Option<Cause>,
    },
    /// The server was reached, then the connection broke before a complete
    /// answer (reset, closed): the request may or may not have taken effect.
    #[error("{op} '{key}' at {location}: the connection broke before a complete answer ({detail})")]
    Broken {
        /// The operation (GET, PUT, HEAD, ...).
        op: &'static str,
        /// The object key.
        key: String,
        /// The endpoint URL.
        location: String,
        /// What the OS or the client library said, and the attempts made.
        detail: String,
        /// The error this one came from, where a library or the OS gave one
        /// (the S3 SDK's, the direct GET path's, the RDMA library's): the
        /// chain [`std::error::Error::source`] walks. `detail` says it in words.
        #[source]
        cause: Option<Cause>,
    },
    /// A request got no (complete) answer in time: the endpoint may well be
    /// reachable (an earlier request may have succeeded).
    #[error("{op} '{key}' at {location} timed out: {detail}")]
    Timeout {
        /// The operation (GET, PUT, HEAD, ...).
        op: &'static str,
        /// The object key.
        key: String,
        /// The endpoint URL.
        location: String,
        /// How long was waited, over how many attempts, and which settings bound it.
        detail: String,
        /// The error this one came from, where a library or the OS gave one
        /// (the S3 SDK's, the direct GET path's, the RDMA library's): the
        /// chain [`std::error::Error::source`] walks. `detail` says it in words.
        #[source]
        cause: Option<Cause>,
    },
    /// Fewer bytes arrived than the server announced or the range asked for.
    #[error("short read of '{key}' from {location}: got {got} of {expected} bytes")]
    ShortBody {
        /// The object key.
        key: String,
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
        /// Bytes that arrived.
        got: u64,
        /// Bytes announced or asked for.
        expected: u64,
    },
    /// A ranged GET was answered with other bytes than were asked for
    /// (another range, or no `Content-Range`): nothing of it is counted.
    #[error(
        "ranged GET of '{key}' at {location} asked for {asked} and was answered with {served}: not the requested bytes, nothing counted (a proxy or gateway that rewrites ranges?)"
    )]
    WrongRange {
        /// The object key.
        key: String,
        /// The endpoint URL.
        location: String,
        /// The range asked for, as `bytes first-last`.
        asked: String,
        /// What came back (the `Content-Range` header as sent, or its absence).
        served: String,
    },
    /// The object was replaced while one read of it was under way (its
    /// size or ETag changed between the ranged GETs of that read).
    #[error("'{key}' at {location} changed during the read ({detail}): its bytes were not counted; run again when nothing writes to it")]
    Changed {
        /// The object key.
        key: String,
        /// The endpoint URL.
        location: String,
        /// What changed.
        detail: String,
    },
    /// A listing reached its bound before it ended: more keys under the
    /// prefix than a listing may hold, or more requests than such a listing
    /// takes (a server or proxy that keeps paging new keys). Nothing of it is
    /// used, and memory never grew past the bound.
    #[error(
        "LIST '{prefix}' at {location} stopped after {requests} request(s) and {keys} key(s): a listing may hold {max_keys} keys in {max_requests} requests; {}",
        if requests >= max_requests { "the server kept paging (a page of fewer than 100 new keys on average: a misbehaving server or proxy)" } else { "the prefix holds more keys than that" }
    )]
    ListTooLong {
        /// The prefix listed.
        prefix: String,
        /// Where: the endpoint URL or the local directory.
        location: String,
        /// LIST requests made (the local backend: directories read).
        requests: u64,
        /// Distinct keys listed when it stopped.
        keys: u64,
        /// The bound on keys.
        max_keys: u64,
        /// The bound on requests.
        max_requests: u64,
    },
    /// The key cannot name an object in this store.
    #[error("invalid object key '{key}': {why}")]
    InvalidKey {
        /// The object key.
        key: String,
        /// Why the key is refused.
        why: &'static str,
    },
    /// The byte range is empty or lies outside the object.
    #[error("range {}..{} is invalid for object '{key}' of {size} bytes: ranges must be non-empty and end at or before the object's end (an object cut short while the run reads it gives this too: run again when nothing writes to it)", range.start, range.end)]
    BadRange {
        /// The object key.
        key: String,
        /// The range asked for (end exclusive).
        range: Range<u64>,
        /// The object's size, bytes.
        size: u64,
    },
    /// The caller's buffer cannot hold the bytes asked for.
    #[error("buffer of {capacity} bytes is too small for {needed} bytes of object '{key}'")]
    BufferTooSmall {
        /// The object key.
        key: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes the buffer holds.
        capacity: u64,
    },
    /// Configuration the store cannot work with (missing endpoint, bad URL, ...).
    #[error("{0}")]
    Config(String),
    /// The transport's client library cannot be loaded, lacks a symbol, or
    /// refuses to create a client (rdma: libminiocpp). Exit 2 like
    /// [`StoreError::Config`]: the fix is `--rdma-lib` or the host's install
    /// (`verify` reports it as its step 1's finding, exit 1).
    #[error("{0}")]
    Library(String),
    /// Any other failure of an operation, with the server's code and message.
    #[error("{op} '{key}' at {location} failed: {detail}")]
    Other {
        /// The operation (GET, PUT, HEAD, ...).
        op: &'static str,
        /// The object key.
        key: String,
        /// Where it was looked for: the endpoint URL or the local directory.
        location: String,
        /// What the server or the OS said.
        detail: String,
        /// The error this one came from, where a library or the OS gave one
        /// (the S3 SDK's, the direct GET path's, the RDMA library's): the
        /// chain [`std::error::Error::source`] walks. `detail` says it in words.
        #[source]
        cause: Option<Cause>,
    },
    /// A local I/O error with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl StoreError {
    /// This error with `cause` as its source ([`std::error::Error::source`]),
    /// where its kind keeps one (auth, unreachable, broken, timeout, other);
    /// other kinds are returned unchanged.
    pub fn caused_by(mut self, cause: impl Into<Cause>) -> Self {
        if let StoreError::Auth { cause: c, .. }
        | StoreError::Unreachable { cause: c, .. }
        | StoreError::Broken { cause: c, .. }
        | StoreError::Timeout { cause: c, .. }
        | StoreError::Other { cause: c, .. } = &mut self
        {
            *c = Some(cause.into());
        }
        self
    }
}

impl StoreError {
    /// This error with `extra` added to what it says: appended to the detail
    /// of the kinds that have one (auth, unreachable, broken, timeout,
    /// other); any other kind becomes [`StoreError::Other`] for `op` on
    /// `key`, its message followed by `extra`.
    pub fn with_detail(mut self, op: &'static str, key: &str, extra: &str) -> Self {
        match &mut self {
            StoreError::Auth { detail, .. }
            | StoreError::Unreachable { detail, .. }
            | StoreError::Broken { detail, .. }
            | StoreError::Timeout { detail, .. }
            | StoreError::Other { detail, .. } => {
                detail.push_str("; ");
                detail.push_str(extra);
                self
            }
            _ => {
                let location = match &self {
                    StoreError::NoSuchBucket { location, .. } | StoreError::NotFound { location, .. } => location.clone(),
                    _ => String::new(),
                };
                StoreError::Other { op, key: key.into(), location, detail: format!("{self}; {extra}"), cause: Some(Box::new(self)) }
            }
        }
    }
}

/// What an S3 server's refusal (401/403) says about the request, from its
/// error code (AWS S3 API reference, "Error responses"): each has its own fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthProblem {
    /// `InvalidAccessKeyId`: the server does not know the access key id
    /// (also what it answers to temporary keys sent without their session token).
    KeyId,
    /// `SignatureDoesNotMatch`: the secret key does not match the key id.
    Signature,
    /// `ExpiredToken`, `InvalidToken`, `TokenRefreshRequired`: the session token.
    Token,
    /// `RequestTimeTooSkewed`, `RequestExpired`: the clocks differ by more than 15 minutes.
    Clock,
    /// `AccessDenied`: valid credentials without permission.
    Denied,
    /// Another code, or none.
    Other,
}

impl AuthProblem {
    /// The problem an S3 error code names.
    pub fn of_code(code: &str) -> AuthProblem {
        match code {
            "InvalidAccessKeyId" => AuthProblem::KeyId,
            "SignatureDoesNotMatch" => AuthProblem::Signature,
            "ExpiredToken" | "InvalidToken" | "TokenRefreshRequired" => AuthProblem::Token,
            "RequestTimeTooSkewed" | "RequestExpired" => AuthProblem::Clock,
            "AccessDenied" => AuthProblem::Denied,
            _ => AuthProblem::Other,
        }
    }
}

/// Top-level error of a subcommand; [`Error::exit_code`] maps it to the process exit code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Invalid arguments or combinations of arguments (exit 2).
    #[error("{0}")]
    Usage(String),
    /// A store operation failed (exit 1); the CLI adds the flags that fix it
    /// when it prints the error (`cli::message`).
    #[error("{0}")]
    Store(#[from] StoreError),
    /// Any other runtime failure (exit 1).
    #[error("{0}")]
    Runtime(String),
    /// `--require-rdma` and a verdict other than rdma-verified (exit 3).
    #[error("{0}")]
    WitnessFailed(String),
    /// Data read back differs from what was written (exit 4).
    #[error("{0}")]
    Mismatch(String),
    /// A rank process failed; carries its exit code.
    #[error("{msg}")]
    RankFailed {
        /// The failed rank's exit code.
        code: i32,
        /// Which rank failed, and that the others were stopped.
        msg: String,
    },
}

impl Error {
    /// The process exit code for this error (README.md, "Exit codes").
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            Error::Store(StoreError::Config(_) | StoreError::Library(_)) => 2,
            Error::Store(_) | Error::Runtime(_) => 1,
            Error::WitnessFailed(_) => 3,
            Error::Mismatch(_) => 4,
            Error::RankFailed { code, .. } => *code,
        }
    }
}

/// The message of a panic raised by `print!`/`eprintln!` when the output
/// cannot be written (a full disk under a redirect, a closed pipe): std's
/// printing macros panic ("failed printing to stdout: ..."). `None` for any
/// other panic, which stays a bug to report.
pub fn output_failure(payload: &(dyn std::any::Any + Send)) -> Option<String> {
    let msg = payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied())?;
    msg.starts_with("failed printing to std").then(|| msg.to_string())
}

/// Result alias for subcommands.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// True when `err` (or a cause of it) says no connection was made: refused,
/// unreachable, or a name that does not resolve. A connection that broke
/// after it was made is not this ([`StoreError::Broken`]).
pub fn never_connected(err: &(dyn std::error::Error + 'static)) -> bool {
    use std::io::ErrorKind::*;
    let mut cur = Some(err);
    while let Some(e) = cur {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(io.kind(), ConnectionRefused | HostUnreachable | NetworkUnreachable | AddrNotAvailable | NotFound)
        {
            return true;
        }
        // hyper-util's connector and resolver errors, whatever their source.
        let text = e.to_string();
        if text.contains("tcp connect error") || text.contains("dns error") || text.contains("failed to lookup address") {
            return true;
        }
        cur = e.source();
    }
    false
}

/// The innermost cause of an error chain: the part a user can act on
/// ("Connection refused (os error 111)").
pub fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut e = err;
    while let Some(s) = e.source() {
        e = s;
    }
    e.to_string()
}
