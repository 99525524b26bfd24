//! One conformance suite for the ObjectStore trait, run with the same bodies
//! against every backend (the way Apache Arrow's `object_store` tests its
//! stores): a behaviour difference between backends is a bug.

mod common;

use std::sync::Arc;

use clap::Parser;
use rand::{RngCore, SeedableRng, rngs::SmallRng};
use s3rdma::cli::StoreArgs;
use s3rdma::error::StoreError;
use s3rdma::mem::Buffer;
use s3rdma::store::{self, ObjectStore, TransferPath};

#[derive(Parser)]
struct Wrap {
    #[command(flatten)]
    store: StoreArgs,
}

/// Open a store from command-line words, exactly as the binary would.
fn open(words: &[&str]) -> Arc<dyn ObjectStore> {
    let mut argv = vec!["test"];
    argv.extend_from_slice(words);
    Arc::from(store::open(&Wrap::parse_from(argv).store.config()).expect("open store"))
}

fn local(bucket: &str) -> Arc<dyn ObjectStore> {
    static ROOT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let root = ROOT.get_or_init(|| tempfile::tempdir().unwrap().keep());
    open(&["--backend", "local", "--root", root.to_str().unwrap(), "--bucket", bucket])
}

/// The http backend with its default GET path: `direct` (plain http:// endpoint).
fn http(bucket: &str) -> Arc<dyn ObjectStore> {
    http_with(bucket, "auto")
}

/// The http backend with every GET through aws-sdk-s3.
fn http_sdk(bucket: &str) -> Arc<dyn ObjectStore> {
    http_with(bucket, "sdk")
}

fn http_with(bucket: &str, get: &str) -> Arc<dyn ObjectStore> {
    let s = common::server();
    // Small parts so one GET becomes many concurrent ranged GETs.
    let st = open(&[
        "--backend",
        "http",
        "--endpoint",
        &s.endpoint,
        "--access-key",
        common::ACCESS_KEY,
        "--secret-key",
        common::SECRET_KEY,
        "--bucket",
        bucket,
        "--part-size",
        "1MiB",
        "--part-concurrency",
        "4",
        "--http-get",
        get,
    ]);
    let want = if get == "auto" { "direct" } else { get };
    assert_eq!(st.describe()["get_path"], want, "--http-get {get}");
    st
}

/// The rdma backend through the test double: data over the C ABI, control
/// over HTTP. A 3 MiB transfer ceiling and 1 MiB windows make the ranged and
/// multipart bodies cross every boundary the 4 GiB limit creates in real runs.
fn rdma(bucket: &str) -> Arc<dyn ObjectStore> {
    rdma_through(&common::fake_lib(), bucket)
}

/// The rdma backend through the real libminiocpp (minio-cpp v0.6.0, libs3rdma
/// generation, no RDMA device here: every transfer takes its HTTP fallback),
/// with the same ceilings as the double. `None` where it is not built (see
/// [`common::real_lib`]).
fn rdma_real(bucket: &str) -> Option<Arc<dyn ObjectStore>> {
    let lib = common::real_lib(&format!("conformance over the real libminiocpp ({bucket})"))?;
    Some(rdma_through(&lib, bucket))
}

fn rdma_through(lib: &std::path::Path, bucket: &str) -> Arc<dyn ObjectStore> {
    let s = common::server();
    open(&[
        "--backend",
        "rdma",
        "--rdma-lib",
        lib.to_str().unwrap(),
        "--endpoint",
        &s.endpoint,
        "--access-key",
        common::ACCESS_KEY,
        "--secret-key",
        common::SECRET_KEY,
        "--bucket",
        bucket,
        "--rdma-max-transfer",
        "3MiB",
        "--range-size",
        "1MiB",
        "--rdma-threads",
        "3",
    ])
}

fn random(n: usize, seed: u64) -> Buffer {
    let mut b = Buffer::host(n);
    SmallRng::seed_from_u64(seed).fill_bytes(b.as_host_mut().unwrap());
    b
}

async fn fresh(s: &dyn ObjectStore) {
    s.ensure_bucket(true).await.unwrap();
}

