//! The `http` backend: any S3 endpoint (MinIO, AIStor, AWS, Ceph, s3s) through
//! `aws-sdk-s3`.
//!
//! A GET of one object is split into `--part-size` ranged GETs, up to
//! `--part-concurrency` in flight, each streamed straight into its own slice of
//! the caller's one buffer (no intermediate `Vec` per part). The first ranged GET
//! also learns the object's size from `Content-Range`, so a whole-object read
//! costs no extra HEAD. Objects above the part size are written with multipart
//! upload.
//!
//! The SDK's defaults are changed where S3-compatible stores break on them:
//! path-style addressing; request checksums only when required (newer SDKs add
//! CRC32 trailers to every PUT, which several stores reject); response
//! checksum validation per `--response-checksums`.

pub mod aws;
pub mod direct;
mod errors;
mod multipart;
pub use multipart::{PROGRESS_FLOOR_BYTES_PER_S, scaled_read_timeout};
pub mod sdk_retries;
pub(crate) mod served;
mod tls;

use std::ops::Range;
use std::time::Instant;

use async_trait::async_trait;
use aws_sdk_s3::Client;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{BehaviorVersion, Region, RequestChecksumCalculation, ResponseChecksumValidation, StalledStreamProtectionConfig};
use aws_sdk_s3::error::ProvideErrorMetadata;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{BucketLocationConstraint, CreateBucketConfiguration};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde_json::json;

use super::{
    Capabilities, ObjectMeta, ObjectStore, ObjectVersion, Transfer, TransferPath, Transport, check_capacity, check_key, check_source, check_version,
    resolve_range,
};
use crate::error::{AuthProblem, StoreError, root_cause};
use crate::flag::{ACCESS_KEY, BACKEND, ENDPOINT, HTTP_GET, PROFILE, READ_TIMEOUT, RESPONSE_CHECKSUMS, SECRET_KEY};
use crate::mem::Buffer;
use crate::store::{Backend, ChecksumMode, HttpGet, StoreConfig};
use aws::AwsSetup;
use direct::{DirectError, DirectGet};
use served::{Served, Version};

/// S3's smallest part for multipart upload (all parts but the last), 5 MiB
/// (AWS S3 API reference, UploadPart).
pub const MIN_MULTIPART_PART: u64 = 5 << 20;

/// An S3 bucket reached over HTTP(S).
#[derive(Debug)]
pub struct HttpStore {
    client: Client,
    bucket: String,
    endpoint: String,
    region: String,
    /// Where credentials, endpoint, region and CA came from (for the record).
    aws: std::sync::Arc<AwsSetup>,
    part_size: u64,
    part_concurrency: usize,
    checksums: ChecksumMode,
    attempts: u32,
    connect_timeout: std::time::Duration,
    read_timeout: std::time::Duration,
    /// The ranged-GET path when it is `direct` (`--http-get`); `None`: the SDK.
    direct: Option<DirectGet>,
    /// Retries made on the SDK paths, by cause.
    sdk_retries: std::sync::Arc<sdk_retries::SdkRetries>,
    /// CompleteMultipartUploads refused as gone on a retry and confirmed by a
    /// HEAD of the key (`multipart_completions_confirmed` in the store's counters).
    completions_confirmed: std::sync::atomic::AtomicU64,
    /// Keys one listing may hold ([`super::listing::ListBound`]).
    list_max_keys: u64,
}

