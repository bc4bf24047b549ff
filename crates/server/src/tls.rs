//! TLS on the client port, in tonic's terms (rustls on ring underneath),
//! from the files etcd's flags name: the member's certificate and key,
//! and the CA that signs client certificates.
//!
//! Members also call each other's client port (a forwarded call when the
//! peer queue is full, relayed lease keep-alives, the consistency check).
//! With TLS on, they do so over TLS, trusting `trusted_ca_file` and
//! presenting their own certificate, as etcd's members do.

use crate::config::ClientTlsFiles;
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
    /// Reads the files; an unreadable or empty one is an error that names
    /// it.
    pub fn load(files: &ClientTlsFiles) -> Result<ClientTls, String> {
        let cert = read("certificate (cert_file)", &files.cert)?;
        let key = read("key (key_file)", &files.key)?;
        let identity = Identity::from_pem(&cert, &key);
        let mut server = ServerTlsConfig::new()
            .identity(identity.clone())
            .timeout(TLS_HANDSHAKE_TIMEOUT);
        let mut member_client = ClientTlsConfig::new()
            .identity(identity)
            .timeout(TLS_HANDSHAKE_TIMEOUT);
        if let Some(path) = &files.trusted_ca {
            let ca = Certificate::from_pem(read("CA file (trusted_ca_file)", path)?);
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
