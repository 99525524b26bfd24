//! Checking a device load's bytes while they are staged: every span asked
//! for (a tensor) hashed as one XXH3-64 stream by the reader thread that
//! stages it, and every part's landing checksum ([`crate::mem::Landing`])
//! summed on the way, so that after the load the GPU's checksum of device
//! memory shows the staged bytes are the bytes that landed. Nothing is read
//! back over PCIe.
//!
//! An XXH3 stream must be fed in order, so each span is staged by one
//! thread from its first byte to its last: the spans (and the gaps between
//! them, read but not hashed) are shared out over the reader threads largest
//! first, each to the thread with the fewest bytes so far (longest processing
//! time first), instead of the unchecked load's one shared chunk queue. A
//! model whose largest tensor outweighs a thread's share finishes with that
//! tensor's thread.

use std::ops::Range;

use serde::Serialize;

use crate::mem::Landing;

/// What to check while a load stages its parts.
#[derive(Debug, Clone, Default)]
pub struct StagedCheck {
    /// Per part (in the parts' order), the byte ranges to hash, each
    /// relative to the part's range start (a tensor's offset and end in
    /// its shard's data section): sorted, not overlapping, within the part.
    pub spans: Vec<Vec<Range<u64>>>,
}

/// What a checked load found.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct StagedHashes {
    /// Per part, per span (the [`StagedCheck`]'s order): the XXH3-64 of the span as staged.
    pub hashes: Vec<Vec<u64>>,
    /// Per part: the landing checksum of its bytes as staged, word 0 at the
    /// part's first byte (compare with the destination's
    /// [`crate::mem::DeviceBuffer::landing_checksum`] from the part's `at`).
    pub landing: Vec<u64>,
    /// Sum over reader threads of seconds hashing (XXH3 and the landing sum), inside the load.
    pub hash_s: f64,
    /// The most bytes one thread staged (the load's floor with one tensor per thread).
    pub largest_share_bytes: u64,
}

/// One piece of work of a checked load: `range` of part `part` (relative to
/// its range start), hashed as span `span` of that part, or a gap (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Item {
    pub part: usize,
    pub range: Range<u64>,
    pub span: Option<usize>,
}

/// The items of a checked load of parts `lens` bytes long: every span, and
/// every gap before, between and after them, so each byte of each part is
/// in exactly one item.
///
/// Errors: the parts and the spans disagree (count, order, overlap, a span
/// past its part), in words.
pub(super) fn items(lens: &[u64], check: &StagedCheck) -> Result<Vec<Item>, String> {
    if check.spans.len() != lens.len() {
        return Err(format!("a checked load of {} parts with spans for {}", lens.len(), check.spans.len()));
    }
    let mut out = Vec::new();
    for (part, (spans, &len)) in check.spans.iter().zip(lens).enumerate() {
        let mut at = 0;
        for (i, s) in spans.iter().enumerate() {
            if s.start < at || s.end < s.start || s.end > len {
                return Err(format!("part {part}: span {i} ({}..{}) overlaps the one before it or runs past the part's {len} bytes", s.start, s.end));
            }
            if s.start > at {
                out.push(Item { part, range: at..s.start, span: None });
            }
            out.push(Item { part, range: s.clone(), span: Some(i) });
            at = s.end;
        }
        if at < len {
            out.push(Item { part, range: at..len, span: None });
        }
    }
    Ok(out)
}

/// `items` shared out over `threads` threads, largest first, each to the
/// thread with the fewest bytes so far; each thread's items then in part and
/// offset order (reads forward through each file). Empty items are dropped.
pub(super) fn shares(items: Vec<Item>, threads: usize) -> Vec<Vec<Item>> {
    let mut order: Vec<Item> = items.into_iter().filter(|i| i.range.end > i.range.start).collect();
    order.sort_by_key(|i| std::cmp::Reverse(i.range.end - i.range.start));
    let mut out: Vec<(u64, Vec<Item>)> = (0..threads.max(1)).map(|_| (0, Vec::new())).collect();
    for i in order {
        let least = out.iter_mut().min_by_key(|(load, _)| *load).expect("threads >= 1");
        least.0 += i.range.end - i.range.start;
        least.1.push(i);
    }
    out.into_iter()
        .map(|(_, mut v)| {
            v.sort_by_key(|i| (i.part, i.range.start));
            v
        })
        .collect()
}

