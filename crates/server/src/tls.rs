//! TLS on the client port, in tonic's terms (rustls on ring underneath),
//! from the files etcd's flags name: the member's certificate and key,
//! and the CA that signs client certificates.
//!
//! Members also call each other's client port (a forwarded call when the
//! peer queue is full, relayed lease keep-alives, the consistency check).
//! With TLS on, they do so over TLS, trusting `trusted_ca_file` and
//! presenting their own certificate, as etcd's members do.

use crate::config::ClientTlsFiles;
use std::sync::Arc;
use std::time::Duration;
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// A TLS handshake that takes longer fails, so a client that opens a
/// connection and sends nothing does not hold it.
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

fn read(what: &str, path: &std::path::Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display()))
}

/// Both sides' settings, read once at start.
#[derive(Clone, Debug)]
pub struct ClientTls {
    /// What the client port serves.
    pub server: ServerTlsConfig,
    /// What this member uses to call another member's client port.
    pub member_client: ClientTlsConfig,
}

impl ClientTls {
    /// Reads the files and checks them: a file that cannot be read or
    /// parsed, a key that does not match its certificate, or a CA file
    /// without a certificate is an error that names the file, before the
    /// member starts (tonic would only find out when it serves).
    pub fn load(files: &ClientTlsFiles) -> Result<ClientTls, String> {
        let cert = read("certificate (cert_file)", &files.cert)?;
        let key = read("key (key_file)", &files.key)?;
        server_config(&cert, &key)?;
        let identity = Identity::from_pem(&cert, &key);
        let mut server = ServerTlsConfig::new()
            .identity(identity.clone())
            .timeout(TLS_HANDSHAKE_TIMEOUT);
        let mut member_client = ClientTlsConfig::new()
            .identity(identity)
            .timeout(TLS_HANDSHAKE_TIMEOUT);
        if let Some(path) = &files.trusted_ca {
            let pem = read("CA file (trusted_ca_file)", path)?;
            let mut roots = rustls::RootCertStore::empty();
            for certificate in certificates(&pem, "trusted_ca_file")? {
                roots
                    .add(certificate)
                    .map_err(|e| format!("trusted_ca_file holds an unusable certificate: {e}"))?;
            }
            let ca = Certificate::from_pem(pem);
            server = server
                .client_ca_root(ca.clone())
                .client_auth_optional(!files.client_cert_auth);
            member_client = member_client.ca_certificate(ca);
        }
        Ok(ClientTls {
            server,
            member_client,
        })
    }
}

/// The HTTP port's TLS (`http_tls`): the member's client certificate,
/// HTTP/1.1, and no client certificate asked, since every route there is
/// read-only (metrics, health, status, the dashboard).
pub fn http_server_config(files: &ClientTlsFiles) -> Result<Arc<rustls::ServerConfig>, String> {
    let cert = read("certificate (cert_file)", &files.cert)?;
    let key = read("key (key_file)", &files.key)?;
    let mut config = server_config(&cert, &key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The PEM certificates in `pem`; at least one.
fn certificates(
    pem: &[u8],
    setting: &str,
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, String> {
    use rustls::pki_types::pem::PemObject;
    let list = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{setting} is not PEM: {e}"))?;
    if list.is_empty() {
        return Err(format!("{setting} holds no certificate"));
    }
    Ok(list)
}

/// A TLS server set-up (no client certificates) for `cert` and `key`:
/// parses both and checks that they belong together.
fn server_config(cert: &[u8], key: &[u8]) -> Result<rustls::ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    let chain = certificates(cert, "cert_file")?;
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(key)
        .map_err(|e| format!("no usable private key in key_file: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| format!("cert_file does not match key_file: {e}"))
}