/// Whether GETs take the direct path (`--http-get`): `auto` takes it for
/// plain `http://`, path-style, without response checksums to validate.
///
/// Errors: [`StoreError::Config`] for `direct` where it cannot run.
fn uses_direct_get(args: &StoreConfig, aws: &AwsSetup, endpoint: &str) -> Result<bool, StoreError> {
    let plain = reqwest::Url::parse(endpoint).is_ok_and(|u| u.scheme() == "http");
    let validate = args.response_checksums == ChecksumMode::WhenSupported;
    match args.http_get {
        HttpGet::Sdk => Ok(false),
        HttpGet::Auto => Ok(plain && !validate && aws.path_style),
        HttpGet::Direct if !aws.path_style => Err(StoreError::Config(format!(
            "{HTTP_GET} direct sends path-style requests, but virtual-hosted addressing is configured ({}): use {HTTP_GET} sdk",
            aws.addressing_source
        ))),
        HttpGet::Direct if validate => Err(StoreError::Config(format!(
            "{HTTP_GET} direct does not validate response checksums: drop {RESPONSE_CHECKSUMS} when-supported, or use {HTTP_GET} sdk"
        ))),
        HttpGet::Direct => Ok(true),
    }
}

impl HttpStore {
    /// Build the client from the configuration's resolved AWS settings
    /// ([`StoreConfig::aws`], from [`AwsSetup::resolve`]), or from its explicit
    /// values alone when nothing was resolved (a library caller, tests).
    ///
    /// Errors: [`StoreError::Config`] when credentials are missing, the endpoint
    /// is not an http(s) URL, or the CA bundle is not usable.
    pub fn new(args: &StoreConfig) -> Result<Self, StoreError> {
        if let Some(e) = &args.aws_error {
            return Err(StoreError::Config(e.clone()));
        }
        let aws = match &args.aws {
            Some(a) => a.clone(),
            None => std::sync::Arc::new(AwsSetup::explicit_only(&args.explicit_aws()).map_err(|_| {
                StoreError::Config(format!(
                    "{BACKEND} {} needs credentials: pass {ACCESS_KEY} and {SECRET_KEY}, set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or name a profile ({PROFILE}, AWS_PROFILE)",
                    args.backend.name()
                ))
            })?),
        };
        let endpoint = match aws.endpoint.as_deref().map(str::trim) {
            Some(e) => check_endpoint(e)?,
            None => format!("https://s3.{}.amazonaws.com", aws.region),
        };
        let sdk_retries = std::sync::Arc::new(sdk_retries::SdkRetries::default());
        let mut conf = aws_sdk_s3::Config::builder()
            .behavior_version(BehaviorVersion::latest())
            .region(Region::new(aws.region.clone()))
            .credentials_provider(aws.provider.clone())
            .force_path_style(aws.path_style)
            .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
            .response_checksum_validation(match args.response_checksums {
                ChecksumMode::WhenRequired => ResponseChecksumValidation::WhenRequired,
                ChecksumMode::WhenSupported => ResponseChecksumValidation::WhenSupported,
            })
            // The direct GET path's backoff (50 ms doubling): the SDK's default
            // (1 s doubling, up to 20 s) alone broke the bound on time to error.
            // The SDK caps a server's Retry-After (an explicit delay from
            // `HonourRetryAfter`) at the maximum backoff too, so that maximum is
            // the longest Retry-After honoured, as on the direct path; the own
            // backoff stays 50 ms, 100 ms at the default 3 attempts.
            .retry_config(
                RetryConfig::standard()
                    .with_max_attempts(args.attempts)
                    .with_initial_backoff(std::time::Duration::from_millis(50))
                    .with_max_backoff(direct::MAX_RETRY_AFTER),
            )
            .timeout_config(TimeoutConfig::builder().connect_timeout(args.connect_timeout).read_timeout(args.read_timeout).build())
            // A body that stops is bounded by --read-timeout too (the SDK's default grace is 20 s).
            .stalled_stream_protection(StalledStreamProtectionConfig::enabled().grace_period(args.read_timeout).build())
            .retry_classifier(sdk_retries::HonourRetryAfter)
            .interceptor(sdk_retries::CountRetries(sdk_retries.clone()));
        if aws.endpoint.is_some() {
            conf = conf.endpoint_url(&endpoint);
        }
        if let Some(ca) = &aws.ca_bundle {
            conf = conf.http_client(tls::client_trusting(ca)?);
        }
        let direct = if uses_direct_get(args, &aws, &endpoint)? {
            Some(DirectGet::new(&endpoint, &aws, args.connect_timeout, args.read_timeout, args.attempts).map_err(StoreError::Config)?)
        } else {
            None
        };
        Ok(HttpStore {
            client: Client::from_conf(conf.build()),
            bucket: args.bucket.clone(),
            endpoint,
            region: aws.region.clone(),
            aws,
            part_size: args.part_size,
            part_concurrency: args.part_concurrency as usize,
            checksums: args.response_checksums,
            attempts: args.attempts,
            connect_timeout: args.connect_timeout,
            read_timeout: args.read_timeout,
            direct,
            sdk_retries,
            completions_confirmed: Default::default(),
            list_max_keys: args.list_max_keys,
        })
    }

