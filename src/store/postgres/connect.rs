//! How the store's pools connect: over TLS with the `postgres-tls` feature (rustls with the
//! ring provider, the server's certificate checked against the system's roots, which
//! `SSL_CERT_FILE` replaces) unless the URL says `sslmode=disable`. As libpq does,
//! `sslmode=prefer` (the default) asks for TLS first and takes plain text only from a server
//! that answers it has none; `sslmode=require` takes no plain text.

use deadpool_postgres::{Manager, ManagerConfig, RecyclingMethod};
use tokio_postgres::config::SslMode;
use tokio_postgres::NoTls;

use crate::store::StoreError;

/// The connection manager of a pool for `config`. A `clean` pool resets each connection's
/// session before it is handed out again (`RESET ALL`, `SET SESSION AUTHORIZATION DEFAULT`,
/// …): the transaction pool's go to handlers, whose session settings must not reach another
/// call; the store's own run only its statements.
pub(super) fn manager(config: tokio_postgres::Config, clean: bool) -> Result<Manager, StoreError> {
    let recycling_method = if clean {
        RecyclingMethod::Clean
    } else {
        RecyclingMethod::Fast
    };
    let settings = ManagerConfig { recycling_method };
    let mode = config.get_ssl_mode();
    if mode == SslMode::Disable {
        return Ok(Manager::from_config(config, NoTls, settings));
    }
    #[cfg(feature = "postgres-tls")]
    {
        Ok(Manager::from_config(config, connector(mode)?, settings))
    }
    #[cfg(not(feature = "postgres-tls"))]
    {
        if mode == SslMode::Require {
            return Err(StoreError::new(
                "the URL says sslmode=require: build with the `postgres-tls` feature",
            ));
        }
        // Without a TLS client, `prefer` has nothing to try.
        Ok(Manager::from_config(config, NoTls, settings))
    }
}

/// A TLS connector that checks the server's certificate against the system's roots.
#[cfg(feature = "postgres-tls")]
fn connector(mode: SslMode) -> Result<tokio_postgres_rustls::MakeRustlsConnect, StoreError> {
    use std::sync::Arc;

    let mut roots = rustls::RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    for error in &native.errors {
        tracing::warn!(%error, "a system certificate could not be read");
    }
    let (added, _ignored) = roots.add_parsable_certificates(native.certs);
    if added == 0 {
        let said = if mode == SslMode::Require {
            "sslmode=require"
        } else {
            "sslmode=prefer (the default) tries TLS first"
        };
        return Err(StoreError::new(format!(
            "{said}, and there is no root certificate to check the server's with: set \
             SSL_CERT_FILE to the authority that signed it, or say sslmode=disable for plain \
             text"
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(StoreError::new)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}
