//! verify's probes: per size and memory kind, one witnessed PUT and one
//! witnessed GET of a random object, the bytes compared. Device memory is
//! written and read the way GPU-Direct can carry it (into CUDA memory; a
//! ranged GET where the store's transport carries ranged reads, as `fetch`
//! and `ckpt` read); host memory with a whole-object GET: an RDMA path with
//! the libs3rdma generation of libminiocpp, never one with cuObject (the
//! original Python suite measured host memory, even pinned, over TCP).

use std::sync::Arc;
use std::time::Instant;

use rand::{RngCore, SeedableRng, rngs::SmallRng};
use serde::Serialize;

use crate::bench::session::{Direction, window_payload};
use crate::mem::{Buffer, Dest, Gpu};
use crate::store::{self, ObjectStore};
use crate::units::size_name;
use crate::witness::{Witness, WitnessReport};

/// Where a probe's bytes come from and land.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Memory {
    /// CUDA device memory: the path GPU-Direct RDMA can carry.
    Device,
    /// Pageable host memory: RDMA with the libs3rdma generation, HTTP with cuObject.
    Host,
}

impl Memory {
    /// "device memory" / "host memory".
    pub(super) fn name(self) -> &'static str {
        match self {
            Memory::Device => "GPU memory",
            Memory::Host => "host memory",
        }
    }
}

/// One witnessed transfer of a probe.
#[derive(Debug, Clone, Serialize)]
pub(super) struct ProbeOp {
    /// Object size, bytes.
    pub size_bytes: u64,
    /// Source (PUT) or destination (GET) memory.
    pub memory: Memory,
    /// "PUT", "ranged GET" (device) or "GET" (host, whole object).
    pub request: &'static str,
    /// Bytes moved (the client's count).
    pub bytes: u64,
    /// Wall seconds of the request alone (scrapes excluded).
    pub seconds: f64,
    /// The bytes read back equal those written (GETs only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_match: Option<bool>,
    /// The window's report.
    pub witness: WitnessReport,
}

impl ProbeOp {
    /// Throughput, GB/s (1e9 B/s).
    pub(super) fn gbps(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 / self.seconds / 1e9 } else { 0.0 }
    }
    /// "ranged GET of 64MiB into GPU memory", as the step lines and RESULT say it.
    pub(super) fn what(&self) -> String {
        let (prep, size) = (if self.request == "PUT" { "from" } else { "into" }, size_name(self.size_bytes));
        format!("{} of {size} {prep} {}", self.request, self.memory.name())
    }
    /// The server's evidence in words: RDMA bytes counted and the HTTP growth
    /// in the payload's direction.
    pub(super) fn evidence(&self) -> String {
        let c = &self.witness.counters;
        let (rdma, http, side) =
            if self.request == "PUT" { (c.rdma_write_bytes, c.http_received_bytes, "received") } else { (c.rdma_read_bytes, c.http_sent_bytes, "sent") };
        let dir = if self.request == "PUT" { "write" } else { "read" };
        let rdma = rdma.map_or_else(|| "no RDMA counter at the server".to_string(), |v| format!("server counted {} RDMA {dir} bytes", group(v as u64)));
        let http = http.map_or_else(|| format!("no HTTP {side} counter"), |v| format!("HTTP {side} grew {}", group(v as u64)));
        format!("{rdma}; {http}")
    }
}

/// 67108864 as "67,108,864" (counter figures a person compares by eye).
/// Own code: eight lines, where a formatting crate (num-format) would add a
/// dependency and its locale tables for one separator.
pub fn group(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Everything a probe needs besides its size and memory.
pub(super) struct ProbeCtx<'a> {
    /// The store (counted, so the witness gets the client's own HTTP bytes).
    pub store: &'a dyn ObjectStore,
    /// The witness.
    pub witness: &'a Witness,
    /// The probe object's key.
    pub key: &'a str,
    /// The GPU for device probes.
    pub gpu: Option<&'a Arc<Gpu>>,
    /// How a failed transfer is said ([`crate::record::OutputConfig::explain`]).
    pub explain: fn(&crate::error::Error) -> String,
}

