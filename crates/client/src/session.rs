//! [`Session`]: a lease kept alive, and a local deadline past which the
//! holder must assume the lease is gone.
//!
//! The server expires a lease TTL seconds after the last keep-alive it
//! received. The client cannot see that moment, but it knows when it sent
//! each keep-alive: a keep-alive that was answered was received no earlier
//! than it was sent, so the lease lives at least until
//! `send time + TTL` by the server's clock. The session's **local
//! deadline** is that instant less a margin for the two clocks running at
//! different rates (at most [`CLOCK_RATE_DRIFT_MAX`] of the TTL) and less
//! any extra margin the caller asks for (the time it needs to stop its
//! work). When the deadline passes without a newer answer the session is
//! `Lost`, strictly before the server can expire the lease and let another
//! holder in, as long as the drift stays within the bound.

use crate::client::Client;
use crate::error::{Error, Result};
use bellwether_api::etcdserverpb as pb;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;

/// The largest difference in clock rate between client and server the
/// deadline allows for, as a fraction of the TTL (1%: ordinary quartz
/// clocks drift by well under 0.01%).
pub const CLOCK_RATE_DRIFT_MAX: f64 = 0.01;

/// Time taken off every deadline for the timer that marks the session
/// lost firing late (timer resolution and scheduling).
pub const TIMER_SLACK: Duration = Duration::from_millis(10);

/// The longest TTL a session may ask for (etcd's own limit is 9e9 s; a
/// day is far past any sensible leadership lease).
pub const TTL_MAX: Duration = Duration::from_secs(24 * 3600);

/// How soon a failed keep-alive is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The metadata that asks a bellwether server for release on disconnect,
/// with the grace in milliseconds.
pub const RELEASE_ON_DISCONNECT_METADATA: &str = "bellwether-release-on-disconnect-ms";

/// The shortest release-on-disconnect grace the server accepts.
pub const RELEASE_ON_DISCONNECT_MS_MIN: u64 = 50;

/// The longest release-on-disconnect grace the server accepts.
pub const RELEASE_ON_DISCONNECT_MS_MAX: u64 = 60_000;

/// Where a session stands.
///
/// ```
/// use bellwether_client::SessionState;
/// // Only Alive and Suspended may still act; Lost is final.
/// let may_act = |s: SessionState| s != SessionState::Lost;
/// assert!(may_act(SessionState::Suspended));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionState {
    /// The last keep-alive was answered; the deadline is ahead.
    Alive,
    /// Keep-alives are failing, but the deadline has not passed yet.
    Suspended,
    /// The deadline passed, the server said the lease is gone, or the
    /// session was closed. Final.
    Lost,
}

/// How a session is set up.
/// ```
/// use bellwether_client::SessionOptions;
/// use std::time::Duration;
/// let options = SessionOptions {
///     release_on_disconnect: Some(Duration::from_millis(300)),
///     ..SessionOptions::with_ttl(Duration::from_secs(10))
/// };
/// assert!(options.validate().is_ok());
/// assert_eq!(options.interval(), Duration::from_millis(75));
/// ```
#[derive(Clone, Debug)]
pub struct SessionOptions {
    /// The lease's time to live (whole seconds; at least 1).
    pub ttl: Duration,
    /// How often a keep-alive is sent; `None` means TTL / 3.
    pub keep_alive_interval: Option<Duration>,
    /// Time taken off the deadline on top of the drift margin: what the
    /// holder needs to stop acting once the session is lost.
    pub extra_margin: Duration,
    /// Release on disconnect (a bellwether extension): when the connection
    /// carrying the keep-alives ends, as it does when the holder crashes,
    /// the server shortens the lease to this grace, so the next campaigner
    /// leads within it instead of within the TTL. To keep the no-overlap
    /// guarantee the session then counts the grace as its lease: it sends
    /// keep-alives every grace / 4 and goes `Lost` within the grace of its
    /// last answered keep-alive. A network blip longer than that costs the
    /// leadership. A real etcd ignores the request and applies the TTL.
    pub release_on_disconnect: Option<Duration>,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            ttl: Duration::from_secs(10),
            keep_alive_interval: None,
            extra_margin: Duration::ZERO,
            release_on_disconnect: None,
        }
    }
}

