//! Dataset shard layouts (docs/02-prepare-dataset.md), compatible with the
//! original suite's ingest so its datasets carry over:
//!
//! - token shards: `<prefix>-NNNNNN.bin` = sequences x seq_len int32 little-endian,
//!   no header, + `<prefix>-NNNNNN.json` ([`TokenShard`]);
//! - raw image shards: `<prefix>-NNNNNN.raw` = N x H x W x 3 uint8 (HWC, RGB), no
//!   header, + `<prefix>-NNNNNN.json` ([`RawShard`]);
//! - JPEG shards: `<prefix>-NNNNNN.tar`, a WebDataset-compatible plain ustar tar
//!   (`<key>.jpg` + `<key>.cls`), + `<prefix>-NNNNNN.index.json` ([`JpegIndex`])
//!   whose offsets point at each JPEG payload, so a sample is one ranged GET.
//!
//! The sidecar is written after its data object: a shard without a sidecar does
//! not exist for the readers (the same commit rule as checkpoint manifests).
//! The whole set is committed by `<prefix>.dataset.json` ([`DatasetManifest`]),
//! written after the last shard. An ingest first replaces the old manifest by
//! one in state [`SetState::Writing`], then deletes every old shard of the
//! prefix, so a re-ingest never mixes with an older set and an interrupted one
//! (a decode error, a full disk, a kill) is refused by every reader until an
//! ingest completes. Readers check each shard's data object against its
//! sidecar ([`ShardMeta`]) and the set against the manifest's shard count,
//! items and bytes; a set without a manifest (one the original suite wrote)
//! is read with a recorded warning.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::flag::{BACKEND, BUCKET, PREFIX};

/// Digits of the shard number in a key (`-000000`).
pub const SHARD_DIGITS: usize = 6;

/// Key of shard `n` with suffix `ext` (`tokens/train-000003.bin`).
pub fn shard_key(prefix: &str, n: usize, ext: &str) -> String {
    format!("{prefix}-{n:0SHARD_DIGITS$}.{ext}")
}

/// `<prefix>.dataset.json`: the set's commit record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DatasetManifest {
    /// `tokens`, `raw` or `jpeg`.
    pub kind: String,
    /// Shards `<prefix>-000000` .. `<prefix>-{shards-1}`.
    pub shards: usize,
    /// Sequences (tokens) or images (raw, jpeg) in the set.
    pub items: u64,
    /// Bytes of the data objects.
    pub bytes: u64,
    /// The `s3rdma` version that wrote it.
    pub tool_version: String,
    /// Whether the set is whole; manifests written before this field existed are.
    #[serde(default)]
    pub state: SetState,
}

/// Where an ingest of a set stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SetState {
    /// An ingest began and has not committed: the shards are partial.
    Writing,
    /// The last shard and the manifest are written.
    #[default]
    Complete,
}

impl DatasetManifest {
    /// The manifest an ingest of `kind` puts first: nothing committed yet.
    pub fn writing(kind: &str) -> Self {
        DatasetManifest { kind: kind.into(), shards: 0, items: 0, bytes: 0, tool_version: env!("CARGO_PKG_VERSION").into(), state: SetState::Writing }
    }

    /// The manifest that commits a whole set of `kind`: `shards` shards holding
    /// `items` sequences or images in `bytes` bytes of data objects.
    pub fn complete(kind: &str, shards: usize, items: u64, bytes: u64) -> Self {
        DatasetManifest { kind: kind.into(), shards, items, bytes, tool_version: env!("CARGO_PKG_VERSION").into(), state: SetState::Complete }
    }
}

