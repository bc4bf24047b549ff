//! [`Client`]: a connection to a cluster through several endpoints.
//!
//! Every call goes to the current endpoint. A call that fails as
//! unavailable (the member is down, restarting or cut off) moves the client
//! to the next endpoint and is tried again, until a deadline. Only calls
//! that are safe to repeat are retried this way: reads, and writes guarded
//! by a compare that makes a second run a no-op. A lease grant repeated
//! after a lost answer leaves at most an unused lease, which expires.

use crate::connection::{Authed, Connection, Link};
use crate::credentials::{Credentials, TokenInterceptor};
use crate::error::{Error, Result};
use crate::watch_hub::WatchHub;
use bellwether_api::etcdserverpb as pb;
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::maintenance_client::MaintenanceClient;
use pb::watch_client::WatchClient;
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::Endpoint;

/// How long a call is retried across endpoints by default.
pub const RETRY_DEADLINE_DEFAULT: Duration = Duration::from_secs(5);

/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// How often an HTTP/2 ping checks that a member still answers, and how
/// long its answer may take.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(3);

/// The largest answer the client accepts (gRPC's default is 4 MiB).
pub const ANSWER_BYTES_MAX: usize = 256 * 1024 * 1024;

/// A handle on a cluster; cheap to clone (clones share the connections
/// and the watch stream).
///
/// ```no_run
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// let client = bellwether_client::Client::connect(["127.0.0.1:7201", "127.0.0.1:7202"])?;
/// client.put("greeting", "hello").await?;
/// assert_eq!(client.get("greeting").await?, Some(b"hello".to_vec()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Client {
    /// What every clone shares.
    inner: Arc<Connection>,
    /// Every watch of the client, on one stream; started on first use and
    /// stopped when the last clone is dropped.
    hub: Arc<OnceLock<WatchHub>>,
}

/// How to reach a cluster: endpoints, and optionally TLS, a user and a
/// retry deadline. Made by [`Client::builder`].
///
/// ```no_run
/// # fn run() -> Result<(), bellwether_client::Error> {
/// let client = bellwether_client::Client::builder(["127.0.0.1:7201"])
///     .user("alice", "secret")
///     .connect()?;
/// # Ok(())
/// # }
/// ```
pub struct ClientBuilder {
    endpoints: Vec<String>,
    retry_deadline: Duration,
    tls: Option<Tls>,
    user: Option<(String, String)>,
}

impl ClientBuilder {
    /// Retries calls that find a member unavailable for this long
    /// (default [`RETRY_DEADLINE_DEFAULT`]).
    pub fn retry_deadline(mut self, retry_deadline: Duration) -> ClientBuilder {
        self.retry_deadline = retry_deadline;
        self
    }

    /// Connects over TLS (see [`Client::connect_tls`]).
    pub fn tls(mut self, tls: Tls) -> ClientBuilder {
        self.tls = Some(tls);
        self
    }

    /// Calls as this user, on a cluster with etcd's auth enabled: a token
    /// is asked for on the first call and again whenever the cluster
    /// refuses it (etcdctl's `--user`).
    pub fn user(mut self, name: impl Into<String>, password: impl Into<String>) -> ClientBuilder {
        self.user = Some((name.into(), password.into()));
        self
    }

    /// The client. Connections are made on first use, so this fails only
    /// on an empty list or a malformed endpoint.
    pub fn connect(self) -> Result<Client> {
        let credentials = self
            .user
            .map(|(name, password)| Credentials::new(name, password));
        Client::connect_with(self.endpoints, self.retry_deadline, self.tls, credentials)
    }
}

impl Client {
    /// A client of the cluster at `endpoints` (`host:port` or
    /// `http://host:port`). Connections are made on first use, so this
    /// fails only on an empty list or a malformed endpoint.
    pub fn connect<S: AsRef<str>>(endpoints: impl IntoIterator<Item = S>) -> Result<Client> {
        Client::connect_with_deadline(endpoints, RETRY_DEADLINE_DEFAULT)
    }

    /// [`Client::connect`], retrying unavailable calls for `retry_deadline`.
    pub fn connect_with_deadline<S: AsRef<str>>(
        endpoints: impl IntoIterator<Item = S>,
        retry_deadline: Duration,
    ) -> Result<Client> {
        Client::builder(endpoints)
            .retry_deadline(retry_deadline)
            .connect()
    }