async fn put_then_get_whole(s: &dyn ObjectStore) {
    fresh(s).await;
    let src = random(3 * 1024 * 1024 + 123, 1);
    let put = s.put_from("a/obj.bin", &src).await.unwrap();
    assert_eq!(put.bytes, src.len() as u64);
    let mut dst = Buffer::host(src.len());
    let got = s.get_into("a/obj.bin", None, &mut dst).await.unwrap();
    assert_eq!(got.bytes, src.len() as u64);
    assert!(matches!(got.path, TransferPath::Local | TransferPath::Http | TransferPath::RdmaAttempted));
    assert!(dst.as_host().unwrap() == src.as_host().unwrap(), "bytes differ");
}

/// A whole-object GET into a buffer larger than the object (a staging buffer
/// sized for the largest chunk reading a short last one) moves the object's
/// bytes, counts those, and leaves the rest of the buffer as it was. The real
/// libminiocpp returns the buffer size it was handed, whatever arrived.
async fn whole_get_into_a_larger_buffer(s: &dyn ObjectStore) {
    fresh(s).await;
    let src = random(102_404, 5);
    s.put_from("short/last", &src).await.unwrap();
    let mut dst = Buffer::host(1 << 20);
    dst.as_host_mut().unwrap().fill(0xAB);
    let got = s.get_into("short/last", None, &mut dst).await.unwrap();
    assert_eq!(got.bytes, 102_404, "the object's bytes, not the buffer's");
    let h = dst.as_host().unwrap();
    assert!(h[..102_404] == *src.as_host().unwrap(), "bytes differ");
    assert!(h[102_404..].iter().all(|&b| b == 0xAB), "bytes beyond the object were written");
}

/// A read pinned to the version an earlier read came from
/// (`get_into_version`) is refused once the object has been replaced, so a
/// load never mixes two versions. Local files and S3 answers name their
/// version; the rdma library's own reads name none, and pass unchecked.
async fn a_replaced_object_is_never_read_as_the_pinned_version(s: &dyn ObjectStore) {
    fresh(s).await;
    let n = 3 * 1024 * 1024 + 5;
    s.put_from("pinned/obj", &random(n, 11)).await.unwrap();
    let mut dst = Buffer::host(n);
    let t = s.get_into("pinned/obj", Some(0..4096), &mut dst).await.unwrap();
    if s.capabilities().versioned_reads {
        assert!(t.version.is_some(), "{} names no version", s.capabilities().name);
    }
    let Some(v) = t.version else { return };
    let again = s.get_into_version("pinned/obj", None, &mut dst, 0, &v).await.unwrap();
    assert_eq!((again.bytes, again.version.as_ref()), (n as u64, Some(&v)));
    s.put_from("pinned/obj", &random(n, 12)).await.unwrap();
    let e = s.get_into_version("pinned/obj", Some(4096..8192), &mut dst, 0, &v).await.unwrap_err();
    assert!(matches!(e, StoreError::Changed { .. }) && e.to_string().contains("'pinned/obj'"), "{e}");
    // Cut short since: a range past the new end is a change too, not a bad range.
    s.put_from("pinned/obj", &random(1000, 13)).await.unwrap();
    let e = s.get_into_version("pinned/obj", Some(4096..8192), &mut dst, 0, &v).await.unwrap_err();
    assert!(matches!(e, StoreError::Changed { .. }), "{e}");
}

async fn ranged_get_at_odd_offsets(s: &dyn ObjectStore) {
    fresh(s).await;
    let n = 12 * 1024 * 1024 + 777;
    let src = random(n, 2);
    s.put_from("ranged", &src).await.unwrap();
    let want = src.as_host().unwrap();
    let n = n as u64;
    for r in [0..1, 1..2, 4095..4097 + 3 * 1024 * 1024, 1_000_001..5_242_881, n - 13..n, 0..n, 777..n] {
        let mut dst = Buffer::host((r.end - r.start) as usize + 100);
        let t = s.get_into("ranged", Some(r.clone()), &mut dst).await.unwrap();
        assert_eq!(t.bytes, r.end - r.start, "range {r:?}");
        let got = &dst.as_host().unwrap()[..t.bytes as usize];
        assert!(got == &want[r.start as usize..r.end as usize], "range {r:?} differs");
    }
}

async fn multipart_put(s: &dyn ObjectStore) {
    fresh(s).await;
    // Above max(part size, 5 MiB): multipart on http, three parts with the last short.
    let src = random(11 * 1024 * 1024 + 5, 3);
    s.put_from("mp/big", &src).await.unwrap();
    assert_eq!(s.head("mp/big").await.unwrap().size, src.len() as u64);
    let mut dst = Buffer::host(src.len());
    s.get_into("mp/big", None, &mut dst).await.unwrap();
    assert!(dst.as_host().unwrap() == src.as_host().unwrap());
}

