//! The verdict: what the client moved (Payload), what the servers' counters say (Deltas), and the one function that judges a window from them (judge), with the worst-of rule over windows.

use super::FabricReport;
use crate::flag::{METRICS_URL, SERVERS};
use crate::store::Backend;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Share of the payload the server must account as RDMA for `rdma-verified`.
pub const VERIFIED_SHARE: f64 = 0.99;
/// Below this share the RDMA bytes are treated as none (noise from other clients).
pub const NOISE_SHARE: f64 = 0.01;

/// The witness's judgement of one window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
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
    /// Bytes read (GET: server -> client), every data call's: the timed
    /// payload plus [`Payload::overhead_bytes`] read.
    pub read_bytes: u64,
    /// Bytes written (PUT / UploadPart: client -> server), likewise.
    pub write_bytes: u64,
    /// Of read + write, the client's declared overhead: data calls that are
    /// not part of the timed figure (manifests, indexes, headers).
    pub overhead_bytes: u64,
    /// Of those, bytes the client itself sent over HTTP (declined RDMA calls,
    /// transfers beyond one RDMA transfer): they can never count as RDMA.
    pub client_http_bytes: u64,
    /// Requests the client itself made in the window (data calls: GETs, PUTs,
    /// ranged reads; and control calls: HEAD, LIST, DELETE, bucket checks):
    /// what the HTTP counters may legitimately grow by per request.
    /// The client's own count, never the server's op count (which other
    /// clients' traffic inflates).
    pub requests: u64,
    /// Object bytes of the ranks' meeting that may have crossed the server
    /// in the window (markers, figures), over plain HTTP: HTTP traffic the
    /// client declares, added to the HTTP allowance (`s3rdma::ranks`).
    pub coordination_bytes: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counter deltas over a window, summed over nodes. `None` = series not present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Servers that more than one target reported (by their `server` label): counted once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counted_once: Vec<String>,
}

/// One window's report, recorded per repeat (and per cell, per rank), with
/// every input [`judge`] used, so `report` can judge it again ([`recheck`]).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WitnessReport {
    /// The verdict.
    pub verdict: Verdict,
    /// Why, in words, always present.
    pub reason: String,
    /// When the opening scrape began (RFC 3339, UTC; `None` in reports judged outside a bench).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_start: Option<String>,
    /// When the closing scrape began.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window_end: Option<String>,
    /// The client's own count, bytes: read + write.
    pub payload_bytes: u64,
    /// Of the payload, bytes read (GET).
    pub payload_read_bytes: u64,
    /// Of the payload, bytes written (PUT).
    pub payload_write_bytes: u64,
    /// Of the payload, the client's declared overhead (manifests, indexes,
    /// headers): data bytes outside the bench's timed figure.
    pub overhead_bytes: u64,
    /// Bytes the client's store layer itself moved over HTTP.
    pub client_http_bytes: u64,
    /// Requests the client made in the window (data and control, and the
    /// ranks' meeting requests that may have fallen inside it).
    pub requests: u64,
    /// Of [`WitnessReport::requests`], the ranks' meeting requests (an upper
    /// bound: markers, polls of `go`, figures sent at the close); their
    /// object bytes are in [`WitnessReport::overhead_bytes`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub coordination_requests: u64,
    /// Their object bytes, over plain HTTP (part of the HTTP allowance).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub coordination_bytes: u64,
    /// (RDMA read + write bytes) / payload, when counters were read.
    pub rdma_share: Option<f64>,
    /// The counter deltas (flattened into the record: `rdma_read_bytes`, ...).
    #[serde(flatten)]
    pub counters: Deltas,
    /// RDMA NIC error counter deltas.
    pub fabric: FabricReport,
    /// Every rank's RDMA rails at the window's open and close, where the
    /// library counts them; a rail lost in the window is named in `reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rails: Vec<super::RailsWindow>,
}

