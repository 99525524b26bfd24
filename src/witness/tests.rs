//! Unit tests of the witness: scrapes of MinIO-shaped metrics, their
//! differences over a window and the verdicts judged from them.

use super::scrape::{RDMA_READ_BYTES, RDMA_READ_OPS};
use super::*;

/// Two AIStor nodes' v3 rdma group, in the shape MinIO emits (HELP/TYPE,
/// `server` label); node 2's TYPE line omits `_total`, so the parser calls
/// its series untyped.
fn rdma_node(server: &str, read: f64, ops: f64, write: f64) -> String {
    format!(
        "# HELP minio_api_rdma_read_bytes_total Bytes sent over RDMA\n\
         # TYPE minio_api_rdma_read_bytes_total counter\n\
         minio_api_rdma_read_bytes_total{{server=\"{server}\"}} {read:e}\n\
         # HELP minio_api_rdma_read_ops_total RDMA read operations\n\
         # TYPE minio_api_rdma_read_ops counter\n\
         minio_api_rdma_read_ops_total{{server=\"{server}\"}} {ops}\n\
         minio_api_rdma_write_bytes_total{{server=\"{server}\"}} {write}\n\
         minio_api_rdma_write_ops_total{{server=\"{server}\"}} 0\n\
         minio_api_rdma_registration_failures_total{{server=\"{server}\"}} 2\n"
    )
}

fn requests_node(server: &str, sent: f64) -> String {
    format!(
        "# HELP minio_api_requests_traffic_sent_bytes Total bytes sent\n\
         # TYPE minio_api_requests_traffic_sent_bytes counter\n\
         minio_api_requests_traffic_sent_bytes{{server=\"{server}\",type=\"s3\"}} {sent}\n\
         minio_api_requests_traffic_sent_bytes{{server=\"{server}\",type=\"admin\"}} 100\n\
         minio_api_requests_traffic_received_bytes{{server=\"{server}\",type=\"s3\"}} 5000\n\
         # TYPE minio_api_requests_ttfb_seconds_distribution histogram\n\
         minio_api_requests_ttfb_seconds_distribution_bucket{{le=\"0.05\",server=\"{server}\"}} 3\n"
    )
}

fn snap(nodes: &[(f64, f64, f64, f64)]) -> Snapshot {
    let mut bodies = Vec::new();
    for (i, (read, ops, write, sent)) in nodes.iter().enumerate() {
        let server = format!("node{}:9000", i + 1);
        bodies.push(Ok(rdma_node(&server, *read, *ops, *write)));
        bodies.push(Ok(requests_node(&server, *sent)));
    }
    Snapshot::from_bodies(bodies)
}

#[test]
fn parser_reads_counters_whatever_the_type_line_says() {
    let s = parse_exposition(&rdma_node("n1:9000", 1.5e9, 7.0, 0.0)).unwrap();
    let get = |n: &str| s.iter().find(|(name, _, _)| name == n).map(|x| x.2);
    assert_eq!(get(RDMA_READ_BYTES), Some(1.5e9));
    assert_eq!(get(RDMA_READ_OPS), Some(7.0), "TYPE without _total: sample still read");
    assert_eq!(s[0].1, vec![("server".to_string(), "n1:9000".to_string())]);
}

#[test]
fn deltas_sum_over_nodes_and_label_sets() {
    let before = snap(&[(1e9, 10.0, 0.0, 1000.0), (2e9, 20.0, 0.0, 2000.0)]);
    let after = snap(&[(1e9 + 48e6, 13.0, 0.0, 1500.0), (2e9 + 16e6, 21.0, 0.0, 2600.0)]);
    let d = diff(&before, &after).unwrap();
    assert_eq!(d.rdma_read_bytes, Some(64e6));
    assert_eq!(d.rdma_read_ops, Some(4.0));
    assert_eq!(d.rdma_write_bytes, Some(0.0));
    assert_eq!(d.http_sent_bytes, Some(1100.0), "the admin series did not move");
    assert_eq!(d.http_received_bytes, Some(0.0));
    assert_eq!(d.rdma_series.get("minio_api_rdma_registration_failures_total"), Some(&0.0));
}

