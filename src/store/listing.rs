//! Bounds on one listing ([`ListBound`]): every backend's `list` stops with
//! [`StoreError::ListTooLong`] at a cap on keys and on requests, so a server
//! that keeps paging new keys cannot make a run list forever or grow without
//! bound (tests/cli/data.rs, `a_listing_that_never_ends_stops_at_its_bound`).

use crate::error::StoreError;

/// Keys one listing may hold unless configured otherwise (`StoreConfig::list_max_keys`).
/// A million keys of ~60 bytes take about 150 MB with their sizes; the
/// datasets, checkpoints and rank markers this tool lists hold far fewer.
pub const DEFAULT_LIST_MAX_KEYS: u64 = 1_000_000;

/// The request and key counts of one listing, against its bounds.
#[derive(Debug)]
pub struct ListBound<'a> {
    prefix: &'a str,
    location: String,
    max_keys: u64,
    requests: u64,
}

impl<'a> ListBound<'a> {
    /// Bounds for listing `prefix` at `location`: at most `max_keys` keys,
    /// and at most [`ListBound::max_requests`] requests.
    pub fn new(prefix: &'a str, location: String, max_keys: u64) -> Self {
        ListBound { prefix, location, max_keys: max_keys.max(1), requests: 0 }
    }

    /// Requests a listing of `max_keys` may take: one per 100 keys, plus 10.
    /// S3 pages hold up to 1,000 keys (ListObjectsV2, `max-keys`), so any
    /// server that pages at least 100 at a time fits; one that trickles a
    /// few new keys per page is stopped long before the key bound.
    pub fn max_requests(&self) -> u64 {
        self.max_keys / 100 + 10
    }

    /// Count one more request, before it is sent, with `keys` listed so far.
    ///
    /// Errors: [`StoreError::ListTooLong`] when it would pass the request bound.
    pub fn request(&mut self, keys: usize) -> Result<(), StoreError> {
        if self.requests >= self.max_requests() {
            return Err(self.too_long(keys));
        }
        self.requests += 1;
        Ok(())
    }

    /// Check the keys listed so far.
    ///
    /// Errors: [`StoreError::ListTooLong`] when they pass the key bound.
    pub fn keys(&self, keys: usize) -> Result<(), StoreError> {
        if keys as u64 > self.max_keys { Err(self.too_long(keys)) } else { Ok(()) }
    }

    fn too_long(&self, keys: usize) -> StoreError {
        StoreError::ListTooLong {
            prefix: self.prefix.to_string(),
            location: self.location.clone(),
            requests: self.requests,
            keys: keys as u64,
            max_keys: self.max_keys,
            max_requests: self.max_requests(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_keys_stop_at_their_bounds() {
        let mut b = ListBound::new("p/", "http://h".into(), 1000);
        assert_eq!(b.max_requests(), 20);
        for _ in 0..20 {
            b.request(0).unwrap();
        }
        let e = b.request(7).unwrap_err();
        let StoreError::ListTooLong { requests, keys, max_keys, max_requests, .. } = &e else { panic!("{e}") };
        assert_eq!((*requests, *keys, *max_keys, *max_requests), (20, 7, 1000, 20));
        let m = e.to_string();
        assert!(
            m.starts_with(
                "LIST 'p/' at http://h stopped after 20 request(s) and 7 key(s): a listing may hold 1000 keys in 20 requests; the server kept paging"
            ),
            "{m}"
        );
        let fresh = ListBound::new("p/", "http://h".into(), 1000);
        assert!(fresh.keys(1001).unwrap_err().to_string().ends_with("the prefix holds more keys than that"));
        assert!(b.keys(1000).is_ok());
        assert!(matches!(b.keys(1001), Err(StoreError::ListTooLong { keys: 1001, .. })));
    }
}
