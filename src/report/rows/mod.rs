//! One record -> its rows: the record's header (benchmark, backend, tag,
//! overall verdict, server, destination) read once, then the typed view of
//! its benchmark ([`ReportRows`], one module per benchmark), then each row's
//! verdict judged again from the record's own witness windows.

mod barrier;
mod ckpt;
mod fetch;
mod fields;
mod list;
mod suite;
#[cfg(test)]
mod tests;
mod tokens;
mod train;
mod weights;

use std::collections::BTreeMap;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::record::WindowId;
use crate::report::Row;
use crate::stats::Spread;
use crate::witness::Proof;
use fields::{Verdict, lenient, present, verdict_text};

/// The verdict `report` shows for a row its record's counters do not prove.
pub const UNPROVEN: &str = "unproven";

/// A benchmark's typed view of a record: the fields its rows read, and
/// nothing more.
trait ReportRows {
    /// The record's rows, each with the witness windows that are its own.
    ///
    /// Errors: a record this view reads but that holds no figure at all
    /// where the benchmark always writes one (a usage error naming the file).
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>>;
}

/// Which of the record's witness windows judge a row.
enum Windows {
    /// Every window of the run (one figure over the whole run).
    Run,
    /// The windows of one cell: those whose id names cell `index` (schema 3
    /// on); in a record whose windows carry no id, those whose label starts
    /// with `label_prefix` (a fetch cell's `"<size> x <streams> streams x <procs> procs,"`),
    /// or every window where older records name no cell (`None`).
    Cell {
        /// The cell's index in the bench's results.
        index: usize,
        /// The label prefix older records are joined on.
        label_prefix: Option<String>,
    },
    /// The windows whose label starts with this text, ids or not (the
    /// original suite's records, which name cells only in labels).
    Labelled(String),
}

impl Windows {
    /// Whether the stored window `label` / `id` judges this row.
    fn judges(&self, label: &str, id: Option<&WindowId>) -> bool {
        match (self, id) {
            (Windows::Run, _) => true,
            (Windows::Cell { index, .. }, Some(id)) => id.cell == *index,
            (Windows::Cell { label_prefix: None, .. }, None) => true,
            (Windows::Cell { label_prefix: Some(prefix), .. }, None) | (Windows::Labelled(prefix), _) => label.starts_with(prefix.as_str()),
        }
    }
}

/// What every record says, whatever its benchmark.
#[derive(Deserialize)]
struct Header {
    /// A `benchmark` or `backend` that is not a string reads as absent: the
    /// record is then named as lacking it.
    #[serde(default, deserialize_with = "lenient")]
    benchmark: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    backend: Option<String>,
    /// Only its presence counts: a record without it is not one of this tool's.
    #[serde(default, deserialize_with = "present")]
    results: bool,
    /// Context, not identity: a `tag` or `environment` in another shape than
    /// this tool writes (the original suite's) reads as absent.
    #[serde(default, deserialize_with = "lenient")]
    tag: Option<String>,
    rdma_witness: Option<Verdict>,
    /// Written by this tool only: records without it are the original
    /// suite's. Its number picks the reader: schema 3 on, a bench's own
    /// record type where it has one (see `rows_of`).
    #[serde(default)]
    schema_version: Option<Value>,
    /// Only its presence counts: this tool writes it in every record (with
    /// `schema_version`); the original suite's records have neither.
    #[serde(default, deserialize_with = "present")]
    tool: bool,
    #[serde(default, deserialize_with = "lenient")]
    environment: Option<Environment>,
}

/// `environment`: where the bytes went and the store the run used.
#[derive(Deserialize)]
struct Environment {
    /// `--dest` (host, pinned, device, ...).
    dest: Option<String>,
    store: Option<Store>,
}

/// `environment.store`, or an rdma store's `control_plane` inside it.
#[derive(Deserialize)]
struct Store {
    /// The rdma store's HTTP control plane: the server to look at when present.
    control_plane: Option<Box<Store>>,
    server: Option<Server>,
    endpoint: Option<String>,
    /// The local store's reader threads (`--io-threads`).
    io_threads: Option<u64>,
}

