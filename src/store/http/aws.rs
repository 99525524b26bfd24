//! Credentials, region, endpoint, CA bundle and addressing style for the
//! `http` and `rdma` backends, resolved as the AWS CLI and SDKs resolve them,
//! through the `aws-config` crate's providers (never a hand-written chain of
//! our own): what was given explicitly first, then the environment, then the
//! selected profile of `~/.aws/config` and `~/.aws/credentials`
//! (`AWS_CONFIG_FILE`, `AWS_SHARED_CREDENTIALS_FILE`; `AWS_PROFILE` or
//! `--profile`), then the variables of the original Python suite, then
//! web identity, container and instance metadata. Every value keeps the
//! source it came from, for the record and for error messages
//! (docs/backends.md, "Credentials, endpoints and TLS").
//!
//! Orders (AWS SDKs and Tools reference guide,
//! <https://docs.aws.amazon.com/sdkref/latest/guide/settings-reference.html>):
//! - endpoint: explicit > `AWS_ENDPOINT_URL_S3` > `AWS_ENDPOINT_URL` > the
//!   profile's `services` section for `s3` > the profile's `endpoint_url` >
//!   `S3_ENDPOINT` > AWS for the region (`AWS_IGNORE_CONFIGURED_ENDPOINT_URLS`
//!   drops the configured ones, as the SDKs do);
//! - region: explicit > `AWS_REGION` > `AWS_DEFAULT_REGION` > the profile's
//!   `region` > instance metadata (only when the endpoint is AWS's) > `us-east-1`;
//! - credentials: explicit keys (with an optional session token) > the chain:
//!   `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` / `AWS_SESSION_TOKEN` >
//!   profile (static keys, `credential_process`, SSO, role assumption) > web
//!   identity > `S3_ACCESS_KEY` / `S3_SECRET_KEY` > container > instance
//!   metadata (short timeouts, so a host without them fails within a second);
//! - CA bundle: explicit > `AWS_CA_BUNDLE` > the profile's `ca_bundle`
//!   (`SSL_CERT_FILE` replaces the system's roots, as rustls-native-certs reads it);
//! - addressing: the profile's `s3 = addressing_style` (`path`, `virtual`,
//!   `auto`), else path-style for a configured endpoint (what S3-compatible
//!   stores serve) and virtual-hosted for AWS.

use std::borrow::Cow;
use std::path::PathBuf;
use std::time::Duration;

use aws_config::meta::credentials::CredentialsProviderChain;
use aws_config::profile::{ProfileFileCredentialsProvider, ProfileSet};
use aws_config::provider_config::ProviderConfig;
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use aws_runtime::env_config::EnvConfigValue;
use aws_types::os_shim_internal::{Env, Fs};
use aws_types::region::Region;

use crate::error::StoreError;
use crate::flag::{ACCESS_KEY, CA_BUNDLE, ENDPOINT, PROFILE, REGION, SECRET_KEY, SESSION_TOKEN};

/// What was given explicitly (flags or a library caller); `None`: not given.
#[derive(Debug, Clone, Default)]
pub struct AwsExplicit {
    /// Endpoint URL.
    pub endpoint: Option<String>,
    /// Signing region.
    pub region: Option<String>,
    /// Access key id.
    pub access_key: Option<String>,
    /// Secret access key.
    pub secret_key: Option<String>,
    /// Session token of temporary credentials (with the two keys).
    pub session_token: Option<String>,
    /// Profile name (else `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// PEM file of extra certificate authorities.
    pub ca_bundle: Option<PathBuf>,
}

/// A PEM bundle of certificate authorities trusted besides the system's.
#[derive(Debug, Clone)]
pub struct CaBundle {
    /// The file.
    pub path: PathBuf,
    /// Where its name came from (`--ca-bundle`, `AWS_CA_BUNDLE`, `profile 'p' ca_bundle`).
    pub source: String,
    /// Its contents (PEM, at least one certificate).
    pub pem: Vec<u8>,
}

