//! Rail health over a window: the RDMA NICs the client library spreads
//! transfers over (libs3rdma takes a failing rail out of rotation and goes on
//! with the rest), read at each window's open and close on every rank.
//!
//! A rail lost mid-window is a warning beside the verdict, never a verdict
//! of its own: the servers' counters still decide whether RDMA carried the
//! bytes (a run that lost one of two rails may still be all RDMA).

use serde::{Deserialize, Serialize};

use crate::store::Rails;

/// One rank's rails at a window's open and close.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RailsWindow {
    /// The rank that read them (0 in single-process runs).
    pub rank: u32,
    /// Total and healthy rails at the window's open.
    pub open: Rails,
    /// Total and healthy rails at the window's close.
    pub close: Rails,
}

impl RailsWindow {
    /// The window of `rank` from its readings at open and close; `None` when
    /// either is missing (a store that does not count rails).
    pub fn between(rank: usize, open: Option<Rails>, close: Option<Rails>) -> Option<RailsWindow> {
        Some(RailsWindow { rank: rank as u32, open: open?, close: close? })
    }

    /// A rail went out of rotation (or the total shrank) between open and close.
    pub fn lost(&self) -> bool {
        self.close.healthy < self.open.healthy || self.close.total < self.open.total
    }

    /// The window ran degraded: a rail was lost in it, or it opened or
    /// closed with a rail out of rotation (lost before it, in a warm-up or
    /// an earlier window).
    pub fn degraded(&self) -> bool {
        self.lost() || self.open.healthy < self.open.total || self.close.healthy < self.close.total
    }

    /// "rank R lost an RDMA rail in the window: ..." when it was lost inside,
    /// else "rank R ran on H of T RDMA rails (one out of rotation since before the window)".
    pub fn note(&self) -> String {
        if self.lost() {
            format!(
                "rank {} lost an RDMA rail in the window: {} of {} healthy at open, {} of {} at close",
                self.rank, self.open.healthy, self.open.total, self.close.healthy, self.close.total
            )
        } else {
            format!("rank {} ran on {} of {} RDMA rails (one out of rotation since before the window)", self.rank, self.close.healthy, self.close.total)
        }
    }
}

/// The notes of every rank in `rails` that ran degraded, joined by "; ".
pub fn rails_note(rails: &[RailsWindow]) -> Option<String> {
    let lost: Vec<String> = rails.iter().filter(|r| r.degraded()).map(RailsWindow::note).collect();
    (!lost.is_empty()).then(|| lost.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(open: (u32, u32), close: (u32, u32)) -> RailsWindow {
        RailsWindow { rank: 1, open: Rails { total: open.0, healthy: open.1 }, close: Rails { total: close.0, healthy: close.1 } }
    }

    #[test]
    fn a_rail_out_of_rotation_is_named_and_a_steady_one_is_not() {
        assert!(!w((2, 2), (2, 2)).degraded());
        assert!(!w((2, 1), (2, 2)).lost(), "a rail back in rotation is no loss");
        assert!(w((2, 1), (2, 1)).degraded() && !w((2, 1), (2, 1)).lost(), "lost before the window");
        assert_eq!(w((2, 1), (2, 1)).note(), "rank 1 ran on 1 of 2 RDMA rails (one out of rotation since before the window)");
        assert!(w((2, 2), (2, 1)).lost());
        assert!(w((2, 2), (1, 1)).lost());
        assert_eq!(rails_note(&[w((2, 2), (2, 2))]), None);
        assert_eq!(rails_note(&[w((2, 2), (2, 1))]).as_deref(), Some("rank 1 lost an RDMA rail in the window: 2 of 2 healthy at open, 1 of 2 at close"));
    }
}
