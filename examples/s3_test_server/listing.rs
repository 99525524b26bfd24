//! s3s-fs behind one change: ListObjectsV2 without a delimiter reads only the
//! directory the prefix names, in one blocking task, as an object store
//! lists from its namespace index by prefix.
//!
//! s3s-fs 0.14.1 (`list_objects_recursive` in its `s3.rs`) walks the whole
//! bucket for every page and awaits three `tokio::fs` calls per file, each a
//! round trip through tokio's blocking pool. Under thousands of concurrent
//! HEADs (ranks polling a barrier's `go`, which queue in the same pool) a
//! listing of 2,048 markers then took longer than the 30 s read timeout:
//! the barrier simulation of `scripts/barrier-sim.sh` measured the test
//! server, not the rendezvous. Keys, order, paging (the continuation token
//! is the last key of the page, as s3s-fs's) and the answer's fields are
//! s3s-fs's; every other request, and a listing with a delimiter or a
//! prefix that is not a plain relative path, goes to s3s-fs unchanged.
//! Written here because no crate offers an S3 server over a directory with
//! a prefix-scoped listing; the rest stays s3s-fs's.

use std::path::{Component, Path, PathBuf};

use s3s::dto::*;
use s3s::{S3, S3Error, S3ErrorCode, S3Request, S3Response, S3Result};

/// s3s-fs with a prefix-scoped ListObjectsV2 (see the module docs).
pub struct Store {
    fs: s3s_fs::FileSystem,
    root: PathBuf,
}

impl Store {
    /// The store over directory `root` (created by the caller), one bucket per subdirectory.
    pub fn new(root: &Path) -> std::io::Result<Store> {
        let fs = s3s_fs::FileSystem::new(root).map_err(|e| std::io::Error::other(format!("{e:?}")))?;
        // s3s-fs resolves its root the same way: against the working directory, canonical.
        let root = std::env::current_dir()?.join(root).canonicalize()?;
        Ok(Store { fs, root })
    }
}

/// One listed object: key, size in bytes, modification time.
type Listed = (String, u64, std::time::SystemTime);

/// The directory to walk for `prefix` (its part up to the last `/`) and
/// whether the prefix is a plain relative path (no `.`, `..` or empty
/// component, no backslash) that this walk may serve.
fn start_dir(prefix: &str) -> Option<&str> {
    let dir = prefix.rfind('/').map_or("", |i| &prefix[..i]);
    let plain = !prefix.contains('\\') && (dir.is_empty() || Path::new(dir).components().all(|c| matches!(c, Component::Normal(_))));
    (plain && !dir.split('/').any(|c| c == "." || c == "..") && !dir.contains("//")).then_some(dir)
}

