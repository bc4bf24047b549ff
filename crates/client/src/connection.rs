//! [`Connection`]: the endpoints of a cluster and which one calls go to
//! now, with the retry rule every call shares: a call that fails as
//! unavailable moves to the next endpoint and is tried again until a
//! deadline; a token is asked for, or asked for again after a change of
//! permissions, a bounded number of times. [`crate::Client`] and the watch
//! stream ([`crate::watch_hub`]) both call through it.

use crate::credentials::{is_old_auth_revision, wants_new_token, Credentials, TokenInterceptor};
use crate::error::{Error, Result};
use bellwether_api::etcdserverpb as pb;
use pb::watch_client::WatchClient;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;

/// A channel to one member, with the token calls on it carry.
pub(crate) type Authed = InterceptedService<Channel, TokenInterceptor>;

/// Tokens asked for (and writes made again after a change of
/// permissions) in one call, at most.
const AUTH_ROUNDS_MAX: usize = 3;

/// The pause between two rounds over every endpoint.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The endpoints and which one is in use.
pub(crate) struct Connection {
    /// One lazily connected channel per endpoint, in the order given.
    channels: Vec<Channel>,
    /// The endpoints as given, for error messages.
    endpoints: Vec<String>,
    /// Index of the endpoint calls go to now.
    current: Mutex<usize>,
    /// How long a call is retried across endpoints.
    retry_deadline: Duration,
    /// The user calls are made as, on a cluster with auth enabled.
    credentials: Option<Credentials>,
}

/// The channel to one endpoint and the token to send on it.
#[derive(Clone)]
pub(crate) struct Link {
    pub(crate) channel: Channel,
    pub(crate) token: Option<AsciiMetadataValue>,
    /// A token must be asked for before calling.
    ask_first: bool,
}

impl Link {
    /// The token calls on this link carry, if any.
    pub(crate) fn token(&self) -> Option<AsciiMetadataValue> {
        self.token.clone()
    }
}

impl Link {
    /// A Watch client on this link.
    pub(crate) fn watch_client(self) -> WatchClient<Authed> {
        WatchClient::with_interceptor(self.channel, TokenInterceptor::new(self.token))
    }
}

impl Connection {
    /// The endpoints, as given.
    pub(crate) fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The endpoints `endpoints` (named `names` in errors), calls retried
    /// for `retry_deadline`, made as `credentials`' user if any.
    pub(crate) fn new(
        channels: Vec<Channel>,
        names: Vec<String>,
        retry_deadline: Duration,
        credentials: Option<Credentials>,
    ) -> Self {
        assert_eq!(channels.len(), names.len(), "a name per endpoint");
        Connection {
            channels,
            endpoints: names,
            current: Mutex::new(0),
            retry_deadline,
            credentials,
        }
    }

    /// The channel to the endpoint in use, and its index.
    pub(crate) fn channel(&self) -> (usize, Link) {
        let index = *self.current.lock().expect("endpoint lock");
        let token = self.credentials.as_ref().and_then(Credentials::token);
        let ask_first = self.credentials.as_ref().is_some_and(Credentials::must_ask);
        let link = Link {
            channel: self.channels[index].clone(),
            token,
            ask_first,
        };
        (index, link)
    }

    /// Forgets `sent`, the token a watch (or its stream) was refused
    /// with, when `reason` says a new one is needed, so that the next
    /// stream opened carries a new one. Returns whether it was forgotten.
    pub(crate) fn watch_refused(&self, sent: &Option<AsciiMetadataValue>, reason: &str) -> bool {
        match &self.credentials {
            Some(credentials) if wants_new_token(reason) => {
                credentials.forget(sent);
                true
            }
            _ => false,
        }
    }

    /// Runs `call` once on the current endpoint (for writes that are not
    /// safe to repeat after a lost answer). Only a call refused for its
    /// token, or for a change of permissions before it was applied, is
    /// made again: it did nothing.
    pub(crate) async fn call_once<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = std::result::Result<T, tonic::Status>>,
    {
        self.run(call, false).await
    }

    /// See [`Client::ensure_token`].
    pub(crate) async fn ensure_token(&self) -> Result<()> {
        if self.credentials.is_none() {
            return Ok(());
        }
        self.retry(|_| async { Ok(()) }).await
    }

    /// See [`Client::retry`]. With credentials, a token is asked for
    /// before the first call and again when the cluster refuses the one
    /// sent; a write refused for a change of permissions is made again.
    /// Both at most [`AUTH_ROUNDS_MAX`] times a call.
    pub(crate) async fn retry<T, F, Fut>(&self, call: F) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = std::result::Result<T, tonic::Status>>,
    {
        self.run(call, true).await
    }

    /// [`retry`](Self::retry) and [`call_once`](Self::call_once): one loop
    /// for tokens and for moving between endpoints; an unavailable failure
    /// of the call itself moves on only if `repeatable`.
    async fn run<T, F, Fut>(&self, mut call: F, repeatable: bool) -> Result<T>
    where
        F: FnMut(Link) -> Fut,
        Fut: Future<Output = std::result::Result<T, tonic::Status>>,
    {
        let deadline = Instant::now() + self.retry_deadline;
        let mut attempts = 0usize;
        let mut auth_rounds = 0;
        loop {
            let (index, link) = self.channel();
            let last = if link.ask_first {
                let credentials = self
                    .credentials
                    .as_ref()
                    .expect("asked only with credentials");
                auth_rounds += 1;
                if auth_rounds > AUTH_ROUNDS_MAX {
                    return Err(Error::Status(tonic::Status::unauthenticated(
                        "the cluster refused every token given to this client",
                    )));
                }
                match credentials.authenticate(link.channel.clone()).await {
                    Ok(()) => continue,
                    Err(status) if is_unavailable(&status) => status,
                    Err(status) => return Err(Error::Status(status)),
                }
            } else {
                let sent = link.token.clone();
                match call(link).await {
                    Ok(value) => return Ok(value),
                    Err(status)
                        if self.credentials.is_some()
                            && wants_new_token(status.message())
                            && auth_rounds < AUTH_ROUNDS_MAX =>
                    {
                        self.credentials
                            .as_ref()
                            .expect("checked above")
                            .forget(&sent);
                        continue;
                    }
                    Err(status)
                        if is_old_auth_revision(&status) && auth_rounds < AUTH_ROUNDS_MAX =>
                    {
                        auth_rounds += 1;
                        continue;
                    }
                    Err(status) if repeatable && is_unavailable(&status) => status,
                    Err(status) => return Err(Error::Status(status)),
                }
            };
            self.rotate(index);
            attempts += 1;
            if Instant::now() >= deadline {
                return Err(Error::Unavailable {
                    endpoints: self.endpoints.join(","),
                    waited: self.retry_deadline,
                    last: last.message().to_string(),
                });
            }
            if attempts.is_multiple_of(self.channels.len()) {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }

    /// Moves to the endpoint after `failed`, unless another call already
    /// moved on from it.
    pub(crate) fn rotate(&self, failed: usize) {
        let mut current = self.current.lock().expect("endpoint lock");
        if *current == failed {
            *current = (failed + 1) % self.channels.len();
        }
    }
}

/// Whether a failure means "this member cannot serve now, try another".
pub(crate) fn is_unavailable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        tonic::Code::Unavailable | tonic::Code::Unknown | tonic::Code::Cancelled
    ) || status.message().contains("no leader")
        || status.message().contains("leader changed")
}
