//! Multipart PUT over the SDK: parts uploaded `part_concurrency` at a time,
//! completed in part order, aborted on failure or when the PUT's future is
//! dropped part-way ([`PendingUpload`]).
//!
//! Completion is idempotent for the caller: a retried CompleteMultipartUpload
//! whose upload is gone is checked by a HEAD of the key, size and multipart
//! ETag ([`multipart_etag`]), and every request that carries or assembles a
//! payload waits [`scaled_read_timeout`] for its answer, not the flat
//! `--read-timeout` (tests/cli/faults.rs: `a_completion_answered_late_*`).

use std::time::Duration;

use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use md5::{Digest, Md5};

use super::HttpStore;
use crate::error::StoreError;

impl HttpStore {
    async fn upload_part(&self, key: &str, upload_id: &str, n: i32, chunk: &[u8]) -> Result<CompletedPart, StoreError> {
        // One copy per part: the SDK wants an owned body and the caller's
        // buffer is borrowed. Zero-copy needs an owned, shareable buffer
        // (Bytes::from_owner), left for the checkpoint bench.
        let out = self
            .client
            .upload_part()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(upload_id)
            .part_number(n)
            .body(ByteStream::from(Bytes::copy_from_slice(chunk)))
            .customize()
            .config_override(self.timeouts_for(chunk.len() as u64))
            .send()
            .await
            .map_err(|e| self.map_err("UploadPart", key, e))?;
        Ok(CompletedPart::builder().part_number(n).set_e_tag(out.e_tag).build())
    }

    pub(super) async fn put_multipart(&self, key: &str, data: &[u8], part: usize) -> Result<(), StoreError> {
        let upload =
            self.client.create_multipart_upload().bucket(&self.bucket).key(key).send().await.map_err(|e| self.map_err("CreateMultipartUpload", key, e))?;
        let upload_id = upload.upload_id().unwrap_or_default().to_string();
        let mut pending =
            PendingUpload { client: self.client.clone(), bucket: self.bucket.clone(), key: key.to_string(), upload_id: upload_id.clone(), done: false };
        // Futures are built first and then driven by buffer_unordered: a closure
        // inside the stream combinator trips rustc's higher-ranked Send check.
        let uploads: Vec<_> = data.chunks(part).enumerate().map(|(i, chunk)| self.upload_part(key, &upload_id, i as i32 + 1, chunk)).collect();
        let result: Result<Vec<CompletedPart>, StoreError> = futures::stream::iter(uploads).buffer_unordered(self.part_concurrency).try_collect().await;
        let mut parts = match result {
            Ok(p) => p,
            Err(e) => {
                self.abort(key, &upload_id).await;
                pending.done = true;
                return Err(e);
            }
        };
        parts.sort_by_key(|p| p.part_number);
        let sent = Sent { bytes: data.len() as u64, etag: multipart_etag(&parts) };
        let answer = self
            .client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(&upload_id)
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
            .customize()
            .config_override(self.timeouts_for(sent.bytes))
            .send()
            .await;
        let outcome = match answer {
            Ok(_) => Ok(()),
            Err(e) if upload_gone(&e) => self.confirm_completed(key, &sent, self.map_err("CompleteMultipartUpload", key, e)).await,
            Err(e) => Err(self.map_err("CompleteMultipartUpload", key, e)),
        };
        if outcome.is_err() {
            // Refused for good: its parts are freed now, not by a background
            // task the process may exit before (an upload that is gone makes
            // this one wasted request).
            self.abort(key, &upload_id).await;
        }
        pending.done = true;
        outcome
    }

    /// Abort an upload, best effort, within one `--read-timeout`: clean-up
    /// gets one short budget, never a new round of attempts, so against a
    /// hung server a failure comes within attempts x --read-timeout (plus
    /// this), not twice that.
    async fn abort(&self, key: &str, upload_id: &str) {
        let abort = self.client.abort_multipart_upload().bucket(&self.bucket).key(key).upload_id(upload_id).send();
        let _ = tokio::time::timeout(self.read_timeout, abort).await;
    }