/// `environment.store.server`.
#[derive(Deserialize)]
struct Server {
    local_process: Option<LocalProcess>,
}

/// `environment.store.server.local_process`: the server's process on the measuring host.
#[derive(Deserialize)]
struct LocalProcess {
    process: Option<String>,
}

impl Environment {
    /// See [`server_of`].
    fn server(&self) -> Option<String> {
        let store = self.store.as_ref()?;
        let store = store.control_plane.as_deref().unwrap_or(store);
        if let Some(p) = store.server.as_ref().and_then(|s| s.local_process.as_ref()).and_then(|l| l.process.as_deref()) {
            return Some(format!("{p} on this host"));
        }
        crate::store::server::is_loopback_endpoint(store.endpoint.as_deref()?).then(|| "loopback server".to_string())
    }
}

/// What a record says about a server on its own host: the process
/// (`environment.store.server.local_process.process`, or the rdma store's
/// `control_plane`), "on this host"; records written before that field, with
/// a loopback endpoint: "loopback server" (docs/05-interpreting-results.md,
/// "A server on the measuring host"). `None` for a remote or no server, and
/// for a record whose `environment` is in another shape.
pub fn server_of(record: &Value) -> Option<String> {
    #[derive(Deserialize)]
    struct Located {
        #[serde(default, deserialize_with = "lenient")]
        environment: Option<Environment>,
    }
    Located::deserialize(record).ok()?.environment?.server()
}

/// The header of a record being read: what each of its rows starts from.
struct Head<'a> {
    /// Canonical benchmark name (fetch, ckpt, ...).
    benchmark: String,
    backend: String,
    file: &'a str,
    tag: Option<String>,
    /// The record's overall stored verdict ("none" without one).
    verdict: String,
    server: Option<String>,
    dest: Option<String>,
    /// `environment.store.io_threads`: how the local store was driven, which
    /// changes a figure though it is no dimension of a bench.
    io_threads: Option<u64>,
}

impl Head<'_> {
    /// A row of this record: `dims` (plus `dest` where the record has one),
    /// `value` in `metric`, the overall stored verdict; the other figures unset.
    fn row(&self, mut dims: BTreeMap<String, String>, metric: &str, value: Spread) -> Row {
        // Settings that change the figure but are not a bench's own dimension: where the bytes went.
        if let Some(d) = &self.dest {
            dims.insert("dest".into(), d.clone());
        }
        Row {
            benchmark: self.benchmark.clone(),
            backend: self.backend.clone(),
            file: self.file.to_string(),
            tag: self.tag.clone(),
            dims,
            metric: metric.into(),
            value,
            wall_s: None,
            cpu_cores: None,
            gbps: None,
            verdict: self.verdict.clone(),
            data_mismatch: false,
            series: None,
            server: self.server.clone(),
            blocked: None,
        }
    }

    /// A usage error naming the file: `why` it is no record this report reads.
    fn bad(&self, why: &str) -> Error {
        bad(self.file, why)
    }
}

fn bad(file: &str, why: &str) -> Error {
    Error::Usage(format!("{file}: {why}: pass result records written by s3rdma (or the original suite)"))
}

/// The benchmarks this tool writes records of, by their exact names.
const BENCHES: &[&str] = &["fetch", "ckpt", "weights", "tokens", "train", "list", "barrier", "verify"];