    /// Read `range` of `key` (the whole object when `None`) into
    /// `dst[at..]`: a first ranged GET of up to one part, which tells the
    /// object's size and version, then the other parts, `--part-concurrency`
    /// in flight, each pinned to that version (`If-Match`). With `pin`, the
    /// first GET asks for that version too.
    ///
    /// Errors: [`StoreError::Changed`] when the object is another version;
    /// [`StoreError::WrongRange`] for a wrong answer; as `get_into_at`.
    async fn read(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize, pin: Option<&ObjectVersion>) -> Result<Transfer, StoreError> {
        check_key(key)?;
        if let Some(r) = &range
            && r.start >= r.end
        {
            let size = self.head(key).await?.size;
            return Err(StoreError::BadRange { key: key.into(), range: r.clone(), size });
        }
        let t0 = Instant::now();
        let start = range.as_ref().map_or(0, |r| r.start);
        let first_end = range.as_ref().map_or(u64::MAX, |r| r.end).min(start.saturating_add(self.part_size));
        let Some(first) = self.send_first(key, start, first_end - 1, pin.and_then(|p| p.tag.as_deref())).await? else {
            // Out of range: either an empty object (whole-object read of
            // nothing) or a range beyond the end.
            let size = self.head(key).await?.size;
            if let Some(p) = pin
                && p.size != size
            {
                // Cut short since the pinned read: a change, not a bad range.
                check_version(key, &self.endpoint, p, Some(&ObjectVersion { tag: None, size }))?;
            }
            if size == 0 && range.is_none() {
                return Ok(Transfer { first_byte: Some(t0.elapsed()), ..Transfer::of(0, TransferPath::Http) });
            }
            return Err(StoreError::BadRange { key: key.into(), range: range.unwrap_or(0..0), size });
        };
        let version = self.first_version(key, start, first_end - 1, &first)?;
        if let Some(p) = pin {
            // A server that ignores If-Match answers with the version it has.
            check_version(key, &self.endpoint, p, Some(&version.served()))?;
        }
        let full = resolve_range(key, range, version.size)?;
        let len = full.end - full.start;
        check_capacity(key, len, at, dst)?;
        let first_len = (first_end.min(full.end) - full.start) as usize;
        let buf = &mut dst.as_host_mut().ok_or_else(|| StoreError::Config("device buffers go through store::read_into (the staged pipeline)".into()))?
            [at..at + len as usize];
        let (head, rest) = buf.split_at_mut(first_len);
        let part = self.part_size as usize;
        let rest_start = full.start + first_len as u64;
        let first_fut = self.read_first(key, first, head);
        let parts: Vec<_> = rest.chunks_mut(part).enumerate().map(|(i, chunk)| self.get_part(key, rest_start + (i * part) as u64, chunk, &version)).collect();
        // The first part's body is in flight too, so one fewer here.
        let rest_fut = futures::stream::iter(parts).buffer_unordered(self.part_concurrency.saturating_sub(1).max(1)).try_collect::<Vec<_>>();
        let (first_byte, _) = futures::try_join!(first_fut, rest_fut)?;
        Ok(Transfer { bytes: len, path: TransferPath::Http, first_byte: first_byte.map(|t| t - t0), version: Some(version.served()) })
    }