/// The resolved settings, each with its source. Secrets are never printed
/// ([`std::fmt::Debug`] and [`AwsSetup::describe`] leave them out).
#[derive(Clone)]
pub struct AwsSetup {
    /// Endpoint URL; `None`: AWS for [`AwsSetup::region`].
    pub endpoint: Option<String>,
    /// Where the endpoint came from.
    pub endpoint_source: String,
    /// Signing region.
    pub region: String,
    /// Where the region came from.
    pub region_source: String,
    /// The credentials as first resolved (the rdma backend's library client and
    /// the metrics token are made from these once).
    pub credentials: Credentials,
    /// Where they came from (`--access-key`, `environment`, `profile 'p'`, ...).
    pub credentials_source: String,
    /// The provider the http backend asks for current credentials on every
    /// request (the SDK caches and refreshes them before they expire).
    pub provider: SharedCredentialsProvider,
    /// Extra certificate authorities, if any were configured.
    pub ca_bundle: Option<CaBundle>,
    /// Path-style (`https://host/bucket/key`) rather than virtual-hosted addressing.
    pub path_style: bool,
    /// Where the addressing style came from.
    pub addressing_source: String,
    /// The selected profile, when one was named (`--profile` or `AWS_PROFILE`).
    pub profile: Option<String>,
    /// What the refreshes did (sets fetched, shortest lifetime, latest
    /// expiry); `None` for static keys.
    pub refreshes: Option<std::sync::Arc<crate::store::credentials::RefreshLog>>,
}

impl std::fmt::Debug for AwsSetup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsSetup")
            .field("endpoint", &self.endpoint)
            .field("endpoint_source", &self.endpoint_source)
            .field("region", &self.region)
            .field("credentials_source", &self.credentials_source)
            .field("path_style", &self.path_style)
            .finish_non_exhaustive()
    }
}