    /// A builder, for TLS, a user or a retry deadline.
    pub fn builder<S: AsRef<str>>(endpoints: impl IntoIterator<Item = S>) -> ClientBuilder {
        ClientBuilder {
            endpoints: endpoints
                .into_iter()
                .map(|e| e.as_ref().to_string())
                .collect(),
            retry_deadline: RETRY_DEADLINE_DEFAULT,
            tls: None,
            user: None,
        }
    }

    /// [`Client::connect`] over TLS: `host:port` endpoints are taken as
    /// `https://`, the server's certificate is checked against `tls`'s CA,
    /// and its client certificate, if any, is presented (etcdctl's
    /// `--cacert`, `--cert` and `--key`).
    pub fn connect_tls<S: AsRef<str>>(
        endpoints: impl IntoIterator<Item = S>,
        tls: Tls,
    ) -> Result<Client> {
        Client::builder(endpoints).tls(tls).connect()
    }

    fn connect_with(
        endpoints: Vec<String>,
        retry_deadline: Duration,
        tls: Option<Tls>,
        credentials: Option<Credentials>,
    ) -> Result<Client> {
        let mut channels = Vec::new();
        let mut names = Vec::new();
        for endpoint in &endpoints {
            let endpoint = endpoint.trim();
            if endpoint.is_empty() {
                continue;
            }
            let scheme = if tls.is_some() { "https" } else { "http" };
            let url = if endpoint.contains("://") {
                endpoint.to_string()
            } else {
                format!("{scheme}://{endpoint}")
            };
            if tls.is_some() && !url.starts_with("https://") {
                return Err(Error::BadEndpoint {
                    endpoint: endpoint.to_string(),
                    reason: "a TLS client needs https:// endpoints (or host:port)".into(),
                });
            }
            let bad = |e: tonic::transport::Error| Error::BadEndpoint {
                endpoint: endpoint.to_string(),
                reason: e.to_string(),
            };
            let mut channel = Endpoint::from_shared(url).map_err(bad)?;
            if let Some(tls) = &tls {
                channel = channel.tls_config(tls.config.clone()).map_err(bad)?;
            }
            let channel = channel
                .connect_timeout(CONNECT_TIMEOUT)
                // A peer that vanished without closing the connection is
                // noticed within a few seconds, and its streams fail over.
                .http2_keep_alive_interval(KEEP_ALIVE_INTERVAL)
                .keep_alive_timeout(KEEP_ALIVE_INTERVAL)
                .keep_alive_while_idle(true)
                .tcp_nodelay(true)
                .connect_lazy();
            channels.push(channel);
            names.push(endpoint.to_string());
        }
        if channels.is_empty() {
            return Err(Error::NoEndpoints);
        }
        Ok(Client {
            inner: Arc::new(Connection::new(
                channels,
                names,
                retry_deadline,
                credentials,
            )),
            hub: Arc::new(OnceLock::new()),
        })
    }

    /// The client's watch hub (started here on first use, inside the
    /// caller's tokio runtime).
    pub(crate) fn hub(&self) -> &WatchHub {
        self.hub.get_or_init(|| WatchHub::start(self.inner.clone()))
    }

    /// The endpoints, as given.
    pub fn endpoints(&self) -> &[String] {
        self.inner.endpoints()
    }

    /// The channel to the endpoint in use, and its index.
    pub(crate) fn channel(&self) -> (usize, Link) {
        self.inner.channel()
    }

    /// See [`Connection::call_once`].
    pub(crate) async fn call_once<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = std::result::Result<T, tonic::Status>>,
    {
        self.inner.call_once(call).await
    }

    /// Forgets a token a watch was refused with (see
    /// [`Connection::watch_refused`]).
    pub(crate) fn watch_refused(&self, sent: &Option<AsciiMetadataValue>, reason: &str) -> bool {
        self.inner.watch_refused(sent, reason)
    }

    /// Makes sure a token is held when the client calls as a user (for
    /// calls that are not made through [`retry`](Self::retry): streams).
    pub(crate) async fn ensure_token(&self) -> Result<()> {
        self.inner.ensure_token().await
    }

    /// Moves to the endpoint after `failed`, unless another call already
    /// moved on from it.
    pub(crate) fn rotate(&self, failed: usize) {
        self.inner.rotate(failed)
    }

    /// Runs `call` on the current endpoint, moving on to the next one on
    /// each unavailable failure until the retry deadline passes.
    pub(crate) async fn retry<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = std::result::Result<T, tonic::Status>>,
    {
        self.inner.retry(call).await
    }