    /// One ranged GET of `dst.len()` bytes at `offset` of the object version
    /// `v` (the read's first part), streamed into `dst`; its answer must be
    /// that range of that version ([`served::check_part`]). Returns the time
    /// the first body byte arrived.
    async fn get_part(&self, key: &str, offset: u64, dst: &mut [u8], v: &Version) -> Result<Option<Instant>, StoreError> {
        if let Some(d) = &self.direct {
            return self.get_part_direct(d, key, offset, dst, v).await;
        }
        let end = offset + dst.len() as u64 - 1;
        let resp = self
            .client
            .get_object()
            .bucket(&self.bucket)
            .key(key)
            .range(format!("bytes={offset}-{end}"))
            .set_if_match(v.etag.clone())
            .send()
            .await
            .map_err(|e| self.map_err("GET", key, e))?;
        served::check_part(key, &self.endpoint, offset, end, v, Served { content_range: resp.content_range.as_deref(), etag: resp.e_tag.as_deref() })?;
        if let Some(n) = resp.content_length
            && n as u64 != dst.len() as u64
        {
            return Err(self.short(key, n.max(0) as u64, dst.len() as u64));
        }
        self.stream_into(key, resp.body, dst).await
    }

    /// One ranged GET on the direct path, read into `dst` (exactly `dst.len()` bytes at `offset`).
    async fn get_part_direct(&self, d: &DirectGet, key: &str, offset: u64, dst: &mut [u8], v: &Version) -> Result<Option<Instant>, StoreError> {
        let last = offset + dst.len() as u64 - 1;
        let mut resp = d.send(&self.bucket, key, offset, last, v.etag.as_deref()).await.map_err(|e| self.map_direct(key, e))?;
        if resp.status != 206 {
            return Err(self.range_ignored(key, offset, last, resp.status));
        }
        served::check_part(key, &self.endpoint, offset, last, v, Served { content_range: resp.content_range.as_deref(), etag: resp.etag.as_deref() })?;
        if resp.content_length != dst.len() as u64 {
            return Err(self.wrong_length(key, resp.content_length, dst.len() as u64));
        }
        let first = resp.read_into(dst).await.map_err(|e| self.map_direct(key, e))?;
        d.recycle(resp);
        Ok(Some(first))
    }

    /// A ranged GET answered with a status other than 206: the whole object
    /// (200: the server or a proxy ignores Range), never counted as the range.
    fn range_ignored(&self, key: &str, first: u64, last: u64, status: u16) -> StoreError {
        StoreError::WrongRange {
            key: key.into(),
            location: self.endpoint.clone(),
            asked: format!("bytes {first}-{last}"),
            served: format!("HTTP {status} instead of 206 Partial Content (the server ignores Range)"),
        }
    }

