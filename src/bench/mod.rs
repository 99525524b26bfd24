//! One folder or file per subcommand over shared bench plumbing (warp's
//! layout); the statistics every bench reports are `crate::stats`.

pub mod barrier;
pub mod ckpt;
pub mod driver;
pub(crate) mod fanout;
pub mod fetch;
pub mod list;
pub mod session;
pub mod tokens;
pub mod train;
pub mod verify;
pub mod weights;

/// Drop repeated list entries, keeping the first of each (a cell or an operation runs once).
pub fn dedup<T: PartialEq + Copy>(v: &mut Vec<T>) {
    let mut seen = Vec::new();
    v.retain(|x| {
        let new = !seen.contains(x);
        seen.push(*x);
        new
    });
}

/// Read `range` of `key` into `buf` (from its start) in `window`-sized ranged
/// GETs, one after another (never two transfers into one buffer at once:
/// cuObject registers by address); returns (bytes, GETs). Every window is of
/// one object version: `version` when given (the one an earlier read, such
/// as a header's, came from), else the first window's.
///
/// Errors: the store's ([`crate::error::StoreError::Changed`] when the
/// object is replaced meanwhile), or a short read naming the key and offset.
pub async fn read_range(
    store: &dyn crate::store::ObjectStore,
    key: &str,
    range: std::ops::Range<u64>,
    buf: &mut crate::mem::Buffer,
    window: u64,
    version: Option<&crate::store::ObjectVersion>,
) -> crate::error::Result<(u64, u64)> {
    let (mut bytes, mut n) = (0, 0);
    let mut pin = version.cloned();
    for w in crate::store::chunks(range.clone(), window) {
        let t = crate::store::read_into_version(store, key, Some(w.clone()), buf, (w.start - range.start) as usize, pin.as_ref()).await?;
        if t.bytes != w.end - w.start {
            return Err(crate::error::Error::Runtime(format!("short read of '{key}' at {}: {} of {} bytes", w.start, t.bytes, w.end - w.start)));
        }
        pin = pin.or(t.version);
        bytes += t.bytes;
        n += 1;
    }
    Ok((bytes, n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedup_keeps_the_first_of_each() {
        let mut v = vec![2, 1, 2, 3, 1];
        dedup(&mut v);
        assert_eq!(v, [2, 1, 3]);
    }
}
