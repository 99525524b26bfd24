//! Property tests for every parser of outside input:
//! Prometheus text, safetensors headers, checkpoint manifests (ours and the
//! original suite's), `Content-Range`, launcher environments and
//! `SLURM_TASKS_PER_NODE`, JPEG tar shard indexes, the ImageFolder walk.
//! Each: never a panic on any input, and the property the format promises
//! (round trips; offsets covering the data exactly once).

use proptest::prelude::*;

use crate::format::ckpt::{self, Manifest, TensorSpec};
use crate::format::shards::{JpegIndex, JpegSample};
use crate::format::weights::parse_header;
use crate::ranks::{from_vars, slurm_tasks_on_node};
use crate::store::http::served::content_range;
use crate::witness::scrape::parse_exposition;

/// Every variable the launcher detection reads.
const LAUNCH_VARS: &[&str] = &[
    "S3RDMA_RANK",
    "S3RDMA_WORLD_SIZE",
    "S3RDMA_LOCAL_RANK",
    "S3RDMA_RUN_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "PMIX_NAMESPACE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "SLURM_NODEID",
    "SLURM_TASKS_PER_NODE",
    "SLURM_RESTART_COUNT",
];

/// A label value as the text format escapes it.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn dtype() -> impl Strategy<Value = (&'static str, u64)> {
    prop_oneof![Just(("F32", 4)), Just(("BF16", 2)), Just(("U8", 1)), Just(("I64", 8)), Just(("F64", 8))]
}

