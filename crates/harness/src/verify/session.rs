//! What every client of `bellwether verify` shares: one lazily connected
//! channel per member, and a [`Session`] that talks to one member at a time
//! (followers included, so forwarding is exercised) and moves to the next
//! one after a failure. A request is made once: there is no retry inside
//! an operation, so a history says exactly what each answer was about.

use bellwether_api::etcdserverpb as pb;
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use std::time::Duration;
use tokio::time::Instant;
use tonic::transport::{Channel, Endpoint};

/// How long one request may take before it counts as unanswered.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);
/// Operations recorded per run, at most; clients stop at the bound.
pub const OPERATIONS_MAX: usize = 200_000;
/// Pause after a failed request, so that a client does not spin on a
/// member that is down.
pub const PAUSE_AFTER_FAILURE: Duration = Duration::from_millis(20);

/// One lazily connected channel per member.
pub fn channels(endpoints: &[String]) -> anyhow::Result<Vec<Channel>> {
    endpoints
        .iter()
        .map(|endpoint| {
            Ok(Endpoint::from_shared(format!("http://{endpoint}"))?
                .connect_timeout(Duration::from_millis(300))
                .tcp_nodelay(true)
                .connect_lazy())
        })
        .collect()
}

/// A client's position: which member it talks to, its clock origin, and
/// its pace.
pub struct Session {
    pub client: u64,
    channels: Vec<Channel>,
    member: usize,
    origin: Instant,
    /// Time between the starts of this client's requests, at least, so
    /// that a run's bounded history spreads over all of it.
    pace: Duration,
}

impl Session {
    /// Client `client`'s session, starting on member `client mod n` so
    /// that the clients spread over the members.
    pub fn new(client: u64, channels: Vec<Channel>, origin: Instant) -> Session {
        assert!(!channels.is_empty(), "a cluster has members");
        let member = client as usize % channels.len();
        Session {
            client,
            channels,
            member,
            origin,
            pace: Duration::ZERO,
        }
    }

    /// The session with `clients` clients sharing [`OPERATIONS_MAX`]
    /// requests evenly over `span`.
    pub fn paced(mut self, clients: usize, span: Duration) -> Session {
        self.pace = span * clients as u32 / OPERATIONS_MAX as u32;
        self
    }

    /// Waits for the start of this client's request number `sequence`.
    pub async fn wait_turn(&self, sequence: u64) {
        tokio::time::sleep_until(self.origin + self.pace * sequence as u32).await;
    }

    /// A KV client on the member in use.
    pub fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channels[self.member].clone())
    }

    /// A Lease client on the member in use.
    pub fn lease(&self) -> LeaseClient<Channel> {
        LeaseClient::new(self.channels[self.member].clone())
    }

    /// The run's origin, which the clients' times count from.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Microseconds since the run's origin.
    pub fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// Moves to the next member after a failed request, and pauses.
    pub async fn failed(&mut self) {
        self.member = (self.member + 1) % self.channels.len();
        tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
    }
}
