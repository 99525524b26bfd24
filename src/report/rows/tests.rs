//! The typed views read what older records and the original suite hold:
//! missing fields, figures in either shape, fields in shapes the report
//! cannot use.

use serde_json::json;

use super::fields::Figure;
use super::{rows_of, server_of};
use crate::stats::Spread;

#[test]
fn a_figure_is_a_number_or_a_spread_with_a_numeric_median() {
    let read = |v| serde_json::from_value::<Figure>(v).unwrap().0;
    assert_eq!(read(json!(3)), Some(Spread { median: 3.0, min: 3.0, max: 3.0 }));
    assert_eq!(read(json!({"median": 2.0, "min": 1.0})), Some(Spread { median: 2.0, min: 1.0, max: 2.0 }));
    assert_eq!(read(json!({"median": 2.0, "max": "x"})), Some(Spread { median: 2.0, min: 2.0, max: 2.0 }));
    for none in [json!("3"), json!([1.0, 2.0, 3.0]), json!({"median": null}), json!({"min": 1.0})] {
        assert_eq!(read(none.clone()), None, "{none}");
    }
}

#[test]
fn fetch_cells_without_procs_or_summary_read_from_their_repeats() {
    let rec = json!({"schema_version": 1, "benchmark": "fetch", "backend": "local", "params": {},
    "environment": {"dest": "host"},
    "results": [
        {"size_bytes": 16u64 << 20, "concurrency": 4, "repeats": [{"throughput_gbps": 1.0}, {"throughput_gbps": 3.0, "client_cpu_cores": 0.5}]},
        {"size_bytes": 1u64 << 30, "concurrency": 8, "procs": 2, "summary": {"throughput_gbps": {"median": 9.0, "min": 8.0, "max": 10.0}}, "repeats": []},
        {"size_bytes": 1u64 << 30, "concurrency": 16, "summary": {}, "repeats": []}
    ]});
    let rows = rows_of(&rec, "f.json").unwrap();
    assert_eq!(rows.len(), 2, "the cell without a figure has no row");
    assert_eq!(rows[0].value, Spread { median: 2.0, min: 1.0, max: 3.0 });
    assert_eq!(rows[0].cpu_cores, Some(0.5));
    let dims = |i: usize| rows[i].dims.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(";");
    assert_eq!(dims(0), "concurrency=4;dest=host;size=16MiB");
    assert_eq!(dims(1), "concurrency=8;dest=host;procs=2;size=1GiB");
    assert!(rows.iter().all(|r| r.verdict == "not-applicable"));
}

#[test]
fn a_record_of_the_wrong_shape_is_named_not_read() {
    let rec = json!({"schema_version": 1, "benchmark": "fetch", "backend": "http", "results": [{"size_bytes": "big", "concurrency": 4}]});
    let e = rows_of(&rec, "bad.json").unwrap_err().to_string();
    assert!(e.contains("bad.json: not a fetch record this build reads"), "{e}");
    let e = rows_of(&json!({"benchmark": 5, "backend": "http", "results": []}), "b.json").unwrap_err().to_string();
    assert!(e.contains("b.json: no \"benchmark\" field"), "{e}");
}

#[test]
fn suite_entries_read_by_the_suites_names_and_skip_what_is_no_figure() {
    let rec = json!({"benchmark": "b2-checkpoint", "backend": "http", "rdma_witness": {"verdict": "not-applicable"},
    "environment": {"store": "a string, not this tool's store"}, "tag": 7,
    "results": [
        {"throughput_gbps": "x", "gbps": 3.5, "state": {"not": "a dimension"}, "op": "save", "method": 2, "seconds": 1.5, "rdma_witness": null, "witness": "rdma-verified"},
        5, [1.0, 2.0], {"tokens_per_s": [1, 2]}
    ]});
    let rows = rows_of(&rec, "s.json").unwrap();
    assert_eq!(rows.len(), 1);
    let r = &rows[0];
    assert_eq!((r.benchmark.as_str(), r.metric.as_str(), r.value.median, r.gbps), ("ckpt", "GB/s", 3.5, Some(3.5)));
    assert_eq!(r.dims.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(), ["method=2", "op=save"]);
    assert_eq!(r.wall_s.map(|w| w.median), Some(1.5));
    assert_eq!((r.tag.as_deref(), r.server.as_deref()), (None, None));
    // A present `rdma_witness`, even null, wins over `witness`; no windows and nothing claimed: shown as stored.
    assert_eq!(r.verdict, "none");
}