    /// Send the first ranged GET of an object (bytes `start..=last`) on
    /// whichever path `--http-get` chose; `None` when the server answers 416
    /// (an empty object, or a range beyond the end).
    async fn send_first(&self, key: &str, start: u64, last: u64, pin: Option<&str>) -> Result<Option<FirstPart>, StoreError> {
        if let Some(d) = &self.direct {
            return match d.send(&self.bucket, key, start, last, pin).await {
                Ok(r) => Ok(Some(FirstPart::Direct(r))),
                Err(DirectError::Status { status: 416, .. }) => Ok(None),
                Err(e) => Err(self.map_direct(key, e)),
            };
        }
        match self.client.get_object().bucket(&self.bucket).key(key).range(format!("bytes={start}-{last}")).set_if_match(pin.map(str::to_string)).send().await {
            Ok(r) => Ok(Some(FirstPart::Sdk(Box::new(r)))),
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 416) => Ok(None),
            Err(e) => Err(self.map_err("GET", key, e)),
        }
    }

    /// The object version (size, ETag) the first part of a read, asked for
    /// bytes `start..=last`, was served from ([`served::check_first`]).
    fn first_version(&self, key: &str, start: u64, last: u64, first: &FirstPart) -> Result<Version, StoreError> {
        let s = match first {
            FirstPart::Sdk(r) => Served { content_range: r.content_range.as_deref(), etag: r.e_tag.as_deref() },
            FirstPart::Direct(r) if r.status != 206 => return Err(self.range_ignored(key, start, last, r.status)),
            FirstPart::Direct(r) => Served { content_range: r.content_range.as_deref(), etag: r.etag.as_deref() },
        };
        served::check_first(key, &self.endpoint, start, last, s)
    }

    /// Read the first part's body into `dst` (its announced length must be `dst.len()`).
    async fn read_first(&self, key: &str, first: FirstPart, dst: &mut [u8]) -> Result<Option<Instant>, StoreError> {
        match first {
            FirstPart::Sdk(r) => {
                if let Some(n) = r.content_length
                    && n.max(0) as u64 != dst.len() as u64
                {
                    return Err(self.wrong_length(key, n.max(0) as u64, dst.len() as u64));
                }
                self.stream_into(key, r.body, dst).await
            }
            FirstPart::Direct(mut r) => {
                if r.content_length != dst.len() as u64 {
                    return Err(self.wrong_length(key, r.content_length, dst.len() as u64));
                }
                let t = r.read_into(dst).await.map_err(|e| self.map_direct(key, e))?;
                if let Some(d) = &self.direct {
                    d.recycle(r);
                }
                Ok(Some(t))
            }
        }
    }

    /// Copy a response body into `dst`; it must fill `dst` exactly.
    async fn stream_into(&self, key: &str, mut body: ByteStream, dst: &mut [u8]) -> Result<Option<Instant>, StoreError> {
        let mut off = 0usize;
        let mut first = None;
        while let Some(chunk) = body.try_next().await.map_err(|e| {
            StoreError::Other {
                op: "GET",
                key: key.into(),
                location: self.endpoint.clone(),
                detail: match root_cause(&e) {
                    // The stalled-stream guard's words for a body that stopped.
                    c if c.contains("minimum throughput") => {
                        format!("body broke after {off} bytes: no data for {} ({READ_TIMEOUT})", humantime::format_duration(self.read_timeout))
                    }
                    c => format!("body stream broke after {off} bytes: {c}"),
                },
                cause: None,
            }
            .caused_by(e)
        })? {
            first.get_or_insert_with(Instant::now);
            let Some(slot) = dst.get_mut(off..off + chunk.len()) else {
                return Err(StoreError::Other {
                    op: "GET",
                    key: key.into(),
                    location: self.endpoint.clone(),
                    detail: format!("server sent more than the {} bytes asked for", dst.len()),
                    cause: None,
                });
            };
            slot.copy_from_slice(&chunk);
            off += chunk.len();
        }
        if off != dst.len() {
            return Err(self.short(key, off as u64, dst.len() as u64));
        }
        Ok(first)
    }
}

/// The first ranged GET of an object, on either GET path, its body not yet read.
enum FirstPart {
    Sdk(Box<aws_sdk_s3::operation::get_object::GetObjectOutput>),
    Direct(direct::Response),
}

