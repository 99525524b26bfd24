//! Reading the servers' counters: Prometheus text parsed into series, snapshots summed per metric, diffs over a window; and the RDMA NIC error counters under /sys/class/infiniband.

use super::Deltas;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub(crate) const RDMA_READ_BYTES: &str = "minio_api_rdma_read_bytes_total";
pub(crate) const RDMA_READ_OPS: &str = "minio_api_rdma_read_ops_total";
pub(crate) const RDMA_WRITE_BYTES: &str = "minio_api_rdma_write_bytes_total";
pub(crate) const RDMA_WRITE_OPS: &str = "minio_api_rdma_write_ops_total";
pub(crate) const RDMA_PREFIX: &str = "minio_api_rdma_";
pub(crate) const HTTP_SENT: &str = "minio_api_requests_traffic_sent_bytes";
pub(crate) const HTTP_RECEIVED: &str = "minio_api_requests_traffic_received_bytes";

/// NIC error counters worth watching on an RDMA fabric (docs/witness.md, "Fabric health").
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

/// An OpenMetrics answer (`application/openmetrics-text`, what client_golang
/// writes when OpenMetrics is negotiated) as the Prometheus text format the
/// parser reads, for the series the witness reads
/// (<https://github.com/prometheus/OpenMetrics/blob/main/specification/OpenMetrics.md>):
/// a counter family's samples carry `_total` (MinIO's text names for the
/// HTTP traffic counters do not: the suffix is dropped for those two) and
/// `_created` (dropped: a timestamp, not a count); an exemplar after ` # `
/// and a timestamp in seconds with a fraction are dropped; `# EOF` ends it.
pub fn openmetrics_as_text(om: &str) -> String {
    let mut out = String::with_capacity(om.len());
    for line in om.lines().map(str::trim) {
        if line == "# EOF" {
            break;
        }
        if line.starts_with('#') || line.is_empty() {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        // The exemplar: " # {labels} value [timestamp]" after the sample.
        let sample = line.split_once(" # ").map_or(line, |(s, _)| s).trim_end();
        let name_end = sample.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(sample.len());
        let (name, rest) = sample.split_at(name_end);
        if name.ends_with("_created") && witnessed(name.trim_end_matches("_created").trim_end_matches("_total")) {
            continue;
        }
        let name = match name.strip_suffix("_total") {
            Some(base) if base == HTTP_SENT || base == HTTP_RECEIVED => base,
            _ => name,
        };
        // Labels may hold spaces: the value and timestamp follow the closing brace.
        let (labels, tail) = match rest.rfind('}') {
            Some(i) => rest.split_at(i + 1),
            None => ("", rest),
        };
        let value = tail.split_whitespace().next().unwrap_or("");
        out.push_str(&format!("{name}{labels} {value}\n"));
    }
    out
}

/// A metrics body as text, decompressed by its `Content-Encoding` (`gzip`,
/// `x-gzip`, `deflate` = zlib as HTTP defines it, or none).
///
/// Errors: another encoding, or a body that does not decompress.
pub fn decode_body(encoding: &str, body: &[u8]) -> std::result::Result<String, String> {
    use std::io::Read;
    let mut s = String::new();
    let read = match encoding {
        "identity" | "" => return Ok(String::from_utf8_lossy(body).into_owned()),
        "gzip" | "x-gzip" => flate2::read::GzDecoder::new(body).read_to_string(&mut s),
        "deflate" => flate2::read::ZlibDecoder::new(body).read_to_string(&mut s),
        other => return Err(format!("answered with Content-Encoding {other:?}, which the witness cannot read (gzip, deflate or none)")),
    };
    read.map_err(|e| format!("its {encoding} body does not decompress: {e}"))?;
    Ok(s)
}

/// Parse Prometheus text exposition into `(name, sorted labels, value)` for
/// every sample of a series the witness reads (`minio_api_rdma_*`,
/// `minio_api_requests_traffic_*`); other series are skipped unread.
///
/// Own parser, per the text format's grammar
/// (<https://prometheus.io/docs/instrumenting/exposition_formats/>): label
/// values are quoted strings with the escapes `\"`, `\\` and `\n`, so they may
/// hold `,`, `=` and `}`. prometheus-parse 0.2.5 (the newest release) splits
/// label sets on those characters inside quotes, merging or dropping series
/// (two series whose label values differ only after a comma were read as one,
/// half the RDMA bytes lost); for the witness that is a wrong verdict, not a nuisance.
///
/// Errors: a witnessed line that does not follow the grammar; a witnessed
/// name a `# TYPE` line declares a histogram or summary; a value that is not
/// a finite count >= 0 and below 2^63 (where an f64 stops resolving 2 KiB);
/// one series twice in one answer.
pub fn parse_exposition(text: &str) -> std::result::Result<Vec<Sample>, String> {
    let mut out: Vec<Sample> = Vec::new();
    let mut keys = std::collections::BTreeSet::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(comment) = line.strip_prefix('#') {
            let mut w = comment.split_whitespace();
            if let (Some("TYPE"), Some(name), Some(kind)) = (w.next(), w.next(), w.next())
                && witnessed(name)
                && (kind == "summary" || kind == "histogram")
            {
                return Err(format!("{name} is declared a {kind}, not a counter: its bytes cannot be read"));
            }
            continue;
        }
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace()).unwrap_or(line.len());
        let name = &line[..name_end];
        if !witnessed(name) {
            continue;
        }
        let (labels, v) = sample_line(&line[name_end..]).map_err(|why| format!("cannot parse the metrics line '{line}': {why}"))?;
        if !(v.is_finite() && v >= 0.0) {
            return Err(format!("{name} is {v}, not a byte or op count"));
        }
        if v >= 9.223_372_036_854_776e18 {
            return Err(format!("{name} is {v:e}: beyond 2^63 the counter cannot resolve a request's bytes"));
        }
        if !keys.insert((name.to_string(), labels.clone())) {
            return Err(format!("{} appears twice in one answer: which value counts is not defined", fmt_sample(name, &labels)));
        }
        out.push((name.to_string(), labels, v));
    }
    Ok(out)
}