/// What a reader needs of one kind of shard sidecar to find, check and size
/// the shard ([`TokenShard`], [`RawShard`], [`JpegIndex`]).
pub trait ShardMeta: for<'de> Deserialize<'de> {
    /// The set's kind as the manifest and `s3rdma ingest` name it.
    const KIND: &'static str;
    /// The sidecar's suffix after `<prefix>-NNNNNN.`.
    const SIDECAR_EXT: &'static str;
    /// The data object's suffix after `<prefix>-NNNNNN.`.
    const DATA_EXT: &'static str;
    /// What the sidecar is, for messages.
    const WHAT: &'static str;
    /// Errors ([`Error::Runtime`], naming `key`) when the sidecar describes no
    /// shard this tool reads.
    fn check(&self, key: &str) -> Result<()>;
    /// Sequences (tokens) or images in the shard.
    fn items(&self) -> u64;
    /// Bytes the data object must hold.
    fn data_bytes(&self) -> u64;
    /// The data object's key as the sidecar itself names it, where it does
    /// (a JPEG index's `shard`); a reader requires it to be the shard's own
    /// `<prefix>-NNNNNN.<DATA_EXT>`.
    fn names_data(&self) -> Option<&str> {
        None
    }
}
/// Key of the dataset manifest of `prefix`.
pub fn manifest_key(prefix: &str) -> String {
    format!("{prefix}.dataset.json")
}

/// Sidecar of one token shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenShard {
    /// Sequences in the shard (rows).
    pub sequences: u64,
    /// Tokens per sequence (columns).
    pub seq_len: u64,
    /// Always "int32".
    pub dtype: String,
    /// Always 4.
    pub bytes_per_token: u64,
    /// Vocabulary size of the tokenizer (with added tokens), or `--vocab` when synthetic.
    pub vocab_size: u64,
    /// The tokenizer the ids came from (its path as given), or "synthetic-uniform".
    pub tokenizer: String,
    /// True when the ids are uniform random numbers, not text.
    pub synthetic: bool,
    /// Token appended after every input document (e.g. `[SEP]`, `</s>`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separator: Option<String>,
}

impl ShardMeta for TokenShard {
    const KIND: &'static str = "tokens";
    const SIDECAR_EXT: &'static str = "json";
    const DATA_EXT: &'static str = "bin";
    const WHAT: &'static str = "token shard";
    fn check(&self, key: &str) -> Result<()> {
        if self.dtype != "int32" || self.bytes_per_token != 4 || self.seq_len == 0 || self.sequences == 0 {
            return Err(Error::Runtime(format!(
                "'{key}': {} sequences of {} tokens, dtype {} x {} bytes: only non-empty int32 token shards are read: re-run `s3rdma ingest tokens`",
                self.sequences, self.seq_len, self.dtype, self.bytes_per_token
            )));
        }
        Ok(())
    }
    fn items(&self) -> u64 {
        self.sequences
    }
    /// sequences x seq_len x bytes_per_token (saturating: a sidecar's
    /// numbers are input, and a size no object has is caught by the check
    /// against the object).
    fn data_bytes(&self) -> u64 {
        self.sequences.saturating_mul(self.seq_len).saturating_mul(self.bytes_per_token)
    }
}

/// Sidecar of one raw image shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RawShard {
    /// Images in the shard.
    pub samples: u64,
    /// Image height, pixels.
    pub height: u64,
    /// Image width, pixels.
    pub width: u64,
    /// Always 3 (RGB).
    pub channels: u64,
    /// Class index of each image (ImageFolder order: class directories sorted by name).
    pub labels: Vec<u32>,
    /// Source key of each image (`<class>/<file stem>`).
    pub keys: Vec<String>,
    /// Class directory names, index = label (extension: lets a reader name a label).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<String>,
}

impl RawShard {
    /// Bytes of one image (H x W x 3), saturating.
    pub fn sample_bytes(&self) -> u64 {
        self.height.saturating_mul(self.width).saturating_mul(self.channels)
    }
}

impl ShardMeta for RawShard {
    const KIND: &'static str = "raw";
    const SIDECAR_EXT: &'static str = "json";
    const DATA_EXT: &'static str = "raw";
    const WHAT: &'static str = "raw image shard";
    fn check(&self, key: &str) -> Result<()> {
        if self.channels != 3 || self.labels.len() as u64 != self.samples || self.samples == 0 || self.height == 0 || self.width == 0 {
            return Err(Error::Runtime(format!(
                "'{key}': {} samples of {}x{}x{}, {} labels: not a valid raw shard sidecar (3 channels, one label per sample): re-run `s3rdma ingest raw`",
                self.samples,
                self.height,
                self.width,
                self.channels,
                self.labels.len()
            )));
        }
        Ok(())
    }
    fn items(&self) -> u64 {
        self.samples
    }
    /// samples x H x W x 3 (saturating).
    fn data_bytes(&self) -> u64 {
        self.samples.saturating_mul(self.sample_bytes())
    }
}

