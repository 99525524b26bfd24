//! Reading the servers' counters: Prometheus text parsed into series, snapshots summed per metric, diffs over a window; and the RDMA NIC error counters under /sys/class/infiniband.

use super::*;

pub(crate) const RDMA_READ_BYTES: &str = "minio_api_rdma_read_bytes_total";
pub(crate) const RDMA_READ_OPS: &str = "minio_api_rdma_read_ops_total";
pub(crate) const RDMA_WRITE_BYTES: &str = "minio_api_rdma_write_bytes_total";
pub(crate) const RDMA_WRITE_OPS: &str = "minio_api_rdma_write_ops_total";
pub(crate) const RDMA_PREFIX: &str = "minio_api_rdma_";
pub(crate) const HTTP_SENT: &str = "minio_api_requests_traffic_sent_bytes";
pub(crate) const HTTP_RECEIVED: &str = "minio_api_requests_traffic_received_bytes";

/// NIC error counters worth watching on an RDMA fabric (DESIGN.md, "Fabric health").
pub const FABRIC_COUNTERS: [&str; 6] = ["local_ack_timeout_err", "out_of_buffer", "packet_seq_err", "req_cqe_error", "resp_cqe_error", "rnr_nak_retry_err"];

/// A series by name and (sorted) labels, whatever target reported it.
type SeriesId = (String, Vec<(String, String)>);

/// One series: which target, which sample name, which labels (sorted).
pub(crate) type SeriesKey = (usize, String, Vec<(String, String)>);

/// Counters of every target at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub(crate) series: BTreeMap<SeriesKey, f64>,
    /// Per target that failed: why (status, content type, network error).
    pub(crate) errors: Vec<String>,
    /// Servers another target already reported (same series, same `server` label): counted once.
    pub(crate) counted_once: std::collections::BTreeSet<String>,
}

/// One sample of a scrape: metric name, its labels sorted by name, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Whether the witness reads this series (its names, whatever a `# TYPE` line says).
fn witnessed(name: &str) -> bool {
    name.starts_with(RDMA_PREFIX) || name == HTTP_SENT || name == HTTP_RECEIVED
}

/// Parse Prometheus text exposition into `(name, sorted labels, value)` for
/// every counter, gauge or untyped sample (other histograms and summaries skipped).
///
/// Errors: text that does not parse; a series the witness reads that a
/// `# TYPE` line declares a histogram or summary (its bytes would vanish
/// from the sums); a value of such a series that is not a finite number.
pub fn parse_exposition(text: &str) -> std::result::Result<Vec<Sample>, String> {
    // prometheus-parse drops the samples of a name declared a summary or
    // histogram without `quantile`/`le` labels: catch the declaration itself.
    for l in text.lines() {
        let mut w = l.split_whitespace();
        if let (Some("#"), Some("TYPE"), Some(name), Some(kind)) = (w.next(), w.next(), w.next(), w.next())
            && witnessed(name)
            && (kind == "summary" || kind == "histogram")
        {
            return Err(format!("{name} is declared a {kind}, not a counter: its bytes cannot be read"));
        }
    }
    // prometheus-parse silently drops a line it cannot read (a label value
    // holding '}' or a comma, a value such as 0x1e9) and merges label sets it
    // misreads (values holding '='): every raw line of a witnessed series must
    // come out as a sample of its own, or the scrape fails.
    let raw_lines = text
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter(|l| witnessed(l.split(|c: char| c == '{' || c.is_whitespace()).next().unwrap_or("")))
        .count();
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).map_err(|e| format!("cannot parse metrics: {e}"))?;
    let mut out = Vec::new();
    for s in scrape.samples {
        let v = match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
            _ if witnessed(&s.metric) => return Err(format!("{} is declared a histogram or summary, not a counter: its bytes cannot be read", s.metric)),
            _ => continue,
        };
        if witnessed(&s.metric) && !(v.is_finite() && v >= 0.0) {
            return Err(format!("{} is {v}, not a byte or op count", s.metric));
        }
        // Beyond 2^63 an f64 cannot resolve 2 KiB: a payload's growth could vanish in rounding.
        if witnessed(&s.metric) && v >= 9.223_372_036_854_776e18 {
            return Err(format!("{} is {v:e}: beyond 2^63 the counter cannot resolve a request's bytes", s.metric));
        }
        let mut labels: Vec<(String, String)> = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        labels.sort();
        out.push((s.metric, labels, v));
    }
    let parsed: Vec<&Sample> = out.iter().filter(|(n, _, _)| witnessed(n)).collect();
    if parsed.len() != raw_lines {
        return Err(format!(
            "{raw_lines} lines of witnessed series (minio_api_rdma_*, minio_api_requests_traffic_*) but {} parsed: a line the parser could not read (a label value holding '}}', ',' or '=', a value that is not a plain number) would go uncounted",
            parsed.len()
        ));
    }
    let mut keys = std::collections::BTreeSet::new();
    for (n, l, _) in parsed {
        if !keys.insert((n, l)) {
            return Err(format!("{} appears twice in one answer: which value counts is not defined", fmt_sample(n, l)));
        }
    }
    Ok(out)
}

fn fmt_sample(name: &str, labels: &[(String, String)]) -> String {
    let l: Vec<String> = labels.iter().map(|(a, b)| format!("{a}=\"{b}\"")).collect();
    format!("{name}{{{}}}", l.join(","))
}

