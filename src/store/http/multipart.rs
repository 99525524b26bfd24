//! Multipart PUT over the SDK: parts uploaded `part_concurrency` at a time,
//! completed in part order, aborted on failure or when the PUT's future is
//! dropped part-way ([`PendingUpload`]).

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};

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
                // Clean-up gets one short budget, never a new round of
                // attempts: against a hung server the failure must come within
                // attempts x --read-timeout (plus this), not twice that.
                let abort = self.client.abort_multipart_upload().bucket(&self.bucket).key(key).upload_id(&upload_id).send();
                let _ = tokio::time::timeout(self.read_timeout, abort).await;
                pending.done = true;
                return Err(e);
            }
        };
        parts.sort_by_key(|p| p.part_number);
        self.client
            .complete_multipart_upload()
            .bucket(&self.bucket)
            .key(key)
            .upload_id(&upload_id)
            .multipart_upload(CompletedMultipartUpload::builder().set_parts(Some(parts)).build())
            .send()
            .await
            .map_err(|e| self.map_err("CompleteMultipartUpload", key, e))?;
        pending.done = true;
        Ok(())
    }
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