async fn head_list_delete(s: &dyn ObjectStore) {
    fresh(s).await;
    for (k, n) in [("p/b", 10), ("p/a", 20), ("q/c", 30), ("p/sub/d", 40)] {
        s.put_from(k, &random(n, n as u64)).await.unwrap();
    }
    assert_eq!(s.head("p/a").await.unwrap().size, 20);
    let keys: Vec<(String, u64)> = s.list("p/").await.unwrap().into_iter().map(|m| (m.key, m.size)).collect();
    assert_eq!(keys, vec![("p/a".into(), 20), ("p/b".into(), 10), ("p/sub/d".into(), 40)]);
    s.delete("p/a").await.unwrap();
    assert!(matches!(s.head("p/a").await, Err(StoreError::NotFound { .. })));
    s.delete("p/a").await.expect("deleting a missing object succeeds, as in S3");
    assert_eq!(s.list("p/").await.unwrap().len(), 2);
    // Overwrite replaces.
    s.put_from("p/b", &random(5, 9)).await.unwrap();
    assert_eq!(s.head("p/b").await.unwrap().size, 5);
    // A prefix is a string prefix, not a directory: "p/s" matches "p/sub/d";
    // a prefix nothing is under lists nothing; deleting the last key under a
    // "directory" leaves no trace of it in listings.
    s.put_from("p/sx", &random(3, 3)).await.unwrap();
    let keys = |v: Vec<store::ObjectMeta>| v.into_iter().map(|m| m.key).collect::<Vec<_>>();
    assert_eq!(keys(s.list("p/s").await.unwrap()), vec!["p/sub/d".to_string(), "p/sx".to_string()]);
    assert_eq!(keys(s.list("p/sub/").await.unwrap()), vec!["p/sub/d".to_string()]);
    assert!(s.list("nothing/here/").await.unwrap().is_empty());
    s.delete("p/sub/d").await.unwrap();
    assert!(s.list("p/sub/").await.unwrap().is_empty());
    assert_eq!(keys(s.list("p/").await.unwrap()), vec!["p/b".to_string(), "p/sx".to_string()]);
}

async fn missing_key(s: &dyn ObjectStore) {
    fresh(s).await;
    let mut dst = Buffer::host(16);
    match s.get_into("nope/never", None, &mut dst).await {
        Err(StoreError::NotFound { key, .. }) => assert_eq!(key, "nope/never"),
        other => panic!("expected NotFound, got {other:?}"),
    }
    assert!(matches!(s.head("nope/never").await, Err(StoreError::NotFound { .. })));
}

async fn empty_object(s: &dyn ObjectStore) {
    fresh(s).await;
    s.put_from("empty", &Buffer::host(0)).await.unwrap();
    assert_eq!(s.head("empty").await.unwrap().size, 0);
    let mut dst = Buffer::host(8);
    assert_eq!(s.get_into("empty", None, &mut dst).await.unwrap().bytes, 0);
    assert!(matches!(s.get_into("empty", Some(0..1), &mut dst).await, Err(StoreError::BadRange { size: 0, .. })));
}

async fn bad_ranges_and_small_buffers(s: &dyn ObjectStore) {
    fresh(s).await;
    s.put_from("r", &random(1000, 4)).await.unwrap();
    let mut dst = Buffer::host(2000);
    assert!(matches!(s.get_into("r", Some(10..10), &mut dst).await, Err(StoreError::BadRange { size: 1000, .. })));
    assert!(matches!(s.get_into("r", Some(900..1001), &mut dst).await, Err(StoreError::BadRange { size: 1000, .. })));
    let mut small = Buffer::host(999);
    assert!(matches!(s.get_into("r", None, &mut small).await, Err(StoreError::BufferTooSmall { needed: 1000, capacity: 999, .. })));
}

async fn invalid_keys(s: &dyn ObjectStore) {
    fresh(s).await;
    let b = Buffer::host(1);
    for k in ["", "/abs", "a/../b", "a//b", " ", "  \t"] {
        assert!(matches!(s.put_from(k, &b).await, Err(StoreError::InvalidKey { .. })), "{k:?}");
    }
    // A key of one space (" "): the refusal names the key and why.
    let e = s.put_from(" ", &b).await.unwrap_err().to_string();
    assert!(e.contains("' '") && e.contains("only whitespace"), "{e}");
}