impl WitnessReport {
    /// A report of `payload` not judged yet: `unverified`, no counters.
    fn unjudged(payload: &Payload, fabric: FabricReport) -> Self {
        WitnessReport {
            verdict: Verdict::Unverified,
            reason: String::new(),
            window_start: None,
            window_end: None,
            payload_bytes: payload.read_bytes + payload.write_bytes,
            payload_read_bytes: payload.read_bytes,
            payload_write_bytes: payload.write_bytes,
            overhead_bytes: payload.overhead_bytes,
            client_http_bytes: payload.client_http_bytes,
            requests: payload.requests,
            coordination_requests: 0,
            coordination_bytes: payload.coordination_bytes,
            rdma_share: None,
            counters: Deltas::default(),
            fabric,
            rails: Vec::new(),
        }
    }
}

/// [`judge`]'s verdict where the server has HTTP counters but no RDMA
/// series: `http_carried` of the `total` payload bytes went over HTTP.
fn without_rdma_series(expect: Expect, http_carried: f64, total: u64) -> (Verdict, String) {
    let covers = http_carried >= VERIFIED_SHARE * total as f64;
    match (expect, covers) {
        (Expect::Http | Expect::Local, _) => {
            (Verdict::NotApplicable, format!("http backend; no RDMA series on the server; HTTP carried {http_carried:.0} of {total} payload bytes"))
        }
        (_, true) => (
            Verdict::FullFallback,
            format!("no RDMA series on the server, and its HTTP traffic counters grew by the payload ({http_carried:.0} of {total} bytes)"),
        ),
        (_, false) => (
            Verdict::Unverified,
            "no minio_api_rdma_* series at the metrics targets (not an AIStor RDMA build?) and the HTTP counters do not account for the payload".into(),
        ),
    }
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
    let mut r = WitnessReport::unjudged(&payload, fabric);
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
        r.reason = format!(
            "no minio_api_rdma_* or minio_api_requests_* counters at the metrics targets: \
                    is this a MinIO/AIStor server, and are {SERVERS}/{METRICS_URL} right?"
        );
        return r;
    }
    // HTTP bytes that carried the payload: sent for reads, received for writes.
    let http_carried = d.http_sent_bytes.unwrap_or(0.0).min(payload.read_bytes as f64) + d.http_received_bytes.unwrap_or(0.0).min(payload.write_bytes as f64);
    if total == 0 {
        r.reason = "the client moved no bytes in this window".into();
        return r;
    }
    if !has_rdma {
        (r.verdict, r.reason) = without_rdma_series(expect, http_carried, total);
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
        (
            Verdict::FullFallback,
            format!(
                "the client itself moved {client_http} of {total} bytes over HTTP (declined, refused or failed over RDMA, or beyond one RDMA transfer: the store's counters say which)"
            ),
        )
    } else if share >= VERIFIED_SHARE && client_http as f64 <= NOISE_SHARE * total as f64 {
        match shared_window(&d, &shares, payload.requests, payload.coordination_bytes) {
            Some(why) => (Verdict::Unverified, why),
            None => (Verdict::RdmaVerified, format!("server accounted {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){http_note}")),
        }
    } else if share >= NOISE_SHARE || client_http > 0 {
        let why = if client_http > 0 {
            format!(
                "; the client itself moved {client_http} bytes over HTTP (declined, refused or failed over RDMA, or beyond one RDMA transfer: the store's counters say which)"
            )
        } else {
            String::new()
        };
        (Verdict::PartialFallback, format!("server accounted only {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){http_note}{why}"))
    } else {
        (Verdict::FullFallback, format!("server accounted {rdma:.0} of {dir_total} {dir} payload bytes as RDMA ({pct}%){http_note}: silent fallback"))
    };
    if !r.counters.counted_once.is_empty() {
        r.reason.push_str(&format!("; counted once: {} (reported by more than one metrics target)", r.counters.counted_once.join(", ")));
    }
    r
}

