//! The witness: server-side proof of which transport carried a run's bytes.
//!
//! The client library falls back from RDMA to HTTP silently (seeds/000, "silent
//! fallback traps"; seeds/002: at 768 MiB x 8 processes only a third of the
//! bytes went over RDMA with no error). So every timed window is wrapped: every
//! server node's counters are scraped before and after, diffed, summed over
//! nodes and compared with the bytes the client moved (DESIGN.md, "The witness").
//!
//! Counters (AIStor RDMA build, per node): `/minio/metrics/v3/api/rdma` —
//! `minio_api_rdma_read_bytes_total`, `_read_ops_total` (GET, server -> client),
//! `_write_bytes_total`, `_write_ops_total` (PUT, UploadPart), and every other
//! `minio_api_rdma_*` series; `/minio/metrics/v3/api/requests` —
//! `minio_api_requests_traffic_sent_bytes` / `_received_bytes`. An RDMA reply has
//! an empty HTTP body, so HTTP sent bytes that grow by the payload are a second,
//! independent sign of fallback.
//!
//! Series are matched by sample name (never by TYPE: a TYPE line that omits
//! `_total` makes the parser call the series untyped), keyed by target and full
//! label set, diffed per series, then summed. A series that appears during the
//! window counts from zero (MinIO creates series on first use); one that goes
//! backwards (server restart) or vanishes makes the window `unverified`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result, root_cause};
use crate::store::Backend;

/// RDMA counter group path on every AIStor node.
pub const RDMA_PATH: &str = "/minio/metrics/v3/api/rdma";
/// HTTP request counter group path.
pub const REQUESTS_PATH: &str = "/minio/metrics/v3/api/requests";
/// Share of the payload the server must account as RDMA for `rdma-verified`.
pub const VERIFIED_SHARE: f64 = 0.99;
/// Below this share the RDMA bytes are treated as none (noise from other clients).
pub const NOISE_SHARE: f64 = 0.01;

const RDMA_READ_BYTES: &str = "minio_api_rdma_read_bytes_total";
const RDMA_READ_OPS: &str = "minio_api_rdma_read_ops_total";
const RDMA_WRITE_BYTES: &str = "minio_api_rdma_write_bytes_total";
const RDMA_WRITE_OPS: &str = "minio_api_rdma_write_ops_total";
const RDMA_PREFIX: &str = "minio_api_rdma_";
const HTTP_SENT: &str = "minio_api_requests_traffic_sent_bytes";
const HTTP_RECEIVED: &str = "minio_api_requests_traffic_received_bytes";

/// NIC error counters worth watching on an RDMA fabric (DESIGN.md, "Fabric health").
pub const FABRIC_COUNTERS: [&str; 6] = ["local_ack_timeout_err", "out_of_buffer", "packet_seq_err", "req_cqe_error", "resp_cqe_error", "rnr_nak_retry_err"];

/// The witness's judgement of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// No proof either way (no endpoint, scrape failed, counters missing or reset).
    Unverified,
    /// RDMA was asked for, the server accounted (almost) none of it as RDMA.
    FullFallback,
    /// Some of the payload went over RDMA, the rest did not.
    PartialFallback,
    /// No RDMA expected (http or local backend) and none seen.
    NotApplicable,
    /// The server accounted at least 99 % of the payload as RDMA.
    RdmaVerified,
}

impl Verdict {
    /// The verdict's name as printed and recorded.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Unverified => "unverified",
            Verdict::FullFallback => "full-fallback",
            Verdict::PartialFallback => "partial-fallback",
            Verdict::NotApplicable => "not-applicable",
            Verdict::RdmaVerified => "rdma-verified",
        }
    }
}

/// Which transport the run asked for, which decides what "no RDMA" means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Expect {
    /// A local filesystem: no server, nothing to witness.
    Local,
    /// S3 over HTTP: RDMA is not expected.
    Http,
    /// S3 over RDMA: anything short of 99 % RDMA is a fallback.
    Rdma,
}