/// Keys are bytes: spaces (leading, inner, trailing), '+', '%', '~', '=',
/// unicode and a segment of one space round-trip on every backend, through
/// PUT, HEAD, whole and ranged GET, LIST and DELETE.
async fn odd_keys_round_trip(s: &dyn ObjectStore) {
    fresh(s).await;
    let keys = ["odd/a b", "odd/ lead", "odd/trail ", "odd/a+b", "odd/100%", "odd/%20", "odd/ü ñ 日本", "odd/x=y&z", "odd/~t", "odd/ /inner"];
    for (i, k) in keys.iter().enumerate() {
        let src = random(100 + i, i as u64);
        s.put_from(k, &src).await.unwrap_or_else(|e| panic!("PUT {k:?}: {e}"));
        assert_eq!(s.head(k).await.unwrap_or_else(|e| panic!("HEAD {k:?}: {e}")).size, 100 + i as u64, "{k:?}");
        let mut dst = Buffer::host(100 + i);
        s.get_into(k, None, &mut dst).await.unwrap_or_else(|e| panic!("GET {k:?}: {e}"));
        assert!(dst.as_host().unwrap() == src.as_host().unwrap(), "{k:?}");
        let mut part = Buffer::host(10);
        s.get_into(k, Some(5..15), &mut part).await.unwrap_or_else(|e| panic!("ranged GET {k:?}: {e}"));
        assert!(part.as_host().unwrap() == &src.as_host().unwrap()[5..15], "{k:?}");
    }
    let mut listed: Vec<String> = s.list("odd/").await.unwrap().into_iter().map(|m| m.key).collect();
    listed.sort();
    let mut want: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    for k in keys {
        s.delete(k).await.unwrap_or_else(|e| panic!("DELETE {k:?}: {e}"));
    }
    assert!(s.list("odd/").await.unwrap().is_empty());
}

/// Runs against a bucket nobody created.
async fn missing_bucket(s: &dyn ObjectStore) {
    match s.ensure_bucket(false).await {
        Err(e @ StoreError::NoSuchBucket { .. }) => {
            // The store names the bucket and where; the CLI layer adds the flag that fixes it.
            assert!(e.to_string().contains("does not exist at") && !e.to_string().contains("--"), "{e}");
            let shown = s3rdma::cli::message(&s3rdma::error::Error::from(e));
            assert!(shown.ends_with(": create it or pass --prepare"), "{shown}");
        }
        other => panic!("expected NoSuchBucket, got {other:?}"),
    }
    s.ensure_bucket(true).await.unwrap();
    s.ensure_bucket(false).await.unwrap();
}

macro_rules! suite {
    ($backend:ident: $($name:ident),* $(,)?) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let bucket = format!("{}-{}", stringify!($backend), stringify!($name)).replace('_', "-");
                    super::$name(&*super::$backend(&bucket)).await;
                }
            )*
        }
    };
}

suite!(local: put_then_get_whole, whole_get_into_a_larger_buffer, ranged_get_at_odd_offsets, multipart_put, head_list_delete, missing_key,
       empty_object, bad_ranges_and_small_buffers, invalid_keys, odd_keys_round_trip, missing_bucket, a_replaced_object_is_never_read_as_the_pinned_version);
suite!(rdma: put_then_get_whole, whole_get_into_a_larger_buffer, ranged_get_at_odd_offsets, multipart_put, head_list_delete, missing_key,
       empty_object, bad_ranges_and_small_buffers, invalid_keys, odd_keys_round_trip, missing_bucket, a_replaced_object_is_never_read_as_the_pinned_version);
suite!(http: put_then_get_whole, whole_get_into_a_larger_buffer, ranged_get_at_odd_offsets, multipart_put, head_list_delete, missing_key,
       empty_object, bad_ranges_and_small_buffers, invalid_keys, odd_keys_round_trip, missing_bucket, a_replaced_object_is_never_read_as_the_pinned_version);
suite!(http_sdk: put_then_get_whole, whole_get_into_a_larger_buffer, ranged_get_at_odd_offsets, multipart_put, head_list_delete, missing_key,
       empty_object, bad_ranges_and_small_buffers, invalid_keys, odd_keys_round_trip, missing_bucket, a_replaced_object_is_never_read_as_the_pinned_version);

