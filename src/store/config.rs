//! How a store is configured ([`StoreConfig`] and the choices in it:
//! [`Backend`], [`ChecksumMode`], [`HttpGet`]): plain data the CLI fills
//! once from the flags; [`open`](super::open) turns it into a store.

use std::time::Duration;

use serde::Serialize;

use super::http::aws;

// The flag values of `--backend`, `--response-checksums` and `--http-get`
// are these enums: one definition, owned by the store (the CLI spells them,
// `src/cli/values.rs`).

/// Which transport a store uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// A local filesystem directory (bucket = directory under --root).
    Local,
    /// Any S3 endpoint over HTTP(S): ranged GETs per `--http-get`, everything else through aws-sdk-s3.
    Http,
    /// S3 over RDMA through libminiocpp's C ABI (AIStor: GPU-Direct into
    /// device memory, host memory too with libs3rdma).
    Rdma,
}

impl Backend {
    /// Every backend, in the order the CLI lists them.
    pub const ALL: [Backend; 3] = [Backend::Local, Backend::Http, Backend::Rdma];

    /// The name used in records and file names.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Local => "local",
            Backend::Http => "http",
            Backend::Rdma => "rdma",
        }
    }

    /// The backend a record names ([`Backend::name`], any case); `None` for
    /// a name this build does not know.
    pub fn from_name(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name().eq_ignore_ascii_case(name))
    }
}

/// When the HTTP backend validates response checksums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ChecksumMode {
    /// Only when the operation requires it (the default: costs no CPU on GETs).
    WhenRequired,
    /// Whenever the server sends a checksum (whole-object GETs; ranged GETs carry none).
    WhenSupported,
}

/// How the http backend performs ranged GETs (docs/http-peers.md has the measurements).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HttpGet {
    /// direct for plain http:// endpoints without --response-checksums when-supported, sdk otherwise.
    Auto,
    /// aws-sdk-s3: the body arrives in the client's chunks and is copied into the buffer.
    Sdk,
    /// SigV4-signed HTTP/1.1 GET read from the socket straight into the buffer (http:// only).
    Direct,
}