impl From<Backend> for Expect {
    fn from(b: Backend) -> Self {
        match b {
            Backend::Local => Expect::Local,
            Backend::Http => Expect::Http,
            Backend::Rdma => Expect::Rdma,
        }
    }
}

/// The bytes the client itself moved in a window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Payload {
    /// Bytes read (GET: server -> client).
    pub read_bytes: u64,
    /// Bytes written (PUT / UploadPart: client -> server).
    pub write_bytes: u64,
    /// Of those, bytes the client itself sent over HTTP (declined RDMA calls,
    /// transfers beyond one RDMA transfer): they can never count as RDMA.
    pub client_http_bytes: u64,
}

/// Counter deltas over a window, summed over nodes. `None` = series not present.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Deltas {
    /// `minio_api_rdma_read_bytes_total` growth (GET: server to client).
    pub rdma_read_bytes: Option<f64>,
    /// `minio_api_rdma_read_ops_total` growth.
    pub rdma_read_ops: Option<f64>,
    /// `minio_api_rdma_write_bytes_total` growth (PUT, UploadPart).
    pub rdma_write_bytes: Option<f64>,
    /// `minio_api_rdma_write_ops_total` growth.
    pub rdma_write_ops: Option<f64>,
    /// `minio_api_requests_traffic_sent_bytes` growth.
    pub http_sent_bytes: Option<f64>,
    /// `minio_api_requests_traffic_received_bytes` growth.
    pub http_received_bytes: Option<f64>,
    /// Every `minio_api_rdma_*` series by name (the four above included).
    pub rdma_series: BTreeMap<String, f64>,
}

/// One window's report, recorded per repeat (and per cell, per rank).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct WitnessReport {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in words, always present.
    pub reason: String,
    /// The client's own count.
    pub payload_bytes: u64,
    /// Of the payload, bytes read (GET).
    pub payload_read_bytes: u64,
    /// Of the payload, bytes written (PUT).
    pub payload_write_bytes: u64,
    /// (RDMA read + write bytes) / payload, when counters were read.
    pub rdma_share: Option<f64>,
    /// The counter deltas (flattened into the record: `rdma_read_bytes`, ...).
    #[serde(flatten)]
    pub counters: Deltas,
    /// RDMA NIC error counter deltas.
    pub fabric: FabricReport,
}