/// The same bodies through the real libminiocpp, each skipping (or, under
/// `CI=true`, failing) where it is not built.
macro_rules! suite_real {
    ($($name:ident),* $(,)?) => {
        mod rdma_real {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let bucket = format!("real-{}", stringify!($name)).replace('_', "-");
                    let Some(s) = super::rdma_real(&bucket) else { return };
                    super::$name(&*s).await;
                }
            )*
        }
    };
}

suite_real!(
    put_then_get_whole,
    whole_get_into_a_larger_buffer,
    ranged_get_at_odd_offsets,
    multipart_put,
    head_list_delete,
    missing_key,
    empty_object,
    bad_ranges_and_small_buffers,
    invalid_keys,
    odd_keys_round_trip,
    missing_bucket,
    a_replaced_object_is_never_read_as_the_pinned_version
);

/// Many concurrent transfers through the real library on its worker
/// threads, each into its own buffer; every one through the C ABI.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_library_concurrent_transfers_stay_byte_exact() {
    let Some(s) = rdma_real("real-concurrent") else { return };
    s.ensure_bucket(true).await.unwrap();
    let objs: Vec<(String, Buffer)> = (0..12).map(|i| (format!("c/{i}"), random(256 * 1024 + i * 4099, 200 + i as u64))).collect();
    futures::future::try_join_all(objs.iter().map(|(k, b)| s.put_from(k, b))).await.unwrap();
    let reads = objs.iter().map(|(k, b)| {
        let (s, k, n) = (s.clone(), k.clone(), b.len());
        tokio::spawn(async move {
            let mut dst = Buffer::host(n + 4096);
            s.get_into(&k, None, &mut dst).await.map(|t| (t.bytes, dst))
        })
    });
    for ((k, want), got) in objs.iter().zip(futures::future::join_all(reads).await) {
        let (bytes, got) = got.unwrap().unwrap();
        assert_eq!(bytes, want.len() as u64, "{k}");
        assert!(got.as_host().unwrap()[..want.len()] == *want.as_host().unwrap(), "{k} differs");
    }
    let c = s.stats();
    assert_eq!((c.get("rdma_calls"), c.get("rdma_ok")), (24, 24), "12 PUTs and 12 GETs through the C ABI");
    assert_eq!(s.rdma_engine().map(|e| e.generation.as_str()), Some("libs3rdma"));
}

/// Failures inside the real library reach the caller as errors naming the
/// operation, the key and the library's own message (`miniocpp_last_error`
/// on the worker thread that made the call): a wrong secret key. (s3s-fs
/// creates a missing bucket's directory on PUT, so a missing bucket cannot be
/// provoked here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_library_errors_name_operation_key_and_cause() {
    let Some(lib) = common::real_lib("real_library_errors_name_operation_key_and_cause") else { return };
    let srv = common::server();
    let lib = lib.to_str().unwrap();
    let base = ["--backend", "rdma", "--rdma-lib", lib, "--endpoint", &srv.endpoint, "--access-key", common::ACCESS_KEY, "--rdma-threads", "1"];
    let mut a = base.to_vec();
    a.extend(["--secret-key", "not-the-secret", "--bucket", "real-errors"]);
    let s = open(&a);
    let e = s.put_from("k/two", &random(1000, 1)).await.unwrap_err().to_string();
    assert!(e.contains("PUT") && e.contains("k/two") && e.contains("libminiocpp failed (-1)") && e.contains("Signature"), "{e}");
}

/// An object above one RDMA transfer read whole: the library is never handed
/// it (minio-cpp would refuse the registration of a buffer above 4 GiB - 1
/// and stream it over HTTP into one buffer); it goes over HTTP in ranged
/// parts, byte-exact. The ceiling is lowered to 3 MiB (`--rdma-max-transfer`)
/// so the test moves megabytes, not 4 GiB: the path taken depends on the
/// ceiling alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_library_object_above_one_transfer_is_read_whole_without_the_library() {
    let Some(s) = rdma_real("real-big") else { return };
    s.ensure_bucket(true).await.unwrap();
    let src = random((3 << 20) + 4097, 77);
    s.put_from("big", &src).await.unwrap();
    let calls = s.stats().get("rdma_calls");
    let mut dst = Buffer::host(src.len());
    let t = s.get_into("big", None, &mut dst).await.unwrap();
    assert_eq!((t.bytes, t.path), (src.len() as u64, TransferPath::Http));
    assert!(dst.as_host().unwrap() == src.as_host().unwrap(), "bytes differ");
    assert_eq!(s.stats().get("rdma_calls"), calls, "the library was never handed more than one transfer may carry");
}

