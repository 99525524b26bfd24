//! Field types the benchmark views share: a figure (a plain number or a
//! `{median, min, max}` spread), a witness verdict in its record shapes, a
//! dimension value, a data check's outcome. A figure or verdict in a shape
//! the report cannot use reads as "no figure" / its JSON text rather than
//! failing its record: records from older versions and the original suite
//! carry such fields.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::{Number, Value};

use crate::stats::Spread;
use crate::units::size_name;

/// One figure as records store it: a plain number, or a `{median, min, max}`
/// spread over repeats (a missing or non-numeric `min`/`max` is the median).
/// Anything else (a string, a list, an object without a numeric median: NaN
/// is written as `null`) is no figure: `None`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(from = "Value")]
pub(super) struct Figure(pub(super) Option<Spread>);

impl From<Value> for Figure {
    fn from(v: Value) -> Figure {
        Figure(match v {
            Value::Number(n) => n.as_f64().map(|x| Spread { median: x, min: x, max: x }),
            Value::Object(o) => o.get("median").and_then(Value::as_f64).map(|m| Spread {
                median: m,
                min: o.get("min").and_then(Value::as_f64).unwrap_or(m),
                max: o.get("max").and_then(Value::as_f64).unwrap_or(m),
            }),
            _ => None,
        })
    }
}

/// The spread of an optional figure.
pub(super) fn spread(f: &Option<Figure>) -> Option<Spread> {
    f.and_then(|f| f.0)
}

/// The median of an optional figure.
pub(super) fn median(f: &Option<Figure>) -> Option<f64> {
    spread(f).map(|s| s.median)
}

/// A witness verdict where a record stores one, as its text: this tool's
/// `{"verdict": ...}` object gives its `verdict` string ("none" without
/// one), the original suite's bare string is itself, anything else is its
/// JSON text.
#[derive(Debug, Clone, Deserialize)]
#[serde(from = "Value")]
pub(super) struct Verdict(pub(super) String);

impl From<Value> for Verdict {
    fn from(v: Value) -> Verdict {
        Verdict(match v {
            Value::String(s) => s,
            Value::Object(o) => o.get("verdict").and_then(Value::as_str).unwrap_or("none").to_string(),
            Value::Null => "none".into(),
            other => other.to_string(),
        })
    }
}

/// The text of an optional verdict: "none" where the record has none.
pub(super) fn verdict_text(v: &Option<Verdict>) -> String {
    v.as_ref().map_or_else(|| "none".into(), |v| v.0.clone())
}

/// A dimension value as the original suite stores one: a string or a
/// number; anything else is no dimension.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum Scalar {
    /// A string, shown as is.
    Text(String),
    /// A number, shown as JSON writes it (or as a size, for byte counts).
    Number(Number),
    /// Not a dimension.
    Other(serde::de::IgnoredAny),
}

impl Scalar {
    /// The dimension text: a whole byte count as a size (`16MiB`) where
    /// `bytes`, else the string or the number as written; `None` where the
    /// value is no dimension.
    pub(super) fn text(&self, bytes: bool) -> Option<String> {
        match self {
            Scalar::Text(s) => Some(s.clone()),
            Scalar::Number(n) => Some(match n.as_u64() {
                Some(b) if bytes => size_name(b),
                _ => n.to_string(),
            }),
            Scalar::Other(_) => None,
        }
    }
}

/// A run's own data check (`verified`: ckpt restore, weights `--verify`).
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Verified {
    /// Whether the bytes compared equal; absent where the check did not run.
    pub(super) ok: Option<bool>,
}

impl Verified {
    /// True when the check ran and found different bytes.
    pub(super) fn failed(v: &Option<Verified>) -> bool {
        v.as_ref().and_then(|v| v.ok) == Some(false)
    }
}

/// `#[serde(deserialize_with)]` for "the field is there", whatever it holds
/// (`null` included); with `#[serde(default)]`, an absent field is `false`.
pub(super) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(d).map(|_| true)
}

/// `#[serde(deserialize_with)]` for a field read only where it has the shape
/// this tool writes: any other shape (or `null`) is `None`, never an error.
/// With `#[serde(default)]`, an absent field is `None` too.
pub(super) fn lenient<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    Ok(T::deserialize(Value::deserialize(d)?).ok())
}

/// `#[serde(deserialize_with)]` for a verdict field that counts wherever it
/// is present: `null` is `Some` verdict "none"; with `#[serde(default)]`,
/// only an absent field is `None`.
pub(super) fn present_verdict<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Verdict>, D::Error> {
    Verdict::deserialize(d).map(Some)
}
