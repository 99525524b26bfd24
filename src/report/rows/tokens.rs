//! `tokens` records -> one row: tokens/s at the run's sequence length;
//! `list` records -> one row: keys/s; `barrier` records -> one row: barrier latency.
//! Schema 3 on: the writer's own `TokensRecord` (`src/bench/tokens.rs`);
//! older records: the lenient view below, which reads either shape of a figure.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Number;

use super::fields::{Figure, median, spread};
use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;
use crate::stats::Spread;

/// The fields of a tokens record before schema 3 the report reads.
#[derive(Deserialize)]
pub(super) struct TokensRecord {
    results: Results,
}

/// `results`.
#[derive(Deserialize)]
struct Results {
    seq_len: Number,
    summary: Option<Summary>,
}

/// `results.summary`: over repeats.
#[derive(Deserialize)]
struct Summary {
    tokens_per_s: Option<Figure>,
    client_cpu_cores: Option<Figure>,
    throughput_gbps: Option<Figure>,
}

impl ReportRows for TokensRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = self.results.summary.as_ref();
        let v = spread(&s.and_then(|s| s.tokens_per_s)).ok_or_else(|| head.bad("tokens results have no summary"))?;
        let mut r = head.row(BTreeMap::from([("seq_len".to_string(), self.results.seq_len.to_string())]), "tokens/s", v);
        r.cpu_cores = median(&s.and_then(|s| s.client_cpu_cores));
        r.gbps = median(&s.and_then(|s| s.throughput_gbps));
        Ok(vec![(r, Windows::Run)])
    }
}

impl ReportRows for crate::bench::tokens::TokensRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = &self.results.summary;
        let mut r = head.row(BTreeMap::from([("seq_len".to_string(), self.results.seq_len.to_string())]), "tokens/s", s.tokens_per_s);
        r.cpu_cores = Some(s.client_cpu_cores.median);
        r.gbps = Some(s.throughput_gbps.median);
        Ok(vec![(r, Windows::Cell { index: 0, label_prefix: None })])
    }
}

/// `list` records (schema 3 on, the bench's own type): one row, keys listed
/// per second, beside the prefix's key count.
impl ReportRows for crate::bench::list::ListRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let s = &self.results.summary;
        let mut r = head.row(BTreeMap::from([("keys".to_string(), self.results.keys.to_string())]), "keys/s", s.keys_per_s);
        r.wall_s = Spread::of(self.results.repeats.iter().map(|x| x.wall_s));
        Ok(vec![(r, Windows::Run)])
    }
}

/// `barrier` records (the bench's own type): one row, the median barrier
/// latency per rank (enter to leave) with its min and max, by rank count and
/// rendezvous.
impl ReportRows for crate::bench::barrier::BarrierRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let r = &self.results;
        let dims = BTreeMap::from([("ranks".to_string(), r.ranks.to_string()), ("rendezvous".to_string(), format!("{:?}", r.rendezvous).to_lowercase())]);
        let l = &r.latency;
        Ok(vec![(head.row(dims, "barrier p50 ms", Spread { median: l.p50_ms, min: l.min_ms, max: l.max_ms }), Windows::Run)])
    }
}