/// Judge a window from the counter deltas (or why there are none).
///
/// Rules: local backend -> `not-applicable`; no deltas -> `unverified`; no
/// `minio_api_*` series at all -> `unverified`; share >= 0.99 ->
/// `rdma-verified`; share >= 0.01 -> `partial-fallback`; else `full-fallback`
/// for the rdma backend, `not-applicable` for http. Missing RDMA series on an
/// rdma run count as `full-fallback` only when the HTTP sent/received bytes
/// account for the payload, else `unverified`.
pub fn judge(expect: Expect, payload: Payload, deltas: std::result::Result<Deltas, String>, fabric: FabricReport) -> WitnessReport {
    let total = payload.read_bytes + payload.write_bytes;
    let mut r = WitnessReport {
        verdict: Verdict::Unverified,
        reason: String::new(),
        payload_bytes: total,
        payload_read_bytes: payload.read_bytes,
        payload_write_bytes: payload.write_bytes,
        rdma_share: None,
        counters: Deltas::default(),
        fabric,
    };
    if expect == Expect::Local {
        r.verdict = Verdict::NotApplicable;
        r.reason = "local backend: no server, no RDMA".into();
        return r;
    }
    let d = match deltas {
        Ok(d) => d,
        Err(why) => {
            r.reason = why;
            return r;
        }
    };
    r.counters = d.clone();
    let has_rdma = d.rdma_read_bytes.is_some() || d.rdma_write_bytes.is_some();
    let has_http = d.http_sent_bytes.is_some() || d.http_received_bytes.is_some();
    if !has_rdma && !has_http {
        r.reason = "no minio_api_rdma_* or minio_api_requests_* counters at the metrics targets: \
                    is this a MinIO/AIStor server, and are --servers/--metrics-url right?"
            .into();
        return r;
    }
    // HTTP bytes that carried the payload: sent for reads, received for writes.
    let http_carried = d.http_sent_bytes.unwrap_or(0.0).min(payload.read_bytes as f64) + d.http_received_bytes.unwrap_or(0.0).min(payload.write_bytes as f64);
    if total == 0 {
        r.reason = "the client moved no bytes in this window".into();
        return r;
    }
    if !has_rdma {
        let covers = http_carried >= VERIFIED_SHARE * total as f64;
        (r.verdict, r.reason) = match (expect, covers) {
            (Expect::Http | Expect::Local, _) => {
                (Verdict::NotApplicable, format!("http backend; no RDMA series on the server; HTTP carried {:.0} of {total} payload bytes", http_carried))
            }
            (_, true) => (
                Verdict::FullFallback,
                format!("no RDMA series on the server, and its HTTP traffic counters grew by the payload ({http_carried:.0} of {total} bytes)"),
            ),
            (_, false) => (
                Verdict::Unverified,
                "no minio_api_rdma_* series at the metrics targets (not an AIStor RDMA build?) and the HTTP counters do not account for the payload".into(),
            ),
        };
        return r;
    }
    // Each direction is judged on its own counter: RDMA reads cannot vouch
    // for a PUT, nor RDMA writes for a GET. The share is the smaller of the two.
    let mut shares = Vec::new();
    if payload.read_bytes > 0 {
        shares.push(("read", d.rdma_read_bytes.unwrap_or(0.0), payload.read_bytes));
    }
    if payload.write_bytes > 0 {
        shares.push(("write", d.rdma_write_bytes.unwrap_or(0.0), payload.write_bytes));
    }
    let (dir, rdma, dir_total) = shares.iter().copied().min_by(|a, b| (a.1 / a.2 as f64).total_cmp(&(b.1 / b.2 as f64))).expect("payload is non-zero");
    let share = rdma / dir_total as f64;
    r.rdma_share = Some(share);
    let pct = pct_floor(share);
    let http_note = if has_http { format!("; HTTP carried {http_carried:.0}") } else { "; no HTTP counters scraped".into() };
    let client_http = payload.client_http_bytes;
    (r.verdict, r.reason) = if expect != Expect::Rdma {
        let note = if share >= NOISE_SHARE { " (RDMA traffic of other clients?)" } else { "" };
        (Verdict::NotApplicable, format!("http backend; server accounted {rdma:.0} {dir} bytes as RDMA{note}"))
    } else if client_http as f64 >= VERIFIED_SHARE * total as f64 {
        (Verdict::FullFallback, format!("the client itself moved {client_http} of {total} bytes over HTTP (declined or beyond one RDMA transfer)"))
    } else if share >= VERIFIED_SHARE && client_http as f64 <= NOISE_SHARE * total as f64 {
        let extra = if share > 1.01 { " (more than this client moved: other clients active on the server?)" } else { "" };
        (Verdict::RdmaVerified, format!("server accounted {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){extra}"))
    } else if share >= NOISE_SHARE || client_http > 0 {
        let why = if client_http > 0 {
            format!("; the client itself moved {client_http} bytes over HTTP (declined or beyond one RDMA transfer)")
        } else {
            String::new()
        };
        (Verdict::PartialFallback, format!("server accounted only {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){http_note}{why}"))
    } else {
        (Verdict::FullFallback, format!("server accounted {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){http_note}: silent fallback"))
    };
    r
}

/// A share as a percentage rounded down to 0.1, so 98.99 % never prints as 99.0 %.
pub fn pct_floor(share: f64) -> String {
    format!("{:.1}", (share * 1000.0).floor() / 10.0)
}

/// One series: which target, which sample name, which labels (sorted).
type SeriesKey = (usize, String, Vec<(String, String)>);

/// Counters of every target at one moment.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    series: BTreeMap<SeriesKey, f64>,
    /// Per target that failed: why (status, content type, network error).
    errors: Vec<String>,
}