/// Which provider of the chain answered, tagged on the credentials it gave.
#[derive(Debug, Clone)]
struct Source(&'static str);

/// A chain member that tags its credentials with its name ([`Source`]), so the
/// record can say which one answered (the SDK's own chain does not tell).
#[derive(Debug)]
struct Named<P>(&'static str, P);

impl<P: ProvideCredentials> ProvideCredentials for Named<P> {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        future::ProvideCredentials::new(async move {
            let mut c = self.1.provide_credentials().await?;
            c.set_property(Source(self.0));
            Ok(c)
        })
    }
}

/// The original Python suite's variables, below every AWS source.
const SEED_ENDPOINT: &str = "S3_ENDPOINT";
const SEED_ACCESS_KEY: &str = "S3_ACCESS_KEY";
const SEED_SECRET_KEY: &str = "S3_SECRET_KEY";

/// Instance-metadata timeouts: a host that has none answers nothing, and a
/// laptop must not wait the SDK's default seconds for that.
const IMDS_CONNECT: Duration = Duration::from_millis(300);
const IMDS_READ: Duration = Duration::from_millis(700);

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Said once on the terminal when the original suite's variable is used (by
/// the process that started the run, not again by each rank it starts).
fn note_seed(name: &str, what: &str) {
    if std::env::var_os(crate::rank_env::ENV_RANK).is_some() {
        return;
    }
    eprintln!("note: {what} from {name} (the original Python suite's variable; the AWS ones win when set)");
}

impl AwsSetup {
    /// Resolve every setting (reads the environment and the profile files,
    /// and asks the credential chain once, so a missing or broken source
    /// fails here, naming what was tried).
    ///
    /// Errors: [`StoreError::Config`] for a profile file that cannot be parsed,
    /// a named profile that does not exist, a CA bundle that cannot be read or
    /// holds no certificate, an endpoint that is not an http(s) URL, only one
    /// of the two keys, or no credentials from any source.
    pub async fn resolve(explicit: &AwsExplicit) -> Result<AwsSetup, StoreError> {
        let (env, fs) = (Env::real(), Fs::real());
        let named_profile = explicit.profile.clone().or_else(|| env_var("AWS_PROFILE"));
        let profile_files = aws_runtime::env_config::file::EnvConfigFiles::default();
        let profiles = aws_config::profile::load(&fs, &env, &profile_files, explicit.profile.clone().map(Cow::Owned)).await.map_err(|e| {
            StoreError::Config(format!(
                "cannot read the AWS profile files ({} and {}): {}: fix the file, or point AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE elsewhere",
                env_var("AWS_CONFIG_FILE").unwrap_or_else(|| "~/.aws/config".into()),
                env_var("AWS_SHARED_CREDENTIALS_FILE").unwrap_or_else(|| "~/.aws/credentials".into()),
                chain_of(&e)
            ))
        })?;
        if let Some(p) = &named_profile
            && profiles.get_profile(p).is_none()
        {
            return Err(StoreError::Config(format!(
                "profile '{p}' (from {}) is in neither ~/.aws/config nor ~/.aws/credentials (nor AWS_CONFIG_FILE / AWS_SHARED_CREDENTIALS_FILE): add it, or name another",
                if explicit.profile.is_some() { PROFILE.to_string() } else { "AWS_PROFILE".to_string() }
            )));
        }
        let profile_label = format!("profile '{}'", profiles.selected_profile());

        let (endpoint, endpoint_source) = endpoint_of(explicit, &env, &profiles);
        if let Some(e) = &endpoint {
            super::check_endpoint(e).map_err(|e| StoreError::Config(format!("{e} (endpoint from {endpoint_source})")))?;
        }
        let (path_style, addressing_source) = addressing_of(&profiles, &profile_label, endpoint.is_some())?;

        let imds = aws_config::imds::Client::builder().connect_timeout(IMDS_CONNECT).read_timeout(IMDS_READ).max_attempts(1).build();
        let (region, region_source) = region_of(explicit, named_profile.as_deref(), &profile_label, endpoint.is_none(), imds.clone()).await;
        let ca_bundle = ca_bundle_of(explicit, &env, &profiles, &profile_label)?;

        let (provider, credentials, refreshes) = credentials_of(explicit, named_profile.as_deref(), &region, imds).await?;
        let credentials_source = match credentials.get_property::<Source>() {
            Some(Source("profile")) => profile_label.clone(),
            Some(Source("explicit")) => ACCESS_KEY.to_string(),
            Some(Source(s)) => s.to_string(),
            None => "unknown".into(),
        };
        Ok(AwsSetup {
            endpoint,
            endpoint_source,
            region,
            region_source,
            credentials,
            credentials_source,
            provider,
            ca_bundle,
            path_style,
            addressing_source,
            profile: Some(named_profile.unwrap_or_else(|| profiles.selected_profile().to_string())),
            refreshes,
        })
    }

    /// Only what was given explicitly, no environment or files: for a library
    /// caller (and tests) that hand every value over. Path-style addressing.
    ///
    /// Errors: [`StoreError::Config`] when the keys are missing or only one is given.
    pub fn explicit_only(explicit: &AwsExplicit) -> Result<AwsSetup, StoreError> {
        let credentials = static_keys(explicit)?.ok_or_else(|| {
            StoreError::Config("credentials are needed: give the access key and the secret key (or resolve them with AwsSetup::resolve)".into())
        })?;
        let endpoint = explicit.endpoint.clone();
        Ok(AwsSetup {
            endpoint_source: if endpoint.is_some() { format!("{ENDPOINT}") } else { "AWS (no endpoint configured)".into() },
            endpoint,
            region: explicit.region.clone().unwrap_or_else(|| "us-east-1".into()),
            region_source: if explicit.region.is_some() { format!("{REGION}") } else { "default (us-east-1)".into() },
            provider: SharedCredentialsProvider::new(credentials.clone()),
            credentials,
            credentials_source: format!("{ACCESS_KEY}"),
            ca_bundle: None,
            path_style: true,
            addressing_source: "default (path-style)".into(),
            profile: None,
            refreshes: None,
        })
    }

    /// What the record says: each value's source, whether a session token is
    /// in use, when the latest credentials expire, how many sets were fetched
    /// and the shortest lifetime among them (seconds); never a key or token.
    pub fn describe(&self) -> serde_json::Value {
        let rfc3339 = |t: std::time::SystemTime| chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339();
        let (lifetime, latest) = self.refreshes.as_ref().map_or((None, None), |r| r.lifetime_and_expiry());
        serde_json::json!({
            "endpoint_source": self.endpoint_source,
            "region_source": self.region_source,
            "credentials_source": self.credentials_source,
            "session_token": self.credentials.session_token().is_some(),
            "credentials_expire": latest.or(self.credentials.expiry()).map(rfc3339),
            "credentials_fetched": self.refreshes.as_ref().map(|r| r.fetched()),
            "credentials_lifetime_s": lifetime.map(|l| l.as_secs_f64()),
            "ca_bundle": self.ca_bundle.as_ref().map(|c| serde_json::json!({"path": c.path, "source": c.source})),
            "addressing": if self.path_style { "path" } else { "virtual" },
            "addressing_source": self.addressing_source,
            "profile": self.profile,
        })
    }
}

/// The explicit keys as credentials (`None`: neither given).
fn static_keys(explicit: &AwsExplicit) -> Result<Option<Credentials>, StoreError> {
    match (&explicit.access_key, &explicit.secret_key) {
        (Some(ak), Some(sk)) => {
            let mut c = Credentials::new(ak, sk, explicit.session_token.clone(), None, "s3rdma-explicit");
            c.set_property(Source("explicit"));
            Ok(Some(c))
        }
        (None, None) if explicit.session_token.is_some() => {
            Err(StoreError::Config(format!("{SESSION_TOKEN} is given without {ACCESS_KEY} and {SECRET_KEY}: give all three, or none")))
        }
        (None, None) => Ok(None),
        (Some(_), None) => Err(StoreError::Config(format!("{ACCESS_KEY} is given without {SECRET_KEY}: give both, or neither"))),
        (None, Some(_)) => Err(StoreError::Config(format!("{SECRET_KEY} is given without {ACCESS_KEY}: give both, or neither"))),
    }
}

fn endpoint_of(explicit: &AwsExplicit, env: &Env, profiles: &ProfileSet) -> (Option<String>, String) {
    if let Some(e) = explicit.endpoint.as_deref().map(str::trim).filter(|e| !e.is_empty()) {
        return (Some(e.to_string()), format!("{ENDPOINT}"));
    }
    let ignore = env_var("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || profiles.get("ignore_configured_endpoint_urls").is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
    if !ignore
        && let Some((v, _)) = EnvConfigValue::new().env("AWS_ENDPOINT_URL").profile("endpoint_url").service_id("S3").load(env, Some(profiles))
        && !v.trim().is_empty()
    {
        // Which source won, in the loader's own order (its source's Display
        // prints the value where the variable's name belongs, aws-runtime 1.10).
        let label = format!("profile '{}'", profiles.selected_profile());
        let source = if env_var("AWS_ENDPOINT_URL_S3").is_some() {
            "AWS_ENDPOINT_URL_S3".to_string()
        } else if env_var("AWS_ENDPOINT_URL").is_some() {
            "AWS_ENDPOINT_URL".to_string()
        } else if profiles.get("endpoint_url").is_some_and(|g| g.trim() == v.trim()) {
            format!("{label} endpoint_url")
        } else {
            format!("{label} services section, s3 endpoint_url")
        };
        return (Some(v.trim().to_string()), source);
    }
    if let Some(v) = env_var(SEED_ENDPOINT) {
        note_seed(SEED_ENDPOINT, "endpoint");
        return (Some(v.trim().to_string()), SEED_ENDPOINT.into());
    }
    (None, "AWS (no endpoint configured)".into())
}

/// The profile's `s3 = addressing_style = ...` sub-property (AWS CLI S3 configuration).
fn addressing_of(profiles: &ProfileSet, profile_label: &str, custom_endpoint: bool) -> Result<(bool, String), StoreError> {
    // Sub-properties arrive as the indented lines of the `s3` property's value.
    let style = profiles
        .get("s3")
        .and_then(|s3| s3.lines().filter_map(|l| l.split_once('=')).find(|(k, _)| k.trim() == "addressing_style").map(|(_, v)| v.trim().to_ascii_lowercase()));
    match style.as_deref() {
        Some("path") => Ok((true, format!("{profile_label} s3.addressing_style"))),
        Some("virtual") => Ok((false, format!("{profile_label} s3.addressing_style"))),
        Some("auto") | None => Ok(if custom_endpoint {
            (true, "default for a configured endpoint (path-style)".into())
        } else {
            (false, "default for AWS (virtual-hosted)".into())
        }),
        Some(other) => {
            Err(StoreError::Config(format!("{profile_label}: s3.addressing_style = '{other}' is not one of path, virtual, auto: fix it in ~/.aws/config")))
        }
    }
}

async fn region_of(explicit: &AwsExplicit, profile: Option<&str>, profile_label: &str, aws_endpoint: bool, imds: aws_config::imds::Client) -> (String, String) {
    use aws_config::meta::region::ProvideRegion;
    if let Some(r) = explicit.region.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
        return (r.to_string(), format!("{REGION}"));
    }
    for var in ["AWS_REGION", "AWS_DEFAULT_REGION"] {
        if let Some(r) = env_var(var) {
            return (r.trim().to_string(), var.into());
        }
    }
    let mut from_profile = aws_config::profile::ProfileFileRegionProvider::builder();
    if let Some(p) = profile {
        from_profile = from_profile.profile_name(p);
    }
    if let Some(r) = from_profile.build().region().await {
        return (r.to_string(), format!("{profile_label} region"));
    }
    if aws_endpoint && let Some(r) = aws_config::imds::region::ImdsRegionProvider::builder().imds_client(imds).build().region().await {
        return (r.to_string(), "instance metadata".into());
    }
    ("us-east-1".into(), "default (us-east-1)".into())
}

fn ca_bundle_of(explicit: &AwsExplicit, env: &Env, profiles: &ProfileSet, profile_label: &str) -> Result<Option<CaBundle>, StoreError> {
    let (path, source) = if let Some(p) = &explicit.ca_bundle {
        (p.clone(), format!("{CA_BUNDLE}").to_string())
    } else if let Some((v, _)) = EnvConfigValue::new().env("AWS_CA_BUNDLE").profile("ca_bundle").load(env, Some(profiles)) {
        let source = if env_var("AWS_CA_BUNDLE").is_some() { "AWS_CA_BUNDLE".to_string() } else { format!("{profile_label} ca_bundle") };
        (PathBuf::from(v.trim()), source)
    } else {
        return Ok(None);
    };
    let pem = std::fs::read(&path).map_err(|e| StoreError::Config(format!("CA bundle '{}' (from {source}) cannot be read: {e}", path.display())))?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(StoreError::Config(format!("CA bundle '{}' (from {source}) holds no PEM certificate (-----BEGIN CERTIFICATE-----)", path.display())));
    }
    Ok(Some(CaBundle { path, source, pem }))
}

