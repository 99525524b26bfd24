//! The store's flags ([`StoreArgs`]): which store and how to reach it, turned
//! into [`crate::store::StoreConfig`] once, with the AWS settings resolved.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{
    Backend, ChecksumMode, DEFAULT_LOCAL_ROOT, HttpGet, auto, parse_bytes, parse_io_threads, parse_part_size, parse_positive, parse_positive_duration,
    parse_range_size,
};

/// Which store to use and how to reach it.
#[derive(Debug, Clone, Args)]
pub struct StoreArgs {
    /// Transport: local (a directory), http (any S3 endpoint) or rdma (libminiocpp: S3 over RDMA into GPU memory, and host memory with its libs3rdma generation).
    #[arg(long, value_enum, default_value_t = Backend::Local)]
    pub backend: Backend,
    /// Bucket to read and write.
    #[arg(long, default_value = "s3rdma-bench")]
    pub bucket: String,
    /// local: directory holding one subdirectory per bucket.
    #[arg(long, default_value = DEFAULT_LOCAL_ROOT)]
    pub root: PathBuf,
    /// local: read with O_DIRECT (bypass the page cache) where offsets allow.
    #[arg(long)]
    pub direct: bool,
    /// local: threads per read, each taking 16 MiB pieces of it (1 = the
    /// stream's own thread only, so --concurrency is the whole parallelism).
    /// Default: cores / 4, from 1 to 8 (the record says which was used); at most 64.
    #[arg(long, value_parser = parse_io_threads)]
    pub io_threads: Option<u32>,
    /// local, into device memory: how each reader thread gets a chunk of a
    /// file into its pinned bounce buffer: `pread` (the kernel copies out of
    /// the page cache) or `mmap` (the file mapped, the chunk copied out of
    /// the mapping; a file truncated meanwhile by another process ends the
    /// run with SIGBUS). The record says which.
    #[arg(long, value_enum, default_value = "pread")]
    pub file_io: FileIoArg,
    /// http: endpoint URL, e.g. http://127.0.0.1:9000 (default, as the AWS
    /// SDKs resolve it: AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the profile's
    /// services `s3` or `endpoint_url`, S3_ENDPOINT, else AWS for the region).
    #[arg(long)]
    pub endpoint: Option<String>,
    /// http: region used for signing (default: AWS_REGION, AWS_DEFAULT_REGION,
    /// the profile's `region`, else us-east-1).
    #[arg(long)]
    pub region: Option<String>,
    /// http: access key (default: the AWS credential chain: AWS_ACCESS_KEY_ID,
    /// the profile, credential_process, SSO, web identity, S3_ACCESS_KEY,
    /// container or instance metadata; docs/backends.md).
    #[arg(long)]
    pub access_key: Option<String>,
    /// http: secret key, with --access-key (never printed or recorded).
    #[arg(long)]
    pub secret_key: Option<String>,
    /// http: session token of temporary credentials, with --access-key and
    /// --secret-key (never printed or recorded).
    #[arg(long)]
    pub session_token: Option<String>,
    /// http: profile of ~/.aws/config and ~/.aws/credentials to use (default:
    /// AWS_PROFILE, else `default`): keys, credential_process, SSO, role,
    /// endpoint_url, region, ca_bundle, s3 addressing_style.
    #[arg(long)]
    pub profile: Option<String>,
    /// http: PEM file of certificate authorities to trust besides the system's
    /// (default: AWS_CA_BUNDLE, else the profile's ca_bundle; SSL_CERT_FILE
    /// replaces the system's roots instead).
    #[arg(long)]
    pub ca_bundle: Option<PathBuf>,
    /// http: one GET is split into ranged GETs of this many bytes; PUTs above it
    /// go multipart with parts of max(this, 5 MiB). IEC (MiB) or decimal (MB).
    #[arg(long, value_parser = parse_part_size, default_value = "8MiB")]
    pub part_size: u64,
    /// http: ranged GETs (or part uploads) in flight per object.
    #[arg(long, value_parser = parse_positive, default_value_t = 8)]
    pub part_concurrency: u32,
    /// http: when to validate response checksums.
    #[arg(long, value_enum, default_value_t = ChecksumMode::WhenRequired)]
    pub response_checksums: ChecksumMode,
    /// http: ranged-GET path. `direct` reads each body from the socket straight
    /// into the destination buffer (one copy fewer than the SDK's chunks);
    /// every other request (PUT, multipart, HEAD, LIST, DELETE) uses aws-sdk-s3.
    #[arg(long, value_enum, default_value_t = HttpGet::Auto)]
    pub http_get: HttpGet,
    /// http: attempts per request (1 = no retries).
    #[arg(long, value_parser = parse_positive, default_value_t = 3)]
    pub attempts: u32,
    /// http: TCP/TLS connect timeout, e.g. 5s.
    #[arg(long, value_parser = parse_positive_duration, default_value = "5s")]
    pub connect_timeout: Duration,
    /// http: longest wait for a response to start once a request is sent, e.g. 30s.
    #[arg(long, value_parser = parse_positive_duration, default_value = "30s")]
    pub read_timeout: Duration,
    /// rdma: path of libminiocpp.so built with -DMINIO_CPP_ENABLE_RDMA=ON
    /// (scripts/build-libminiocpp.sh; default: the system library search
    /// path). Its libs3rdma generation (minio-cpp v0.6.0+) picks NICs from
    /// S3RDMA_DEVICE, else every ACTIVE port.
    #[arg(long, env = "MINIOCPP_LIB")]
    pub rdma_lib: Option<PathBuf>,
    /// The size of one ranged GET where a read is split into ranged GETs:
    /// rdma transfers above one RDMA transfer (4 GiB - 1), weights' shard
    /// reads, tokens' runs, train's shards. `--window` is its older name.
    #[arg(long, alias = "window", value_parser = parse_range_size, default_value = "1GiB")]
    pub range_size: u64,
    /// rdma: behave as if the library lacked miniocpp_get_object_range
    /// (large objects and ranged reads then go over HTTP).
    #[arg(long)]
    pub rdma_no_range: bool,
    /// rdma: worker threads, one client each (default: the largest --concurrency).
    #[arg(long, value_parser = parse_positive)]
    pub rdma_threads: Option<u32>,
    /// rdma: largest single transfer; lowered only to test windowing.
    #[arg(long, value_parser = parse_bytes, default_value = "4294967295", hide = true)]
    pub rdma_max_transfer: u64,
    /// rdma: the engine that carries transfers. `libminiocpp`: its C ABI
    /// (whole objects only; falls back to HTTP inside each call).
    /// `libs3rdma`: libs3rdma bound directly (ranged GETs over RDMA,
    /// registration measured off the clock, every reply judged and counted);
    /// --rdma-lib then names libs3rdma.so.0, or a libminiocpp.so beside it.
    #[arg(long, value_enum, default_value_t = crate::store::RdmaEngineKind::Libminiocpp)]
    pub rdma_engine: crate::store::RdmaEngineKind,
    /// rdma, libs3rdma engine: devices or rail addresses to open, comma
    /// separated (mlx5_0, 10.0.0.1, ...); default S3RDMA_DEVICE, else every
    /// device with an ACTIVE port.
    #[arg(long)]
    pub rdma_device: Option<String>,
    /// Keys one listing (of a dataset's shards, a checkpoint's chunks, rank
    /// markers) may hold; a listing that passes it, or takes more than one
    /// request per 100 keys, stops with an error instead of growing.
    #[arg(long, value_parser = parse_positive, default_value_t = crate::store::listing::DEFAULT_LIST_MAX_KEYS as u32)]
    pub list_max_keys: u32,
    /// The AWS settings resolved from these flags, the environment and the
    /// profile files ([`StoreArgs::resolve_aws`]); `None` until then.
    #[arg(skip)]
    pub aws: Option<std::sync::Arc<crate::store::http::aws::AwsSetup>>,
    /// Why resolving them failed: reported when the store is opened, after
    /// the bench has checked its flags.
    #[arg(skip)]
    pub aws_error: Option<String>,
}