    /// An SDK override of the client's timeouts for a request whose duration
    /// grows with `bytes` ([`scaled_read_timeout`]).
    pub(super) fn timeouts_for(&self, bytes: u64) -> aws_sdk_s3::config::Builder {
        // A whole TimeoutConfig: the override replaces the client's, it does not merge with it.
        aws_sdk_s3::Config::builder()
            .timeout_config(TimeoutConfig::builder().connect_timeout(self.connect_timeout).read_timeout(scaled_read_timeout(self.read_timeout, bytes)).build())
    }

    /// A CompleteMultipartUpload refused because its upload is gone: the
    /// usual cause is that an earlier attempt completed it and its answer was
    /// lost (a read timeout, a reset), so the SDK sent it again. The upload is
    /// taken as completed when a HEAD of `key` finds an object of the size sent
    /// whose ETag is the one S3 gives the parts sent ([`multipart_etag`]);
    /// otherwise `refused` is returned, with what the HEAD found.
    ///
    /// Errors: `refused`, its detail extended with the HEAD's finding.
    async fn confirm_completed(&self, key: &str, sent: &Sent, refused: StoreError) -> Result<(), StoreError> {
        let head = self.client.head_object().bucket(&self.bucket).key(key).send().await;
        let found = match &head {
            Ok(h) => Found::Object { bytes: h.content_length.unwrap_or(0).max(0) as u64, etag: h.e_tag.as_deref().unwrap_or("").trim_matches('"').to_string() },
            Err(e) if e.raw_response().is_some_and(|r| r.status().as_u16() == 404) => Found::Nothing,
            Err(e) => Found::Unreadable(crate::error::root_cause(e)),
        };
        let wanted = match &sent.etag {
            Some(etag) => format!("{} bytes with ETag {etag}", sent.bytes),
            None => format!("{} bytes (the parts' ETags are not MD5s, so the object's ETag cannot be predicted)", sent.bytes),
        };
        match &found {
            Found::Object { bytes, etag } if *bytes == sent.bytes && sent.etag.as_deref() == Some(etag.as_str()) => {
                self.completions_confirmed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                tracing::warn!(
                    "CompleteMultipartUpload '{key}' at {}: the upload was gone when the request was sent again (an earlier attempt's answer was lost); \
                     a HEAD found the object as uploaded ({wanted}), so it is taken as completed",
                    self.endpoint
                );
                Ok(())
            }
            _ => Err(refused.with_detail(
                "CompleteMultipartUpload",
                key,
                &format!("a HEAD of the key found {} where a completed upload would have left {wanted}, so no earlier attempt completed it", found.describe()),
            )),
        }
    }
}

/// What a completion would leave: the payload's size and, when every part's
/// ETag is an MD5, the object's multipart ETag.
struct Sent {
    bytes: u64,
    etag: Option<String>,
}

/// What a HEAD of a key found.
enum Found {
    Object { bytes: u64, etag: String },
    Nothing,
    Unreadable(String),
}

impl Found {
    fn describe(&self) -> String {
        match self {
            Found::Object { bytes, etag } => format!("an object of {bytes} bytes with ETag {etag}"),
            Found::Nothing => "no object".into(),
            Found::Unreadable(why) => format!("nothing it could read ({why})"),
        }
    }
}

/// The slowest rate, in bytes per second, at which a request whose duration
/// grows with its payload is still taken as progressing: a PUT or UploadPart
/// (its body is sent before the answer can start) and a
/// CompleteMultipartUpload (the server assembles every part before it
/// answers; AWS documents that this can take minutes for large objects and
/// that the answer may be HTTP 200 with an error in its body:
/// <https://docs.aws.amazon.com/AmazonS3/latest/API/API_CompleteMultipartUpload.html>).
/// 50 MB/s is below a disk-backed server assembling a 4 GiB object while
/// busy, which took more than the 30 s default `--read-timeout` on a
/// 2-core machine (s3s-fs copies and MD5-hashes every part).
pub const PROGRESS_FLOOR_BYTES_PER_S: f64 = 50e6;