/// An endpoint must be `http(s)://host[:port]`: no credentials, path or query
/// (a path would silently become part of every key). Returns it without a trailing '/'.
pub(crate) fn check_endpoint(e: &str) -> Result<String, StoreError> {
    let bad = |why: &str| {
        // Never echo what may be user:password@ back.
        let shown = if e.contains('@') { "<endpoint with credentials>" } else { e };
        StoreError::Config(format!("invalid {ENDPOINT} '{shown}': {why}: use http://host:port or https://host"))
    };
    let url = reqwest::Url::parse(e).map_err(|err| {
        // http://::1:9100 : an IPv6 host without its brackets.
        // The authority, less any user:password@ (never shown).
        let authority = |rest: &str| {
            let a = rest.split('/').next().unwrap_or(rest);
            a.rsplit_once('@').map_or(a, |(_, host)| host).to_string()
        };
        match e.split_once("://").map(|(scheme, rest)| (scheme, authority(rest))) {
            Some((scheme, authority)) if !authority.contains('[') && authority.matches(':').count() >= 2 => {
                let (host, port) = match authority.rsplit_once(':') {
                    Some((h, p)) if h.parse::<std::net::Ipv6Addr>().is_ok() && p.parse::<u16>().is_ok() => (h, format!(":{p}")),
                    _ => (authority.as_str(), String::new()),
                };
                bad(&format!("an IPv6 address goes in brackets: {scheme}://[{host}]{port}"))
            }
            _ => bad(&err.to_string()),
        }
    })?;
    if url.scheme() != "http" && url.scheme() != "https" {
        return Err(bad("the scheme must be http or https"));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(&format!("credentials belong in {ACCESS_KEY}/{SECRET_KEY}, not the URL")));
    }
    if url.path() != "/" || url.query().is_some() || url.fragment().is_some() {
        return Err(bad("no path or query allowed"));
    }
    // The parsed form: scheme and host lowercased, a default port dropped.
    Ok(url.as_str().trim_end_matches('/').to_string())
}