/// PUT `size` random bytes from `memory` to the probe key, read them back,
/// compare; each transfer in a witness window of its own.
///
/// Errors (in words, the step prints them): the outer one when an allocation
/// or the PUT fails; the inner one when the GET fails after the PUT was judged.
pub(super) async fn probe(ctx: &ProbeCtx<'_>, size: u64, memory: Memory) -> Result<(ProbeOp, Result<ProbeOp, String>), String> {
    let len = usize::try_from(size).map_err(|_| format!("{size} bytes do not fit in memory here"))?;
    let mut bytes = vec![0u8; len];
    SmallRng::from_os_rng().fill_bytes(&mut bytes);
    // The device probe reads with a ranged GET where the store's transport
    // carries ranged reads (rdma: miniocpp_get_object_range), else whole.
    let ranged = memory == Memory::Device && size > 0 && ctx.store.capabilities().ranged_read.is_some();
    let (dest, request) = match memory {
        Memory::Device => (Dest::Device, if ranged { "ranged GET" } else { "GET" }),
        Memory::Host => (Dest::Host, "GET"),
    };
    // A store that cannot reach device memory stages it: the PUT through one
    // host copy, the GET through two pinned bounce buffers of up to 64 MiB.
    let staged = memory == Memory::Device && !ctx.store.capabilities().device_writes;
    let (bounce, chunk) = if staged { (2, len.clamp(1, 64 << 20)) } else { (0, 0) };
    let alloc = |what| move |e| format!("allocating the {what} ({} of {}): {e}", size_name(size), memory.name());
    let mut src = Buffer::for_dest(dest, ctx.gpu, len, 0, 0).map_err(alloc("source"))?;
    src.copy_from_host(0, &bytes).map_err(|e| format!("filling the source: {e}"))?;
    let mut scratch = staged.then(|| Buffer::host(len));

    let ws = ctx.witness.begin().await;
    let before = ctx.store.stats();
    let t0 = Instant::now();
    let (t, _) = store::write_from(ctx.store, ctx.key, &src, 0..len, scratch.as_mut()).await.map_err(|e| (ctx.explain)(&e.into()))?;
    let seconds = t0.elapsed().as_secs_f64();
    let witness = ctx.witness.end(ws, window_payload(&ctx.store.stats().since(&before), Direction::Write, t.bytes)).await;
    let put = ProbeOp { size_bytes: size, memory, request: "PUT", bytes: t.bytes, seconds, data_match: None, witness };
    drop(src);

    let mut dst = Buffer::for_dest(dest, ctx.gpu, len, bounce, chunk).map_err(alloc("destination"))?;
    let range = ranged.then_some(0..size);
    let ws = ctx.witness.begin().await;
    let before = ctx.store.stats();
    let t0 = Instant::now();
    let got = match store::read_into(ctx.store, ctx.key, range, &mut dst).await {
        Ok(t) => t,
        Err(e) => return Ok((put, Err((ctx.explain)(&e.into())))),
    };
    let seconds = t0.elapsed().as_secs_f64();
    let witness = ctx.witness.end(ws, window_payload(&ctx.store.stats().since(&before), Direction::Read, got.bytes)).await;
    let same = match &dst {
        Buffer::Device(d) => {
            let mut back = vec![0u8; len];
            d.read_back(0, &mut back).map_err(|e| format!("reading the device buffer back: {e}"))?;
            back == bytes
        }
        other => other.as_host().is_some_and(|h| h[..len] == bytes[..]),
    };
    Ok((put, Ok(ProbeOp { size_bytes: size, memory, request, bytes: got.bytes, seconds, data_match: Some(same && got.bytes == size), witness })))
}

/// The table verify prints after its steps: where the transport changes.
pub(super) fn table(ops: &[ProbeOp]) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header(["size", "memory", "request", "GB/s", "data", "witness", "RDMA share", "HTTP growth"]);
    for o in ops {
        let c = &o.witness.counters;
        let http = if o.request == "PUT" { c.http_received_bytes } else { c.http_sent_bytes };
        t.add_row([
            size_name(o.size_bytes),
            o.memory.name().into(),
            o.request.into(),
            format!("{:.3}", o.gbps()),
            match o.data_match {
                Some(true) => "match".into(),
                Some(false) => "DIFFER".into(),
                None => "-".into(),
            },
            o.witness.verdict.as_str().into(),
            o.witness.rdma_share.map_or_else(|| "-".into(), |s| format!("{}%", crate::witness::pct_floor(s))),
            http.map_or_else(|| "-".into(), |h| group(h as u64)),
        ]);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_figures_are_grouped_by_thousands() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1000), "1,000");
        assert_eq!(group(67_108_864), "67,108,864");
    }
}
