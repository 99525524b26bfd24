//! The witness: server-side proof of which transport carried a run's bytes.
//!
//! The client library falls back from RDMA to HTTP silently (the original Python suite's "silent
//! fallback traps"; an upstream report on multi-process scaling: at 768 MiB x 8 processes only a third of the
//! bytes went over RDMA with no error). So every timed window is wrapped: every
//! server node's counters are scraped before and after, diffed, summed over
//! nodes and compared with the bytes the client moved (docs/witness.md).
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

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::error::{Error, Result, root_cause};
use crate::flag::{ENDPOINT, METRICS_TOKEN, METRICS_URL, SERVERS};

mod rails;
mod recheck;
pub(crate) mod scrape;
mod verdict;
pub use rails::{RailsWindow, rails_note};
pub use recheck::{Proof, proof_of};
pub use scrape::{FABRIC_COUNTERS, FabricReport, FabricSnapshot, Sample, Snapshot, decode_body, diff, fabric_diff, openmetrics_as_text, parse_exposition};
pub use verdict::{Deltas, Expect, HTTP_OVERHEAD_PER_OP, NOISE_SHARE, Payload, VERIFIED_SHARE, Verdict, WitnessReport, judge, pct_floor, recheck, worst};

/// RDMA counter group path on every AIStor node.
pub const RDMA_PATH: &str = "/minio/metrics/v3/api/rdma";
/// HTTP request counter group path.
pub const REQUESTS_PATH: &str = "/minio/metrics/v3/api/requests";

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
    /// Longest wait for one scrape: [`SCRAPE_TIMEOUT`], or the store's
    /// `--read-timeout` when shorter, so a hung server fails a run within the
    /// time the user allowed its requests.
    pub scrape_timeout: Duration,
    /// PEM certificate authorities the store's client trusts besides the
    /// system's (`--ca-bundle`, `AWS_CA_BUNDLE`): the metrics endpoints are
    /// the same servers.
    pub ca_pem: Option<Vec<u8>>,
}

/// Longest wait for one scrape of a metrics endpoint, by default: 5 s.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

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
    start: String,
}