impl StoreArgs {
    /// The local backend on a directory the tool may create things in
    /// unasked: its own default (`./s3rdma-data`), or a `--root` that does
    /// not exist yet (nothing of anyone's is there). Either is created on
    /// first use; a `--root` that exists is the user's, and the tool creates
    /// nothing in it without `--prepare`.
    pub fn owns_local_root(&self) -> bool {
        self.is_default_local_dir() || (self.backend == Backend::Local && std::fs::symlink_metadata(&self.root).is_err())
    }

    /// The local backend on its own default directory (`./s3rdma-data`): the
    /// only one a read-only bench (train) creates its bucket in.
    pub fn is_default_local_dir(&self) -> bool {
        self.backend == Backend::Local && self.root.as_path() == std::path::Path::new(DEFAULT_LOCAL_ROOT)
    }

    /// For the http and rdma backends, resolve credentials, endpoint, region,
    /// CA bundle and addressing as the AWS CLI does ([`crate::store::http::aws`]),
    /// once, before [`StoreArgs::config`]; nothing for the local backend.
    ///
    /// A failure is kept ([`StoreArgs::aws_error`]) and reported when the
    /// store opens, so a bench's own flag checks are said first.
    pub async fn resolve_aws(&mut self) {
        if self.backend == Backend::Local || self.aws.is_some() {
            return;
        }
        let explicit = crate::store::http::aws::AwsExplicit {
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
            access_key: self.access_key.clone(),
            secret_key: self.secret_key.clone(),
            session_token: self.session_token.clone(),
            profile: self.profile.clone(),
            ca_bundle: self.ca_bundle.clone(),
        };
        match crate::store::http::aws::AwsSetup::resolve(&explicit).await {
            Ok(a) => self.aws = Some(std::sync::Arc::new(a)),
            Err(e) => {
                let m = e.to_string();
                self.aws_error = Some(if m.starts_with("needs credentials") { format!("--backend {} {m}", self.backend.name()) } else { m });
            }
        }
    }