/// The rest of a sample line after its name: `{l="v",...} value [timestamp]`
/// -> (labels sorted by name, value).
fn sample_line(rest: &str) -> std::result::Result<(Vec<(String, String)>, f64), String> {
    let mut labels = Vec::new();
    let mut chars = rest.char_indices().peekable();
    let mut after = 0;
    if rest.starts_with('{') {
        chars.next();
        loop {
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            if chars.next_if(|(_, c)| *c == '}').is_some() {
                break;
            }
            let mut key = String::new();
            while let Some((_, c)) = chars.next_if(|(_, c)| c.is_ascii_alphanumeric() || *c == '_') {
                key.push(c);
            }
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            if key.is_empty() || chars.next().map(|(_, c)| c) != Some('=') {
                return Err("a label is not name=\"value\"".into());
            }
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            if chars.next().map(|(_, c)| c) != Some('"') {
                return Err(format!("label {key}'s value is not quoted"));
            }
            let mut value = String::new();
            loop {
                match chars.next() {
                    Some((_, '"')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, 'n')) => value.push('\n'),
                        Some((_, c @ ('\\' | '"'))) => value.push(c),
                        _ => return Err(format!("label {key}'s value has an escape other than \\\\, \\\" or \\n")),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err(format!("label {key}'s value is not closed")),
                }
            }
            if labels.iter().any(|(k, _)| *k == key) {
                return Err(format!("label {key} appears twice"));
            }
            labels.push((key, value));
            while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
            match chars.next() {
                Some((_, ',')) => continue,
                Some((_, '}')) => break,
                _ => return Err("labels are not separated by ',' or closed by '}'".into()),
            }
        }
        after = chars.peek().map_or(rest.len(), |(i, _)| *i);
    }
    let mut fields = rest[after..].split_whitespace();
    let value = fields.next().ok_or("no value")?;
    let v = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        other => other.parse::<f64>().map_err(|_| format!("value '{other}' is not a number"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| format!("timestamp '{ts}' is not an integer"))?;
    }
    if fields.next().is_some() {
        return Err("more than a value and a timestamp after the labels".into());
    }
    labels.sort();
    Ok((labels, v))
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

#[cfg(test)]
mod format_tests {
    use super::*;

    fn sums(text: &str) -> Vec<(String, f64)> {
        parse_exposition(text).unwrap().into_iter().map(|(n, _, v)| (n, v)).collect()
    }

    /// The same two counters as MinIO's text, as client_golang's OpenMetrics
    /// (`_total`, `_created`, `# EOF`), with exemplars, and with timestamps
    /// in seconds: each reads as the text does.
    #[test]
    fn openmetrics_answers_read_as_the_text_format() {
        let l = r#"{server="n:9000",type="s3"}"#;
        let want = vec![(HTTP_SENT.to_string(), 5000.0), (HTTP_RECEIVED.to_string(), 7000.0)];
        let native = format!(
            "# TYPE {HTTP_SENT} counter\n{HTTP_SENT}_total{l} 5000\n{HTTP_SENT}_created{l} 1.796e+09\n\
             # TYPE {HTTP_RECEIVED} counter\n{HTTP_RECEIVED}_total{l} 7000\n{HTTP_RECEIVED}_created{l} 1.796e+09\n# EOF\n"
        );
        assert_eq!(sums(&openmetrics_as_text(&native)), want);
        let exemplar = native.replace(" 5000\n", " 5000 # {trace_id=\"4bf9\"} 1.0 1796218000.125\n");
        assert_eq!(sums(&openmetrics_as_text(&exemplar)), want);
        let ts = format!("# TYPE {HTTP_SENT} unknown\n{HTTP_SENT}{l} 5000 1796218000.125\n{HTTP_RECEIVED}{l} 7000 1796218000.125\n# EOF\n");
        assert_eq!(sums(&openmetrics_as_text(&ts)), want);
        // RDMA counters keep their _total; their _created samples are no counts.
        let rdma = format!("minio_api_rdma_read_bytes_total{l} 4096\nminio_api_rdma_read_bytes_created{l} 1.7e9\n# EOF\n");
        assert_eq!(sums(&openmetrics_as_text(&rdma)), vec![("minio_api_rdma_read_bytes_total".to_string(), 4096.0)]);
    }

    #[test]
    fn compressed_bodies_are_decoded_by_their_encoding() {
        use std::io::Write;
        let text = "minio_api_requests_traffic_sent_bytes 12\n";
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        assert_eq!(decode_body("gzip", &gz.finish().unwrap()).unwrap(), text);
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(text.as_bytes()).unwrap();
        assert_eq!(decode_body("deflate", &z.finish().unwrap()).unwrap(), text);
        assert_eq!(decode_body("identity", text.as_bytes()).unwrap(), text);
        assert!(decode_body("br", b"x").unwrap_err().contains("\"br\""));
        assert!(decode_body("gzip", b"not gzip").unwrap_err().contains("does not decompress"));
    }
}
