//! The statistics every bench reports and `report` reads back: nearest-rank
//! percentiles, a latency distribution, a figure's median and range over
//! repeats, and host CPU cores summed over processes. A leaf: it names no
//! other module of this crate.

use std::time::Duration;

use serde::Serialize;

/// Nearest-rank percentile of an ascending-sorted slice: the value at rank
/// `ceil(p * n)` (1-based), clamped to `1..=n`; `p` in `[0, 1]`. `None` when empty.
///
/// Source: the nearest-rank method (NIST/Hyndman & Fan definition 1); with 50
/// samples of 1..=50 ms it gives p50 = 25, p90 = 45, p99 = 50.
pub fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    let rank = ((p * n as f64).ceil() as usize).clamp(1, n);
    Some(sorted[rank - 1])
}

/// Latency distribution of a set of operations, milliseconds.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Latency {
    /// Fastest, milliseconds.
    pub min_ms: f64,
    /// Median (nearest rank), milliseconds.
    pub p50_ms: f64,
    /// 90th percentile (nearest rank), milliseconds.
    pub p90_ms: f64,
    /// 99th percentile (nearest rank), milliseconds.
    pub p99_ms: f64,
    /// Slowest, milliseconds.
    pub max_ms: f64,
}

impl Latency {
    /// From per-operation durations; `None` when there are none.
    pub fn from_durations(d: &[Duration]) -> Option<Self> {
        let mut ms: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        ms.sort_by(f64::total_cmp);
        Some(Latency {
            min_ms: *ms.first()?,
            p50_ms: percentile(&ms, 0.50)?,
            p90_ms: percentile(&ms, 0.90)?,
            p99_ms: percentile(&ms, 0.99)?,
            max_ms: *ms.last()?,
        })
    }
}

/// Median and range of one figure over repeats.
#[derive(Debug, Clone, Copy, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct Spread {
    /// Median (mean of the two middle values for an even count).
    #[serde(deserialize_with = "f64_or_nan")]
    pub median: f64,
    /// Smallest value.
    #[serde(deserialize_with = "f64_or_nan")]
    pub min: f64,
    /// Largest value.
    #[serde(deserialize_with = "f64_or_nan")]
    pub max: f64,
}

/// A figure read back from a record: serde_json writes a NaN `f64` as
/// `null`, so `null` reads as NaN (a figure with no value), not as a record
/// refused for it.
///
/// Errors: anything but a number or `null`.
pub fn f64_or_nan<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(<Option<f64> as serde::Deserialize>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Spread {
    /// From the per-repeat values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => return None,
            _ if n % 2 == 1 => v[n / 2],
            _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
        };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }
}

/// Whole-host CPU cores over processes that each sampled their own host:
/// processes on one host see the same host, so each host counts once (its
/// busiest view) and hosts are summed. Input: (hostname, host cores) per process.
pub fn host_cores<'a>(per_process: impl IntoIterator<Item = (&'a str, f64)>) -> f64 {
    let mut hosts: std::collections::BTreeMap<&str, f64> = Default::default();
    for (h, c) in per_process {
        let e = hosts.entry(h).or_default();
        *e = e.max(c);
    }
    hosts.values().sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_1_to_50_ms() {
        let d: Vec<Duration> = (1..=50).map(Duration::from_millis).collect();
        let l = Latency::from_durations(&d).unwrap();
        assert_eq!(l.p50_ms, 25.0);
        assert_eq!(l.p90_ms, 45.0);
        assert_eq!(l.p99_ms, 50.0);
        assert_eq!(l.min_ms, 1.0);
        assert_eq!(l.max_ms, 50.0);
    }

    #[test]
    fn percentile_edges() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7.0], 0.0), Some(7.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(1.0));
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.26), Some(2.0));
        assert!(Latency::from_durations(&[]).is_none());
    }

    #[test]
    fn host_cores_count_each_host_once() {
        assert_eq!(host_cores([("a", 1.5), ("a", 2.0), ("b", 0.5)]), 2.5);
        assert_eq!(host_cores([]), 0.0);
    }

    #[test]
    fn spread_median_and_range() {
        assert_eq!(Spread::of([3.0, 1.0, 2.0]).unwrap(), Spread { median: 2.0, min: 1.0, max: 3.0 });
        assert_eq!(Spread::of([4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(Spread::of([]).is_none());
    }

    #[test]
    fn a_spread_with_a_nan_reads_back_as_written() {
        let written = serde_json::to_string(&Spread { median: f64::NAN, min: 1.0, max: f64::NAN }).unwrap();
        assert_eq!(written, r#"{"median":null,"min":1.0,"max":null}"#);
        let read: Spread = serde_json::from_str(&written).unwrap();
        assert!(read.median.is_nan() && read.max.is_nan() && read.min == 1.0, "{read:?}");
        let e = serde_json::from_str::<Spread>(r#"{"median":"fast","min":1,"max":2}"#).unwrap_err();
        assert!(e.to_string().contains("invalid type"), "{e}");
    }
}
