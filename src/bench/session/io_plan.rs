//! Before a run: which of a bench's planned transfers would leave the
//! store's own transport (over rdma: go over HTTP although RDMA works), said
//! once, and refused up front under `--require-rdma`. Part of the session
//! (`session/mod.rs`).

use super::Session;
use crate::error::{Error, Result};
use crate::flag::REQUIRE_RDMA;
use crate::store::PlannedIo;

impl Session {
    /// Ask the store about each planned transfer (`what` names it for the
    /// user: "weights windows of shard 'x'"). Each that would leave the
    /// transport is a warning (recorded in `environment.warnings`); under
    /// `--require-rdma` the run stops here instead, before any transfer,
    /// naming every such transfer and `fix`, the setting that keeps them on
    /// RDMA where one exists.
    ///
    /// Errors: [`Error::WitnessFailed`] (exit 3) under `--require-rdma` when any transfer would leave.
    pub fn check_io_plan(&self, planned: &[(String, PlannedIo)], fix: Option<&str>) -> Result<()> {
        // One line per reason, naming the transfers it covers (at most 3 by name).
        let mut by_why: Vec<(String, Vec<&str>)> = Vec::new();
        for (what, io) in planned {
            if let Some(why) = self.store.leaves_transport(*io) {
                match by_why.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, whats)) if !whats.contains(&what.as_str()) => whats.push(what),
                    Some(_) => {}
                    None => by_why.push((why, vec![what])),
                }
            }
        }
        let off: Vec<String> = by_why
            .into_iter()
            .map(|(why, whats)| {
                let more = if whats.len() > 3 { format!(" and {} more", whats.len() - 3) } else { String::new() };
                format!("{}{more}: {why}", whats[..whats.len().min(3)].join(", "))
            })
            .collect();
        if off.is_empty() {
            return Ok(());
        }
        if self.require_rdma {
            let fix = fix.map_or(String::new(), |f| format!("; {f}"));
            return Err(Error::WitnessFailed(format!("{REQUIRE_RDMA} refuses this plan before any transfer: {}{fix}", off.join("; "))));
        }
        for line in off {
            self.warn(line);
        }
        Ok(())
    }
}