/// Everything a store is opened with, whichever backend (built by the CLI
/// layer from its flags; the store never sees the flags themselves).
/// Fields are read by the backend they name; the others ignore them.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// Which transport.
    pub backend: Backend,
    /// Bucket the store is bound to.
    pub bucket: String,
    /// local: directory holding one subdirectory per bucket.
    pub root: std::path::PathBuf,
    /// local: O_DIRECT reads where offsets allow.
    pub direct: bool,
    /// local: threads per read (16 MiB pieces).
    pub io_threads: u32,
    /// What chose `io_threads` (`"flag"` or the default's rule), for the record.
    pub io_threads_source: &'static str,
    /// local: how reader threads read a file into device memory's bounce
    /// buffers (`--file-io`; [`super::file_pipeline`]).
    pub file_io: super::FileIo,
    /// http, rdma control plane: endpoint URL (`None`: AWS for `region`).
    pub endpoint: Option<String>,
    /// http: signing region.
    pub region: String,
    /// http: access key.
    pub access_key: Option<String>,
    /// http: secret key (never printed or recorded).
    pub secret_key: Option<String>,
    /// http: session token of temporary credentials (never printed or recorded).
    pub session_token: Option<String>,
    /// http: the AWS profile to read (`None`: `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// http: PEM file of extra certificate authorities.
    pub ca_bundle: Option<std::path::PathBuf>,
    /// http, rdma: credentials, endpoint, region, CA and addressing as
    /// [`aws::AwsSetup::resolve`] found them (`None`: only the explicit values
    /// above, for a caller that resolved nothing). When set, `endpoint`,
    /// `region` and the keys above hold its values.
    pub aws: Option<std::sync::Arc<aws::AwsSetup>>,
    /// http, rdma: why resolving the AWS settings failed; opening the store
    /// reports it, so the flags' own checks come first.
    pub aws_error: Option<String>,
    /// http: ranged-GET size and multipart part size, bytes.
    pub part_size: u64,
    /// http: ranged GETs or part uploads in flight per object.
    pub part_concurrency: u32,
    /// http: response checksum validation.
    pub response_checksums: ChecksumMode,
    /// http: ranged-GET path.
    pub http_get: HttpGet,
    /// http: attempts per request.
    pub attempts: u32,
    /// http: connect timeout.
    pub connect_timeout: Duration,
    /// http: longest wait for a response to start.
    pub read_timeout: Duration,
    /// rdma: libminiocpp to load (`None`: the system search path).
    pub rdma_lib: Option<std::path::PathBuf>,
    /// The size of one ranged GET, bytes, where a read is split into ranged
    /// GETs (rdma above one transfer, every bench's ranged reads; `--range-size`).
    pub range_bytes: u64,
    /// rdma: ignore `miniocpp_get_object_range`.
    pub rdma_no_range: bool,
    /// rdma: worker threads (one client each).
    pub rdma_threads: Option<u32>,
    /// rdma: largest single transfer, bytes (4 GiB - 1).
    pub rdma_max_transfer: u64,
    /// rdma: which engine carries the transfers (`--rdma-engine`).
    pub rdma_engine: RdmaEngineKind,
    /// rdma, libs3rdma engine: the devices or rail addresses to open
    /// (`--rdma-device`; `None`: `S3RDMA_DEVICE`, else every ACTIVE port).
    pub rdma_device: Option<String>,
    /// Every backend: keys one listing may hold before it stops with an
    /// error ([`super::listing::ListBound`]; default
    /// [`super::listing::DEFAULT_LIST_MAX_KEYS`]).
    pub list_max_keys: u64,
}

/// Which engine the rdma backend drives (`--rdma-engine`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RdmaEngineKind {
    /// libminiocpp's C ABI (minio-cpp with `-DMINIO_CPP_ENABLE_RDMA=ON`):
    /// whole-object GET and PUT, its own fallback inside each call.
    #[default]
    Libminiocpp,
    /// libs3rdma bound directly, the protocol spoken by this tool
    /// (src/store/rdma/libs3rdma): ranged GETs, registration off the clock,
    /// every reply judged and counted.
    Libs3rdma,
}

impl RdmaEngineKind {
    /// The name as flags and records spell it.
    pub fn name(self) -> &'static str {
        match self {
            RdmaEngineKind::Libminiocpp => "libminiocpp",
            RdmaEngineKind::Libs3rdma => "libs3rdma",
        }
    }
}

impl StoreConfig {
    /// Whether a bench that writes may create a missing bucket: the local
    /// backend's bucket is a directory under `root`, made like any directory
    /// a save writes into; a server's bucket stays its operator's to create
    /// (a mistyped name must not create a bucket in the account).
    pub fn creates_bucket_on_write(&self) -> bool {
        self.backend == Backend::Local
    }

    /// The directory holding the bucket's objects as files, where this
    /// machine's page cache holds them (the local backend: `root/bucket`,
    /// as `store/local.rs` lays them out, made absolute); `None` for a
    /// server, whose cache is its own.
    pub fn local_bucket_dir(&self) -> Option<std::path::PathBuf> {
        (self.backend == Backend::Local).then(|| std::path::absolute(&self.root).unwrap_or_else(|_| self.root.clone()).join(&self.bucket))
    }

    /// The explicitly given AWS values (flags), for [`aws::AwsSetup`].
    pub fn explicit_aws(&self) -> aws::AwsExplicit {
        aws::AwsExplicit {
            endpoint: self.endpoint.clone(),
            region: Some(self.region.clone()),
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
            session_token: self.session_token.clone(),
            profile: self.profile.clone(),
            ca_bundle: self.ca_bundle.clone(),
        }
    }
}
