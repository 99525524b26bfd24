//! TLS for the http backend: a client that trusts a CA bundle besides the
//! system's roots, and certificate failures told apart from broken
//! connections (a certificate the client does not trust is a configuration
//! error: retrying it cannot help).

use aws_smithy_http_client::tls::{self, TlsContext, TrustStore, rustls_provider::CryptoMode};
use aws_smithy_runtime_api::client::http::SharedHttpClient;

use crate::error::StoreError;
use crate::flag::CA_BUNDLE;
use crate::store::http::aws::CaBundle;

/// The SDK's own HTTPS client (rustls on aws-lc), trusting `ca` as well as the
/// system's roots (which `SSL_CERT_FILE` replaces, as rustls-native-certs reads it).
///
/// Errors: [`StoreError::Config`] when the bundle's certificates cannot be loaded.
pub(super) fn client_trusting(ca: &CaBundle) -> Result<SharedHttpClient, StoreError> {
    let ctx = TlsContext::builder()
        .with_trust_store(TrustStore::default().with_pem_certificate(ca.pem.clone()))
        .build()
        .map_err(|e| StoreError::Config(format!("CA bundle '{}' (from {}) cannot be used: {e}", ca.path.display(), ca.source)))?;
    Ok(aws_smithy_http_client::Builder::new().tls_provider(tls::Provider::Rustls(CryptoMode::AwsLc)).tls_context(ctx).build_https())
}

/// The certificate problem somewhere in `err`'s chain of causes, in words
/// ("signed by an authority this client does not trust", "issued for another
/// name", "expired", ...), or `None` when the failure is not about the server's
/// certificate. rustls reports it as `rustls::Error::InvalidCertificate`,
/// which hyper-rustls wraps in an `std::io::Error` (whose `source()` skips the
/// wrapped error, so each `io::Error` is opened with `get_ref`).
pub(super) fn certificate_problem(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = next {
        if let Some(r) = e.downcast_ref::<rustls::Error>() {
            return describe(r);
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && let Some(found) = certificate_problem(inner)
        {
            return Some(found);
        }
        next = e.source();
    }
    None
}

fn describe(e: &rustls::Error) -> Option<String> {
    use rustls::CertificateError as C;
    let rustls::Error::InvalidCertificate(c) = e else { return None };
    Some(match c {
        C::UnknownIssuer => UNKNOWN_ISSUER.into(),
        C::NotValidForName | C::NotValidForNameContext { .. } => NAME.into(),
        C::Expired | C::ExpiredContext { .. } => "its certificate has expired".into(),
        C::NotValidYet | C::NotValidYetContext { .. } => "its certificate is not valid yet".into(),
        C::Revoked => "its certificate is revoked".into(),
        other => format!("its certificate is refused ({other:?})"),
    })
}

const UNKNOWN_ISSUER: &str = "its certificate is signed by an authority this client does not trust (a private CA?)";
const NAME: &str = "its certificate is issued for another name than the endpoint's host";

/// The configuration error for a certificate `problem` at `location`, naming
/// the fix for that problem and the CA bundle in use (`ca`), if any.
pub(super) fn certificate_error(location: &str, problem: &str, ca: Option<&CaBundle>) -> StoreError {
    let trusting = match ca {
        Some(c) => format!(" (this client trusts the system's roots and {} from {})", c.path.display(), c.source),
        None => String::new(),
    };
    let fix = if problem == UNKNOWN_ISSUER {
        match ca {
            Some(c) => format!(
                "the CA that signed it must be in the bundle in use, {} (from {}): add it there, or name a bundle holding it with {CA_BUNDLE} FILE.pem (which wins over AWS_CA_BUNDLE and the profile's ca_bundle)",
                c.path.display(),
                c.source
            ),
            None => format!(
                "trust its CA with {CA_BUNDLE} FILE.pem, AWS_CA_BUNDLE=FILE.pem or ca_bundle in the profile (SSL_CERT_FILE replaces the system's roots instead); or use http:// if the server speaks it"
            ),
        }
    } else if problem == NAME {
        "connect by a name the certificate holds (openssl s_client -connect HOST:PORT shows its names), or have it reissued with this host in its subjectAltName".into()
    } else if problem.contains("expired") || problem.contains("not valid yet") {
        "have the server's certificate renewed; if it should be valid, check the clocks of this host and the server (NTP)".into()
    } else {
        "have the server present a certificate this client can verify".into()
    };
    StoreError::Config(format!("TLS to {location} failed: {problem}{trusting}. Fix: {fix}"))
}