impl Snapshot {
    /// Build from already-fetched bodies (one per target; `Err` = that target failed).
    ///
    /// A server is counted once, by its own identity, not by URL: MinIO v3
    /// labels every series with the `server` that produced it, so a series
    /// (name and every label, `server` among them) that an earlier target
    /// already reported is the same server reached under a second name (an IP
    /// and a hostname, a load-balancer alias, `N1:9000` and `n1:9000`) and is
    /// skipped. Series without a `server` label cannot be told apart and are summed.
    pub fn from_bodies(bodies: Vec<std::result::Result<String, String>>) -> Self {
        let mut snap = Snapshot::default();
        // (name, labels) -> (first target that reported it, its value there)
        let mut seen: BTreeMap<SeriesId, (usize, f64)> = BTreeMap::new();
        for (t, body) in bodies.into_iter().enumerate() {
            match body.and_then(|b| parse_exposition(&b)) {
                Ok(samples) => {
                    for (name, labels, v) in samples {
                        if witnessed(&name) {
                            let server = labels.iter().find(|(k, _)| k == "server").map(|(_, v)| v.clone());
                            if let Some(server) = server {
                                let (first, value) = *seen.entry((name.clone(), labels.clone())).or_insert((t, v));
                                if first != t {
                                    // One server under two names answers the same
                                    // numbers; different numbers mean two servers
                                    // that claim one identity (or a stale proxy):
                                    // neither can be trusted, nor skipped.
                                    if value != v {
                                        snap.errors.push(format!(
                                            "{} reads {value} at target {} and {v} at target {}: two answers claim one server, so which counts is unknown",
                                            fmt_sample(&name, &labels),
                                            first + 1,
                                            t + 1
                                        ));
                                    }
                                    snap.counted_once.insert(server);
                                    continue;
                                }
                            }
                            snap.series.insert((t, name, labels), v);
                        }
                    }
                }
                Err(e) => snap.errors.push(e),
            }
        }
        snap
    }
}

pub(crate) fn fmt_series(k: &SeriesKey) -> String {
    let labels: Vec<String> = k.2.iter().map(|(a, b)| format!("{a}=\"{b}\"")).collect();
    format!("{}{{{}}}", k.1, labels.join(","))
}

/// Diff two snapshots and sum the deltas by counter name.
///
/// Errors (as the reason for `unverified`): a target failed in either
/// snapshot, a series went backwards (server restart), or a series vanished.
pub fn diff(before: &Snapshot, after: &Snapshot) -> std::result::Result<Deltas, String> {
    if let Some(e) = before.errors.first().or(after.errors.first()) {
        return Err(e.clone());
    }
    for k in before.series.keys() {
        if !after.series.contains_key(k) {
            return Err(format!("series {} vanished during the run: server restarted or a node stopped answering", fmt_series(k)));
        }
    }
    let mut sums: BTreeMap<String, f64> = BTreeMap::new();
    for (k, &v1) in &after.series {
        let v0 = before.series.get(k).copied().unwrap_or(0.0);
        if v1 < v0 {
            return Err(format!("counter {} went backwards ({v0} -> {v1}): the server restarted during the run", fmt_series(k)));
        }
        *sums.entry(k.1.clone()).or_insert(0.0) += v1 - v0;
    }
    Ok(Deltas {
        rdma_read_bytes: sums.get(RDMA_READ_BYTES).copied(),
        rdma_read_ops: sums.get(RDMA_READ_OPS).copied(),
        rdma_write_bytes: sums.get(RDMA_WRITE_BYTES).copied(),
        rdma_write_ops: sums.get(RDMA_WRITE_OPS).copied(),
        http_sent_bytes: sums.get(HTTP_SENT).copied(),
        http_received_bytes: sums.get(HTTP_RECEIVED).copied(),
        rdma_series: sums.into_iter().filter(|(n, _)| n.starts_with(RDMA_PREFIX)).collect(),
        counted_once: after.counted_once.iter().cloned().collect(),
    })
}

/// RDMA NIC error counters at one moment: `<dev>/<port>/<counter>` -> value.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FabricSnapshot(BTreeMap<String, u64>);

impl FabricSnapshot {
    /// Read `<root>/<dev>/ports/<n>/hw_counters/<counter>` for the counters in
    /// [`FABRIC_COUNTERS`]; root is normally `/sys/class/infiniband`.
    pub fn read(root: &Path) -> Self {
        let mut m = BTreeMap::new();
        let Ok(devs) = std::fs::read_dir(root) else { return FabricSnapshot(m) };
        for dev in devs.flatten() {
            let Ok(ports) = std::fs::read_dir(dev.path().join("ports")) else { continue };
            for port in ports.flatten() {
                for c in FABRIC_COUNTERS {
                    let p = port.path().join("hw_counters").join(c);
                    if let Some(v) = std::fs::read_to_string(&p).ok().and_then(|s| s.trim().parse().ok()) {
                        let key = format!("{}/{}/{c}", dev.file_name().to_string_lossy(), port.file_name().to_string_lossy());
                        m.insert(key, v);
                    }
                }
            }
        }
        FabricSnapshot(m)
    }
}

/// RDMA NIC error counter deltas over a window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FabricReport {
    /// False when no RDMA NIC error counters exist on this host.
    pub present: bool,
    /// `<dev>/<port>/<counter>` -> increase (only counters that exist).
    pub deltas: BTreeMap<String, u64>,
    /// Sum of all deltas: any non-zero value means the fabric dropped or retried.
    pub total_errors: u64,
}

/// Diff two fabric snapshots (a counter that went backwards counts as 0).
pub fn fabric_diff(before: &FabricSnapshot, after: &FabricSnapshot) -> FabricReport {
    let deltas: BTreeMap<String, u64> = after.0.iter().map(|(k, v)| (k.clone(), v.saturating_sub(before.0.get(k).copied().unwrap_or(*v)))).collect();
    FabricReport { present: !after.0.is_empty(), total_errors: deltas.values().sum(), deltas }
}
