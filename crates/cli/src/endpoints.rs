//! Where the commands that act as clients find the cluster, and how they
//! reach it: TLS files and a user, with etcdctl's flag names.
//!
//! A flag wins, then its `BELLWETHER_*` variable, then etcdctl's
//! `ETCDCTL_*` one (so a shell set up for etcdctl works unchanged), then
//! the default: for endpoints, the cluster `bellwether up` starts. An
//! empty value counts as unset.

use anyhow::{bail, Context};
use bellwether_client::{Client, Tls};
use clap::Args;
use std::path::PathBuf;

/// How a command that acts as a client reaches the cluster.
#[derive(Args, Clone, Debug, Default)]
pub struct ClientArgs {
    /// Comma-separated client endpoints (default: BELLWETHER_ENDPOINTS,
    /// then ETCDCTL_ENDPOINTS, then the cluster `bellwether up` starts).
    #[arg(long)]
    pub endpoints: Option<String>,
    /// The CA that signed the members' certificates, for a cluster served
    /// over TLS (also BELLWETHER_CACERT, ETCDCTL_CACERT).
    #[arg(long, value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// A client certificate to present, for `--client-cert-auth` (also
    /// BELLWETHER_CERT, ETCDCTL_CERT).
    #[arg(long, value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// The client certificate's key (also BELLWETHER_KEY, ETCDCTL_KEY).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Call as this user, on a cluster with auth enabled: NAME:PASSWORD,
    /// or NAME with --password (also BELLWETHER_USER, ETCDCTL_USER).
    #[arg(long, value_name = "NAME[:PASSWORD]")]
    pub user: Option<String>,
    /// The user's password, when --user gives only a name (also
    /// BELLWETHER_PASSWORD, ETCDCTL_PASSWORD).
    #[arg(long)]
    pub password: Option<String>,
}

impl ClientArgs {
    /// A client of the chosen cluster, as the chosen user.
    pub fn connect(&self) -> anyhow::Result<Client> {
        self.connect_with(|name| std::env::var(name).ok())
    }

    /// One client per endpoint, each as the chosen user over the chosen
    /// TLS, for commands that must ask every member (`transfer`).
    pub fn connect_each(&self) -> anyhow::Result<Vec<(String, Client)>> {
        let env = |name: &str| std::env::var(name).ok();
        resolve_with(self.endpoints.as_deref(), env)
            .into_iter()
            .map(|endpoint| {
                let client = self.client_of(std::slice::from_ref(&endpoint), env)?;
                Ok((endpoint, client))
            })
            .collect()
    }

    fn connect_with(&self, env: impl Fn(&str) -> Option<String>) -> anyhow::Result<Client> {
        let endpoints = resolve_with(self.endpoints.as_deref(), &env);
        self.client_of(&endpoints, env)
    }

    /// A client of `endpoints` with this command's TLS files and user.
    fn client_of(
        &self,
        endpoints: &[String],
        env: impl Fn(&str) -> Option<String>,
    ) -> anyhow::Result<Client> {
        let mut builder = Client::builder(endpoints);
        let file = |flag: &Option<PathBuf>, name: &str| {
            setting(flag.as_ref().map(|p| p.display().to_string()), name, &env).map(PathBuf::from)
        };
        let cacert = file(&self.cacert, "CACERT");
        let cert = file(&self.cert, "CERT");
        let key = file(&self.key, "KEY");
        match (cacert, cert, key) {
            (None, None, None) => {}
            (Some(ca), None, None) => builder = builder.tls(Tls::from_files(&ca, None)?),
            (Some(ca), Some(cert), Some(key)) => {
                builder = builder.tls(Tls::from_files(&ca, Some((&cert, &key)))?)
            }
            (None, _, _) => bail!(
                "--cert and --key need --cacert: the CA that signed the members' certificates"
            ),
            _ => bail!("--cert and --key go together"),
        }
        if let Some(user) = setting(self.user.clone(), "USER", &env) {
            let (name, inline) = match user.split_once(':') {
                Some((name, password)) => (name.to_string(), Some(password.to_string())),
                None => (user, None),
            };
            let password = inline
                .or_else(|| setting(self.password.clone(), "PASSWORD", &env))
                .with_context(|| {
                    format!(
                        "no password for user {name}: pass --user {name}:PASSWORD or --password"
                    )
                })?;
            builder = builder.user(name, password);
        }
        Ok(builder.connect()?)
    }
}

/// A setting from its flag, then `BELLWETHER_{name}`, then `ETCDCTL_{name}`.
fn setting(
    flag: Option<String>,
    name: &str,
    env: &impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    set(flag)
        .or_else(|| set(env(&format!("BELLWETHER_{name}"))))
        .or_else(|| set(env(&format!("ETCDCTL_{name}"))))
}

/// The client endpoints of the cluster `bellwether up` starts by default.
pub const UP_DEFAULT: &str = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203";

/// The endpoints to use, from the flag or the environment read through
/// `env`.
fn resolve_with(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    setting(flag.map(str::to_string), "ENDPOINTS", &env)
        .unwrap_or_else(|| UP_DEFAULT.to_string())
        .split(',')
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_flag_then_bellwether_then_etcdctl_then_up_s_default() {
        let both = [
            ("BELLWETHER_ENDPOINTS", "b:1"),
            ("ETCDCTL_ENDPOINTS", "e:1"),
        ];
        assert_eq!(resolve_with(Some("f:1, f:2"), env(&both)), ["f:1", "f:2"]);
        assert_eq!(resolve_with(None, env(&both)), ["b:1"]);
        assert_eq!(resolve_with(None, env(&both[1..])), ["e:1"]);
        assert_eq!(resolve_with(None, env(&[])).len(), 3);
        assert_eq!(
            resolve_with(Some(""), env(&both)),
            ["b:1"],
            "empty is unset"
        );
    }

    #[test]
    fn a_user_needs_a_password_and_a_certificate_needs_its_key_and_ca() {
        // Channels are made lazily, but inside a runtime.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _inside = runtime.enter();
        let args = |user: &str| ClientArgs {
            endpoints: Some("127.0.0.1:1".into()),
            user: Some(user.into()),
            ..ClientArgs::default()
        };
        assert!(args("alice:secret").connect_with(env(&[])).is_ok());
        let error = args("alice").connect_with(env(&[])).err().unwrap();
        assert!(
            error.to_string().contains("no password for user alice"),
            "{error}"
        );
        assert!(args("alice")
            .connect_with(env(&[("ETCDCTL_PASSWORD", "secret")]))
            .is_ok());
        let only_cert = ClientArgs {
            cert: Some("c.pem".into()),
            key: Some("k.pem".into()),
            ..ClientArgs::default()
        };
        let error = only_cert.connect_with(env(&[])).err().unwrap();
        assert!(error.to_string().contains("need --cacert"), "{error}");
        let missing = ClientArgs {
            cacert: Some("/nonexistent/ca.pem".into()),
            ..ClientArgs::default()
        };
        let error = missing.connect_with(env(&[])).err().unwrap();
        assert!(
            error.to_string().contains("cannot read this TLS file"),
            "{error}"
        );
    }
}