/// A record's `schema_version`: `None` for the original suite's records
/// (no `schema_version`, no `tool`), else a whole number from 1 to this
/// build's [`SCHEMA_VERSION`](crate::record::SCHEMA_VERSION).
///
/// Errors (usage, naming `file`): a version in another shape (`"4"`, `-1`,
/// `4.5`), one newer than this build reads, or none in a record this tool
/// wrote (it has `tool`).
fn schema_of(version: Option<&Value>, tool: bool, file: &str) -> Result<Option<u64>> {
    let newest = u64::from(crate::record::SCHEMA_VERSION);
    match version {
        None | Some(Value::Null) if tool => Err(bad(file, "no \"schema_version\", though s3rdma wrote it (it has \"tool\")")),
        None | Some(Value::Null) => Ok(None),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=newest).contains(&n) => Ok(Some(n)),
            Some(n) if n > newest => Err(Error::Usage(format!(
                "{file}: written by a newer s3rdma (schema_version {n}; this build reads 1 to {newest}): report it with that build or a newer one"
            ))),
            _ => Err(bad(file, &format!("schema_version {v} is not a whole number from 1 to {newest}"))),
        },
    }
}

/// The original suite named benchmarks after its report sections (b1-fetch, b3-resnet50, ...).
fn canonical_benchmark(name: &str) -> String {
    let n = name.to_ascii_lowercase();
    for (key, canon) in
        [("fetch", "fetch"), ("resnet", "train"), ("train", "train"), ("checkpoint", "ckpt"), ("ckpt", "ckpt"), ("token", "tokens"), ("weight", "weights")]
    {
        if n.contains(key) {
            return canon.into();
        }
    }
    n
}

/// The first record schema whose `tokens`, `list` and `barrier` records
/// `report` reads through the writer's own types
/// (`crate::bench::tokens::TokensRecord`, ...); older records go through the
/// lenient views of `rows/<bench>.rs`.
const TYPED_FROM: u64 = 3;

/// The first record schema whose `fetch`, `weights`, `ckpt` and `train`
/// records `report` reads through the writer's own types.
const ALL_TYPED_FROM: u64 = 4;

/// Read `record` as the view `V` and take its rows.
fn view<V: DeserializeOwned + ReportRows>(record: &Value, head: &Head) -> Result<Vec<(Row, Windows)>> {
    // serde_path_to_error names where in the record a field is missing or of another type ("results.rows[0].wall_s: ...").
    let v: V = serde_path_to_error::deserialize(record).map_err(|e| unreadable(head, &e))?;
    v.rows(head)
}

/// A record that does not read as its bench's type, named with where (`e`).
fn unreadable(head: &Head, e: &serde_path_to_error::Error<serde_json::Error>) -> Error {
    head.bad(&format!("not a {} record this build reads ({e})", head.benchmark))
}

/// Read `record` through the writer's own type `T`. serde_json writes a NaN
/// figure as `null`, which a plain number of `T` cannot hold: such a record
/// is read through the lenient view `L` instead (a figure it cannot use is
/// no figure there), with a note naming the field; any other departure from
/// `T` refuses the record (see [`view`]).
fn typed<T, L>(record: &Value, head: &Head) -> Result<Vec<(Row, Windows)>>
where
    T: DeserializeOwned + ReportRows,
    L: DeserializeOwned + ReportRows,
{
    match serde_path_to_error::deserialize::<_, T>(record) {
        Ok(v) => v.rows(head),
        Err(e) if e.inner().to_string().starts_with("invalid type: null") => {
            eprintln!("note: {}: {} is null (a figure that was NaN when written): read through the lenient view", head.file, e.path());
            view::<L>(record, head)
        }
        Err(e) => Err(unreadable(head, &e)),
    }
}

