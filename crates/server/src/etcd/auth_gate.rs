//! Who is calling, and what they may do: the check every etcd RPC passes
//! before it reads or writes.
//!
//! A caller is named by a token (the `token` metadata etcd's clients send,
//! or `authorization` from the JSON gateway), or, with
//! `--client-cert-auth` and no token, by its client certificate's common
//! name, as in etcd. While auth is disabled every call passes, and the
//! check costs one atomic load ([`AuthSummary`]).
//!
//! Reads are checked on the member that serves them, after the read
//! barrier, so they see every change acknowledged before they began.
//! Writes are checked on the member that takes them, and the log entry
//! records the auth revision of that check (`Command::encode_checked`);
//! the state machine refuses it if auth changed in between. Together a
//! revoke takes effect at once, wherever the next call lands.

use super::credentials;
use super::refusal_status::grpc_code;
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::permissions::Permissions;
use bellwether_kv::{AuthError, KvStore, Permission};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tonic::metadata::MetadataMap;
use tonic::Status;

/// etcd's default token lifetime (`--auth-token-ttl`).
pub const AUTH_TOKEN_TTL_DEFAULT: Duration = Duration::from_secs(300);

/// Whether auth is on and its revision, published by the state machine
/// after every auth change so the hot path need not lock the store.
#[derive(Clone, Debug, Default)]
pub struct AuthSummary(Arc<AtomicU64>);

impl AuthSummary {
    /// Records the store's auth state (called with the store locked).
    pub fn publish(&self, store: &KvStore) {
        let auth = store.auth();
        let packed = (auth.revision() << 1) | u64::from(auth.is_enabled());
        self.0.store(packed, Ordering::Release);
    }

    /// (enabled, revision) as last published.
    pub fn get(&self) -> (bool, u64) {
        let packed = self.0.load(Ordering::Acquire);
        (packed & 1 == 1, packed >> 1)
    }
}

/// The member's auth settings.
#[derive(Clone, Debug)]
pub struct AuthGate {
    /// Published by the state machine.
    pub summary: AuthSummary,
    /// How long an issued token is valid.
    pub token_ttl: Duration,
    /// A client certificate's common name names the user when no token is
    /// sent (`--client-cert-auth`).
    pub client_cert_auth: bool,
}

impl Default for AuthGate {
    fn default() -> Self {
        AuthGate {
            summary: AuthSummary::default(),
            token_ttl: AUTH_TOKEN_TTL_DEFAULT,
            client_cert_auth: false,
        }
    }
}

/// The identity of one call, as checked. The default names no one, with
/// auth off: every check then consults the store's current state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Caller {
    /// The user; `None` when the call named none.
    pub user: Option<String>,
    /// The auth revision the identity was read at (see the module docs).
    pub auth_revision: u64,
    /// Whether auth was on then.
    pub enabled: bool,
}

/// etcd's gRPC code for an auth error.
pub fn auth_code(error: AuthError) -> tonic::Code {
    grpc_code(bellwether_etcd::answer::auth_code(error))
}

/// An auth error as the status etcd answers with.
pub fn auth_status(error: AuthError) -> Status {
    Status::new(auth_code(error), error.to_string())
}

/// An auth error on an administrative Maintenance call, as etcd 3.4
/// answers it there (code Unknown, "auth: ..."): etcdctl prints exactly it.
pub fn maintenance_auth_status(error: AuthError) -> Status {
    let message = error.to_string();
    let message = message.strip_prefix("etcdserver: ").unwrap_or(&message);
    Status::unknown(format!("auth: {message}"))
}

/// The token a call carries, if any.
fn token_of(metadata: &MetadataMap) -> Option<&str> {
    ["token", "authorization"]
        .iter()
        .find_map(|key| metadata.get(*key))
        .and_then(|value| value.to_str().ok())
        .map(|token| token.strip_prefix("Bearer ").unwrap_or(token))
}