    /// The store configuration these flags describe (the one conversion; the
    /// store never sees flags), with the resolved AWS settings when
    /// [`StoreArgs::resolve_aws`] ran.
    pub fn config(&self) -> crate::store::StoreConfig {
        let io_threads = auto::io_threads(self.io_threads);
        let aws = self.aws.as_deref();
        crate::store::StoreConfig {
            backend: self.backend,
            bucket: self.bucket.clone(),
            root: self.root.clone(),
            direct: self.direct,
            io_threads: io_threads.value,
            io_threads_source: io_threads.source,
            file_io: match self.file_io {
                FileIoArg::Pread => crate::store::FileIo::Pread,
                FileIoArg::Mmap => crate::store::FileIo::Mmap,
            },
            endpoint: aws.map_or_else(|| self.endpoint.clone(), |a| a.endpoint.clone()),
            region: aws.map_or_else(|| self.region.clone().unwrap_or_else(|| "us-east-1".into()), |a| a.region.clone()),
            access_key: aws.map_or_else(|| self.access_key.clone(), |a| Some(a.credentials.access_key_id().to_string())),
            secret_key: aws.map_or_else(|| self.secret_key.clone(), |a| Some(a.credentials.secret_access_key().to_string())),
            session_token: aws.map_or_else(|| self.session_token.clone(), |a| a.credentials.session_token().map(str::to_string)),
            profile: self.profile.clone(),
            ca_bundle: self.ca_bundle.clone(),
            aws: self.aws.clone(),
            aws_error: self.aws_error.clone(),
            part_size: self.part_size,
            part_concurrency: self.part_concurrency,
            response_checksums: self.response_checksums,
            http_get: self.http_get,
            attempts: self.attempts,
            connect_timeout: self.connect_timeout,
            read_timeout: self.read_timeout,
            rdma_lib: self.rdma_lib.clone(),
            range_bytes: self.range_size,
            rdma_no_range: self.rdma_no_range,
            rdma_threads: self.rdma_threads,
            rdma_max_transfer: self.rdma_max_transfer,
            rdma_engine: self.rdma_engine,
            rdma_device: self.rdma_device.clone(),
            list_max_keys: u64::from(self.list_max_keys),
        }
    }
}

/// `--file-io` as typed (the store's [`crate::store::FileIo`] is the one that runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FileIoArg {
    /// pread(2) into the bounce buffer.
    Pread,
    /// Copy out of a read-only mapping of the file.
    Mmap,
}
