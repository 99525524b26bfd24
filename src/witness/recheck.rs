//! Judging a stored record again: a verdict string in a file proves nothing
//! (anyone can type `"rdma-verified"`); the counters and client counts the
//! witness stored beside it do. `report` uses [`proof_of`] on every record.

use serde_json::Value;

use super::{Expect, Verdict, WitnessReport, recheck};
use crate::record::WindowId;
use crate::store::Backend;

/// What a record's stored windows prove about its verdicts.
#[derive(Debug, Clone, PartialEq)]
pub enum Proof {
    /// Every stored window judged again gives its stored verdict: each
    /// window's label, id (schema 3 on) and verdict (a row shows the worst
    /// of its own windows).
    Rechecked(Vec<(String, Option<WindowId>, Verdict)>),
    /// A local run: no server, so `not-applicable` whatever the record says.
    Local,
    /// Nothing to prove: a record without windows whose verdict claims
    /// nothing (`unverified`, or `not-applicable` on http).
    NoClaim,
    /// The record claims a verdict its own evidence does not give (why).
    Unproven(String),
}

/// Judge `record` (a run record: `backend`, `rdma_witness.verdict`,
/// `rdma_witness.windows` as [`WitnessReport`]s with a `label`) again.
///
/// A record with windows is `Rechecked` only when each window's stored
/// verdict is what [`recheck`] gives its stored inputs and the record's
/// overall verdict is the worst of them; a record without windows (written
/// before schema 3, or hand-made) proves nothing beyond `NoClaim`.
pub fn proof_of(record: &Value) -> Proof {
    let named = record["backend"].as_str().unwrap_or_default();
    // A backend this build does not know is not judged as any it does (a
    // new transport's records are not RDMA's).
    let expect = match Backend::from_name(named) {
        Some(Backend::Local) => return Proof::Local,
        Some(Backend::Http) => Expect::Http,
        Some(Backend::Rdma) => Expect::Rdma,
        None => {
            return Proof::Unproven(format!("the record's backend '{named}' is not one this build knows (local, http, rdma): its verdict cannot be judged"));
        }
    };
    let w = &record["rdma_witness"];
    let stored = w["verdict"].as_str().unwrap_or("none");
    let Some(windows) = w["windows"].as_array().filter(|a| !a.is_empty()) else {
        return match (stored, expect) {
            ("unverified", _) | ("not-applicable", Expect::Http) => Proof::NoClaim,
            _ => Proof::Unproven(format!("the record says {stored} but holds no witness windows (counters) to prove it")),
        };
    };
    let mut verdicts = Vec::new();
    for (i, v) in windows.iter().enumerate() {
        let label = v["label"].as_str().map_or_else(|| format!("window {i}"), String::from);
        let r: WitnessReport = match serde_json::from_value(v.clone()) {
            Ok(r) => r,
            Err(e) => return Proof::Unproven(format!("{label}: the stored window is incomplete ({e})")),
        };
        // Inputs no scrape can produce (a live one refuses them): never judged.
        let c = &r.counters;
        let figures = [c.rdma_read_bytes, c.rdma_read_ops, c.rdma_write_bytes, c.rdma_write_ops, c.http_sent_bytes, c.http_received_bytes];
        if figures.iter().flatten().chain(c.rdma_series.values()).any(|v| !(v.is_finite() && *v >= 0.0 && *v < 9.2e18)) {
            return Proof::Unproven(format!("{label}: a stored counter delta is negative, not finite or beyond 2^63: no scrape gives that"));
        }
        let again = recheck(expect, &r);
        if again != r.verdict {
            return Proof::Unproven(format!("{label}: stored {}, but its own counters give {}", r.verdict.as_str(), again.as_str()));
        }
        // An id that does not read is no id: the row falls back to the label.
        let id = serde_json::from_value::<WindowId>(v["id"].clone()).ok();
        verdicts.push((label, id, r.verdict));
    }
    let worst = verdicts.iter().map(|(_, _, v)| *v).min().expect("non-empty");
    if stored != worst.as_str() {
        return Proof::Unproven(format!("the record says {stored}, its windows' worst verdict is {}", worst.as_str()));
    }
    Proof::Rechecked(verdicts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::{Deltas, FabricReport, Payload, judge};
    use serde_json::json;

    const M: u64 = 1 << 20;
    const MF: f64 = M as f64;

    fn window(label: &str, read: u64, rdma: f64, sent: f64) -> Value {
        let d = Deltas { rdma_read_bytes: Some(rdma), http_sent_bytes: Some(sent), http_received_bytes: Some(0.0), ..Default::default() };
        let r = judge(Expect::Rdma, Payload { read_bytes: read, requests: 1, ..Default::default() }, Ok(d), FabricReport::default());
        let mut v = serde_json::to_value(r).unwrap();
        v["label"] = json!(label);
        v
    }

    fn record(verdict: &str, windows: Vec<Value>) -> Value {
        json!({"benchmark": "fetch", "backend": "rdma", "rdma_witness": {"verdict": verdict, "windows": windows}})
    }

    #[test]
    fn faithful_windows_recheck_to_their_verdicts() {
        let rec = record("partial-fallback", vec![window("a", M, MF, 0.0), window("b", M, MF / 2.0, MF / 2.0)]);
        assert_eq!(proof_of(&rec), Proof::Rechecked(vec![("a".into(), None, Verdict::RdmaVerified), ("b".into(), None, Verdict::PartialFallback)]));
    }

    #[test]
    fn a_bare_verdict_string_is_unproven() {
        let rec = json!({"benchmark": "fetch", "backend": "rdma", "rdma_witness": {"verdict": "rdma-verified"}});
        assert!(matches!(proof_of(&rec), Proof::Unproven(w) if w.contains("no witness windows")));
        // Claiming nothing needs no proof; a local run has nothing to prove.
        let rec = json!({"backend": "http", "rdma_witness": {"verdict": "unverified"}});
        assert_eq!(proof_of(&rec), Proof::NoClaim);
        let rec = json!({"backend": "LOCAL", "rdma_witness": {"verdict": "rdma-verified"}});
        assert_eq!(proof_of(&rec), Proof::Local);
        // A backend this build does not know is never judged as RDMA (or anything).
        for b in ["gds", "", "rdma2"] {
            let rec = json!({"backend": b, "rdma_witness": {"verdict": "rdma-verified", "windows": [window("a", M, MF, 0.0)]}});
            assert!(matches!(proof_of(&rec), Proof::Unproven(m) if m.contains("not one this build knows")), "{b}");
        }
        let rec = json!({"rdma_witness": {"verdict": "unverified"}});
        assert!(matches!(proof_of(&rec), Proof::Unproven(_)), "no backend at all");
    }

    #[test]
    fn an_edited_verdict_or_counter_is_unproven() {
        let mut w = window("a", M, 0.0, MF);
        w["verdict"] = json!("rdma-verified");
        assert!(
            matches!(proof_of(&record("rdma-verified", vec![w])), Proof::Unproven(m) if m.contains("a: stored rdma-verified, but its own counters give full-fallback"))
        );
        let mut w = window("a", M, MF, 0.0);
        w["http_sent_bytes"] = json!(MF);
        assert!(matches!(proof_of(&record("rdma-verified", vec![w])), Proof::Unproven(_)));
        // The overall verdict must be the worst window's.
        let rec = record("rdma-verified", vec![window("a", M, MF, 0.0), window("b", M, 0.0, MF)]);
        assert!(matches!(proof_of(&rec), Proof::Unproven(m) if m.contains("worst verdict is full-fallback")));
        // Impossible counters are refused, not judged.
        let mut w = window("a", M, MF, 0.0);
        w["http_sent_bytes"] = json!(-1e12);
        assert!(matches!(proof_of(&record("rdma-verified", vec![w])), Proof::Unproven(m) if m.contains("negative")));
        // A window missing its inputs cannot be judged again.
        let mut w = window("a", M, MF, 0.0);
        w.as_object_mut().unwrap().remove("requests");
        assert!(matches!(proof_of(&record("rdma-verified", vec![w])), Proof::Unproven(m) if m.contains("incomplete")));
    }
}
