//! `bellwether certs`: a throwaway certificate authority and certificates
//! for a local secure cluster, so that trying TLS needs no cfssl or
//! openssl. `bellwether up --tls` uses it; tests use it for a cluster's CA
//! and for a foreign one.
//!
//! Each certificate names the given hosts (IP addresses and DNS names) as
//! subject alternative names, which is what clients and members check, and
//! carries its name as the common name (etcd takes a client certificate's
//! common name as the user). Keys are ECDSA P-256. The CA's key stays in
//! the directory, so more certificates can be issued later (`up add`).

use anyhow::{bail, Context, Result};
use clap::Args;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Flags of `bellwether certs`.
#[derive(Args, Debug)]
pub struct CertsArgs {
    /// Directory for ca.pem, ca-key.pem and NAME.pem / NAME-key.pem; a CA
    /// already there signs the new certificates.
    #[arg(long, default_value = "bellwether-tls")]
    pub dir: PathBuf,
    /// Certificates to issue, comma-separated; each name is also its
    /// common name.
    #[arg(long, value_delimiter = ',', default_value = "n1,n2,n3,client")]
    pub names: Vec<String>,
    /// What every certificate is valid for (IP addresses or DNS names).
    #[arg(long, value_delimiter = ',', default_value = "127.0.0.1,localhost")]
    pub hosts: Vec<String>,
}

/// Name of the CA certificate file.
pub const CA_FILE: &str = "ca.pem";
const CA_KEY_FILE: &str = "ca-key.pem";

/// Runs `bellwether certs`.
pub fn execute(args: CertsArgs) -> Result<ExitCode> {
    issue(&args.dir, &args.names, &args.hosts)?;
    println!(
        "certificates for {} in {} (CA: {})",
        args.names.join(", "),
        args.dir.display(),
        args.dir.join(CA_FILE).display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The CA's subject; the same every time, so that a CA loaded from its
/// key signs certificates its own certificate verifies.
fn ca_params() -> Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "bellwether local CA");
    params.distinguished_name = name;
    Ok(params)
}

/// Issues a certificate and key per name into `dir`, with the CA found
/// there or a new one.
pub fn issue(dir: &Path, names: &[String], hosts: &[String]) -> Result<()> {
    if names.is_empty() || hosts.is_empty() {
        bail!("give at least one name and one host");
    }
    for name in names {
        let plain = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.');
        if !plain || name == "ca" {
            bail!("{name:?} cannot name a certificate file: use letters, digits, '-', '_' and '.', and not \"ca\"");
        }
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let ca_key_path = dir.join(CA_KEY_FILE);
    let ca_key = if ca_key_path.exists() {
        let pem = std::fs::read_to_string(&ca_key_path)
            .with_context(|| format!("cannot read {}", ca_key_path.display()))?;
        KeyPair::from_pem(&pem)
            .with_context(|| format!("{} is not a key", ca_key_path.display()))?
    } else {
        let key = KeyPair::generate()?;
        let certificate = ca_params()?.self_signed(&key)?;
        write(&dir.join(CA_FILE), &certificate.pem())?;
        write_key(&ca_key_path, &key.serialize_pem())?;
        key
    };
    let issuer = Issuer::new(ca_params()?, ca_key);
    for name in names {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(hosts.to_vec())
            .with_context(|| format!("{hosts:?}: not host names or IP addresses"))?;
        params
            .distinguished_name
            .push(DnType::CommonName, name.as_str());
        let certificate = params.signed_by(&key, &issuer)?;
        write(&dir.join(format!("{name}.pem")), &certificate.pem())?;
        write_key(&dir.join(format!("{name}-key.pem")), &key.serialize_pem())?;
    }
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes a private key readable by its owner only.
fn write_key(path: &Path, text: &str) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A second run keeps the CA, and its certificates load beside it as a
    /// TLS identity (real handshakes with them run in `tests/tls.rs`).
    #[test]
    fn a_ca_kept_in_the_directory_signs_later_certificates() {
        let root = std::env::temp_dir().join(format!("bw-certs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        struct Dir(PathBuf);
        impl Dir {
            fn path(&self) -> &Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let dir = Dir(root);
        let hosts = vec!["127.0.0.1".to_string()];
        issue(dir.path(), &["n1".to_string()], &hosts).unwrap();
        let ca = std::fs::read(dir.path().join(CA_FILE)).unwrap();
        issue(dir.path(), &["n2".to_string()], &hosts).unwrap();
        assert_eq!(
            std::fs::read(dir.path().join(CA_FILE)).unwrap(),
            ca,
            "the CA is kept"
        );
        for name in ["n1", "n2"] {
            let cert = std::fs::read(dir.path().join(format!("{name}.pem"))).unwrap();
            let key = std::fs::read(dir.path().join(format!("{name}-key.pem"))).unwrap();
            bellwether_transport::PeerTls::from_pem(&cert, &key, &ca).unwrap();
        }
        let error = issue(dir.path(), &["../x".to_string()], &hosts).unwrap_err();
        assert!(
            error.to_string().contains("cannot name a certificate file"),
            "{error}"
        );
    }
}