#[async_trait]
impl ObjectStore for HttpStore {
    /// Ranged reads: one round of ranged GETs, every part in flight at once.
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            name: Backend::Http.name(),
            page_cache: false,
            device_writes: false,
            staged_path: TransferPath::HttpStaged,
            ranged_read: Some(self.part_size.saturating_mul(self.part_concurrency as u64)),
            direct_alignment: None,
            versioned_reads: true,
            server: true,
        }
    }
    fn bucket(&self) -> &str {
        &self.bucket
    }
    fn location(&self) -> String {
        self.endpoint.clone()
    }
    async fn ensure_bucket(&self, create: bool) -> Result<(), StoreError> {
        let mut err = match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => return Ok(()),
            Err(e) => self.map_err("HeadBucket", &self.bucket, e),
        };
        if let StoreError::Auth { problem: AuthProblem::Clock, .. } = err {
            // The SDK learnt the server's clock from that answer's Date (its
            // clock-skew correction); a HEAD's refusal carries no error code,
            // so its own retry did not fire: once more, signed at the server's time.
            err = match self.client.head_bucket().bucket(&self.bucket).send().await {
                Ok(_) => return Ok(()),
                Err(e) => self.map_err("HeadBucket", &self.bucket, e),
            };
        }
        match err {
            StoreError::NotFound { .. } | StoreError::NoSuchBucket { .. } if create => {
                let mut req = self.client.create_bucket().bucket(&self.bucket);
                if self.region != "us-east-1" {
                    req = req.create_bucket_configuration(
                        CreateBucketConfiguration::builder().location_constraint(BucketLocationConstraint::from(self.region.as_str())).build(),
                    );
                }
                match req.send().await {
                    Ok(_) => Ok(()),
                    Err(e) if e.code() == Some("BucketAlreadyOwnedByYou") => Ok(()),
                    Err(e) => Err(self.map_err("CreateBucket", &self.bucket, e)),
                }
            }
            StoreError::NotFound { .. } => Err(StoreError::NoSuchBucket { bucket: self.bucket.clone(), location: self.endpoint.clone() }),
            other => Err(other),
        }
    }
    async fn head(&self, key: &str) -> Result<ObjectMeta, StoreError> {
        check_key(key)?;
        let out = match self.client.head_object().bucket(&self.bucket).key(key).send().await.map_err(|e| self.map_err("HEAD", key, e)) {
            // Signed again at the server's time, which the refusal's Date taught the SDK (see ensure_bucket).
            Err(StoreError::Auth { problem: AuthProblem::Clock, .. }) => {
                self.client.head_object().bucket(&self.bucket).key(key).send().await.map_err(|e| self.map_err("HEAD", key, e))?
            }
            other => other?,
        };
        Ok(ObjectMeta { key: key.into(), size: out.content_length.unwrap_or(0).max(0) as u64 })
    }
    async fn get_into_at(&self, key: &str, range: Option<Range<u64>>, dst: &mut Buffer, at: usize) -> Result<Transfer, StoreError> {
        self.read(key, range, dst, at, None).await
    }
    async fn get_into_version(
        &self,
        key: &str,
        range: Option<Range<u64>>,
        dst: &mut Buffer,
        at: usize,
        version: &ObjectVersion,
    ) -> Result<Transfer, StoreError> {
        self.read(key, range, dst, at, Some(version)).await
    }
    async fn put_range(&self, key: &str, src: &Buffer, range: Range<usize>) -> Result<Transfer, StoreError> {
        check_key(key)?;
        check_source(key, src, &range)?;
        let data = &src
            .as_host()
            .ok_or_else(|| StoreError::Config("device memory is written through store::write_from (staged through pinned memory)".into()))?[range];
        let part = self.part_size.max(MIN_MULTIPART_PART) as usize;
        if data.len() > part {
            self.put_multipart(key, data, part).await?;
        } else {
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .body(ByteStream::from(Bytes::copy_from_slice(data)))
                .customize()
                .config_override(self.timeouts_for(data.len() as u64))
                .send()
                .await
                .map_err(|e| self.map_err("PUT", key, e))?;
        }
        Ok(Transfer::of(data.len() as u64, TransferPath::Http))
    }
    async fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        // Every key seen, with its size: a server that pages keys again, or
        // cycles through tokens (A, B, A, ...), would otherwise be listed until
        // memory runs out; the bound stops one that keeps paging new keys.
        let mut keys: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
        let mut tokens = std::collections::HashSet::new();
        let mut token: Option<String> = None;
        let mut bound = super::listing::ListBound::new(prefix, self.location(), self.list_max_keys);
        loop {
            bound.request(keys.len())?;
            let resp = self
                .client
                .list_objects_v2()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_continuation_token(token.take())
                .send()
                .await
                .map_err(|e| self.map_err("LIST", prefix, e))?;
            let broken = |keys: usize, why: &str| StoreError::Other {
                op: "LIST",
                key: prefix.to_string(),
                location: self.location(),
                detail: format!("after {keys} keys the server {why}: its listing cannot be completed (a misbehaving server or proxy)"),
                cause: None,
            };
            let (mut again, mut first_again) = (0usize, None);
            for o in resp.contents() {
                if let Some(k) = o.key() {
                    // S3 pages a listing in key order, each page after the
                    // last (ListObjectsV2): a key listed before is never a
                    // real page's (tests/cli/data.rs, `a_listing_that_cycles_or_repeats_its_keys_is_an_error`).
                    if keys.insert(k.to_string(), o.size().unwrap_or(0).max(0) as u64).is_some() {
                        again += 1;
                        first_again.get_or_insert_with(|| k.to_string());
                    }
                    bound.keys(keys.len())?;
                }
            }
            if again > 0 {
                return Err(broken(
                    keys.len(),
                    &format!("sent a page with {again} key(s) it had listed already (the first: '{}')", first_again.unwrap_or_default()),
                ));
            }
            // A listing either ends (IsTruncated false) or says where it goes
            // on; a server that claims more keys without a new token cannot be
            // continued, and stopping there would truncate silently (tests/cli/data.rs,
            // `a_listing_the_server_never_ends_is_an_error_not_a_truncation`).
            match (resp.is_truncated() == Some(true), resp.next_continuation_token()) {
                (false, _) => break,
                (true, None) => return Err(broken(keys.len(), "answered IsTruncated=true without a NextContinuationToken")),
                (true, Some(t)) if !tokens.insert(t.to_string()) => {
                    return Err(broken(keys.len(), &format!("answered a NextContinuationToken it had given before ('{t}')")));
                }
                (true, Some(t)) => token = Some(t.to_string()),
            }
        }
        let mut out: Vec<ObjectMeta> = keys.into_iter().map(|(key, size)| ObjectMeta { key, size }).collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
    async fn delete(&self, key: &str) -> Result<(), StoreError> {
        check_key(key)?;
        match self.client.delete_object().bucket(&self.bucket).key(key).send().await {
            Ok(_) => Ok(()),
            Err(e) => match self.map_err("DELETE", key, e) {
                StoreError::NotFound { .. } => Ok(()),
                other => Err(other),
            },
        }
    }
}