#[test]
fn a_counter_reset_or_vanished_series_is_unverified() {
    let before = snap(&[(5e9, 10.0, 0.0, 1000.0)]);
    let reset = snap(&[(1e6, 1.0, 0.0, 1000.0)]);
    let e = diff(&before, &reset).unwrap_err();
    assert!(e.contains("went backwards") && e.contains("minio_api_rdma_read_bytes_total{server=\"node1:9000\"}"), "{e}");
    let r = judge(Expect::Rdma, Payload { read_bytes: 1, ..Default::default() }, Err(e), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified);
    assert!(r.rdma_share.is_none());
    // Node 2 answered before, not after (its series are gone).
    let two = snap(&[(1.0, 1.0, 0.0, 1.0), (1.0, 1.0, 0.0, 1.0)]);
    let one = snap(&[(2.0, 2.0, 0.0, 2.0)]);
    assert!(diff(&two, &one).unwrap_err().contains("vanished"));
}

#[test]
fn a_series_that_appears_counts_from_zero() {
    let before = Snapshot::from_bodies(vec![Ok(requests_node("n:1", 10.0))]);
    let after = Snapshot::from_bodies(vec![Ok(requests_node("n:1", 10.0) + &rdma_node("n:1", 4096.0, 1.0, 0.0))]);
    let d = diff(&before, &after).unwrap();
    assert_eq!(d.rdma_read_bytes, Some(4096.0));
}

#[test]
fn a_failed_scrape_is_unverified_with_its_status() {
    let bad = Snapshot::from_bodies(vec![Err("metrics target http://x/m answered HTTP 403 (application/xml)".into())]);
    let good = snap(&[(0.0, 0.0, 0.0, 0.0)]);
    let e = diff(&good, &bad).unwrap_err();
    assert!(e.contains("403"));
}

fn judged(expect: Expect, read: u64, rdma: f64, sent: f64) -> WitnessReport {
    let d = Deltas { rdma_read_bytes: Some(rdma), http_sent_bytes: Some(sent), ..Default::default() };
    judge(expect, Payload { read_bytes: read, ..Default::default() }, Ok(d), FabricReport::default())
}

#[test]
fn verdicts_follow_the_share() {
    let p = 64 << 20;
    let v = judged(Expect::Rdma, p, p as f64, 0.0);
    assert_eq!((v.verdict, v.rdma_share), (Verdict::RdmaVerified, Some(1.0)));
    // 99 % is the line.
    assert_eq!(judged(Expect::Rdma, 1000, 990.0, 10.0).verdict, Verdict::RdmaVerified);
    assert_eq!(judged(Expect::Rdma, 1000, 989.0, 11.0).verdict, Verdict::PartialFallback);
    let third = judged(Expect::Rdma, 3000, 1000.0, 2000.0);
    assert_eq!(third.verdict, Verdict::PartialFallback);
    assert!(third.reason.contains("33.3%"), "{}", third.reason);
    assert_eq!(judged(Expect::Rdma, 1000, 0.0, 1000.0).verdict, Verdict::FullFallback);
    assert_eq!(judged(Expect::Http, 1000, 0.0, 1000.0).verdict, Verdict::NotApplicable);
    let other = judged(Expect::Http, 1000, 1000.0, 0.0);
    assert_eq!(other.verdict, Verdict::NotApplicable, "an http run is never rdma-verified");
    assert!(other.reason.contains("other clients"), "{}", other.reason);
    let l = judge(Expect::Local, Payload { read_bytes: 5, ..Default::default() }, Err("x".into()), FabricReport::default());
    assert_eq!(l.verdict, Verdict::NotApplicable);
}

#[test]
fn missing_rdma_series_needs_http_evidence_for_full_fallback() {
    let d = |sent| Deltas { http_sent_bytes: Some(sent), ..Default::default() };
    let p = Payload { read_bytes: 1000, ..Default::default() };
    assert_eq!(judge(Expect::Rdma, p, Ok(d(1000.0)), FabricReport::default()).verdict, Verdict::FullFallback);
    assert_eq!(judge(Expect::Rdma, p, Ok(d(10.0)), FabricReport::default()).verdict, Verdict::Unverified);
    assert_eq!(judge(Expect::Http, p, Ok(d(1000.0)), FabricReport::default()).verdict, Verdict::NotApplicable);
    let none = judge(Expect::Rdma, p, Ok(Deltas::default()), FabricReport::default());
    assert_eq!(none.verdict, Verdict::Unverified);
    assert!(none.reason.contains("MinIO"));
}