/// The direct GET path signs what it sends: s3s checks SigV4, so a wrong
/// secret is refused (and the suites above, which pass, were signed right).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn direct_gets_are_signed() {
    let good = http("direct-signed");
    fresh(&*good).await;
    good.put_from("k", &random(3000, 7)).await.unwrap();
    let s = common::server();
    let bad = open(&[
        "--backend",
        "http",
        "--endpoint",
        &s.endpoint,
        "--access-key",
        common::ACCESS_KEY,
        "--secret-key",
        "not-the-secret",
        "--bucket",
        "direct-signed",
        "--http-get",
        "direct",
    ]);
    let mut dst = Buffer::host(3000);
    let e = bad.get_into("k", None, &mut dst).await.unwrap_err();
    assert!(matches!(e, s3rdma::error::StoreError::Auth { .. }), "{e}");
    assert!(e.to_string().contains("SignatureDoesNotMatch"), "{e}");
    let t = good.get_into("k", None, &mut dst).await.unwrap();
    assert_eq!(t.bytes, 3000);
    assert_eq!(dst.as_host().unwrap(), random(3000, 7).as_host().unwrap());
    // Keys S3 percent-encodes: written through the SDK, read back signed by us.
    let key = "dir/a b+c~ü=(1)&x.bin";
    good.put_from(key, &random(2000, 8)).await.unwrap();
    let mut dst = Buffer::host(2000);
    assert_eq!(good.get_into(key, Some(5..1500), &mut dst).await.unwrap().bytes, 1495);
    assert_eq!(&dst.as_host().unwrap()[..1495], &random(2000, 8).as_host().unwrap()[5..1500]);
}

/// Parallel reads (--io-threads) give the same bytes as serial ones, at odd offsets too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_io_threads_read_the_same_bytes() {
    let root = tempfile::tempdir().unwrap();
    let s = open(&["--root", root.path().to_str().unwrap(), "--bucket", "threads", "--io-threads", "3"]);
    s.ensure_bucket(true).await.unwrap();
    let src = random(70 * 1024 * 1024 + 999, 11);
    s.put_from("t", &src).await.unwrap();
    let want = src.as_host().unwrap();
    let mut dst = Buffer::host(src.len() + 4096);
    for (r, at) in [(0..src.len() as u64, 0usize), (12_345..50_000_000, 4096), (33..src.len() as u64 - 7, 1)] {
        let t = s.get_into_at("t", Some(r.clone()), &mut dst, at).await.unwrap();
        assert_eq!(t.bytes, r.end - r.start);
        assert!(dst.as_host().unwrap()[at..at + t.bytes as usize] == want[r.start as usize..r.end as usize], "{r:?} at {at}");
    }
}

/// O_DIRECT reads on the local backend give the same bytes, aligned or not
/// (unaligned ranges fall back to buffered reads). Skips, saying why, where
/// the filesystem under the temp dir refuses O_DIRECT (tmpfs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_direct_reads_match() {
    let root = tempfile::tempdir().unwrap();
    let s = open(&["--root", root.path().to_str().unwrap(), "--bucket", "direct", "--direct"]);
    s.ensure_bucket(true).await.unwrap();
    let src = random(5 * 4096 + 100, 7);
    s.put_from("d", &src).await.unwrap();
    let mut dst = Buffer::host(src.len());
    match s.get_into("d", None, &mut dst).await {
        Err(StoreError::Io { context, .. }) if context.contains("O_DIRECT") => {
            println!("SKIP local_direct_reads_match: {context}");
            return;
        }
        r => assert_eq!(r.unwrap().bytes, src.len() as u64),
    }
    assert!(dst.as_host().unwrap() == src.as_host().unwrap());
    for r in [4096..8192 + 50, 4097..9000, 8192..src.len() as u64] {
        let t = s.get_into("d", Some(r.clone()), &mut dst).await.unwrap();
        assert!(dst.as_host().unwrap()[..t.bytes as usize] == src.as_host().unwrap()[r.start as usize..r.end as usize]);
    }
}