/// One sample of a JPEG shard: its JPEG payload's byte range in the tar.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JpegSample {
    /// WebDataset key (`<key>.jpg` and `<key>.cls` in the tar).
    pub key: String,
    /// Byte offset of the JPEG payload (not of its tar header).
    pub offset: u64,
    /// Payload length in bytes.
    pub length: u64,
    /// Class label.
    pub label: u32,
}

/// Bytes of a ustar header: the header of sample `s`'s `<key>.jpg` member
/// lies at `s.offset - TAR_HEADER` (POSIX.1-1988 ustar, as `build_tar`
/// writes and WebDataset reads).
pub const TAR_HEADER: u64 = 512;

impl JpegSample {
    /// Check `header` (the [`TAR_HEADER`] bytes before the payload) names
    /// this sample's `<key>.jpg` with its `length` (the `tar` crate's
    /// reading): an index applied to another tar, or one whose offsets are
    /// shifted, is caught before its bytes are decoded and counted.
    ///
    /// Errors: what the header holds instead, in words.
    pub fn check_header(&self, header: &[u8]) -> std::result::Result<(), String> {
        if header.len() != TAR_HEADER as usize {
            return Err(format!("{} bytes before the payload, not a {TAR_HEADER}-byte tar header", header.len()));
        }
        let h = tar::Header::from_byte_slice(header);
        let path = h.path().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let size = h.size().ok();
        let want = format!("{}.jpg", self.key);
        if path != want || size != Some(self.length) {
            let size = size.map_or("no size".to_string(), |n| format!("{n} bytes"));
            return Err(format!("the tar header before offset {} names '{}' ({size}), not '{want}' ({} bytes)", self.offset, path.escape_debug(), self.length));
        }
        Ok(())
    }
}

/// `<shard>.index.json` of one JPEG tar shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JpegIndex {
    /// Key of the tar object.
    pub shard: String,
    /// Bytes of the tar object.
    pub size: u64,
    /// Every sample: key, payload offset, length, label.
    pub samples: Vec<JpegSample>,
}

impl JpegIndex {
    /// Every sample's payload is non-empty, lies inside the shard and
    /// overlaps no other sample's (in a tar each member has its own bytes).
    ///
    /// Errors: [`Error::Runtime`] naming the sidecar `key` and the sample.
    pub fn check_samples(&self, key: &str) -> Result<()> {
        if self.samples.is_empty() {
            return Err(Error::Runtime(format!("'{key}' lists no samples: rebuild it with `s3rdma ingest jpeg`")));
        }
        let bad = |s: &JpegSample, why: String| {
            Error::Runtime(format!("'{key}': sample '{}' at {}+{} {why}: rebuild it with `s3rdma ingest jpeg`", s.key, s.offset, s.length))
        };
        let mut by_offset: Vec<&JpegSample> = self.samples.iter().collect();
        by_offset.sort_by_key(|s| s.offset);
        let mut prev_end = 0u64;
        for s in by_offset {
            match s.offset.checked_add(s.length) {
                _ if s.length == 0 => return Err(bad(s, "is empty".into())),
                _ if s.offset < prev_end + TAR_HEADER => return Err(bad(s, format!("leaves no room for its {TAR_HEADER}-byte tar header"))),
                Some(end) if end <= self.size => prev_end = end,
                _ => return Err(bad(s, format!("lies outside the {}-byte shard", self.size))),
            }
        }
        Ok(())
    }
}

impl ShardMeta for JpegIndex {
    const KIND: &'static str = "jpeg";
    const SIDECAR_EXT: &'static str = "index.json";
    const DATA_EXT: &'static str = "tar";
    const WHAT: &'static str = "JPEG shard index";
    fn check(&self, key: &str) -> Result<()> {
        self.check_samples(key)
    }
    fn items(&self) -> u64 {
        self.samples.len() as u64
    }
    fn data_bytes(&self) -> u64 {
        self.size
    }
    /// The tar the index names (`shard`).
    fn names_data(&self) -> Option<&str> {
        Some(&self.shard)
    }
}

