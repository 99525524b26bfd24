//! When credentials that expire are asked for again ([`refresh_at`]), and a
//! provider that follows that rule for every request path
//! ([`RefreshByLifetime`]): the SDK's identity cache refreshes 10 s before
//! expiry, so credentials that live under that (a `credential_process`
//! handing out 2 s credentials) were fetched again for every request.
//!
//! Own code because the SDK's cache takes one fixed margin for every
//! lifetime; this wraps the provider the SDK and the direct GET path ask.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};

/// Credentials are refreshed when they expire within this (the AWS SDKs' lazy
/// cache refreshes within 10 s of expiry; a GET can take longer), or within a
/// quarter of their lifetime when that is shorter ([`refresh_at`]).
pub const REFRESH_AHEAD: Duration = Duration::from_secs(60);
/// Shortest time between two refreshes, whatever the credentials' lifetime.
const MIN_REFRESH_GAP: Duration = Duration::from_secs(1);

/// When credentials obtained at `obtained` that expire at `expiry` are asked
/// for again: [`REFRESH_AHEAD`] before they expire, or a quarter of their
/// lifetime before when that is shorter, and never sooner than 1 s after
/// they were obtained (nor later than `expiry`).
///
/// So each set of credentials is refreshed once, at three quarters of its
/// lifetime or later: a `credential_process` whose credentials live 30 s runs
/// about every 22 s, never once per request (which a fixed 60 s margin gave:
/// credentials that live under a minute were always inside it).
pub fn refresh_at(obtained: SystemTime, expiry: SystemTime) -> SystemTime {
    let lifetime = expiry.duration_since(obtained).unwrap_or(Duration::ZERO);
    let ahead = REFRESH_AHEAD.min(lifetime / 4);
    (expiry - ahead).max(obtained + MIN_REFRESH_GAP).min(expiry)
}

/// Say once per process that the credentials' source hands out credentials
/// living under [`REFRESH_AHEAD`], and how often they are asked for.
pub fn note_lifetime(fresh: &Credentials, obtained: SystemTime) {
    static SAID: AtomicBool = AtomicBool::new(false);
    let Some(lifetime) = fresh.expiry().and_then(|t| t.duration_since(obtained).ok()) else { return };
    if lifetime < REFRESH_AHEAD && !SAID.swap(true, Ordering::Relaxed) {
        let every = refresh_at(obtained, obtained + lifetime).duration_since(obtained).unwrap_or_default();
        eprintln!(
            "warning: the credentials' source hands out credentials that expire {:.0} s after they are issued (under the {} s this tool refreshes ahead): they are asked for again every {:.1} s",
            lifetime.as_secs_f64(),
            REFRESH_AHEAD.as_secs(),
            every.as_secs_f64()
        );
    }
}

/// A provider that hands out the credentials it holds until [`refresh_at`]
/// comes, and only then asks `inner` again (one refresh at a time).
#[derive(Debug)]
pub struct RefreshByLifetime {
    inner: SharedCredentialsProvider,
    held: tokio::sync::Mutex<Option<(Credentials, SystemTime)>>,
}

impl RefreshByLifetime {
    /// Wrap `inner`; nothing is asked until the first request.
    pub fn new(inner: SharedCredentialsProvider) -> Self {
        RefreshByLifetime { inner, held: tokio::sync::Mutex::new(None) }
    }
}

impl ProvideCredentials for RefreshByLifetime {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let mut held = self.held.lock().await;
            if let Some((c, obtained)) = held.as_ref()
                && c.expiry().is_none_or(|t| SystemTime::now() < refresh_at(*obtained, t))
            {
                return Ok(c.clone());
            }
            let fresh = self.inner.provide_credentials().await?;
            let obtained = SystemTime::now();
            note_lifetime(&fresh, obtained);
            *held = Some((fresh.clone(), obtained));
            Ok(fresh)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU32;

    /// The refresh schedule over simulated time: each set of credentials is
    /// asked for again once, at three quarters of its lifetime or later, never
    /// sooner than 1 s after it came, never after it expired.
    #[test]
    fn refreshes_follow_the_credentials_lifetime() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let s = Duration::from_secs;
        // Runs of a provider whose credentials live `life`, over `span`: set-up, then one per refresh.
        let runs = |life: Duration, span: Duration| {
            let (mut obtained, mut n) = (t0, 1);
            loop {
                let next = refresh_at(obtained, obtained + life);
                if next > t0 + span {
                    return n;
                }
                (obtained, n) = (next, n + 1);
            }
        };
        assert_eq!(runs(s(30), s(30)), 2, "30 s credentials over 30 s: set-up and one refresh at 22.5 s");
        assert_eq!(runs(s(60), s(180)), 5, "60 s credentials over 180 s: every 45 s");
        assert_eq!(runs(s(3600), s(3600)), 2, "an hour's credentials: refreshed a minute before they expire");
        assert_eq!(refresh_at(t0, t0 + s(3600)), t0 + s(3540));
        assert_eq!(refresh_at(t0, t0 + s(30)), t0 + Duration::from_millis(22_500));
        assert_eq!(refresh_at(t0, t0 + Duration::from_millis(400)), t0 + Duration::from_millis(400), "never after expiry");
        assert_eq!(refresh_at(t0, t0 + s(2)), t0 + s(1) + Duration::from_millis(500));
        assert_eq!(refresh_at(t0, t0 - s(5)), t0 - s(5), "already expired: at once");
    }

    #[derive(Debug)]
    struct Counting(Arc<AtomicU32>, Duration);

    impl ProvideCredentials for Counting {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            future::ProvideCredentials::ready(Ok(Credentials::new(format!("K{n}"), "s", None, Some(SystemTime::now() + self.1), "t")))
        }
    }

    /// Credentials that live 2 s (under the SDK's 10 s margin, which asked for
    /// them on every request): 1,000 requests in a row are answered from the
    /// one set; after 1.6 s (past three quarters of the lifetime) a new one.
    #[tokio::test]
    async fn short_lived_credentials_are_asked_for_once_per_lifetime() {
        let calls = Arc::new(AtomicU32::new(0));
        let p = RefreshByLifetime::new(SharedCredentialsProvider::new(Counting(calls.clone(), Duration::from_secs(2))));
        for _ in 0..1000 {
            assert_eq!(p.provide_credentials().await.unwrap().access_key_id(), "K0");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        tokio::time::sleep(Duration::from_millis(1600)).await;
        assert_eq!(p.provide_credentials().await.unwrap().access_key_id(), "K1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
    }
}