/// Many concurrent transfers on many worker threads, each into its own buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rdma_concurrent_transfers_stay_byte_exact() {
    let s = rdma("rdma-concurrent");
    s.ensure_bucket(true).await.unwrap();
    let objs: Vec<(String, Buffer)> = (0..8).map(|i| (format!("c/{i}"), random(512 * 1024 + i * 4099, 100 + i as u64))).collect();
    futures::future::try_join_all(objs.iter().map(|(k, b)| s.put_from(k, b))).await.unwrap();
    let reads = objs.iter().map(|(k, b)| {
        let s = s.clone();
        let k = k.clone();
        let n = b.len();
        tokio::spawn(async move {
            let mut dst = Buffer::host(n);
            s.get_into(&k, None, &mut dst).await.map(|_| dst)
        })
    });
    let got = futures::future::join_all(reads).await;
    for ((k, want), got) in objs.iter().zip(got) {
        let got = got.unwrap().unwrap();
        assert!(got.as_host() == want.as_host(), "{k} differs");
    }
    let c = s.stats();
    assert_eq!(c.get("rdma_calls"), 16, "8 PUTs and 8 GETs through the C ABI");
    assert_eq!(c.get("rdma_ok"), 16);
}

/// Device memory on every backend: staged (local, http) and direct (rdma,
/// through the double's device-pointer path), whole and ranged at odd
/// offsets, read back and compared byte for byte; pinned memory too. Skips,
/// saying why, where there is no GPU (CI); runs on the GPU machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_and_pinned_reads_are_byte_exact_on_every_backend() {
    use s3rdma::mem::{Dest, Gpu};
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            println!("SKIP device_and_pinned_reads_are_byte_exact_on_every_backend: {e}");
            return;
        }
    };
    const MIB: usize = 1 << 20;
    // 2 bounce buffers: each is reused for every other chunk of the 6. The
    // real library (where built) without RDMA: device memory staged through
    // pinned buffers, the GPU-host scenario of a node without an RDMA NIC.
    let mut stores =
        vec![("local", local("dev-local"), 4), ("http", http("dev-http"), 4), ("http-2-bounce", http_sdk("dev-http2"), 2), ("rdma", rdma("dev-rdma"), 0)];
    if let Some(s) = rdma_real("dev-rdma-real") {
        stores.push(("rdma-real-library", s, 2));
    }
    for (name, s, bounce) in stores {
        // A store that cannot write device memory itself (the rdma backend
        // whose library reports RDMA unavailable) is read through bounce buffers.
        let bounce = if bounce == 0 && !s.capabilities().device_writes { 2 } else { bounce };
        s.ensure_bucket(true).await.unwrap();
        let src = random(5 * MIB + 12345, 42);
        let want = src.as_host().unwrap();
        s.put_from("d", &src).await.unwrap();
        let mut dst = Buffer::for_dest(Dest::Device, Some(&gpu), src.len(), bounce, MIB).unwrap();
        for r in [None, Some(777..3 * MIB as u64 + 5), Some(4 * MIB as u64..src.len() as u64)] {
            let t = store::read_into(&*s, "d", r.clone(), &mut dst).await.unwrap();
            let r = r.unwrap_or(0..src.len() as u64);
            assert_eq!(t.bytes, r.end - r.start, "{name} {r:?}");
            let mut back = vec![0u8; t.bytes as usize];
            let Buffer::Device(d) = &dst else { unreachable!() };
            d.read_back(0, &mut back).unwrap();
            assert!(back == want[r.start as usize..r.end as usize], "{name}: device bytes differ for {r:?}");
        }
        let mut pinned = Buffer::for_dest(Dest::Pinned, Some(&gpu), src.len(), 0, 0).unwrap();
        store::read_into(&*s, "d", None, &mut pinned).await.unwrap();
        assert!(pinned.as_host().unwrap() == want, "{name}: pinned bytes differ");
        println!("{name}: device and pinned reads byte-exact");
    }
}