/// One sample of a scrape: metric name, its labels sorted by name, value.
pub type Sample = (String, Vec<(String, String)>, f64);

/// Parse Prometheus text exposition into `(name, sorted labels, value)` for
/// every counter, gauge or untyped sample (histograms and summaries skipped).
pub fn parse_exposition(text: &str) -> std::result::Result<Vec<Sample>, String> {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).map_err(|e| format!("cannot parse metrics: {e}"))?;
    Ok(scrape
        .samples
        .into_iter()
        .filter_map(|s| {
            let v = match s.value {
                prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) | prometheus_parse::Value::Untyped(v) => v,
                _ => return None,
            };
            let mut labels: Vec<(String, String)> = s.labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            labels.sort();
            Some((s.metric, labels, v))
        })
        .collect())
}

impl Snapshot {
    /// Build from already-fetched bodies (one per target; `Err` = that target failed).
    pub fn from_bodies(bodies: Vec<std::result::Result<String, String>>) -> Self {
        let mut snap = Snapshot::default();
        for (t, body) in bodies.into_iter().enumerate() {
            match body.and_then(|b| parse_exposition(&b)) {
                Ok(samples) => {
                    for (name, labels, v) in samples {
                        if name.starts_with(RDMA_PREFIX) || name == HTTP_SENT || name == HTTP_RECEIVED {
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

fn fmt_series(k: &SeriesKey) -> String {
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
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
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

/// How the witness authenticates to the metrics endpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricsAuth {
    /// `--metrics-token`.
    Token,
    /// A JWT from the access/secret key, as `mc admin prometheus generate` makes.
    GeneratedJwt,
    /// No Authorization header (`MINIO_PROMETHEUS_AUTH_TYPE=public`).
    None,
}

/// Claims of MinIO's Prometheus bearer token.
#[derive(Serialize)]
struct PromClaims<'a> {
    exp: i64,
    sub: &'a str,
    iss: &'a str,
}

/// A bearer JWT for MinIO's metrics endpoints, made the way
/// `mc admin prometheus generate` makes it (minio/mc, cmd/admin-prometheus-generate.go):
/// HS512 over `{exp, sub: access key, iss: "prometheus"}` with the secret key.
/// `exp` is 100 years ahead, as there.
pub fn prometheus_jwt(access_key: &str, secret_key: &str) -> Result<String> {
    let exp = chrono::Utc::now().timestamp() + 100 * 365 * 24 * 3600;
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
        &PromClaims { exp, sub: access_key, iss: "prometheus" },
        &jsonwebtoken::EncodingKey::from_secret(secret_key.as_bytes()),
    )
    .map_err(|e| Error::Runtime(format!("cannot make the metrics token: {e}")))
}

/// What a witness is built from (the CLI layer fills it from its flags).
#[derive(Debug, Clone)]
pub struct WitnessConfig {
    /// The transport the run asked for.
    pub expect: Expect,
    /// The store's endpoint URL (`None`: AWS for `region`); its host:port is the default target.
    pub endpoint: Option<String>,
    /// The store's region (for the AWS default endpoint).
    pub region: String,
    /// Access key: with the secret key, the default metrics token (a JWT).
    pub access_key: Option<String>,
    /// Secret key.
    pub secret_key: Option<String>,
    /// Server nodes to scrape, host:port each (empty: the endpoint's).
    pub servers: Vec<String>,
    /// Full metrics URLs to scrape instead of the derived ones.
    pub metrics_url: Vec<String>,
    /// Bearer token for the metrics endpoints.
    pub metrics_token: Option<String>,
}

/// Scrapes the configured targets; one per run, shared by every window.
#[derive(Debug)]
pub struct Witness {
    expect: Expect,
    targets: Vec<String>,
    auth: MetricsAuth,
    bearer: Option<String>,
    client: Option<reqwest::Client>,
    fabric_root: PathBuf,
}

/// The "before" half of a window.
#[derive(Debug)]
pub struct Window {
    counters: Snapshot,
    fabric: FabricSnapshot,
}

impl Witness {
    /// Configure from the store and witness flags. Targets: `--metrics-url`
    /// as given, else the rdma and requests groups of every `--servers`
    /// host:port, else of the endpoint's host:port. The local backend scrapes nothing.
    ///
    /// Errors: [`Error::Usage`] for a malformed `--servers` or `--metrics-url`.
    pub fn new(args: &WitnessConfig) -> Result<Self> {
        let store = args;
        let fabric_root = PathBuf::from("/sys/class/infiniband");
        let mut targets = Vec::new();
        if args.expect != Expect::Local {
            if !args.metrics_url.is_empty() {
                for u in &args.metrics_url {
                    let ok = reqwest::Url::parse(u).ok().filter(|p| {
                        (p.scheme() == "http" || p.scheme() == "https")
                            && p.host_str().is_some_and(|h| !h.is_empty())
                            && p.username().is_empty()
                            && p.password().is_none()
                    });
                    if ok.is_none() {
                        let shown = if u.contains('@') { "<url with credentials>" } else { u.as_str() };
                        return Err(Error::Usage(format!(
                            "invalid --metrics-url '{shown}': use http(s)://host:port/path, with no credentials in it (use --metrics-token)"
                        )));
                    }
                    if targets.contains(u) {
                        return Err(Error::Usage(format!("--metrics-url '{u}' is given twice: its counters would be counted twice")));
                    }
                    targets.push(u.clone());
                }
            } else {
                let endpoint = store.endpoint.clone().unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", store.region));
                let url = reqwest::Url::parse(&endpoint).map_err(|_| Error::Usage(format!("invalid --endpoint '{endpoint}': use http://host:port")))?;
                let scheme = url.scheme().to_string();
                let servers: Vec<String> = if args.servers.is_empty() {
                    let host = url.host_str().unwrap_or_default();
                    vec![match url.port_or_known_default() {
                        Some(p) => format!("{host}:{p}"),
                        None => host.to_string(),
                    }]
                } else {
                    args.servers.clone()
                };
                for s in servers {
                    let valid = s.rsplit_once(':').is_some_and(|(h, p)| !h.is_empty() && !h.contains(['/', ' ', '@']) && p.parse::<u16>().is_ok_and(|p| p > 0));
                    if !valid {
                        return Err(Error::Usage(format!("invalid --servers entry '{s}': use host:port, e.g. aistor1:9000")));
                    }
                    let t = format!("{scheme}://{s}{RDMA_PATH}");
                    if targets.contains(&t) {
                        return Err(Error::Usage(format!("--servers lists '{s}' twice: its counters would be counted twice")));
                    }
                    targets.push(t);
                    targets.push(format!("{scheme}://{s}{REQUESTS_PATH}"));
                }
            }
        }
        if let Some(t) = &args.metrics_token
            && (t.is_empty() || t.chars().any(|c| c.is_control() || c == ' '))
        {
            return Err(Error::Usage("--metrics-token (or S3RDMA_METRICS_TOKEN) is empty or holds spaces or control characters".into()));
        }
        let (auth, bearer) = match (&args.metrics_token, &store.access_key, &store.secret_key) {
            (Some(t), _, _) => (MetricsAuth::Token, Some(t.clone())),
            (None, Some(ak), Some(sk)) if !targets.is_empty() => (MetricsAuth::GeneratedJwt, Some(prometheus_jwt(ak, sk)?)),
            _ => (MetricsAuth::None, None),
        };
        let client = if targets.is_empty() {
            None
        } else {
            Some(
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(5))
                    .build()
                    .map_err(|e| Error::Runtime(format!("cannot build the metrics HTTP client: {e}")))?,
            )
        };
        Ok(Witness { expect: args.expect, targets, auth, bearer, client, fabric_root })
    }

    /// Whether this run asked for RDMA (the rdma backend): only then can a verdict be `rdma-verified`.
    pub fn expects_rdma(&self) -> bool {
        self.expect == Expect::Rdma
    }

    /// What the record says about the witness's set-up (never the token).
    pub fn describe(&self) -> serde_json::Value {
        serde_json::json!({"targets": self.targets, "auth": self.auth, "expect": self.expect,
                           "verified_share": VERIFIED_SHARE, "noise_share": NOISE_SHARE})
    }

    async fn fetch(&self, url: &str) -> std::result::Result<String, String> {
        let client = self.client.as_ref().expect("client exists when targets do");
        let mut req = client.get(url);
        if let Some(b) = &self.bearer {
            req = req.bearer_auth(b);
        }
        let resp = req.send().await.map_err(|e| format!("metrics target {url} did not answer: {}", root_cause(&e)))?;
        let status = resp.status();
        let ctype = resp.headers().get(reqwest::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        if !status.is_success() {
            let hint =
                if status.as_u16() == 401 || status.as_u16() == 403 { ": check --metrics-token (or the access/secret key the token is made from)" } else { "" };
            return Err(format!("metrics target {url} answered HTTP {} ({ctype}){hint}", status.as_u16()));
        }
        if !(ctype.starts_with("text/plain") || ctype.starts_with("application/openmetrics-text")) {
            return Err(format!("metrics target {url} answered {ctype:?}, not the Prometheus text format"));
        }
        resp.text().await.map_err(|e| format!("metrics target {url}: body broke: {}", root_cause(&e)))
    }

    async fn snapshot(&self) -> Snapshot {
        let bodies = futures::future::join_all(self.targets.iter().map(|u| self.fetch(u))).await;
        Snapshot::from_bodies(bodies)
    }

    /// Open a window: scrape every target (concurrently) and the fabric counters.
    pub async fn begin(&self) -> Window {
        let counters = if self.targets.is_empty() { Snapshot::default() } else { self.snapshot().await };
        Window { counters, fabric: FabricSnapshot::read(&self.fabric_root) }
    }

    /// Close a window and judge it against what the client moved.
    pub async fn end(&self, w: Window, payload: Payload) -> WitnessReport {
        let after = if self.targets.is_empty() { Snapshot::default() } else { self.snapshot().await };
        let fabric = fabric_diff(&w.fabric, &FabricSnapshot::read(&self.fabric_root));
        let deltas = if self.targets.is_empty() {
            Err("no metrics targets: pass --endpoint, --servers or --metrics-url".to_string())
        } else {
            diff(&w.counters, &after)
        };
        judge(self.expect, payload, deltas, fabric)
    }
}

/// The worst verdict of several windows, with the reason of the first window
/// that has it (`None` when there are none).
pub fn worst<'a>(reports: impl IntoIterator<Item = (&'a str, &'a WitnessReport)>) -> Option<(Verdict, String)> {
    let mut out: Option<(Verdict, String)> = None;
    for (label, r) in reports {
        if out.as_ref().is_none_or(|(v, _)| r.verdict < *v) {
            out = Some((r.verdict, format!("{label}: {}", r.reason)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn bytes_the_client_sent_over_http_are_never_rdma() {
        let d = || Deltas { rdma_read_bytes: Some(1000.0), ..Default::default() };
        let all = Payload { read_bytes: 1000, write_bytes: 0, client_http_bytes: 1000 };
        assert_eq!(judge(Expect::Rdma, all, Ok(d()), FabricReport::default()).verdict, Verdict::FullFallback);
        let some = Payload { read_bytes: 1000, write_bytes: 0, client_http_bytes: 300 };
        assert_eq!(judge(Expect::Rdma, some, Ok(d()), FabricReport::default()).verdict, Verdict::PartialFallback);
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
    fn writes_count_rdma_write_bytes() {
        let d = Deltas { rdma_write_bytes: Some(4096.0), rdma_write_ops: Some(1.0), ..Default::default() };
        let r = judge(Expect::Rdma, Payload { write_bytes: 4096, ..Default::default() }, Ok(d), FabricReport::default());
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
}