/// Every file under `bucket_root/dir` whose key (its path under
/// `bucket_root`, `/`-separated) starts with `prefix`, sorted by key. A
/// directory that is missing, or that the path cannot name (a part of it is
/// an object, a part is too long), lists nothing.
fn walk(bucket_root: &Path, dir: &str, prefix: &str) -> std::io::Result<Vec<Listed>> {
    let mut out = Vec::new();
    let mut queue = vec![bucket_root.join(dir)];
    while let Some(d) = queue.pop() {
        let entries = match std::fs::read_dir(&d) {
            Ok(e) => e,
            // No such directory, a path through an object (ENOTDIR), a name
            // no file can have (ENAMETOOLONG): no key has this prefix.
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory | std::io::ErrorKind::InvalidFilename) => continue,
            Err(e) => return Err(e),
        };
        for entry in entries {
            let entry = entry?;
            let ty = entry.file_type()?;
            let path = entry.path();
            if ty.is_dir() {
                queue.push(path);
                continue;
            }
            let Some(key) = path.strip_prefix(bucket_root).ok().and_then(|k| k.to_str()).map(|k| k.replace(std::path::MAIN_SEPARATOR, "/")) else {
                continue;
            };
            if !key.starts_with(prefix) {
                continue;
            }
            // A file removed between the directory read and its metadata is not listed.
            let Ok(meta) = entry.metadata() else { continue };
            out.push((key, meta.len(), meta.modified()?));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// One page of `all` (sorted by key): the keys after `after`, at most `max_keys`; and whether more follow.
fn page(all: Vec<Listed>, after: Option<&str>, max_keys: usize) -> (Vec<Listed>, bool) {
    let mut rest: Vec<Listed> = all.into_iter().filter(|o| after.is_none_or(|a| o.0.as_str() > a)).collect();
    let truncated = rest.len() > max_keys;
    rest.truncate(max_keys);
    (rest, truncated)
}

/// `r`, with an internal error logged with its cause (s3s-fs logs its own
/// only when built as its binary, and a 500 answer to a HEAD has no body).
fn said<T>(op: &str, r: S3Result<T>) -> S3Result<T> {
    if let Err(e) = &r
        && *e.code() == S3ErrorCode::InternalError
    {
        tracing::error!(op, error = ?e, "internal error");
    }
    r
}

fn internal(e: impl std::fmt::Display) -> S3Error {
    S3Error::with_message(S3ErrorCode::InternalError, e.to_string())
}

#[async_trait::async_trait]
impl S3 for Store {
    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        let prefix = req.input.prefix.clone().unwrap_or_default();
        // A max-keys of 0 or below, like a delimiter, is s3s-fs's to answer.
        let served = req.input.delimiter.is_none()
            && req.input.max_keys.is_none_or(|m| m > 0)
            && !req.input.bucket.contains(['/', '\\'])
            && !req.input.bucket.starts_with('.');
        let Some(dir) = start_dir(&prefix).filter(|_| served).map(str::to_string) else { return said("list_objects_v2", self.fs.list_objects_v2(req).await) };
        let input = req.input;
        let bucket_root = self.root.join(&input.bucket);
        if !bucket_root.is_dir() {
            return Err(S3Error::new(S3ErrorCode::NoSuchBucket));
        }
        let max_keys = input.max_keys.unwrap_or(1000);
        let p = prefix.clone();
        let all = tokio::task::spawn_blocking(move || walk(&bucket_root, &dir, &p)).await.map_err(internal)?.map_err(internal)?;
        // s3s-fs resumes after the larger of the token and start-after.
        let after = match (input.continuation_token.as_deref(), input.start_after.as_deref()) {
            (Some(t), Some(s)) => Some(t.max(s)),
            (t, s) => t.or(s),
        };
        let (listed, truncated) = page(all, after, usize::try_from(max_keys).unwrap_or(1000));
        let next = truncated.then(|| listed.last().map(|o| o.0.clone())).flatten();
        let contents: Vec<Object> = listed
            .into_iter()
            .map(|(key, size, modified)| Object {
                key: Some(key),
                size: Some(i64::try_from(size).unwrap_or(i64::MAX)),
                last_modified: Some(Timestamp::from(modified)),
                ..Default::default()
            })
            .collect();
        let output = ListObjectsV2Output {
            key_count: Some(i32::try_from(contents.len()).unwrap_or(i32::MAX)),
            max_keys: Some(max_keys),
            is_truncated: Some(truncated),
            contents: (!contents.is_empty()).then_some(contents),
            continuation_token: input.continuation_token,
            next_continuation_token: next,
            encoding_type: input.encoding_type,
            name: Some(input.bucket),
            prefix: input.prefix,
            start_after: input.start_after,
            ..Default::default()
        };
        Ok(S3Response::new(output))
    }

    // Everything else: s3s-fs's own answer.
    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        said("list_objects", self.fs.list_objects(req).await)
    }
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        said("create_bucket", self.fs.create_bucket(req).await)
    }
    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        said("copy_object", self.fs.copy_object(req).await)
    }
    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        said("delete_bucket", self.fs.delete_bucket(req).await)
    }
    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        said("delete_object", self.fs.delete_object(req).await)
    }
    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        said("delete_objects", self.fs.delete_objects(req).await)
    }
    async fn get_bucket_location(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        said("get_bucket_location", self.fs.get_bucket_location(req).await)
    }
    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        said("get_object", self.fs.get_object(req).await)
    }
    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        said("head_bucket", self.fs.head_bucket(req).await)
    }
    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        said("head_object", self.fs.head_object(req).await)
    }
    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        said("list_buckets", self.fs.list_buckets(req).await)
    }
    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        said("put_object", self.fs.put_object(req).await)
    }
    async fn create_multipart_upload(&self, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        said("create_multipart_upload", self.fs.create_multipart_upload(req).await)
    }
    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        said("upload_part", self.fs.upload_part(req).await)
    }
    async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        said("upload_part_copy", self.fs.upload_part_copy(req).await)
    }
    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        said("list_parts", self.fs.list_parts(req).await)
    }
    async fn complete_multipart_upload(&self, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        said("complete_multipart_upload", self.fs.complete_multipart_upload(req).await)
    }
    async fn abort_multipart_upload(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        said("abort_multipart_upload", self.fs.abort_multipart_upload(req).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_walk_starts_at_the_prefix_directory_and_refuses_odd_paths() {
        assert_eq!(start_dir("s3rdma-ranks/run/epoch/00001-b0/"), Some("s3rdma-ranks/run/epoch/00001-b0"));
        assert_eq!(start_dir("data/shard-0"), Some("data"));
        assert_eq!(start_dir("shard"), Some(""));
        assert_eq!(start_dir(""), Some(""));
        for odd in ["../x/", "a/../b/", "a//b/", "./a/", "/a/", "a\\b"] {
            assert_eq!(start_dir(odd), None, "{odd}");
        }
    }

    #[test]
    fn pages_follow_the_last_key_and_say_when_more_follow() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path().join("bkt");
        for k in ["p/r00002", "p/r00000", "p/r00001", "p/sub/x", "q/other", "pz"] {
            let f = b.join(k);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(&f, k.as_bytes()).unwrap();
        }
        let all = walk(&b, "p", "p/").unwrap();
        let keys: Vec<&str> = all.iter().map(|o| o.0.as_str()).collect();
        assert_eq!(keys, ["p/r00000", "p/r00001", "p/r00002", "p/sub/x"]);
        assert_eq!(all[3].1, 7);
        let (first, more) = page(all.clone(), None, 2);
        assert!(more);
        assert_eq!(first.last().unwrap().0, "p/r00001");
        let (second, more) = page(all, Some("p/r00001"), 2);
        assert!(!more);
        assert_eq!(second.iter().map(|o| o.0.as_str()).collect::<Vec<_>>(), ["p/r00002", "p/sub/x"]);
        assert_eq!(walk(&b, "", "p").unwrap().len(), 5, "pz too: a prefix is not a directory");
        assert!(walk(&b, "nope", "nope/").unwrap().is_empty());
        // Through an object, or a name too long for any file: nothing, not an error.
        assert!(walk(&b, "pz", "pz/").unwrap().is_empty());
        assert!(walk(&b, "p/r00000/x", "p/r00000/x/").unwrap().is_empty());
        let long = "x".repeat(300);
        assert!(walk(&b, &long, &format!("{long}/")).unwrap().is_empty());
    }
}