    /// A KV client on `link`.
    pub(crate) fn kv(link: Link) -> KvClient<Authed> {
        // Reads of many keys (a task queue's records, batched task reads)
        // may pass gRPC's default 4 MiB answer bound.
        KvClient::with_interceptor(link.channel, TokenInterceptor::new(link.token))
            .max_decoding_message_size(ANSWER_BYTES_MAX)
    }

    /// A Lease client on `link`.
    pub(crate) fn lease(link: Link) -> LeaseClient<Authed> {
        LeaseClient::with_interceptor(link.channel, TokenInterceptor::new(link.token))
    }

    /// A Watch client on `link`.
    pub(crate) fn watch(link: Link) -> WatchClient<Authed> {
        link.watch_client()
    }

    /// Runs a txn, retried across endpoints while unavailable. Use only
    /// for txns whose second run changes nothing (guarded by a compare).
    pub async fn txn(&self, request: pb::TxnRequest) -> Result<pb::TxnResponse> {
        self.retry(|channel| {
            let request = request.clone();
            async move { Ok(Client::kv(channel).txn(request).await?.into_inner()) }
        })
        .await
    }

    /// A linearizable range read, retried across endpoints.
    pub async fn range(&self, request: pb::RangeRequest) -> Result<pb::RangeResponse> {
        self.retry(|channel| {
            let request = request.clone();
            async move { Ok(Client::kv(channel).range(request).await?.into_inner()) }
        })
        .await
    }

    /// Reads one key's value, or `None`.
    pub async fn get(&self, key: impl Into<Vec<u8>>) -> Result<Option<Vec<u8>>> {
        let request = pb::RangeRequest {
            key: key.into(),
            ..pb::RangeRequest::default()
        };
        let response = self.range(request).await?;
        Ok(response.kvs.into_iter().next().map(|kv| kv.value))
    }

    /// Writes one key (not retried after an unavailable failure: a put is
    /// not safe to repeat blindly).
    pub async fn put(&self, key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>) -> Result<i64> {
        let request = pb::PutRequest {
            key: key.into(),
            value: value.into(),
            ..pb::PutRequest::default()
        };
        let response = self
            .inner
            .call_once(|link| {
                let request = request.clone();
                async move { Ok(Client::kv(link).put(request).await?.into_inner()) }
            })
            .await?;
        Ok(response.header.map_or(0, |h| h.revision))
    }
}

impl Client {
    /// Maintenance.Status of the member at the endpoint in use, tried
    /// once (a client of one endpoint asks exactly that member).
    pub async fn member_status(&self) -> Result<pb::StatusResponse> {
        self.inner
            .call_once(|link| async move {
                let mut maintenance = MaintenanceClient::with_interceptor(
                    link.channel,
                    TokenInterceptor::new(link.token),
                );
                Ok(maintenance.status(pb::StatusRequest {}).await?.into_inner())
            })
            .await
    }

    /// Maintenance.MoveLeader to member `target`, sent to the member at
    /// the endpoint in use (which must lead), tried once.
    pub async fn move_leader(&self, target: u64) -> Result<()> {
        self.inner
            .call_once(|link| async move {
                let mut maintenance = MaintenanceClient::with_interceptor(
                    link.channel,
                    TokenInterceptor::new(link.token),
                );
                maintenance
                    .move_leader(pb::MoveLeaderRequest { target_id: target })
                    .await?;
                Ok(())
            })
            .await
    }
}

/// What a client needs to reach a TLS client port: the CA that signed the
/// members' certificates, and a client certificate where the cluster asks
/// for one (`--client-cert-auth`).
#[derive(Clone, Debug)]
pub struct Tls {
    config: tonic::transport::ClientTlsConfig,
}

impl Tls {
    /// From PEM files: the CA, and optionally a certificate and its key.
    pub fn from_files(
        ca: &std::path::Path,
        identity: Option<(&std::path::Path, &std::path::Path)>,
    ) -> Result<Tls> {
        let read = |path: &std::path::Path| {
            std::fs::read(path).map_err(|e| Error::BadEndpoint {
                endpoint: path.display().to_string(),
                reason: format!("cannot read this TLS file: {e}"),
            })
        };
        let mut config = tonic::transport::ClientTlsConfig::new()
            .ca_certificate(tonic::transport::Certificate::from_pem(read(ca)?));
        if let Some((cert, key)) = identity {
            config = config.identity(tonic::transport::Identity::from_pem(
                read(cert)?,
                read(key)?,
            ));
        }
        Ok(Tls { config })
    }
}