/// Every row of one record (a run record as JSON). `file` names it in the
/// table and in errors.
///
/// This tool's records (with `schema_version`) are read through their
/// benchmark's typed view; the original suite's, and benchmarks without
/// one, through the suite's field names. Each row's verdict is then the
/// worst its own witness windows give again (`unproven` where they do not,
/// with a note on stderr; `not-applicable` for local runs).
///
/// Errors (usage, naming `file`): no `benchmark`, `backend` or `results`
/// field, a field of the wrong type, or a benchmark that always writes a
/// summary without one.
pub fn rows_of(record: &Value, file: &str) -> Result<Vec<Row>> {
    let h = Header::deserialize(record).map_err(|e| bad(file, &format!("the record's header does not read ({e})")))?;
    let named = h.benchmark.ok_or_else(|| bad(file, "no \"benchmark\" field"))?;
    let schema = schema_of(h.schema_version.as_ref(), h.tool, file)?;
    // This tool's records name their bench exactly; the original suite's by its report sections.
    if schema.is_some() && !BENCHES.contains(&named.as_str()) {
        return Err(bad(file, &format!("benchmark '{named}' is not one of this build's ({})", BENCHES.join(", "))));
    }
    let benchmark = canonical_benchmark(&named);
    let backend = h.backend.ok_or_else(|| bad(file, "no \"backend\" field"))?;
    if !h.results {
        return Err(bad(file, "no \"results\" field"));
    }
    let env = h.environment.as_ref();
    let head = Head {
        benchmark,
        backend,
        file,
        tag: h.tag,
        verdict: verdict_text(&h.rdma_witness),
        server: env.and_then(Environment::server),
        dest: env.and_then(|e| e.dest.clone()),
        io_threads: env.and_then(|e| e.store.as_ref()).and_then(|s| s.io_threads),
    };
    // Which reader: this tool's records by their benchmark, and from schema
    // 3 on (`TYPED_FROM`) through the writer's own record type where the bench has one.
    let tokens_typed = schema.is_some_and(|v| v >= TYPED_FROM);
    let all_typed = schema.is_some_and(|v| v >= ALL_TYPED_FROM);
    let rows = match (schema.is_some(), head.benchmark.as_str()) {
        (true, "fetch") if all_typed => typed::<crate::bench::fetch::FetchRecord, fetch::FetchRecord>(record, &head)?,
        (true, "fetch") => view::<fetch::FetchRecord>(record, &head)?,
        (true, "ckpt") if all_typed => typed::<crate::bench::ckpt::CkptRecord, ckpt::CkptRecord>(record, &head)?,
        (true, "ckpt") => view::<ckpt::CkptRecord>(record, &head)?,
        (true, "weights") if all_typed => typed::<crate::bench::weights::WeightsRecord, weights::WeightsRecord>(record, &head)?,
        (true, "weights") => view::<weights::WeightsRecord>(record, &head)?,
        (true, "tokens") if tokens_typed => typed::<crate::bench::tokens::TokensRecord, tokens::TokensRecord>(record, &head)?,
        (true, "tokens") => view::<tokens::TokensRecord>(record, &head)?,
        (true, "train") if all_typed => typed::<crate::bench::train::TrainRecord, train::TrainRecord>(record, &head)?,
        (true, "train") => view::<train::TrainRecord>(record, &head)?,
        (true, "list") => view::<crate::bench::list::ListRecord>(record, &head)?,
        (true, "barrier") => view::<crate::bench::barrier::BarrierRecord>(record, &head)?,
        // The original suite's records (or a bench this build does not know): any known figure.
        _ => view::<suite::SuiteRecord>(record, &head)?,
    };
    Ok(judge(record, file, rows))
}

/// Stored verdicts count only as far as the record's own counters give
/// them again (`witness::proof_of`); each row shows the worst of its own
/// windows, never a verdict string stored beside them.
fn judge(record: &Value, file: &str, rows: Vec<(Row, Windows)>) -> Vec<Row> {
    let proof = crate::witness::proof_of(record);
    if let Proof::Unproven(why) = &proof {
        eprintln!("note: {file}: witness verdicts shown as {UNPROVEN}: {why}");
    }
    rows.into_iter()
        .map(|(mut r, own)| {
            match &proof {
                Proof::NoClaim => {}
                Proof::Local => r.verdict = "not-applicable".into(),
                Proof::Rechecked(windows) => {
                    let worst = windows.iter().filter(|(label, id, _)| own.judges(label, id.as_ref())).map(|(_, _, v)| *v).min();
                    r.verdict = worst.map_or(UNPROVEN, |v| v.as_str()).to_string();
                }
                Proof::Unproven(_) => r.verdict = UNPROVEN.into(),
            }
            r
        })
        .collect()
}