/// A safetensors file's first 8 + n bytes for `tensors` packed in order;
/// returns the head and the data section's length.
fn safetensors_head(tensors: &[(String, &str, Vec<usize>, u64)]) -> (Vec<u8>, u64) {
    let mut header = serde_json::Map::new();
    header.insert("__metadata__".into(), serde_json::json!({"format": "pt"}));
    let mut off = 0u64;
    for (name, dt, shape, size) in tensors {
        let n = shape.iter().product::<usize>() as u64 * size;
        header.insert(name.clone(), serde_json::json!({"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}));
        off += n;
    }
    let json = serde_json::to_vec(&header).unwrap();
    let mut head = (json.len() as u64).to_le_bytes().to_vec();
    head.extend(json);
    (head, off)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn content_range_never_panics(h in "\\PC{0,40}") {
        let _ = content_range(&h);
    }

    /// A well-formed header gives its range and size; a range past the
    /// size, a reversed one, an unsatisfied (`*`) one or an unknown size gives none.
    #[test]
    fn content_range_round_trips(first in 0u64..1 << 50, len in 1u64..1 << 40, extra in 0u64..1 << 20) {
        let last = first + len - 1;
        let size = last + 1 + extra;
        prop_assert_eq!(content_range(&format!("bytes {first}-{last}/{size}")), Some((first..=last, size)));
        prop_assert_eq!(content_range(&format!("bytes */{size}")), None);
        prop_assert_eq!(content_range(&format!("bytes {first}-{last}/{last}")), None);
        if len > 1 {
            prop_assert_eq!(content_range(&format!("bytes {last}-{first}/{size}")), None);
        }
        prop_assert_eq!(content_range(&format!("bytes {first}-{last}/*")), None);
    }

    #[test]
    fn metrics_text_never_panics(text in "(\\PC|\n|\"|\\\\|\\{|\\}|=|,){0,200}", tail in "\\PC{0,40}") {
        let _ = parse_exposition(&text);
        let _ = parse_exposition(&format!("minio_api_rdma_read_bytes_total{{{tail}"));
    }

    /// Series whose label values hold anything (`,` `=` `}` quotes, backslashes,
    /// newlines) come back one per label set, values unescaped, counts exact.
    #[test]
    fn metrics_series_round_trip(values in proptest::collection::btree_map("(\\PC|\n|\"|\\\\|,|=|\\}){0,12}", 0u64..1 << 52, 1..5)) {
        let mut text = String::from("# HELP minio_api_rdma_read_bytes_total x\n# TYPE minio_api_rdma_read_bytes_total counter\n");
        for (v, n) in &values {
            text.push_str(&format!("minio_api_rdma_read_bytes_total{{server=\"s1\",bar=\"{}\"}} {n}\n", escape(v)));
            text.push_str("some_other_series{a=\"b\"} 1\n");
        }
        let got = parse_exposition(&text).map_err(TestCaseError::fail)?;
        prop_assert_eq!(got.len(), values.len());
        for ((name, labels, value), (v, n)) in got.iter().zip(&values) {
            prop_assert_eq!(name, "minio_api_rdma_read_bytes_total");
            prop_assert_eq!(labels, &vec![("bar".to_string(), v.clone()), ("server".to_string(), "s1".to_string())]);
            prop_assert_eq!(*value, *n as f64);
        }
    }

    #[test]
    fn safetensors_header_never_panics(head in proptest::collection::vec(any::<u8>(), 0..300), n in any::<u64>(), size in any::<u64>()) {
        let _ = parse_header("m", size, &head);
        let mut h = n.to_le_bytes().to_vec();
        h.extend(&head);
        let _ = parse_header("m", size, &h);
        let _ = parse_header("m", h.len() as u64, &h);
    }

    /// A header that packs its tensors back to back parses, and its tensors
    /// cover the data section exactly once; one byte more or less is refused.
    #[test]
    fn safetensors_offsets_cover_the_data_exactly_once(specs in proptest::collection::vec((dtype(), proptest::collection::vec(1usize..6, 0..3)), 1..8)) {
        let tensors: Vec<(String, &str, Vec<usize>, u64)> =
            specs.iter().enumerate().map(|(i, ((dt, size), shape))| (format!("t{i}"), *dt, shape.clone(), *size)).collect();
        let (head, blob) = safetensors_head(&tensors);
        let object = head.len() as u64 + blob;
        let layout = parse_header("m", object, &head).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(layout.tensors.len(), tensors.len());
        let mut end = 0;
        for t in &layout.tensors {
            prop_assert_eq!(t.offset, end);
            end += t.nbytes;
        }
        prop_assert_eq!(end, layout.data_bytes());
        prop_assert!(parse_header("m", object + 1, &head).is_err(), "trailing bytes accepted");
        if blob > 0 {
            prop_assert!(parse_header("m", object - 1, &head).is_err(), "missing bytes accepted");
        }
    }

    #[test]
    fn manifest_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200), total in any::<u64>(), chunk in any::<u64>(), n in any::<u64>(), dim in any::<u64>()) {
        let _ = Manifest::parse("k", &bytes);
        let json = serde_json::json!({"format_version": 1, "total_bytes": total, "alignment": 512, "chunk_bytes": chunk, "num_chunks": n,
            "tensors": [{"path": "a", "dtype": "F32", "shape": [dim, dim], "offset": total, "nbytes": dim}]});
        let _ = Manifest::parse("k", json.to_string().as_bytes());
    }

    /// Ours round-trips; the original suite's form (no chunk prefix, no
    /// checksums) parses; the chunks cover the buffer exactly once.
    #[test]
    fn manifest_round_trips_and_chunks_cover_the_buffer(shapes in proptest::collection::vec(proptest::collection::vec(1u64..50, 1..3), 1..10), chunk in 1u64..100_000) {
        let specs: Vec<TensorSpec> = shapes.iter().enumerate().map(|(i, s)| TensorSpec { path: format!("p{i}"), dtype: "F32", shape: s.clone() }).collect();
        let (entries, total) = ckpt::pack(&specs);
        let m = Manifest::new(entries, total, chunk, "k.g1".into());
        let bytes = serde_json::to_vec(&m).unwrap();
        let back = Manifest::parse("k", &bytes).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back, &m);
        let mut end = 0;
        for i in 0..m.num_chunks {
            let r = m.chunk_range(i);
            prop_assert_eq!(r.start, end);
            prop_assert!(r.end > r.start);
            end = r.end;
        }
        prop_assert_eq!(end, total);
        let mut original: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        original.as_object_mut().unwrap().remove("chunk_prefix");
        let old = Manifest::parse("k", original.to_string().as_bytes()).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(old.chunk_prefix, None);
    }

    #[test]
    fn launcher_environment_never_panics(vals in proptest::collection::vec(proptest::option::of("[0-9]{0,3}|\\PC{0,12}"), LAUNCH_VARS.len())) {
        let get = |k: &str| LAUNCH_VARS.iter().position(|v| *v == k).and_then(|i| vals[i].clone());
        if let Ok(Some(r)) = from_vars(get, Some("run")) {
            prop_assert!(r.rank < r.world, "rank {} of {}", r.rank, r.world);
        }
        let _ = from_vars(get, None);
    }

    /// Slurm's compressed form (`4(x2),3`) expands to one task count per node.
    #[test]
    fn slurm_tasks_per_node_expands(groups in proptest::collection::vec((1usize..64, 1usize..5), 1..5), junk in "\\PC{0,16}") {
        let text = groups.iter().map(|(c, r)| if *r == 1 { c.to_string() } else { format!("{c}(x{r})") }).collect::<Vec<_>>().join(",");
        let nodes: Vec<usize> = groups.iter().flat_map(|(c, r)| std::iter::repeat_n(*c, *r)).collect();
        for (id, want) in nodes.iter().enumerate() {
            prop_assert_eq!(slurm_tasks_on_node(&text, Some(id)).map_err(|e| TestCaseError::fail(e.to_string()))?, Some(*want));
        }
        prop_assert!(slurm_tasks_on_node(&text, Some(nodes.len())).is_err());
        let _ = slurm_tasks_on_node(&junk, Some(0));
        let _ = slurm_tasks_on_node(&junk, None);
    }

    #[test]
    fn jpeg_index_never_panics(samples in proptest::collection::vec((any::<u64>(), any::<u64>()), 0..6), size in any::<u64>()) {
        let idx = JpegIndex {
            shard: "s.tar".into(),
            size,
            samples: samples.iter().enumerate().map(|(i, (o, l))| JpegSample { key: format!("k{i}"), offset: *o, length: *l, label: 0 }).collect(),
        };
        let _ = idx.check_samples("s.index.json");
    }

    /// Payloads laid out as a tar lays them (each after its 512-byte header,
    /// padded to 512) pass; one moved onto its neighbour, or past the end, fails.
    #[test]
    fn jpeg_index_payloads_are_disjoint_and_inside(lengths in proptest::collection::vec(1u64..5000, 1..8), victim in any::<prop::sample::Index>()) {
        let mut off = 0;
        let mut samples = Vec::new();
        for (i, l) in lengths.iter().enumerate() {
            samples.push(JpegSample { key: format!("k{i}"), offset: off + 512, length: *l, label: 0 });
            off += 512 + l.div_ceil(512) * 512;
        }
        let mut idx = JpegIndex { shard: "s.tar".into(), size: off + 1024, samples };
        prop_assert!(idx.check_samples("s.index.json").is_ok());
        let v = victim.index(lengths.len());
        let mut moved = idx.clone();
        moved.samples[v].offset = if v > 0 { moved.samples[v - 1].offset } else { moved.size };
        prop_assert!(moved.check_samples("s.index.json").is_err());
        idx.samples[v].length = 0;
        prop_assert!(idx.check_samples("s.index.json").is_err());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// torchvision's rules on random trees: classes are the first-level
    /// directories holding an image, sorted; every image file below a class
    /// is found once with its class's label; files at the root are not samples.
    #[test]
    fn image_folder_walk_finds_every_image_once(files in proptest::collection::btree_set(("[a-c]", "(d[0-2]/){0,2}", "f[0-9]{1,2}", prop_oneof![Just("jpg"), Just("JPEG"), Just("png"), Just("txt")]), 1..20), root_files in 0usize..3) {
        let dir = tempfile::tempdir().unwrap();
        let mut want: Vec<(String, String)> = Vec::new(); // (class, relative path)
        let mut stems = std::collections::BTreeSet::new();
        for (class, sub, stem, ext) in &files {
            // One file per (class, sub, stem): two would be one sample key.
            if !stems.insert((class.clone(), sub.clone(), stem.clone())) {
                continue;
            }
            let rel = format!("{sub}{stem}.{ext}");
            let p = dir.path().join(class).join(&rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, b"x").unwrap();
            if *ext != "txt" {
                want.push((class.clone(), rel));
            }
        }
        for i in 0..root_files {
            std::fs::write(dir.path().join(format!("root{i}.jpg")), b"x").unwrap();
        }
        let classes: Vec<String> = {
            let mut c: Vec<String> = files.iter().map(|f| f.0.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
            c.sort();
            c
        };
        let empty_class = classes.iter().any(|c| !want.iter().any(|(w, _)| w == c));
        match crate::ingest::images::scan_image_folder(dir.path()) {
            Ok((got_classes, sources)) => {
                prop_assert!(!empty_class, "a class without images was accepted");
                prop_assert_eq!(&got_classes, &classes);
                let mut got: Vec<(String, String)> = sources
                    .iter()
                    .map(|s| {
                        let rel = s.path.strip_prefix(dir.path()).unwrap().to_string_lossy().into_owned();
                        let (class, rest) = rel.split_once('/').unwrap();
                        assert_eq!(classes[s.label as usize], class, "label of {rel}");
                        (class.to_string(), rest.to_string())
                    })
                    .collect();
                got.sort();
                want.sort();
                prop_assert_eq!(got, want);
            }
            Err(e) => prop_assert!(empty_class, "refused a valid tree: {e}"),
        }
    }
}
