//! `tokens` records -> one row: tokens/s at the run's sequence length.
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
use crate::units::size_name;

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

/// Schema 3 on: the writer's own record type. Beside the sequence length,
/// the settings that change what a token rate means are dimensions (runs in
/// flight, run size, batch, simulated compute), so `--baseline` compares
/// only runs alike in them.
impl ReportRows for crate::bench::tokens::TokensRecord {
    fn rows(&self, head: &Head) -> Result<Vec<(Row, Windows)>> {
        let (s, p) = (&self.results.summary, &self.params);
        let dims = BTreeMap::from([
            ("seq_len".to_string(), self.results.seq_len.to_string()),
            ("workers".to_string(), p.fetch_workers.to_string()),
            ("run".to_string(), size_name(p.run_bytes)),
            ("batch".to_string(), p.batch_seqs.to_string()),
            ("compute".to_string(), if p.compute_s > 0.0 { format!("{}ms", (p.compute_s * 1e6).round() / 1e3) } else { "none".into() }),
        ]);
        let mut r = head.row(dims, "tokens/s", s.tokens_per_s);
        r.wall_s = Spread::of(self.results.repeats.iter().map(|r| r.figures.wall_s));
        r.cpu_cores = Some(s.client_cpu_cores.median);
        r.gbps = Some(s.throughput_gbps.median);
        Ok(vec![(r, Windows::Cell { index: 0, label_prefix: None })])
    }
}