/// One reader thread's hashing state: its spans' hashes and its pieces of
/// every part's landing checksum.
#[derive(Debug, Default)]
pub(super) struct ThreadHashes {
    /// (part, span, XXH3-64).
    pub hashes: Vec<(usize, usize, u64)>,
    /// Per part.
    pub landing: Vec<Landing>,
    /// Seconds hashing.
    pub hash_s: f64,
    /// Bytes staged.
    pub bytes: u64,
}

/// The threads' states merged into the load's result, for parts whose spans `check` lists.
pub(super) fn merge(check: &StagedCheck, threads: Vec<ThreadHashes>) -> StagedHashes {
    let mut hashes: Vec<Vec<u64>> = check.spans.iter().map(|s| vec![0; s.len()]).collect();
    let mut landing: Vec<Landing> = vec![Landing::default(); check.spans.len()];
    let mut out = StagedHashes::default();
    for t in threads {
        for (p, s, h) in t.hashes {
            hashes[p][s] = h;
        }
        for (p, l) in t.landing.into_iter().enumerate() {
            landing[p].merge(l);
        }
        out.hash_s += t.hash_s;
        out.largest_share_bytes = out.largest_share_bytes.max(t.bytes);
    }
    out.hashes = hashes;
    out.landing = landing.into_iter().map(Landing::finish).collect();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_cover_every_byte_once_and_shares_keep_each_span_whole() {
        let check = StagedCheck { spans: vec![vec![0..100, 100..1000, 1200..1300], vec![], vec![5..6]] };
        let lens = [1400, 50, 6];
        let items = items(&lens, &check).unwrap();
        for (part, &len) in lens.iter().enumerate() {
            let mut mine: Vec<&Item> = items.iter().filter(|i| i.part == part).collect();
            mine.sort_by_key(|i| i.range.start);
            let mut at = 0;
            for i in mine {
                assert_eq!(i.range.start, at, "part {part}: a gap or overlap at {at}");
                at = i.range.end;
            }
            assert_eq!(at, len, "part {part} covered to its end");
        }
        assert_eq!(items.iter().filter(|i| i.span.is_some()).count(), 4);
        let shares = shares(items.clone(), 3);
        assert_eq!(shares.len(), 3);
        let loads: Vec<u64> = shares.iter().map(|s| s.iter().map(|i| i.range.end - i.range.start).sum()).collect();
        // 900 alone; 200, 100, 100, 50, 5, 1 each to the least loaded: 200+100 | 100+50+5+1.
        assert_eq!(loads, [900, 300, 256]);
        let mut all: Vec<Item> = shares.concat();
        all.sort_by_key(|i| (i.part, i.range.start));
        let mut want = items;
        want.sort_by_key(|i| (i.part, i.range.start));
        assert_eq!(all, want, "every item once, none split");
        for s in &shares {
            assert!(s.windows(2).all(|w| (w[0].part, w[0].range.start) < (w[1].part, w[1].range.start)), "each thread reads forward");
        }
    }

    #[test]
    fn bad_spans_are_refused() {
        let lens = [100];
        assert!(items(&lens, &StagedCheck { spans: vec![vec![0..50, 40..60]] }).unwrap_err().contains("overlaps"));
        assert!(items(&lens, &StagedCheck { spans: vec![vec![90..101]] }).unwrap_err().contains("runs past"));
        assert!(items(&lens, &StagedCheck { spans: vec![] }).unwrap_err().contains("1 parts with spans for 0"));
    }
}