impl SessionOptions {
    /// Options with a TTL of `ttl` and the defaults otherwise.
    pub fn with_ttl(ttl: Duration) -> SessionOptions {
        SessionOptions {
            ttl,
            ..SessionOptions::default()
        }
    }

    /// How long the lease surely lives after a keep-alive is sent, as far
    /// as the holder may count on it: the TTL, or the release-on-disconnect
    /// grace when that is shorter.
    pub fn lease_span(&self) -> Duration {
        match self.release_on_disconnect {
            Some(grace) => self.ttl.min(grace),
            None => self.ttl,
        }
    }

    /// The keep-alive interval in force: a third of the TTL, or a quarter
    /// of the release grace (short graces leave little room otherwise).
    pub fn interval(&self) -> Duration {
        let default = match self.release_on_disconnect {
            Some(_) => self.lease_span() / 4,
            None => self.ttl / 3,
        };
        self.keep_alive_interval.unwrap_or(default)
    }

    /// How far before `send time + lease span` the session counts itself
    /// lost.
    pub fn margin(&self) -> Duration {
        self.lease_span().mul_f64(CLOCK_RATE_DRIFT_MAX) + TIMER_SLACK + self.extra_margin
    }

    /// Refuses settings under which the session could not stay alive
    /// between two keep-alives, or that break a limit.
    pub fn validate(&self) -> Result<()> {
        let invalid = |text: String| Err(Error::InvalidArgument(text));
        if self.ttl < Duration::from_secs(1) || self.ttl.subsec_nanos() != 0 {
            return invalid(format!(
                "the TTL must be a whole number of seconds, at least 1 (got {:?})",
                self.ttl
            ));
        }
        if self.ttl > TTL_MAX {
            return invalid(format!("the TTL must be at most {TTL_MAX:?}"));
        }
        if let Some(grace) = self.release_on_disconnect {
            let millis = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
            // The server gets whole milliseconds: a fraction would make the
            // client count on more than the server grants.
            if grace.subsec_nanos() % 1_000_000 != 0
                || !(RELEASE_ON_DISCONNECT_MS_MIN..=RELEASE_ON_DISCONNECT_MS_MAX).contains(&millis)
            {
                return invalid(format!(
                    "the release-on-disconnect grace must be whole milliseconds from \
                     {RELEASE_ON_DISCONNECT_MS_MIN} to {RELEASE_ON_DISCONNECT_MS_MAX} (got {grace:?})"
                ));
            }
        }
        let interval = self.interval();
        if interval.is_zero() {
            return invalid("the keep-alive interval must be above 0".into());
        }
        let usable = self.lease_span().saturating_sub(self.margin());
        // Two keep-alives must fit before the deadline, so that one lost
        // answer does not lose the session.
        if usable <= interval * 2 {
            return invalid(format!(
                "a lease of {:?} leaves {usable:?} after the margin of {:?}: not enough for \
                 two keep-alives every {interval:?}; raise the TTL (or the release grace) or \
                 lower the margin",
                self.lease_span(),
                self.margin()
            ));
        }
        Ok(())
    }
}

/// A lease kept alive in the background. Dropping the session stops the
/// keep-alives (the lease then expires on the server); [`Session::close`]
/// revokes it at once.
///
/// ```no_run
/// use bellwether_client::{Client, Session, SessionOptions, SessionState};
/// use std::time::Duration;
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// let client = Client::connect(["127.0.0.1:7201"])?;
/// let session = Session::new(&client, SessionOptions::with_ttl(Duration::from_secs(5))).await?;
/// let mut state = session.state();
/// // Stop acting on anything the lease guards once this returns.
/// let _ = state.wait_for(|s| *s == SessionState::Lost).await;
/// # Ok(())
/// # }
/// ```
pub struct Session {
    /// What the keep-alive task shares.
    shared: Arc<Shared>,
    /// The keep-alive task; aborted on close and drop.
    task: JoinHandle<()>,
}

/// The session's state, shared with its keep-alive task.
struct Shared {
    /// The cluster.
    client: Client,
    /// The lease.
    lease_id: i64,
    /// The settings.
    options: SessionOptions,
    /// The local deadline: past it, the lease may be gone.
    deadline: Mutex<Instant>,
    /// Publishes the state.
    state: watch::Sender<SessionState>,
}

