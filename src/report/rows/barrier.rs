//! `barrier` records -> one row: barrier latency (the bench's own type).

use std::collections::BTreeMap;

use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;
use crate::stats::Spread;

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