/// The common name of the first (leaf) certificate.
fn common_name(certs: &[tonic::transport::CertificateDer<'static>]) -> Option<String> {
    let (_, cert) = x509_parser::parse_x509_certificate(certs.first()?.as_ref()).ok()?;
    let name = cert.subject().iter_common_name().next()?.as_str().ok()?;
    Some(name.to_string())
}

impl AuthGate {
    /// Who a call is: by token, else by certificate (when allowed). A
    /// token that does not check out is refused, as etcd refuses it.
    pub fn caller<T>(
        &self,
        store: &std::sync::Mutex<KvStore>,
        request: &tonic::Request<T>,
    ) -> Result<Caller, Status> {
        let (enabled, revision) = self.summary.get();
        if !enabled {
            return Ok(Caller {
                user: None,
                auth_revision: revision,
                enabled,
            });
        }
        let certs = if self.client_cert_auth {
            request.peer_certs()
        } else {
            None
        };
        let store = store.lock().expect("store lock");
        self.caller_at(
            &store,
            request.metadata(),
            certs.as_deref().map(Vec::as_slice),
        )
    }

    /// [`caller`](Self::caller) against a locked store.
    pub fn caller_at(
        &self,
        store: &KvStore,
        metadata: &MetadataMap,
        certs: Option<&[tonic::transport::CertificateDer<'static>]>,
    ) -> Result<Caller, Status> {
        let auth = store.auth();
        let mut caller = Caller {
            user: None,
            auth_revision: auth.revision(),
            enabled: auth.is_enabled(),
        };
        if !caller.enabled {
            return Ok(caller);
        }
        if let Some(token) = token_of(metadata) {
            let claims =
                credentials::verify_token(auth.secret(), token, credentials::now_unix_ms())
                    .map_err(auth_status)?;
            match auth.user(&claims.user) {
                Some(user) if user.since == claims.since => caller.user = Some(claims.user),
                _ => return Err(auth_status(AuthError::InvalidToken)),
            }
        } else if let Some(name) = certs.and_then(common_name) {
            caller.user = Some(name);
        }
        Ok(caller)
    }

    /// A token for `user` as of `since` (when its password was checked),
    /// valid for the configured TTL.
    pub fn issue(&self, store: &KvStore, user: &str, since: u64) -> Result<String, AuthError> {
        let auth = store.auth();
        if !auth.is_enabled() {
            return Err(AuthError::NotEnabled);
        }
        let expires = credentials::now_unix_ms() + self.token_ttl.as_millis() as u64;
        Ok(credentials::issue_token(
            auth.secret(),
            user,
            since,
            expires,
        ))
    }
}

impl Caller {
    /// This caller's rights against `store`'s users and roles now.
    pub fn permissions<'a>(&'a self, store: &'a KvStore) -> Permissions<'a> {
        Permissions {
            store,
            user: self.user.as_deref(),
            enabled: self.enabled,
        }
    }

    /// Whether the caller may do `needed` on `[key, range_end)`.
    pub fn check_range(
        &self,
        store: &KvStore,
        key: &[u8],
        range_end: &[u8],
        needed: Permission,
    ) -> Result<(), Status> {
        self.permissions(store)
            .range(key, range_end, needed)
            .map_err(auth_status)
    }

    /// Whether the caller may make administrative calls.
    pub fn check_admin(&self, store: &KvStore) -> Result<(), AuthError> {
        self.permissions(store).admin()
    }

    /// What a put needs (see [`Permissions::put`]).
    pub fn check_put(&self, store: &KvStore, put: &pb::PutRequest) -> Result<(), Status> {
        self.permissions(store).put(put).map_err(auth_status)
    }

    /// `needed` on every key attached to `lease` (none for an unknown one).
    pub fn check_lease_keys(
        &self,
        store: &KvStore,
        lease: i64,
        needed: Permission,
    ) -> Result<(), Status> {
        self.permissions(store)
            .lease_keys(lease, needed)
            .map_err(auth_status)
    }

    /// What a delete needs (see [`Permissions::delete`]).
    pub fn check_delete(
        &self,
        store: &KvStore,
        delete: &pb::DeleteRangeRequest,
    ) -> Result<(), Status> {
        self.permissions(store).delete(delete).map_err(auth_status)
    }

    /// What a txn needs (see [`Permissions::txn`]).
    pub fn check_txn(&self, store: &KvStore, txn: &pb::TxnRequest) -> Result<(), Status> {
        self.permissions(store).txn(txn).map_err(auth_status)
    }
}