impl Transport for HttpStore {
    /// Retries by cause: the direct GET path's (`get_retries_5xx`, `_connect`,
    /// `_timeout`, `_io`) and the SDK paths' (`sdk_retries_5xx`, `_timeout`,
    /// `_io`, `_other`: PUT, multipart, HEAD, LIST, DELETE, `--http-get sdk`).
    fn stats(&self) -> crate::store::StoreStats {
        let mut pairs = self.direct.as_ref().map(|d| d.retries.counters().to_vec()).unwrap_or_default();
        pairs.extend(self.sdk_retries.counters());
        pairs.push(("multipart_completions_confirmed", self.completions_confirmed.load(std::sync::atomic::Ordering::Relaxed)));
        crate::store::StoreStats(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }
    fn describe(&self) -> serde_json::Value {
        json!({"backend": "http", "endpoint": self.endpoint, "region": self.region, "bucket": self.bucket,
               "addressing": if self.aws.path_style { "path-style" } else { "virtual-hosted" }, "aws": self.aws.describe(), "part_size_bytes": self.part_size,
               "part_concurrency": self.part_concurrency, "response_checksums": self.checksums,
               "request_checksums": "when-required", "attempts": self.attempts,
               "read_timeout_s": self.read_timeout.as_secs_f64(),
               "payload_read_timeout": format!("read_timeout_s + bytes / {:.0} B/s (PUT, UploadPart, CompleteMultipartUpload)", multipart::PROGRESS_FLOOR_BYTES_PER_S),
               "get_path": if self.direct.is_some() { "direct" } else { "sdk" }, "server": super::server::describe(&self.endpoint)})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_checked() {
        assert_eq!(check_endpoint("http://127.0.0.1:9000/").unwrap(), "http://127.0.0.1:9000");
        assert!(check_endpoint("https://s3.example.com").is_ok());
        assert_eq!(check_endpoint("HTTP://LocalHost:9000/").unwrap(), "http://localhost:9000");
        assert_eq!(check_endpoint("http://[::1]:9000").unwrap(), "http://[::1]:9000");
        for bad in ["http://", "http://127.0.0.1:99999", "http://h:1/path", "http://h:1/?x=1", "ftp://h", "h:9000"] {
            assert!(check_endpoint(bad).is_err(), "{bad} accepted");
        }
        let e = check_endpoint("http://AK:SECRET@h:1").unwrap_err().to_string();
        assert!(!e.contains("SECRET"), "{e}");
        // An IPv6 host without brackets: the fix, with and without a port.
        for (bad, fix) in
            [("http://::1:9100", "http://[::1]:9100"), ("https://2001:db8::5", "https://[2001:db8::5]"), ("http://fe80::1:9000/", "http://[fe80::1]:9000")]
        {
            let e = check_endpoint(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("an IPv6 address goes in brackets: {fix}:")), "{bad}: {e}");
        }
    }
}
