//! TLS from `--tls-cert` and `--tls-key`. Clients that ask for it (SSLRequest, or PostgreSQL
//! 17's direct TLS) get it; the others stay on plain TCP, as with PostgreSQL's `host` lines.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use pgwire::tokio::TlsAcceptor;
use pgwire::tokio::tokio_rustls::rustls::ServerConfig;
use pgwire::tokio::tokio_rustls::rustls::crypto::ring;
use pgwire::tokio::tokio_rustls::rustls::pki_types::pem::PemObject;
use pgwire::tokio::tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// An acceptor for the PEM certificate chain in `cert` and the private key in `key`.
pub fn acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .with_context(|| format!("reading the certificates in {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "{} holds no certificate", cert.display());
    let key =
        PrivateKeyDer::from_pem_file(key).with_context(|| format!("reading the private key in {}", key.display()))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the TLS certificate and key do not go together")?;
    // Direct TLS (`sslnegotiation=direct`) requires this ALPN protocol.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
