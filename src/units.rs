//! Byte counts as people read them: one place, so every table, key and
//! message writes sizes the same way. (Hand-written: the forms are the
//! command line's own, `16MiB` and `64MB`, which no formatting crate emits.)

const IEC: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
const DEC: [(u64, &str); 4] = [(1_000_000_000_000, "TB"), (1_000_000_000, "GB"), (1_000_000, "MB"), (1_000, "kB")];

/// A size the way a user would type it (`--sizes`, key names, table cells):
/// the exact IEC (`16MiB`) or decimal (`64MB`) form with the smallest
/// number, else IEC with one decimal (`1.4MiB`), else bytes (`512B`).
pub fn size_name(n: u64) -> String {
    let exact = IEC.iter().chain(DEC.iter()).filter(|(u, _)| n >= *u && n.is_multiple_of(*u)).min_by_key(|(u, _)| n / u);
    if let Some((u, name)) = exact {
        return format!("{}{name}", n / u);
    }
    size_approx(n)
}

/// An amount (memory available, bytes needed): the largest IEC unit that
/// fits, one decimal (`22.5GiB`), or bytes below 1 KiB.
pub fn size_approx(n: u64) -> String {
    match IEC.iter().find(|(u, _)| n >= *u) {
        Some((u, name)) => format!("{:.1}{name}", n as f64 / *u as f64),
        None => format!("{n}B"),
    }
}

/// Decimal gigabytes with one decimal (`16.1 GB`), as the seeds report model and checkpoint sizes.
pub fn gb(n: u64) -> String {
    format!("{:.1} GB", n as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_render_as_typed_and_amounts_in_the_largest_unit() {
        assert_eq!(size_name(16 << 20), "16MiB");
        assert_eq!(size_name(64_000_000), "64MB");
        assert_eq!(size_name(1_500_000), "1500kB");
        assert_eq!(size_name(1_500_001), "1.4MiB");
        assert_eq!(size_name(512), "512B");
        assert_eq!(size_name(1 << 30), "1GiB");
        // The case `fetch-large-objects-many-streams`: 23605416 KiB available reads as GiB.
        assert_eq!(size_approx(23_605_416 << 10), "22.5GiB");
        assert_eq!(size_approx(64 << 30), "64.0GiB");
        assert_eq!(size_approx(1000), "1000B");
        assert_eq!(gb(16_060_000_000), "16.1 GB");
    }
}