#[test]
fn a_server_on_the_measuring_host_is_named_from_the_control_plane_first() {
    let rec = |store| json!({"environment": {"store": store}});
    let process = json!({"local_process": {"process": "minio"}});
    assert_eq!(server_of(&rec(json!({"server": process}))).as_deref(), Some("minio on this host"));
    assert_eq!(server_of(&rec(json!({"endpoint": "http://10.0.0.1:9000", "control_plane": {"server": process}}))).as_deref(), Some("minio on this host"));
    assert_eq!(server_of(&rec(json!({"endpoint": "http://127.0.0.1:9000"}))).as_deref(), Some("loopback server"));
    assert_eq!(server_of(&rec(json!({"endpoint": "http://192.0.2.7:9000"}))), None);
    assert_eq!(server_of(&rec(json!("not an object"))), None);
}

/// A stored rdma window: `rdma` of `read` bytes over RDMA, the rest over
/// HTTP, judged as the witness judges it, with `label` and (schema 3) `id`.
fn rdma_window(label: &str, id: Option<(usize, u32)>, rdma: f64) -> serde_json::Value {
    use crate::witness::{Deltas, Expect, FabricReport, Payload, judge};
    let read = 1u64 << 20;
    let d = Deltas { rdma_read_bytes: Some(rdma), http_sent_bytes: Some(read as f64 - rdma), http_received_bytes: Some(0.0), ..Default::default() };
    let mut v =
        serde_json::to_value(judge(Expect::Rdma, Payload { read_bytes: read, requests: 1, ..Default::default() }, Ok(d), FabricReport::default())).unwrap();
    v["label"] = json!(label);
    if let Some((cell, repeat)) = id {
        v["id"] = json!({"cell": cell, "repeat": repeat});
    }
    v
}

/// Two fetch cells, the first all RDMA, the second half HTTP: each row shows
/// its own windows' verdict. Schema 3 joins on the windows' ids, whatever
/// their labels say (here labels that name no cell, or the other one);
/// schema 2 records, without ids, still join on fetch's labels.
#[test]
fn rows_join_their_windows_by_id_and_older_records_by_label() {
    let cells = json!([{"size_bytes": 1u64 << 20, "concurrency": 4, "procs": 1, "repeats": [{"repeat": 1, "throughput_gbps": 2.0}]},
                       {"size_bytes": 1u64 << 20, "concurrency": 8, "procs": 1, "repeats": [{"repeat": 1, "throughput_gbps": 3.0}]}]);
    let full = (1u64 << 20) as f64;
    let record = |schema: u32, windows: Vec<serde_json::Value>| {
        json!({"schema_version": schema, "benchmark": "fetch", "backend": "rdma", "params": {}, "results": cells,
               "rdma_witness": {"verdict": "partial-fallback", "windows": windows}})
    };
    let verdicts = |rec: serde_json::Value| rows_of(&rec, "w.json").unwrap().into_iter().map(|r| r.verdict).collect::<Vec<_>>();
    let want = ["rdma-verified", "partial-fallback"];
    let by_id = record(3, vec![rdma_window("1MiB x 8 streams x 1 procs, repeat 1", Some((0, 1)), full), rdma_window("renamed", Some((1, 1)), full / 2.0)]);
    assert_eq!(verdicts(by_id), want);
    // The ids swapped: the verdicts follow the ids, not the labels.
    let swapped = record(3, vec![rdma_window("1MiB x 4 streams x 1 procs, repeat 1", Some((1, 1)), full), rdma_window("x", Some((0, 1)), full / 2.0)]);
    assert_eq!(verdicts(swapped), ["partial-fallback", "rdma-verified"]);
    let by_label =
        record(2, vec![rdma_window("1MiB x 4 streams x 1 procs, repeat 1", None, full), rdma_window("1MiB x 8 streams x 1 procs, repeat 1", None, full / 2.0)]);
    assert_eq!(verdicts(by_label), want);
}

/// A tokens summary of `tokens_per_s` (median, min, max).
fn tokens_results(tokens_per_s: (f64, f64, f64)) -> crate::bench::tokens::TokensResults {
    use crate::bench::tokens::{TokensResults, TokensSummary};
    let one = |v: f64| Spread { median: v, min: v, max: v };
    TokensResults {
        shards: 3,
        timed_shards: 2,
        seq_len: 2048,
        vocab_size: 128_256,
        synthetic: true,
        tokenizer: "synthetic-uniform".into(),
        timed_bytes: 1 << 30,
        warmup: None,
        repeats: Vec::new(),
        summary: TokensSummary {
            tokens_per_s: Spread { median: tokens_per_s.0, min: tokens_per_s.1, max: tokens_per_s.2 },
            throughput_gbps: one(20.0),
            client_cpu_cores: one(0.5),
            fetch_wait_s: one(0.0),
            step_ms_median: one(1.0),
        },
        gpus_it_could_feed: Vec::new(),
    }
}

