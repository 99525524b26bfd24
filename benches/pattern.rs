//! `cargo bench --bench pattern`: `fetch --verify`'s host check
//! ([`Pattern::first_difference`]) on one thread, per build of its word loop
//! this CPU runs (baseline, AVX2, AVX-512), side by side in one run: GB/s
//! (1e9 B/s) as the median of 7 passes over 256 MiB: the check alone over
//! the whole buffer, and each 2 MiB piece copied (as a read from the page
//! cache copies it) then checked while in cache, as `fetch --verify` does,
//! beside the copies alone.
//!
//! A plain `harness = false` bench, as `benches/http_get.rs` says why.
//! Under `cargo test --all-targets` (no `--bench` argument) it only says how
//! to run it.

use std::time::Instant;

use s3rdma::format::pattern::{CheckKernel, Pattern};

const TOTAL: usize = 256 << 20;
const PIECE: usize = 2 << 20;
const PASSES: usize = 7;

fn median_gbps(bytes: usize, mut pass: impl FnMut()) -> f64 {
    let mut secs: Vec<f64> = (0..PASSES)
        .map(|_| {
            let t = Instant::now();
            pass();
            t.elapsed().as_secs_f64()
        })
        .collect();
    secs.sort_by(f64::total_cmp);
    bytes as f64 / secs[PASSES / 2] / 1e9
}

fn main() {
    if !std::env::args().any(|a| a == "--bench") {
        println!("benches/pattern.rs: run it with `cargo bench --bench pattern`");
        return;
    }
    let p = Pattern::of("bench/pattern");
    let mut buf = vec![0u8; TOTAL];
    p.fill(0, &mut buf);
    let mut piece = vec![0u8; PIECE];
    let mut copy_pieces = |check: Option<CheckKernel>| {
        for (i, src) in buf.chunks(PIECE).enumerate() {
            let dst = &mut piece[..src.len()];
            dst.copy_from_slice(src);
            if let Some(k) = check {
                assert_eq!(p.first_difference_with(k, (i * PIECE) as u64, std::hint::black_box(&*dst)), None);
            }
            std::hint::black_box(&mut *dst);
        }
    };
    let copies = median_gbps(TOTAL, || copy_pieces(None));
    println!("{:<10} {:>16} {:>22}", "kernel", "check GB/s", "copy + check GB/s");
    for k in CheckKernel::available() {
        let check = median_gbps(TOTAL, || assert_eq!(p.first_difference_with(k, 0, std::hint::black_box(&buf)), None));
        let fused = median_gbps(TOTAL, || copy_pieces(Some(k)));
        println!("{:<10} {check:>16.2} {fused:>22.2}", format!("{k:?}"));
    }
    println!("the 2 MiB copies alone: {copies:.2} GB/s (one thread; GB/s = 1e9 B/s)");
}