/// The HTTP client the scrapes go through: `scrape_timeout` per scrape, and
/// the store's CA bundle trusted.
///
/// Errors: a CA bundle that does not read (usage); a client that cannot be built.
fn metrics_client(args: &WitnessConfig) -> Result<reqwest::Client> {
    let mut b = reqwest::Client::builder().timeout(args.scrape_timeout);
    if let Some(pem) = &args.ca_pem {
        for cert in reqwest::Certificate::from_pem_bundle(pem).map_err(|e| Error::Usage(format!("the CA bundle cannot be read for the metrics client: {e}")))? {
            b = b.add_root_certificate(cert);
        }
    }
    b.build().map_err(|e| Error::Runtime(format!("cannot build the metrics HTTP client: {e}")))
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
                            "invalid {METRICS_URL} '{shown}': use http(s)://host:port/path, with no credentials in it (use {METRICS_TOKEN})"
                        )));
                    }
                    if targets.contains(u) {
                        return Err(Error::Usage(format!("{METRICS_URL} '{u}' is given twice: its counters would be counted twice")));
                    }
                    targets.push(u.clone());
                }
            } else {
                let endpoint = store.endpoint.clone().unwrap_or_else(|| format!("https://s3.{}.amazonaws.com", store.region));
                // The store's own check: its message (an IPv6 host's brackets) and never a password from the URL.
                let endpoint = crate::store::http::check_endpoint(&endpoint)?;
                let url = reqwest::Url::parse(&endpoint).map_err(|e| Error::Usage(format!("invalid endpoint: {e}")))?;
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
                        // An entry with user:password@ is never echoed whole.
                        let shown = s.rsplit_once('@').map_or_else(|| s.clone(), |(_, host)| format!("<credentials>@{host}"));
                        return Err(Error::Usage(format!("invalid {SERVERS} entry '{shown}': use host:port, e.g. aistor1:9000 (no scheme, no credentials)")));
                    }
                    // Host names are case-insensitive (N1:9000 is n1:9000); servers reached
                    // under two different names are caught by their `server` label instead.
                    let t = format!("{scheme}://{}{RDMA_PATH}", s.to_ascii_lowercase());
                    if targets.contains(&t) {
                        return Err(Error::Usage(format!("{SERVERS} lists '{s}' twice: its counters would be counted twice")));
                    }
                    targets.push(t);
                    targets.push(format!("{scheme}://{}{REQUESTS_PATH}", s.to_ascii_lowercase()));
                }
            }
        }
        if let Some(t) = &args.metrics_token
            && (t.is_empty() || t.chars().any(|c| c.is_control() || c == ' '))
        {
            return Err(Error::Usage(format!("{METRICS_TOKEN} (or S3RDMA_METRICS_TOKEN) is empty or holds spaces or control characters")));
        }
        let (auth, bearer) = match (&args.metrics_token, &store.access_key, &store.secret_key) {
            (Some(t), _, _) => (MetricsAuth::Token, Some(t.clone())),
            (None, Some(ak), Some(sk)) if !targets.is_empty() => (MetricsAuth::GeneratedJwt, Some(prometheus_jwt(ak, sk)?)),
            _ => (MetricsAuth::None, None),
        };
        let client = if targets.is_empty() { None } else { Some(metrics_client(args)?) };
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
        // A server without the RDMA group (community MinIO) has no such path:
        // that is "no RDMA series", which the verdict rules already handle.
        if status.as_u16() == 404 && url.ends_with("/minio/metrics/v3/api/rdma") {
            return Ok(String::new());
        }
        if !status.is_success() {
            let hint = if status.as_u16() == 401 || status.as_u16() == 403 {
                format!(": check {METRICS_TOKEN} (or the access/secret key the token is made from)")
            } else {
                String::new()
            };
            return Err(format!("metrics target {url} answered HTTP {} ({ctype}){hint}", status.as_u16()));
        }
        let openmetrics = ctype.starts_with("application/openmetrics-text");
        if !(ctype.starts_with("text/plain") || openmetrics) {
            return Err(format!("metrics target {url} answered {ctype:?}, not the Prometheus text format"));
        }
        let encoding = resp.headers().get(reqwest::header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("identity").trim().to_ascii_lowercase();
        let body = resp.bytes().await.map_err(|e| format!("metrics target {url}: body broke: {}", root_cause(&e)))?;
        // Compressed although never asked for (a proxy that compresses regardless).
        let text = decode_body(&encoding, &body).map_err(|why| format!("metrics target {url}: {why}"))?;
        Ok(if openmetrics { openmetrics_as_text(&text) } else { text })
    }

    async fn snapshot(&self) -> Snapshot {
        let bodies = futures::future::join_all(self.targets.iter().map(|u| self.fetch(u))).await;
        Snapshot::from_bodies(bodies)
    }

    /// Open a window: scrape every target (concurrently) and the fabric counters.
    pub async fn begin(&self) -> Window {
        let start = now_rfc3339();
        let counters = if self.targets.is_empty() { Snapshot::default() } else { self.snapshot().await };
        Window { counters, fabric: FabricSnapshot::read(&self.fabric_root), start }
    }

    /// Close a window and judge it against what the client moved.
    pub async fn end(&self, w: Window, payload: Payload) -> WitnessReport {
        let closed = self.close(w).await;
        self.judge_closed(closed, payload)
    }

    /// The closing scrape alone, for a client whose figures arrive after it
    /// (ranks send theirs once the window is closed: their messages stay out of it).
    pub async fn close(&self, w: Window) -> ClosedWindow {
        let end = now_rfc3339();
        let after = if self.targets.is_empty() { Snapshot::default() } else { self.snapshot().await };
        let fabric = fabric_diff(&w.fabric, &FabricSnapshot::read(&self.fabric_root));
        ClosedWindow { opened: w, after, fabric, end }
    }

    /// Judge a window closed by [`Witness::close`] against what the client moved.
    pub fn judge_closed(&self, c: ClosedWindow, payload: Payload) -> WitnessReport {
        let deltas = if self.targets.is_empty() {
            Err(format!("no metrics targets: pass {ENDPOINT}, {SERVERS} or {METRICS_URL}").to_string())
        } else {
            diff(&c.opened.counters, &c.after)
        };
        let mut r = judge(self.expect, payload, deltas, c.fabric);
        (r.window_start, r.window_end) = (Some(c.opened.start), Some(c.end));
        r
    }
}

/// A window after its closing scrape, not yet judged (see [`Witness::close`]).
#[derive(Debug)]
pub struct ClosedWindow {
    opened: Window,
    after: Snapshot,
    fabric: FabricReport,
    end: String,
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[cfg(test)]
mod tests;