#[test]
fn each_direction_needs_its_own_counter() {
    // A GET cannot be proven by RDMA writes, a PUT not by RDMA reads.
    let d = Deltas { rdma_read_bytes: Some(0.0), rdma_write_bytes: Some(1000.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::FullFallback);
    let d = Deltas { rdma_read_bytes: Some(1000.0), rdma_write_bytes: Some(0.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { write_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::FullFallback);
    // Both directions in one window: the weaker one decides.
    let d = Deltas { rdma_read_bytes: Some(1000.0), rdma_write_bytes: Some(500.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 1000, write_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!((r.verdict, r.rdma_share), (Verdict::PartialFallback, Some(0.5)));
}

/// The ranks' meeting bytes over HTTP in a window are declared, and only
/// they widen the HTTP allowance: 1 MB written by RDMA, 1 request (1 % +
/// 2 KiB = 12,048 bytes), HTTP received grew 20,000.
#[test]
fn declared_meeting_bytes_widen_the_http_allowance_by_themselves_only() {
    let d = Deltas { rdma_write_bytes: Some(1_000_000.0), http_received_bytes: Some(20_000.0), ..Default::default() };
    let p = Payload { write_bytes: 1_000_000, requests: 1, ..Default::default() };
    let r = judge(Expect::Rdma, p, Ok(d.clone()), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified, "{}", r.reason);
    let declared = Payload { coordination_bytes: 8_000, ..p };
    let r = judge(Expect::Rdma, declared, Ok(d.clone()), FabricReport::default());
    assert_eq!((r.verdict, r.coordination_bytes), (Verdict::RdmaVerified, 8_000), "{}", r.reason);
    assert_eq!(recheck(Expect::Rdma, &r), Verdict::RdmaVerified);
    let short = Payload { coordination_bytes: 7_000, ..p };
    assert_eq!(judge(Expect::Rdma, short, Ok(d), FabricReport::default()).verdict, Verdict::Unverified);
}

#[test]
fn bytes_the_client_sent_over_http_are_never_rdma() {
    let d = || Deltas { rdma_read_bytes: Some(1000.0), ..Default::default() };
    let all = Payload { read_bytes: 1000, client_http_bytes: 1000, requests: 1, ..Default::default() };
    assert_eq!(judge(Expect::Rdma, all, Ok(d()), FabricReport::default()).verdict, Verdict::FullFallback);
    let some = Payload { read_bytes: 1000, client_http_bytes: 300, requests: 1, ..Default::default() };
    assert_eq!(judge(Expect::Rdma, some, Ok(d()), FabricReport::default()).verdict, Verdict::PartialFallback);
}

#[test]
fn rdma_verified_needs_both_sides_of_the_evidence() {
    // (a) RDMA carried the payload, HTTP grew by request heads only: verified.
    let d = Deltas { rdma_read_bytes: Some(4_000_000.0), rdma_read_ops: Some(100.0), http_sent_bytes: Some(60_000.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 4_000_000, requests: 100, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::RdmaVerified, "{}", r.reason);
    // Small objects: 100 requests of 4000 bytes may grow HTTP by half the
    // payload in heads alone, so HTTP cannot tell RDMA from a fallback.
    let d = Deltas { rdma_read_bytes: Some(400_000.0), rdma_read_ops: Some(100.0), http_sent_bytes: Some(0.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 400_000, requests: 100, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified, "{}", r.reason);
    assert!(r.reason.contains("too few read bytes per request"), "{}", r.reason);
    // The allowance is the client's own request count, not the server's op
    // count (another client's many small RDMA ops must not widen it).
    let d = Deltas { rdma_read_bytes: Some(4_194_304.0), rdma_read_ops: Some(2100.0), http_sent_bytes: Some(4_195_904.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 4_194_304, requests: 4, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified, "{}", r.reason);
    // No HTTP counters scraped: the fallback beside another client's RDMA cannot be ruled out.
    let d = Deltas { rdma_read_bytes: Some(1000.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { read_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified, "{}", r.reason);
    assert!(r.reason.contains("not scraped"), "{}", r.reason);
    // (c) this client fell back (HTTP sent grew by the payload) while another
    // client's RDMA made the RDMA counter grow by as much: never verified.
    let r = judged(Expect::Rdma, 1_000_000, 1_000_000.0, 1_000_000.0);
    assert_eq!(r.verdict, Verdict::Unverified);
    assert!(r.reason.contains("evidence disagrees") && r.reason.contains("1000000"), "{}", r.reason);
    // More RDMA than the payload: someone else shares the server.
    let r = judged(Expect::Rdma, 1_000_000, 1_500_000.0, 0.0);
    assert_eq!(r.verdict, Verdict::Unverified);
    assert!(r.reason.contains("150.0%") && r.reason.contains("another client"), "{}", r.reason);
    // Within noise above the payload (1 %) still verifies.
    assert_eq!(judged(Expect::Rdma, 1_000_000, 1_009_000.0, 0.0).verdict, Verdict::RdmaVerified);
    // Writes are checked against HTTP received bytes.
    let d = Deltas { rdma_write_bytes: Some(1000.0), http_received_bytes: Some(1000.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { write_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::Unverified, "{}", r.reason);
}

#[test]
fn one_server_under_two_urls_is_counted_once() {
    // The same node scraped under two URLs (IP and hostname): its series carry one `server` label.
    let body = |read: f64| Ok(rdma_node("n1:9000", read, 1.0, 0.0));
    let before = Snapshot::from_bodies(vec![body(0.0), body(0.0)]);
    let after = Snapshot::from_bodies(vec![body(500.0), body(500.0)]);
    let d = diff(&before, &after).unwrap();
    assert_eq!(d.rdma_read_bytes, Some(500.0), "not 1000: one server, counted once");
    assert_eq!(d.counted_once, vec!["n1:9000".to_string()]);
    // Payload 1000, the one server saw 500: half, not all of it.
    let r = judge(Expect::Rdma, Payload { read_bytes: 1000, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::PartialFallback);
    assert!(r.reason.contains("counted once: n1:9000"), "{}", r.reason);
    // Two servers are two servers.
    let two = |read: f64| vec![Ok(rdma_node("n1:9000", read, 1.0, 0.0)), Ok(rdma_node("n2:9000", read, 1.0, 0.0))];
    let d = diff(&Snapshot::from_bodies(two(0.0)), &Snapshot::from_bodies(two(500.0))).unwrap();
    assert_eq!(d.rdma_read_bytes, Some(1000.0));
    assert!(d.counted_once.is_empty());
}

#[test]
fn percentages_round_down() {
    assert_eq!(pct_floor(0.9899998), "98.9");
    assert_eq!(pct_floor(1.0), "100.0");
    let r = judged(Expect::Rdma, 10_000_000, 9_899_998.0, 0.0);
    assert_eq!(r.verdict, Verdict::PartialFallback);
    assert!(r.reason.contains("(98.9%)"), "{}", r.reason);
}

#[test]
fn a_witnessed_series_that_is_not_a_finite_counter_is_refused() {
    let nan = "minio_api_requests_traffic_sent_bytes{server=\"n1:9000\"} NaN\n";
    assert!(parse_exposition(nan).unwrap_err().contains("NaN"));
    let summary = "# TYPE minio_api_requests_traffic_sent_bytes summary\nminio_api_requests_traffic_sent_bytes{server=\"n1:9000\"} 5\n";
    assert!(parse_exposition(summary).unwrap_err().contains("summary"), "a TYPE line must not hide HTTP bytes");
    // Other series are none of the witness's business.
    assert!(parse_exposition("go_gc_duration_seconds NaN\n").is_ok());
    // Label values may hold ',', '=' and '}' (quoted, with \" \\ \n escapes):
    // every series is kept under its full label set.
    let comma = "minio_api_rdma_read_bytes_total{bar=\"baz,qux\"} 524288\nminio_api_rdma_read_bytes_total{bar=\"baz,zap\"} 524288\n";
    let got = parse_exposition(comma).unwrap();
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0].1, vec![("bar".to_string(), "baz,qux".to_string())]);
    assert_eq!(got[1].1, vec![("bar".to_string(), "baz,zap".to_string())]);
    let odd = "minio_api_requests_traffic_sent_bytes{server=\"n1\",note=\"a}b=c \\\"q\\\" \\\\ \\n\"} 5 1700000000000\n";
    let got = parse_exposition(odd).unwrap();
    assert_eq!(got[0].1[0], ("note".to_string(), "a}b=c \"q\" \\ \n".to_string()), "{got:?}");
    assert_eq!(got[0].2, 5.0);
    // What does not follow the grammar fails the scrape (never a silent drop).
    for bad in [
        "minio_api_requests_traffic_sent_bytes{server=\"n1\"} 0x1e9\n",
        "minio_api_requests_traffic_sent_bytes{server=\"n1} 5\n",
        "minio_api_requests_traffic_sent_bytes{server=n1} 5\n",
        "minio_api_requests_traffic_sent_bytes{server=\"n1\",server=\"n2\"} 5\n",
        "minio_api_requests_traffic_sent_bytes{server=\"n1\"}\n",
        "minio_api_requests_traffic_sent_bytes{server=\"a\\q\"} 5\n",
    ] {
        assert!(parse_exposition(bad).is_err(), "{bad:?} parsed as {:?}", parse_exposition(bad));
    }
    let twice = "minio_api_requests_traffic_sent_bytes{server=\"n1\"} 5\nminio_api_requests_traffic_sent_bytes{server=\"n1\"} 9\n";
    assert!(parse_exposition(twice).unwrap_err().contains("appears twice"));
    assert!(parse_exposition("minio_api_rdma_read_bytes_total{server=\"n1\"} -5\n").is_err(), "a negative counter");
    assert!(parse_exposition("minio_api_rdma_read_bytes_total{server=\"n1\"} 1e30\n").unwrap_err().contains("2^63"));
    // One server under two URLs must answer the same numbers; different
    // numbers under one identity cannot be counted once, nor twice.
    let a = "minio_api_requests_traffic_sent_bytes{server=\"n1:9000\"} 5\n".to_string();
    let b = "minio_api_requests_traffic_sent_bytes{server=\"n1:9000\"} 9\n".to_string();
    let snap = Snapshot::from_bodies(vec![Ok(a.clone()), Ok(b)]);
    assert!(snap.errors.iter().any(|e| e.contains("two answers claim one server")), "{:?}", snap.errors);
    assert!(Snapshot::from_bodies(vec![Ok(a.clone()), Ok(a)]).errors.is_empty());
    let snap = Snapshot::from_bodies(vec![Ok(nan.to_string())]);
    assert!(diff(&snap, &snap).is_err(), "the window is unverified");
}

#[test]
fn writes_count_rdma_write_bytes() {
    let d = Deltas { rdma_write_bytes: Some(65536.0), rdma_write_ops: Some(1.0), http_received_bytes: Some(300.0), ..Default::default() };
    let r = judge(Expect::Rdma, Payload { write_bytes: 65536, requests: 1, ..Default::default() }, Ok(d), FabricReport::default());
    assert_eq!(r.verdict, Verdict::RdmaVerified);
    assert_eq!(r.counters.rdma_write_ops, Some(1.0));
}

#[test]
fn jwt_matches_mc_admin_prometheus_generate() {
    let t = prometheus_jwt("AKIDEXAMPLE", "s3cr3t").unwrap();
    let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS512);
    v.set_issuer(&["prometheus"]);
    v.sub = Some("AKIDEXAMPLE".into());
    let data = jsonwebtoken::decode::<serde_json::Value>(&t, &jsonwebtoken::DecodingKey::from_secret(b"s3cr3t"), &v).unwrap();
    assert_eq!(data.header.alg, jsonwebtoken::Algorithm::HS512);
    let exp = data.claims["exp"].as_i64().unwrap();
    assert!(exp > chrono::Utc::now().timestamp() + 99 * 365 * 24 * 3600);
    assert!(jsonwebtoken::decode::<serde_json::Value>(&t, &jsonwebtoken::DecodingKey::from_secret(b"wrong"), &v).is_err());
}

#[test]
fn fabric_counters_are_diffed_and_absence_recorded() {
    let root = tempfile::tempdir().unwrap();
    let hw = root.path().join("mlx5_0/ports/1/hw_counters");
    std::fs::create_dir_all(&hw).unwrap();
    for c in FABRIC_COUNTERS {
        std::fs::write(hw.join(c), "5\n").unwrap();
    }
    let a = FabricSnapshot::read(root.path());
    std::fs::write(hw.join("out_of_buffer"), "9\n").unwrap();
    let r = fabric_diff(&a, &FabricSnapshot::read(root.path()));
    assert!(r.present);
    assert_eq!(r.deltas.len(), 6);
    assert_eq!(r.deltas["mlx5_0/1/out_of_buffer"], 4);
    assert_eq!(r.total_errors, 4);
    let none = fabric_diff(&FabricSnapshot::default(), &FabricSnapshot::read(&root.path().join("absent")));
    assert!(!none.present && none.deltas.is_empty());
}

#[test]
fn worst_verdict_wins() {
    let a = judged(Expect::Rdma, 100, 100.0, 0.0);
    let b = judged(Expect::Rdma, 100, 50.0, 50.0);
    let (v, why) = worst([("cell a", &a), ("cell b", &b)]).unwrap();
    assert_eq!(v, Verdict::PartialFallback);
    assert!(why.starts_with("cell b:"));
}