impl Session {
    /// Grants a lease and starts keeping it alive.
    pub async fn new(client: &Client, options: SessionOptions) -> Result<Session> {
        options.validate()?;
        let sent_at = Instant::now();
        let ttl_seconds = i64::try_from(options.ttl.as_secs()).expect("TTL bounded by TTL_MAX");
        let granted = client
            .retry(|channel| async move {
                let request = pb::LeaseGrantRequest {
                    ttl: ttl_seconds,
                    id: 0,
                };
                Ok(Client::lease(channel)
                    .lease_grant(request)
                    .await?
                    .into_inner())
            })
            .await?;
        if !granted.error.is_empty() {
            return Err(Error::InvalidArgument(granted.error));
        }
        if granted.id == 0 || granted.ttl <= 0 {
            return Err(Error::Malformed("a lease grant without an id or a TTL"));
        }
        let deadline = deadline_after(sent_at, granted.ttl, &options);
        let (state, _) = watch::channel(SessionState::Alive);
        let shared = Arc::new(Shared {
            client: client.clone(),
            lease_id: granted.id,
            options,
            deadline: Mutex::new(deadline),
            state,
        });
        let task = tokio::spawn(keep_alive(shared.clone()));
        Ok(Session { shared, task })
    }

    /// The lease's id.
    pub fn lease_id(&self) -> i64 {
        self.shared.lease_id
    }

    /// The lease's TTL as asked for.
    pub fn ttl(&self) -> Duration {
        self.shared.options.ttl
    }

    /// The client the session was made with.
    pub fn client(&self) -> &Client {
        &self.shared.client
    }

    /// The state now and every change to come.
    pub fn state(&self) -> watch::Receiver<SessionState> {
        self.shared.state.subscribe()
    }

    /// The local deadline now.
    pub fn deadline(&self) -> Instant {
        *self.shared.deadline.lock().expect("deadline lock")
    }

    /// Stops sending keep-alives without revoking the lease, as a process
    /// that hangs would: the session goes `Lost` at its deadline and the
    /// server expires the lease later. For tests of what a stalled holder
    /// sees, and for handing a lease over to expiry on purpose.
    pub fn stop_keep_alive(&self) {
        self.task.abort();
        let deadline = self.deadline();
        let shared = self.shared.clone();
        tokio::spawn(async move {
            tokio::time::sleep_until(deadline).await;
            shared.state.send_replace(SessionState::Lost);
        });
    }

    /// Whether the session is lost.
    pub fn is_lost(&self) -> bool {
        *self.shared.state.borrow() == SessionState::Lost
    }

    /// Stops the keep-alives and revokes the lease, which deletes every key
    /// attached to it (leader keys and locks included).
    pub async fn close(self) -> Result<()> {
        self.task.abort();
        self.shared.state.send_replace(SessionState::Lost);
        let id = self.shared.lease_id;
        let revoked = self
            .shared
            .client
            .retry(|channel| async move {
                let request = pb::LeaseRevokeRequest { id };
                match Client::lease(channel).lease_revoke(request).await {
                    Ok(_) => Ok(()),
                    // Revoked or expired already: the goal is met.
                    Err(status) if status.code() == tonic::Code::NotFound => Ok(()),
                    Err(status) => Err(status),
                }
            })
            .await;
        revoked
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.state.send_replace(SessionState::Lost);
    }
}

/// `sent_at + ttl - margin`.
fn deadline_after(sent_at: Instant, ttl_seconds: i64, options: &SessionOptions) -> Instant {
    let ttl = Duration::from_secs(u64::try_from(ttl_seconds).expect("positive TTL"));
    // The server may grant a longer TTL than asked (etcd raises short
    // ones); count on no more than was asked for, nor past the release
    // grace.
    let ttl = ttl.min(options.lease_span());
    sent_at + ttl.saturating_sub(options.margin())
}

/// An open keep-alive stream.
struct Stream {
    /// Requests go here.
    requests: mpsc::Sender<pb::LeaseKeepAliveRequest>,
    /// Answers come from here.
    answers: tonic::Streaming<pb::LeaseKeepAliveResponse>,
    /// The endpoint it runs on.
    endpoint: usize,
}

