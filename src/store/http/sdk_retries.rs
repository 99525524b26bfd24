//! The SDK paths' retries (PUT, multipart, HEAD, LIST, DELETE and
//! `--http-get sdk`), made to match the direct GET path (a server answering
//! `503 SlowDown` with `Retry-After`; tests/cli/faults.rs,
//! `sdk_retries_wait_for_retry_after_and_are_counted`): a retry waits at least
//! the server's `Retry-After` (the SDK's own classifiers ignore it and
//! retried a 503 SlowDown after 0.63 s where the server asked for 2 s),
//! and every retry is counted by the cause of the attempt before it.
//!
//! Written here because aws-sdk-s3 exposes the hooks (a retry classifier, an
//! interceptor) but no counters and no Retry-After handling of its own.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef, InterceptorContext};
use aws_smithy_runtime_api::client::retries::RequestAttempts;
use aws_smithy_runtime_api::client::retries::classifiers::{ClassifyRetry, RetryAction, RetryClassifierPriority, RetryReason};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};

use super::direct::{MAX_RETRY_AFTER, parse_retry_after};

/// Causes a retry is counted under, in the order of [`SdkRetries::counters`].
const CAUSES: [&str; 4] = ["sdk_retries_5xx", "sdk_retries_timeout", "sdk_retries_io", "sdk_retries_other"];

/// Retries the SDK made since the store was opened, by the cause of the
/// attempt that failed before each (5xx answer, timeout, connection error, other).
#[derive(Debug, Default)]
pub struct SdkRetries([AtomicU64; 4]);

impl SdkRetries {
    /// `(counter name, retries)` for every cause, zeros included.
    pub fn counters(&self) -> [(&'static str, u64); 4] {
        std::array::from_fn(|i| (CAUSES[i], self.0[i].load(Ordering::Relaxed)))
    }
}

/// The cause of the last failed attempt of one operation, kept in its config bag.
#[derive(Debug, Clone, Copy)]
struct LastCause(usize);

impl Storable for LastCause {
    type Storer = StoreReplace<Self>;
}

/// Counts retries into [`SdkRetries`]: after each attempt it notes why the
/// attempt failed; before an attempt that is not the first it counts one
/// retry under that cause.
#[derive(Debug)]
pub struct CountRetries(pub Arc<SdkRetries>);

impl Intercept for CountRetries {
    fn name(&self) -> &'static str {
        "s3rdma retry counter"
    }

    fn read_before_attempt(&self, _ctx: &BeforeTransmitInterceptorContextRef<'_>, _rc: &RuntimeComponents, cfg: &mut ConfigBag) -> Result<(), BoxError> {
        if cfg.load::<RequestAttempts>().is_some_and(|a| a.attempts() > 1) {
            let cause = cfg.load::<LastCause>().map_or(3, |c| c.0);
            self.0.0[cause].fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    fn read_after_attempt(&self, ctx: &FinalizerInterceptorContextRef<'_>, _rc: &RuntimeComponents, cfg: &mut ConfigBag) -> Result<(), BoxError> {
        let status = ctx.response().map(|r| r.status().as_u16());
        let cause = match ctx.output_or_error() {
            Some(Ok(_)) | None => return Ok(()),
            Some(Err(_)) if status.is_some_and(|s| s >= 500) => 0,
            Some(Err(e)) if e.is_timeout_error() => 1,
            Some(Err(e)) if e.is_connector_error() => 2,
            Some(Err(_)) => 3,
        };
        cfg.interceptor_state().store_put(LastCause(cause));
        Ok(())
    }
}

/// Refines the SDK's verdict on a retryable failure: never again after a
/// certificate the client does not trust; for an answer that carries
/// `Retry-After`, wait that long plus up to 10 % (jitter), or give up when
/// the server asks for more than [`MAX_RETRY_AFTER`] (the run fails with the
/// server's answer instead of stalling). Runs after the SDK's classifiers.
#[derive(Debug)]
pub struct HonourRetryAfter;

impl ClassifyRetry for HonourRetryAfter {
    fn classify_retry(&self, _ctx: &InterceptorContext) -> RetryAction {
        RetryAction::NoActionIndicated
    }

    fn classify_retry_v2(&self, ctx: &InterceptorContext, previous: &RetryAction) -> RetryAction {
        let RetryAction::RetryIndicated(RetryReason::RetryableError { kind, .. }) = previous else {
            return RetryAction::NoActionIndicated;
        };
        // A certificate this client does not trust stays untrusted: no retry.
        if let Some(Err(e)) = ctx.output_or_error()
            && let Some(c) = e.as_connector_error()
            && super::tls::certificate_problem(c).is_some()
        {
            return RetryAction::RetryForbidden;
        }
        match ctx.response().and_then(|r| r.headers().get("retry-after")).and_then(parse_retry_after) {
            Some(wait) if wait <= MAX_RETRY_AFTER => RetryAction::retryable_error_with_explicit_delay(*kind, wait.mul_f64(1.0 + rand::random::<f64>() / 10.0)),
            Some(_) => RetryAction::RetryForbidden,
            None => RetryAction::NoActionIndicated,
        }
    }

    fn name(&self) -> &'static str {
        "s3rdma Retry-After"
    }

    fn priority(&self) -> RetryClassifierPriority {
        RetryClassifierPriority::run_after(RetryClassifierPriority::transient_error_classifier())
    }
}