/// From schema 3 a tokens record is read through the writer's own type
/// (`bench::tokens::TokensRecord`): what the bench serialized is what the
/// report reads, field for field, so a field renamed in the writer's type
/// is renamed for the reader (one type, nothing to keep in step). A record
/// that does not match that type is named, not read half. Records before
/// schema 3 go through the lenient view, which also reads schema 1's plain
/// numbers.
#[test]
fn tokens_records_read_through_the_writers_type_from_schema_3_and_the_lenient_view_before() {
    let params = serde_json::to_value(crate::bench::tokens::TokensParams {
        prefix: "tokens/train".into(),
        fetch_workers: 4,
        run_bytes: 64 << 20,
        batch_seqs: 8,
        compute_s: 0.0,
        warmup_shards: 1,
        repeats: 3,
        range_bytes: 1 << 30,
        gpu_tflops: 989.0,
        mfu: 0.45,
        feed_formula: crate::bench::tokens::FEED_FORMULA.into(),
    })
    .unwrap();
    let results = serde_json::to_value(tokens_results((6.0e9, 5.0e9, 7.0e9))).unwrap();
    let record = |schema: u32, results: &serde_json::Value| json!({"schema_version": schema, "benchmark": "tokens", "backend": "local", "params": params, "results": results});
    let rows = rows_of(&record(crate::record::SCHEMA_VERSION, &results), "t.json").unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].metric.as_str(), rows[0].value), ("tokens/s", Spread { median: 6.0e9, min: 5.0e9, max: 7.0e9 }));
    assert_eq!((rows[0].gbps, rows[0].cpu_cores), (Some(20.0), Some(0.5)));
    assert_eq!(rows[0].dims.get("seq_len").map(String::as_str), Some("2048"));
    // The writer's type has no default for a field it writes: a schema 3 record without one is refused, by name.
    let mut short = results.clone();
    short.as_object_mut().unwrap().remove("timed_bytes");
    let e = rows_of(&record(3, &short), "short.json").unwrap_err().to_string();
    assert!(e.contains("short.json: not a tokens record this build reads") && e.contains("timed_bytes"), "{e}");
    // Schema 1's shape (a figure as a plain number) reads through the lenient view before schema 3 only.
    let old = json!({"seq_len": 1024, "summary": {"tokens_per_s": 3.0e9, "client_cpu_cores": 2.5}});
    let rows = rows_of(&record(2, &old), "old.json").unwrap();
    assert_eq!((rows[0].value.median, rows[0].cpu_cores), (3.0e9, Some(2.5)));
    assert!(rows_of(&record(3, &old), "old3.json").is_err(), "schema 3 is the writer's type, not the lenient view");
    // Schema 3 wrote the ranged GET's size as `window_bytes`: the writer's type still reads it under that name.
    let mut p3 = params.clone();
    let v = p3.as_object_mut().unwrap().remove("range_bytes").unwrap();
    p3["window_bytes"] = v;
    let r3 = json!({"schema_version": 3, "benchmark": "tokens", "backend": "local", "params": p3, "results": results});
    assert_eq!(rows_of(&r3, "t3.json").unwrap()[0].value.median, 6.0e9);
}

/// Which reader a record meets is its schema's: fetch, weights, ckpt and
/// train records before schema 4 go through the lenient views (a sparse
/// record reads), from schema 4 through the writer's own types (the same
/// sparse record is refused, naming the field it lacks).
#[test]
fn fetch_weights_ckpt_and_train_records_read_through_the_writers_type_from_schema_4() {
    let cases = [
        ("fetch", json!({"params": {}, "results": [{"size_bytes": 1u64 << 20, "concurrency": 4, "repeats": [{"throughput_gbps": 2.0}]}]}), "sizes_bytes"),
        ("weights", json!({"params": {"model": "m", "concurrency": 4}, "results": {"summary": {"throughput_gbps": 5.0}}}), "range_bytes"),
        (
            "ckpt",
            json!({"results": {"rows": [{"state": "s", "method": "flat", "op": "save", "ranks": 1, "throughput_gbps": 3.0}]}}),
            "results.rows[0].throughput_gbps: invalid type",
        ),
        ("train", json!({"params": {"layout": "raw", "ranks": 1}, "results": {"summary": {"images_per_s": 100.0}}}), "prefix"),
    ];
    for (bench, body, missing) in cases {
        let mut rec = body.clone();
        rec["benchmark"] = json!(bench);
        rec["backend"] = json!("local");
        for schema in [1, 2, 3] {
            rec["schema_version"] = json!(schema);
            let rows = rows_of(&rec, "old.json").unwrap_or_else(|e| panic!("{bench} schema {schema}: {e}"));
            assert_eq!(rows.len(), 1, "{bench} schema {schema}");
        }
        rec["schema_version"] = json!(4);
        let e = rows_of(&rec, "new.json").unwrap_err().to_string();
        assert!(e.contains(&format!("new.json: not a {bench} record this build reads")) && e.contains(missing), "{bench}: {e}");
    }
}
