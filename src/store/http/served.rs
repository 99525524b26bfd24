//! What a ranged GET was answered with, checked against what was asked:
//! the `Content-Range` (first byte, last byte and object size, RFC 9110
//! §14.4) and the object version (its ETag, the same on every part of one
//! read). Bytes that are not the requested bytes are never counted: a
//! server or proxy that serves another range, or a part of another version
//! of the object, ends the read with an error naming the key, what was
//! asked and what came.
//!
//! A server that also lies in `Content-Range` (the header names the range
//! asked, the bytes are from elsewhere) cannot be caught here; only a digest
//! can (the checkpoint manifest's per-chunk checksums).

use std::ops::RangeInclusive;

use crate::error::StoreError;

/// `bytes <first>-<last>/<size>` as (first..=last, size); `None` for any
/// other form (`bytes */<size>`, an unknown size `/*`, garbage) or a range
/// that does not lie inside the size.
pub(crate) fn content_range(h: &str) -> Option<(RangeInclusive<u64>, u64)> {
    let (range, size) = h.trim().strip_prefix("bytes ")?.split_once('/')?;
    let size: u64 = size.trim().parse().ok()?;
    let (first, last) = range.split_once('-')?;
    let (first, last): (u64, u64) = (first.trim().parse().ok()?, last.trim().parse().ok()?);
    (first <= last && last < size).then_some((first..=last, size))
}

/// One part's answer, as the checks need it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Served<'a> {
    /// The `Content-Range` header, if any.
    pub content_range: Option<&'a str>,
    /// The `ETag` header, if any.
    pub etag: Option<&'a str>,
}

/// The object version the first part of a read was served from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Version {
    /// Object size from the first part's `Content-Range`.
    pub size: u64,
    /// Its ETag, when the server sent one.
    pub etag: Option<String>,
}

impl Version {
    /// This version as reads report it ([`super::super::Transfer::version`]).
    pub(crate) fn served(&self) -> super::super::ObjectVersion {
        super::super::ObjectVersion { tag: self.etag.as_deref().map(Into::into), size: self.size }
    }
}

/// Check the first part of a read: asked `first..=last` (`last` may lie past
/// the end of an object of unknown size; the server ends the range at its
/// last byte). Returns the object's size and ETag for the later parts.
///
/// Errors: [`StoreError::WrongRange`] when the answer's range starts
/// elsewhere or ends other than where the object or the request ends.
pub(crate) fn check_first(key: &str, location: &str, first: u64, last: u64, s: Served<'_>) -> Result<Version, StoreError> {
    let wrong = |served: String| StoreError::WrongRange { key: key.into(), location: location.into(), asked: format!("bytes {first}-{last}"), served };
    let cr = s.content_range.unwrap_or_default();
    let (range, size) = content_range(cr).ok_or_else(|| wrong(format!("Content-Range '{cr}'")))?;
    if *range.start() != first || *range.end() != last.min(size - 1) {
        return Err(wrong(format!("Content-Range '{cr}'")));
    }
    Ok(Version { size, etag: s.etag.map(str::to_string) })
}

/// Check a later part of the same read, asked `first..=last` (inside the
/// object): the same range, the same object size, the same ETag.
///
/// Errors: [`StoreError::WrongRange`] for another range; [`StoreError::Changed`]
/// for another size or ETag (the object was replaced mid-read).
pub(crate) fn check_part(key: &str, location: &str, first: u64, last: u64, v: &Version, s: Served<'_>) -> Result<(), StoreError> {
    let cr = s.content_range.unwrap_or_default();
    let wrong = || StoreError::WrongRange {
        key: key.into(),
        location: location.into(),
        asked: format!("bytes {first}-{last}"),
        served: format!("Content-Range '{cr}'"),
    };
    let (range, size) = content_range(cr).ok_or_else(wrong)?;
    if size != v.size {
        let detail = format!("its size went from {} to {size} bytes between two ranged GETs", v.size);
        return Err(StoreError::Changed { key: key.into(), location: location.into(), detail });
    }
    if range != (first..=last) {
        return Err(wrong());
    }
    if let (Some(a), Some(b)) = (v.etag.as_deref(), s.etag)
        && a != b
    {
        let detail = format!("ETag {a} -> {b} between two ranged GETs");
        return Err(StoreError::Changed { key: key.into(), location: location.into(), detail });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const AT: &str = "http://s3";

    fn served<'a>(cr: &'a str, etag: &'a str) -> Served<'a> {
        Served { content_range: Some(cr), etag: Some(etag) }
    }

    #[test]
    fn content_ranges_parse_only_when_whole_and_inside_the_size() {
        assert_eq!(content_range("bytes 0-99/12345"), Some((0..=99, 12345)));
        assert_eq!(content_range(" bytes 5-5/6 "), Some((5..=5, 6)));
        for bad in ["bytes */0", "bytes 0-99/*", "bytes 10-5/100", "bytes 0-100/100", "items 0-1/2", "", "bytes 0-/5"] {
            assert_eq!(content_range(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_first_part_must_start_where_asked_and_end_at_the_request_or_the_object() {
        let v = check_first("k", AT, 0, 8_388_607, served("bytes 0-999/1000", "\"e1\"")).unwrap();
        assert_eq!(v, Version { size: 1000, etag: Some("\"e1\"".into()) });
        assert_eq!(check_first("k", AT, 100, 199, served("bytes 100-199/1000", "x")).unwrap().size, 1000);
        // Another range of the object, said honestly: refused, naming both.
        let e = check_first("k", AT, 0, 99, served("bytes 4096-4195/1000000", "x")).unwrap_err().to_string();
        assert!(e.contains("'k'") && e.contains("bytes 0-99") && e.contains("bytes 4096-4195/1000000"), "{e}");
        // Shorter than asked although the object goes on.
        assert!(matches!(check_first("k", AT, 0, 99, served("bytes 0-49/1000", "x")), Err(StoreError::WrongRange { .. })));
        // No Content-Range at all.
        assert!(matches!(check_first("k", AT, 0, 99, Served { content_range: None, etag: None }), Err(StoreError::WrongRange { .. })));
    }

    #[test]
    fn later_parts_must_match_range_size_and_etag() {
        let v = Version { size: 1000, etag: Some("\"e1\"".into()) };
        check_part("k", AT, 100, 199, &v, served("bytes 100-199/1000", "\"e1\"")).unwrap();
        check_part("k", AT, 100, 199, &v, Served { content_range: Some("bytes 100-199/1000"), etag: None }).unwrap();
        assert!(matches!(check_part("k", AT, 100, 199, &v, served("bytes 200-299/1000", "\"e1\"")), Err(StoreError::WrongRange { .. })));
        let e = check_part("k", AT, 100, 199, &v, served("bytes 100-199/1000", "\"e2\"")).unwrap_err();
        assert!(matches!(e, StoreError::Changed { .. }) && e.to_string().contains("ETag \"e1\" -> \"e2\""), "{e}");
        let e = check_part("k", AT, 100, 199, &v, served("bytes 100-199/2000", "\"e1\"")).unwrap_err();
        assert!(e.to_string().contains("from 1000 to 2000 bytes"), "{e}");
    }
}
