//! When credentials that expire are asked for again ([`refresh_at`]), and a
//! provider that follows that rule for every request path
//! ([`RefreshByLifetime`]): the SDK's identity cache refreshes 10 s before
//! expiry, so credentials that live under that (a `credential_process`
//! handing out 2 s credentials) were fetched again for every request.
//!
//! Own code because the SDK's cache takes one fixed margin for every
//! lifetime; this wraps the provider the SDK and the direct GET path ask.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_credential_types::provider::error::CredentialsError;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};

/// Credentials are refreshed when they expire within this (the AWS SDKs' lazy
/// cache refreshes within 10 s of expiry; a GET can take longer), or within a
/// quarter of their lifetime when that is shorter ([`refresh_at`]).
pub const REFRESH_AHEAD: Duration = Duration::from_secs(60);
/// Shortest time between two refreshes, whatever the credentials' lifetime.
const MIN_REFRESH_GAP: Duration = Duration::from_secs(1);
/// Longest the credentials' source may take to answer (a `credential_process`
/// that hangs, metadata that never replies): then the request fails with the
/// SDK's "provider timed out" error and the source's shell is stopped. The SDK
/// itself waits for a `credential_process` forever.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(60);

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

/// The warning said when credentials live under [`REFRESH_AHEAD`] (set once
/// per process by [`note_lifetime`]); records carry it in
/// `environment.warnings`.
static LIFETIME_WARNING: OnceLock<String> = OnceLock::new();

/// Say once per process (on stderr, as a `warning:` line) that the
/// credentials' source hands out credentials living under
/// [`REFRESH_AHEAD`], and how often they are asked for; [`lifetime_warning`]
/// gives it back for the record.
pub fn note_lifetime(fresh: &Credentials, obtained: SystemTime) {
    static SAID: AtomicBool = AtomicBool::new(false);
    let Some(lifetime) = fresh.expiry().and_then(|t| t.duration_since(obtained).ok()) else { return };
    if lifetime < REFRESH_AHEAD && !SAID.swap(true, Ordering::Relaxed) {
        let every = refresh_at(obtained, obtained + lifetime).duration_since(obtained).unwrap_or_default();
        let warning = format!(
            "the credentials' source hands out credentials that expire {:.0} s after they are issued (under the {} s this tool refreshes ahead): they are asked for again every {:.1} s",
            lifetime.as_secs_f64(),
            REFRESH_AHEAD.as_secs(),
            every.as_secs_f64()
        );
        eprintln!("warning: {warning}");
        let _ = LIFETIME_WARNING.set(warning);
    }
}

/// The short-lifetime warning, once [`note_lifetime`] said it.
pub fn lifetime_warning() -> Option<String> {
    LIFETIME_WARNING.get().cloned()
}

/// What the refreshes did over a run, for the record: how many sets of
/// credentials were fetched, the shortest lifetime among them and when the
/// latest set expires.
#[derive(Debug, Default)]
pub struct RefreshLog {
    fetched: AtomicU32,
    seen: Mutex<(Option<Duration>, Option<SystemTime>)>,
}

impl RefreshLog {
    fn note(&self, fresh: &Credentials, obtained: SystemTime) {
        self.fetched.fetch_add(1, Ordering::Relaxed);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(expiry) = fresh.expiry() {
            let life = expiry.duration_since(obtained).unwrap_or_default();
            seen.0 = Some(seen.0.map_or(life, |l| l.min(life)));
            seen.1 = Some(expiry);
        }
    }

    /// Sets of credentials fetched from the source so far (1 after set-up).
    pub fn fetched(&self) -> u32 {
        self.fetched.load(Ordering::Relaxed)
    }

    /// The shortest lifetime of a set (expiry less the time it came), and the
    /// latest set's expiry; `None` for credentials that do not expire.
    pub fn lifetime_and_expiry(&self) -> (Option<Duration>, Option<SystemTime>) {
        *self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A provider that hands out the credentials it holds until [`refresh_at`]
/// comes, and only then asks `inner` again (one refresh at a time).
/// A source that takes longer than [`PROVIDER_TIMEOUT`] fails the request
/// (see there); each set fetched is noted in the [`RefreshLog`].
#[derive(Debug)]
pub struct RefreshByLifetime {
    inner: SharedCredentialsProvider,
    held: tokio::sync::Mutex<Option<(Credentials, SystemTime)>>,
    log: Arc<RefreshLog>,
    timeout: Duration,
    /// Run when the source times out (stops the SDK's credential_process shells).
    on_timeout: fn() -> usize,
}

impl RefreshByLifetime {
    /// Wrap `inner`; nothing is asked until the first request. `log` records
    /// every set fetched.
    pub fn new(inner: SharedCredentialsProvider, log: Arc<RefreshLog>) -> Self {
        RefreshByLifetime { inner, held: tokio::sync::Mutex::new(None), log, timeout: PROVIDER_TIMEOUT, on_timeout: crate::children::stop_shells }
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
            let fresh = match tokio::time::timeout(self.timeout, self.inner.provide_credentials()).await {
                Ok(answer) => answer?,
                Err(_) => {
                    // The SDK does not stop a credential_process it gave up on.
                    (self.on_timeout)();
                    return Err(CredentialsError::provider_timed_out(self.timeout));
                }
            };
            let obtained = SystemTime::now();
            note_lifetime(&fresh, obtained);
            self.log.note(&fresh, obtained);
            *held = Some((fresh.clone(), obtained));
            Ok(fresh)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let log = Arc::new(RefreshLog::default());
        let p = RefreshByLifetime::new(SharedCredentialsProvider::new(Counting(calls.clone(), Duration::from_secs(2))), log.clone());
        for _ in 0..1000 {
            assert_eq!(p.provide_credentials().await.unwrap().access_key_id(), "K0");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        let (_, first_expiry) = log.lifetime_and_expiry();
        tokio::time::sleep(Duration::from_millis(1600)).await;
        assert_eq!(p.provide_credentials().await.unwrap().access_key_id(), "K1");
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        // The log follows: two sets, each living about 2 s, the latest expiring later.
        assert_eq!(log.fetched(), 2);
        let (life, expiry) = log.lifetime_and_expiry();
        assert!(life.is_some_and(|l| l > Duration::from_millis(1900) && l <= Duration::from_secs(2)), "{life:?}");
        assert!(expiry > first_expiry, "{expiry:?} after {first_expiry:?}");
    }

    /// A source that never answers.
    #[derive(Debug)]
    struct Hung;

    impl ProvideCredentials for Hung {
        fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
        where
            Self: 'a,
        {
            future::ProvideCredentials::new(std::future::pending())
        }
    }

    /// A source that hangs fails the request at the timeout, with the SDK's
    /// own "timed out" error, instead of holding every request forever.
    #[tokio::test]
    async fn a_source_that_hangs_fails_at_the_timeout() {
        let mut p = RefreshByLifetime::new(SharedCredentialsProvider::new(Hung), Arc::default());
        p.timeout = Duration::from_millis(200);
        // Not the real clean-up: it would stop other tests' shells.
        p.on_timeout = || 0;
        let t0 = std::time::Instant::now();
        let e = p.provide_credentials().await.unwrap_err();
        assert!(matches!(e, CredentialsError::ProviderTimedOut(_)), "{e:?}");
        assert!(t0.elapsed() >= Duration::from_millis(200) && t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }
}