/// Sends one keep-alive (opening a stream first if needed) and returns the
/// TTL in the answer.
async fn keep_alive_once(shared: &Shared, stream: &mut Option<Stream>) -> Result<i64> {
    let request = pb::LeaseKeepAliveRequest {
        id: shared.lease_id,
    };
    match stream {
        Some(open) => {
            if open.requests.send(request).await.is_err() {
                return Err(Error::Malformed("the keep-alive stream closed"));
            }
        }
        None => {
            let (endpoint, channel) = shared.client.channel();
            let (requests, receiver) = mpsc::channel(1);
            // The first request goes in before the call: etcd sends the
            // stream's headers only with its first answer, so awaiting the
            // call with nothing sent would wait forever.
            requests
                .send(request)
                .await
                .expect("the receiver is alive until the call below drops it");
            let mut call = tonic::Request::new(ReceiverStream::new(receiver));
            if let Some(grace) = shared.options.release_on_disconnect {
                let millis = grace.as_millis().to_string();
                call.metadata_mut().insert(
                    RELEASE_ON_DISCONNECT_METADATA,
                    millis.parse().expect("digits are valid metadata"),
                );
            }
            let opened = Client::lease(channel).lease_keep_alive(call).await;
            match opened {
                Ok(answers) => {
                    *stream = Some(Stream {
                        requests,
                        answers: answers.into_inner(),
                        endpoint,
                    })
                }
                Err(status) => {
                    shared.client.rotate(endpoint);
                    return Err(Error::Status(status));
                }
            }
        }
    }
    let open = stream.as_mut().expect("opened above");
    match open.answers.message().await {
        Ok(Some(answer)) => Ok(answer.ttl),
        Ok(None) => Err(Error::Malformed("the keep-alive stream ended")),
        Err(status) => Err(Error::Status(status)),
    }
}

/// Keeps the lease alive until the deadline passes or the server says the
/// lease is gone.
async fn keep_alive(shared: Arc<Shared>) {
    let interval = shared.options.interval();
    let mut stream: Option<Stream> = None;
    loop {
        let deadline = *shared.deadline.lock().expect("deadline lock");
        let sent_at = Instant::now();
        if sent_at >= deadline {
            shared.state.send_replace(SessionState::Lost);
            return;
        }
        let wait = (sent_at + interval).min(deadline);
        let next = match tokio::time::timeout_at(wait, keep_alive_once(&shared, &mut stream)).await
        {
            Ok(Ok(ttl)) if ttl > 0 => {
                let renewed = deadline_after(sent_at, ttl, &shared.options);
                let mut deadline = shared.deadline.lock().expect("deadline lock");
                *deadline = (*deadline).max(renewed);
                drop(deadline);
                shared.state.send_if_modified(|state| {
                    let changed = *state == SessionState::Suspended;
                    if changed {
                        *state = SessionState::Alive;
                    }
                    changed
                });
                sent_at + interval
            }
            Ok(Ok(_)) => {
                // The server no longer has the lease.
                shared.state.send_replace(SessionState::Lost);
                return;
            }
            Ok(Err(error)) => {
                tracing::debug!(lease = shared.lease_id, %error, "keep-alive failed");
                fail_over(&shared, &mut stream);
                Instant::now() + RETRY_PAUSE
            }
            Err(_elapsed) => {
                tracing::debug!(lease = shared.lease_id, "keep-alive unanswered");
                fail_over(&shared, &mut stream);
                Instant::now()
            }
        };
        let deadline = *shared.deadline.lock().expect("deadline lock");
        tokio::time::sleep_until(next.min(deadline)).await;
    }
}

/// Drops a failing stream, moves to the next endpoint and marks the
/// session suspended (unless it is lost already).
fn fail_over(shared: &Shared, stream: &mut Option<Stream>) {
    if let Some(failed) = stream.take() {
        shared.client.rotate(failed.endpoint);
    }
    shared.state.send_if_modified(|state| {
        let changed = *state == SessionState::Alive;
        if changed {
            *state = SessionState::Suspended;
        }
        changed
    });
}