/// Bytes of HTTP traffic one RDMA request may cost the server's HTTP
/// counters (the request line and headers in, the response head out): an S3
/// response head is a few hundred bytes; 2 KiB leaves room for long keys and
/// extra headers. Times the client's own request count, plus [`NOISE_SHARE`] of
/// the payload, is what HTTP may grow by in a window that RDMA carried.
pub const HTTP_OVERHEAD_PER_OP: f64 = 2048.0;

/// The other side of `rdma-verified`: RDMA and HTTP counters together must
/// account for this client's payload and nothing else. `Some(reason)` when
/// the window holds traffic the client did not make: RDMA bytes above the
/// payload in a direction (more than [`NOISE_SHARE`] over), the payload
/// direction's HTTP bytes (sent for reads, received for writes) grown beyond
/// the request overhead, or those HTTP bytes not scraped at all. The counters are server-wide, so such a window
/// cannot prove this client's transport: another client may have made the
/// RDMA traffic while this one fell back.
fn shared_window(d: &Deltas, shares: &[(&str, f64, u64)], requests: u64, coordination_bytes: u64) -> Option<String> {
    for &(dir, rdma, dir_total) in shares {
        let (http, http_name) = match dir {
            "read" => (d.http_sent_bytes, "sent"),
            _ => (d.http_received_bytes, "received"),
        };
        let Some(http) = http else {
            return Some(format!(
                "the server accounted {rdma:.0} {dir} bytes as RDMA, but its HTTP {http_name} bytes were not scraped (minio_api_requests_traffic_{http_name}_bytes): without them a fallback beside another client's RDMA cannot be ruled out; scrape /minio/metrics/v3/api/requests too"
            ));
        };
        if rdma > (1.0 + NOISE_SHARE) * dir_total as f64 {
            return Some(format!(
                "server accounted {rdma:.0} {dir} bytes as RDMA for {dir_total} payload bytes ({}%): more than this client moved, so another client shares the server and the window proves nothing about this one",
                pct_floor(rdma / dir_total as f64)
            ));
        }
        let allowance = NOISE_SHARE * dir_total as f64 + HTTP_OVERHEAD_PER_OP * requests as f64 + coordination_bytes as f64;
        // A fallback grows HTTP by the payload; when the requests alone may
        // grow it by half of that, the HTTP side cannot tell the two apart
        // (small objects: below about 4 KiB per request).
        if 2.0 * allowance >= dir_total as f64 {
            return Some(format!(
                "too few {dir} bytes per request for the HTTP counters to tell RDMA from a fallback: {requests} requests may grow HTTP {http_name} bytes by up to {allowance:.0}, at least half the {dir_total}-byte payload (HTTP grew {http:.0}); prove the transport with larger objects"
            ));
        }
        if http > allowance {
            return Some(format!(
                "evidence disagrees: the server accounted {rdma:.0} {dir} bytes as RDMA, and its HTTP {http_name} bytes grew by {http:.0} too (more than the {allowance:.0} requests cost): traffic this client did not make shares the window"
            ));
        }
    }
    None
}

/// Judge a stored report again from its own inputs (payload, client
/// counts, counter deltas): the verdict [`judge`] gives them, which a
/// faithful record agrees with. `report` shows a record whose stored
/// verdicts disagree with this as unproven.
pub fn recheck(expect: Expect, r: &WitnessReport) -> Verdict {
    let payload = Payload {
        read_bytes: r.payload_read_bytes,
        write_bytes: r.payload_write_bytes,
        overhead_bytes: r.overhead_bytes,
        client_http_bytes: r.client_http_bytes,
        requests: r.requests,
        coordination_bytes: r.coordination_bytes,
    };
    judge(expect, payload, Ok(r.counters.clone()), r.fabric.clone()).verdict
}

/// A share as a percentage rounded down to 0.1, so 98.99 % never prints as 99.0 %.
pub fn pct_floor(share: f64) -> String {
    format!("{:.1}", (share * 1000.0).floor() / 10.0)
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
