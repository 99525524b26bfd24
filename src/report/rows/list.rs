//! `list` records -> one row: keys listed per second (the bench's own type).

use std::collections::BTreeMap;

use super::{Head, ReportRows, Windows};
use crate::error::Result;
use crate::report::Row;
use crate::stats::Spread;

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
