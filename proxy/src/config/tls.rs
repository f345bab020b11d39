//! The TLS of an `https://` upstream: the system's roots (`SSL_CERT_FILE` and
//! `SSL_CERT_DIR` replace them, as in OpenSSL), an authority of the operator's besides, and a
//! client certificate where the upstream asks for one.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use http::Uri;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

use super::ConfigError;

/// What the file says of the upstream's TLS.
#[derive(Debug, Clone, Default)]
pub struct UpstreamTls {
    /// More authorities to trust, in PEM, beside the system's.
    pub ca_file: Option<PathBuf>,
    /// The client's certificate chain and its key, in PEM.
    pub client_identity: Option<(PathBuf, PathBuf)>,
}

impl UpstreamTls {
    pub fn is_set(&self) -> bool {
        self.ca_file.is_some() || self.client_identity.is_some()
    }
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let read = CertificateDer::pem_file_iter(path)
        .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>());
    match read {
        Ok(certificates) if certificates.is_empty() => {
            Err(format!("{}: no PEM certificate in it", path.display()))
        }
        Ok(certificates) => Ok(certificates),
        Err(error) => Err(format!("{}: {error}", path.display())),
    }
}

/// The client configuration for the upstream.
pub fn client_config(tls: &UpstreamTls) -> Result<Arc<ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "a system certificate could not be read");
    }
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if let Some(path) = &tls.ca_file {
        for certificate in certificates(path)? {
            roots
                .add(certificate)
                .map_err(|error| format!("{}: {error}", path.display()))?;
        }
    } else if added == 0 {
        return Err(
            "an https:// upstream, and no authority to trust it: the system has no root \
             certificates; set SSL_CERT_FILE, or `ca_file` under [upstream]"
                .to_owned(),
        );
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_root_certificates(roots);
    let config = match &tls.client_identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = certificates(cert)?;
            let key = PrivateKeyDer::from_pem_file(key)
                .map_err(|error| format!("{}: {error}", key.display()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|error| format!("the client certificate: {error}"))?
        }
    };
    Ok(Arc::new(config))
}

/// The TLS of an `https://` upstream; TLS settings for any other are a mistake.
pub(super) fn upstream_tls(
    url: &Uri,
    ca_file: &Option<std::path::PathBuf>,
    identity: (&Option<std::path::PathBuf>, &Option<std::path::PathBuf>),
) -> Result<Option<std::sync::Arc<rustls::ClientConfig>>, ConfigError> {
    let client_identity = match identity {
        (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
        (None, None) => None,
        _ => {
            return Err(ConfigError(
                "[upstream]: `client_cert` and `client_key` go together".to_owned(),
            ))
        }
    };
    let settings = UpstreamTls {
        ca_file: ca_file.clone(),
        client_identity,
    };
    if url.scheme_str() != Some("https") {
        if settings.is_set() {
            return Err(ConfigError(format!(
                "[upstream]: `ca_file`, `client_cert` and `client_key` are for an https:// \
                 upstream, and {url} is not one"
            )));
        }
        return Ok(None);
    }
    client_config(&settings)
        .map(Some)
        .map_err(|error| ConfigError(format!("[upstream] TLS: {error}")))
}