/// A shard found in the store: its data key and its sidecar.
#[derive(Debug, Clone)]
pub struct Listed<T> {
    /// Key of the data object.
    pub data_key: String,
    /// Key of its JSON sidecar.
    pub sidecar_key: String,
    /// The sidecar's contents.
    pub meta: T,
}

/// `body` of sidecar `key` as a `what`.
pub(crate) fn parse_sidecar<T: for<'de> Deserialize<'de>>(key: &str, body: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(body)
        .map_err(|e| Error::Runtime(format!("'{key}' is not a {what} sidecar ({e}): check {PREFIX}, or rebuild the set with `s3rdma ingest`")))
}

/// A missing bucket, said the way a dataset reader needs it: build the set first.
pub fn no_dataset_bucket(e: crate::error::StoreError) -> Error {
    match e {
        crate::error::StoreError::NoSuchBucket { bucket, location } => {
            Error::Runtime(format!("bucket '{bucket}' does not exist at {location}: build the dataset first with `s3rdma ingest` (same {BACKEND}/{BUCKET})"))
        }
        e => e.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each payload's tar header names its sample; another sample's, or a
    /// header read at a shifted offset, is refused with what it holds.
    #[test]
    fn a_samples_tar_header_must_name_it() {
        let (tar, spans) = crate::ingest::build_tar(&[("a/x".into(), vec![0xFF, 0xD8, 1, 2], 3), ("b/y".into(), vec![7u8; 700], 4)]).unwrap();
        let sample = |key: &str, (offset, length): (u64, u64)| JpegSample { key: key.into(), offset, length, label: 0 };
        let header = |offset: u64| &tar[(offset - TAR_HEADER) as usize..offset as usize];
        assert_eq!(sample("a/x", spans[0]).check_header(header(spans[0].0)), Ok(()));
        assert_eq!(sample("b/y", spans[1]).check_header(header(spans[1].0)), Ok(()));
        assert_eq!(
            sample("a/x", spans[0]).check_header(header(spans[1].0)),
            Err(format!("the tar header before offset {} names 'b/y.jpg' (700 bytes), not 'a/x.jpg' (4 bytes)", spans[0].0))
        );
        assert!(sample("a/x", spans[0]).check_header(&tar[..100]).unwrap_err().contains("not a 512-byte tar header"));
        // An index whose first payload starts inside the first header is refused when listed.
        let idx = JpegIndex { shard: "t".into(), size: tar.len() as u64, samples: vec![sample("a/x", (100, 4))] };
        assert!(idx.check_samples("t.index.json").unwrap_err().to_string().contains("leaves no room for its 512-byte tar header"));
    }

    #[test]
    fn shard_keys_have_six_digits() {
        assert_eq!(shard_key("tokens/train", 3, "bin"), "tokens/train-000003.bin");
        assert_eq!(shard_key("x", 123456, "index.json"), "x-123456.index.json");
    }

    #[test]
    fn sizes_follow_the_sidecar() {
        let t = TokenShard {
            sequences: 10,
            seq_len: 4096,
            dtype: "int32".into(),
            bytes_per_token: 4,
            vocab_size: 1,
            tokenizer: "t".into(),
            synthetic: true,
            separator: None,
        };
        assert_eq!(t.data_bytes(), 163_840);
        let r = RawShard { samples: 4096, height: 256, width: 256, channels: 3, labels: vec![], keys: vec![], classes: vec![] };
        // docs/02-prepare-dataset.md: 4096 images of 256 x 256 x 3 are "768 MiB".
        assert_eq!(r.data_bytes(), 768 << 20);
    }

    #[test]
    fn original_suite_sidecar_reads() {
        // The original suite's fields only (no separator/classes).
        let t: TokenShard = serde_json::from_str(
            r#"{"sequences":2,"seq_len":8,"dtype":"int32","bytes_per_token":4,"vocab_size":128256,"tokenizer":"meta-llama/Meta-Llama-3-8B","synthetic":false}"#,
        )
        .unwrap();
        assert_eq!((t.sequences, t.seq_len, t.separator), (2, 8, None));
        let r: RawShard = serde_json::from_str(r#"{"samples":1,"height":2,"width":2,"channels":3,"labels":[7],"keys":["a/b"]}"#).unwrap();
        assert_eq!(r.sample_bytes(), 12);
    }
}