/// The read timeout of a request whose duration grows with `bytes`:
/// `read_timeout + bytes / PROGRESS_FLOOR_BYTES_PER_S`
/// ([`PROGRESS_FLOOR_BYTES_PER_S`]); e.g. 30 s + 86 s for 4 GiB.
pub fn scaled_read_timeout(read_timeout: Duration, bytes: u64) -> Duration {
    read_timeout + Duration::from_secs_f64(bytes as f64 / PROGRESS_FLOOR_BYTES_PER_S)
}

/// Whether a CompleteMultipartUpload was refused because its upload no longer
/// exists: S3's and MinIO's `NoSuchUpload`, or s3s-fs's `AccessDenied` (it
/// answers a missing upload so). A real policy refusal is told apart by the
/// HEAD that follows ([`HttpStore::confirm_completed`]).
fn upload_gone<E: ProvideErrorMetadata>(e: &SdkError<E, aws_sdk_s3::config::http::HttpResponse>) -> bool {
    e.as_service_error().and_then(|s| s.code()).is_some_and(|c| c == "NoSuchUpload" || c == "AccessDenied")
}

/// The ETag S3 gives an object completed from `parts`: the MD5 of the parts'
/// binary MD5s, `-` and the part count (the form AWS, MinIO and s3s-fs use
/// for unencrypted objects). `None` when a part's ETag is not a hex MD5
/// (SSE-KMS, SSE-C): the object's ETag then cannot be predicted.
pub(super) fn multipart_etag(parts: &[CompletedPart]) -> Option<String> {
    let mut md5 = Md5::new();
    for p in parts {
        let hex = p.e_tag()?.trim_matches('"');
        if hex.len() != 32 {
            return None;
        }
        for i in (0..32).step_by(2) {
            md5.update([u8::from_str_radix(hex.get(i..i + 2)?, 16).ok()?]);
        }
    }
    let digest: String = md5.finalize().iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("{digest}-{}", parts.len()))
}

/// A multipart upload not yet completed. Dropped unfinished (its PUT's
/// future cancelled mid-way: a fail-fast fan-out stopped it), it aborts the
/// upload in the background, best effort, so the server does not keep its
/// parts; the error path aborts it in line.
struct PendingUpload {
    client: aws_sdk_s3::Client,
    bucket: String,
    key: String,
    upload_id: String,
    done: bool,
}

impl Drop for PendingUpload {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(h) = tokio::runtime::Handle::try_current() {
            let (c, b, k, u) = (self.client.clone(), std::mem::take(&mut self.bucket), std::mem::take(&mut self.key), std::mem::take(&mut self.upload_id));
            h.spawn(async move {
                let _ = c.abort_multipart_upload().bucket(b).key(k).upload_id(u).send().await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(n: i32, etag: &str) -> CompletedPart {
        CompletedPart::builder().part_number(n).e_tag(etag).build()
    }

    #[test]
    fn the_multipart_etag_is_the_md5_of_the_parts_md5s_and_their_count() {
        // The parts' ETags are MD5("a") and MD5("b"); the expected value is
        // Python's hashlib.md5(bytes.fromhex(a) + bytes.fromhex(b)).hexdigest() + "-2".
        let parts = [part(1, "\"0cc175b9c0f1b6a831c399e269772661\""), part(2, "92eb5ffee6ae2fec3ad71c777531578f")];
        assert_eq!(multipart_etag(&parts).as_deref(), Some("96e024ba2074fe77e8e965ba43a704be-2"));
        // An ETag that is no MD5 (SSE-KMS) or none at all: no prediction.
        assert_eq!(multipart_etag(&[part(1, "\"0cc175b9c0f1b6a831c399e2697726\"")]), None);
        assert_eq!(multipart_etag(&[part(1, "zz c175b9c0f1b6a831c399e269772661")]), None);
        assert_eq!(multipart_etag(&[CompletedPart::builder().part_number(1).build()]), None);
    }

    #[test]
    fn a_payloads_timeout_grows_by_its_bytes_at_the_floor_rate() {
        let base = Duration::from_secs(30);
        assert_eq!(scaled_read_timeout(base, 0), base);
        // 4 GiB at 50 MB/s: 85.9 s on top of the 30 s.
        let t = scaled_read_timeout(base, 4 << 30).as_secs_f64();
        assert!((t - (30.0 + 4294967296.0 / 50e6)).abs() < 1e-6, "{t}");
    }
}