async fn credentials_of(
    explicit: &AwsExplicit,
    profile: Option<&str>,
    region: &str,
    imds: aws_config::imds::Client,
) -> Result<(SharedCredentialsProvider, Credentials, Option<std::sync::Arc<crate::store::credentials::RefreshLog>>), StoreError> {
    if let Some(c) = static_keys(explicit)? {
        return Ok((SharedCredentialsProvider::new(c.clone()), c, None));
    }
    // The SDK's environment provider passes over half a pair silently (and a
    // profile's keys would then be used); the AWS CLI refuses it, and so do we.
    match (env_var("AWS_ACCESS_KEY_ID"), env_var("AWS_SECRET_ACCESS_KEY")) {
        (Some(_), None) => return Err(StoreError::Config("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both, or neither".into())),
        (None, Some(_)) => return Err(StoreError::Config("AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: set both, or neither".into())),
        _ => {}
    }
    let conf = ProviderConfig::default().with_region(Some(Region::new(region.to_string())));
    let mut from_profile = ProfileFileCredentialsProvider::builder().configure(&conf);
    if let Some(p) = profile {
        from_profile = from_profile.profile_name(p);
    }
    let mut chain =
        CredentialsProviderChain::first_try("Environment", Named("environment", aws_config::environment::EnvironmentVariableCredentialsProvider::new()))
            .or_else("Profile", Named("profile", from_profile.build()))
            .or_else(
                "WebIdentityToken",
                Named("web identity token", aws_config::web_identity_token::WebIdentityTokenCredentialsProvider::builder().configure(&conf).build()),
            );
    if let (Some(ak), Some(sk)) = (env_var(SEED_ACCESS_KEY), env_var(SEED_SECRET_KEY)) {
        let mut c = Credentials::new(ak, sk, None, None, "s3rdma-seed");
        c.set_property(Source(SEED_ACCESS_KEY));
        chain = chain.or_else("SeedSuite", c);
    }
    let chain =
        chain.or_else("EcsContainer", Named("container metadata", aws_config::ecs::EcsCredentialsProvider::builder().configure(&conf).build())).or_else(
            "Ec2InstanceMetadata",
            Named("instance metadata", aws_config::imds::credentials::ImdsCredentialsProvider::builder().configure(&conf).imds_client(imds).build()),
        );
    // Refreshed by the credentials' lifetime on every path (src/store/credentials.rs).
    let log = std::sync::Arc::new(crate::store::credentials::RefreshLog::default());
    let provider = SharedCredentialsProvider::new(crate::store::credentials::RefreshByLifetime::new(SharedCredentialsProvider::new(chain), log.clone()));
    match provider.provide_credentials().await {
        Ok(c) => {
            if c.get_property::<Source>().is_some_and(|s| s.0 == SEED_ACCESS_KEY) {
                note_seed("S3_ACCESS_KEY/S3_SECRET_KEY", "credentials");
            }
            if let Some(t) = c.expiry().filter(|t| *t <= std::time::SystemTime::now()) {
                // What botocore refuses too: they would be asked for again before every request.
                return Err(StoreError::Config(format!(
                    "the credentials from {} expired at {} (a credential_process or cache that returns an old Expiration?): refresh them",
                    match c.get_property::<Source>() {
                        Some(Source("profile")) => format!("profile '{}'", profile.unwrap_or("default")),
                        Some(Source(s)) => s.to_string(),
                        None => "the chain".into(),
                    },
                    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339()
                )));
            }
            Ok((provider, c, Some(log)))
        }
        Err(e) => {
            let profile_flag = profile.map_or(String::new(), |p| format!(" {PROFILE} {p}"));
            let profile = profile.map_or("the default profile".to_string(), |p| format!("profile '{p}'"));
            Err(StoreError::Config(match e {
                aws_credential_types::provider::error::CredentialsError::CredentialsNotLoaded(_) => format!(
                    "needs credentials: none in {ACCESS_KEY}/{SECRET_KEY}, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, {profile} of ~/.aws/credentials and ~/.aws/config (keys, credential_process, SSO, role), web identity, S3_ACCESS_KEY/S3_SECRET_KEY, container or instance metadata: set one of them"
                ),
                aws_credential_types::provider::error::CredentialsError::ProviderTimedOut(_) => format!(
                    "needs credentials: the source of {profile} (a credential_process, SSO, metadata) did not answer within {} s; it was stopped: run it by hand to see where it waits",
                    crate::store::credentials::PROVIDER_TIMEOUT.as_secs()
                ),
                // A source that is configured but failed (credential_process exited
                // non-zero, an SSO token expired, STS refused): what it said.
                other => {
                    let why = chain_of(&other);
                    let sso = if why.contains("SSO") { format!(" (aws sso login{} first)", profile_flag) } else { String::new() };
                    format!("needs credentials: {profile} is configured but did not give them{sso}: {why}")
                }
            }))
        }
    }
}

/// An error and every cause under it on one line (the SDK's errors keep the
/// service's message, e.g. STS's refusal of a role, a level or two down).
fn chain_of(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut next = e.source();
    while let Some(c) = next {
        let t = c.to_string();
        if !parts.iter().any(|p| p.contains(&t)) {
            parts.push(t);
        }
        next = c.source();
    }
    parts.join(": ").replace('\n', " ")
}