/// The local store's own device pipeline (reader threads, `--file-io pread`
/// and `mmap`): three files of odd sizes, ranges at odd offsets, into
/// device buffers at odd places, read back byte for byte; a range past a
/// file's end and a pinned version that is not the file's are refused.
/// Skips, saying why, where there is no GPU (CI); runs on the GPU machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn local_reader_threads_put_every_byte_in_place() {
    use s3rdma::mem::{Dest, Gpu};
    // The stores open before the GPU is asked for, so the flags are checked on every machine.
    let roots: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let stores: Vec<_> = ["pread", "mmap"]
        .iter()
        .zip(&roots)
        .map(|(io, root)| {
            (*io, open(&["--backend", "local", "--root", root.path().to_str().unwrap(), "--bucket", "reader-threads", "--file-io", io, "--io-threads", "3"]))
        })
        .collect();
    let gpu = match Gpu::open(0) {
        Ok(g) => g,
        Err(e) => {
            println!("SKIP local_reader_threads_put_every_byte_in_place: {e}");
            return;
        }
    };
    const MIB: usize = 1 << 20;
    for (io, s) in stores {
        fresh(&*s).await;
        let sizes = [5 * MIB + 12345, 3 * MIB + 1, 777];
        let mut srcs = Vec::new();
        for (i, n) in sizes.iter().enumerate() {
            let b = random(*n, 7 + i as u64);
            s.put_from(&format!("f{i}"), &b).await.unwrap();
            srcs.push(b);
        }
        let parts: Vec<store::StagedPart> =
            sizes.iter().enumerate().map(|(i, &n)| store::StagedPart { key: format!("f{i}"), range: 13..n as u64, at: 4099, version: None }).collect();
        // 7 bounce buffers of 1 MiB spread over three destinations: 3 threads double-buffer.
        let mut bufs: Vec<Buffer> = sizes.iter().zip([3, 2, 2]).map(|(&n, b)| Buffer::for_dest(Dest::Device, Some(&gpu), n + 4099, b, MIB).unwrap()).collect();
        let mut dsts: Vec<&mut s3rdma::mem::DeviceBuffer> = bufs.iter_mut().map(|b| if let Buffer::Device(d) = b { d } else { unreachable!() }).collect();
        let load = s.read_to_device(&parts, &mut dsts, None).expect("the local store has its own device pipeline").unwrap();
        assert_eq!(load.timeline.threads, 3, "{io}");
        assert_eq!(load.timeline.bytes, sizes.iter().map(|&n| n as u64 - 13).sum::<u64>(), "{io}");
        for (i, (t, n)) in load.transfers.iter().zip(sizes).enumerate() {
            assert_eq!(t.bytes, n as u64 - 13);
            let mut back = vec![0u8; n - 13];
            dsts[i].read_back(4099, &mut back).unwrap();
            assert!(back == srcs[i].as_host().unwrap()[13..], "{io}: f{i} differs in device memory");
        }
        let past = [store::StagedPart { key: "f2".into(), range: 0..778, at: 0, version: None }];
        assert!(s.read_to_device(&past, &mut dsts[2..], None).unwrap().is_err(), "{io}: a range past the end");
        let pinned = [store::StagedPart { version: Some(store::ObjectVersion { tag: Some("other".into()), size: 777 }), ..parts[2].clone() }];
        assert!(matches!(s.read_to_device(&pinned, &mut dsts[2..], None).unwrap(), Err(StoreError::Changed { .. })), "{io}: another version");
        // Checked as staged: every span's XXH3-64 and each part's landing
        // checksum are the source's, and device memory (from `at`) sums the same on the GPU.
        let parts: Vec<store::StagedPart> = parts.iter().map(|p| store::StagedPart { at: 8, ..p.clone() }).collect();
        let spans: Vec<Vec<std::ops::Range<u64>>> = sizes.iter().map(|&n| vec![0..1, 1..(n as u64 - 13) / 2, (n as u64 - 13) / 2 + 5..n as u64 - 14]).collect();
        let check = store::StagedCheck { spans: spans.clone() };
        let load = s.read_to_device(&parts, &mut dsts, Some(&check)).unwrap().unwrap();
        let got = load.checked.expect("a checked load says what it hashed");
        assert!(load.timeline.hash_s > 0.0, "{io}: hashing is timed");
        for (i, src) in srcs.iter().enumerate() {
            let part = &src.as_host().unwrap()[13..];
            let want: Vec<u64> = spans[i].iter().map(|r| twox_hash::XxHash3_64::oneshot(&part[r.start as usize..r.end as usize])).collect();
            assert_eq!(got.hashes[i], want, "{io}: f{i}'s spans as staged");
            assert_eq!(got.landing[i], s3rdma::mem::landing_checksum(part), "{io}: f{i}'s landing checksum as staged");
            assert_eq!(dsts[i].landing_checksum(8, part.len()).unwrap(), got.landing[i], "{io}: f{i} in device memory");
        }
        println!("{io}: reader threads byte-exact");
    }
}
