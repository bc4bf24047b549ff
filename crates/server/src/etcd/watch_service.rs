//! `etcdserverpb.Watch`: the bidirectional Watch stream, with etcd 3.4's
//! semantics (see `session.rs` for the answers and where they come from).
//!
//! Watches are served by the member the client is connected to, from its
//! own store, as etcd does: no forwarding, and header revisions are the
//! local store's. A follower's watchers see a write once it is applied
//! there.
//!
//! Each stream is one task that owns a [`WatchSession`] and waits for
//! whichever comes first: a request, a new revision (`revisions`, updated
//! after every applied write: no polling), room in the bounded response
//! channel, a progress tick, or the server stopping. It reads the store
//! only when the client can take a response, so a slow client leaves its
//! watchers behind in the event log instead of growing a buffer; if the log
//! drops what they still need, they are canceled with the compact revision.
//!
//! Not implemented: `fragment` (a revision is never split, whatever the
//! client asks; one response is bounded by `READ_SCAN_BYTES_MAX` unless a
//! single revision is larger), and etcd's cancelling of streams that
//! require a leader when the leader is lost mid-stream (only checked when
//! the stream opens).

mod session;
mod synced_group;
mod watcher;

pub use session::{
    WatchSession, WatcherBudget, CONTROL_RESPONSES_MAX, REASON_DUPLICATE_ID, REASON_EMPTY_RANGE,
    WATCHERS_MAX, WATCHERS_PER_STREAM_MAX, WATCH_ID_NONE,
};
pub use watcher::READ_SCAN_BYTES_MAX;

use super::auth_gate::Caller;
use super::backend::EtcdBackend;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::watch_server::Watch;
use bellwether_kv::{KvStore, Permission};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tonic::codegen::tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// Responses a stream buffers for its client. Small: events wait in the
/// store's event log, not here.
pub const RESPONSES_BUFFERED_MAX: usize = 16;

/// How often watchers that asked for progress notifications get one while
/// idle: etcd's default (`--experimental-watch-progress-notify-interval`).
pub const PROGRESS_INTERVAL_DEFAULT: Duration = Duration::from_secs(600);

/// The metadata key etcd clients set to ask that a stream fail rather than
/// wait when the cluster has no leader (`clientv3.WithRequireLeader`,
/// which `etcdctl watch` uses).
const REQUIRE_LEADER_METADATA: &str = "hasleader";

/// The Watch service of one node.
#[derive(Clone)]
pub struct WatchService {
    /// What the node's services share.
    backend: EtcdBackend,
    /// Becomes true when the server shuts down, ending every stream: a
    /// graceful shutdown waits for open streams, and watch streams would
    /// otherwise never end.
    stop: watch::Receiver<bool>,
    /// The progress notification interval.
    progress_interval: Duration,
    /// Watchers on this member, over every stream.
    budget: WatcherBudget,
}

impl WatchService {
    /// The service over `backend`; streams end when `stop` becomes true
    /// (or its sender is dropped).
    pub fn new(backend: EtcdBackend, stop: watch::Receiver<bool>) -> Self {
        WatchService {
            backend,
            stop,
            progress_interval: PROGRESS_INTERVAL_DEFAULT,
            budget: WatcherBudget::default(),
        }
    }

    /// Sets the progress notification interval (tests use a short one).
    pub fn with_progress_interval(mut self, progress_interval: Duration) -> Self {
        assert!(!progress_interval.is_zero(), "a zero progress interval");
        self.progress_interval = progress_interval;
        self
    }
}

#[tonic::async_trait]
impl Watch for WatchService {
    type WatchStream = ReceiverStream<Result<pb::WatchResponse, Status>>;

    async fn watch(
        &self,
        request: Request<Streaming<pb::WatchRequest>>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        let requires_leader = request
            .metadata()
            .get(REQUIRE_LEADER_METADATA)
            .is_some_and(|value| value == "true");
        if requires_leader && self.backend.status.borrow().leader.is_none() {
            return Err(Status::unavailable("etcdserver: no leader"));
        }
        let caller = self.backend.caller(&request)?;
        let status = self.backend.status.clone();
        let context = StreamContext {
            caller,
            budget: self.budget.clone(),
            store: self.backend.store.clone(),
            revisions: self.backend.revisions.clone(),
            stop: self.stop.clone(),
            header: pb::ResponseHeader {
                cluster_id: self.backend.cluster_id,
                member_id: self.backend.member_id.0,
                revision: 0,
                raft_term: 0,
            },
            raft_term: Arc::new(move || status.borrow().term),
            progress_interval: self.progress_interval,
        };
        let (sender, receiver) = mpsc::channel(RESPONSES_BUFFERED_MAX);
        tokio::spawn(context.run(request.into_inner(), sender));
        Ok(Response::new(ReceiverStream::new(receiver)))
    }
}

/// Everything one stream's task needs, apart from its two ends. Separate
/// from the backend so tests can run a stream over a bare store.
pub struct StreamContext {
    /// Who opened the stream: each watcher it creates needs read
    /// permission on its range.
    pub caller: Caller,
    /// The member's watcher count.
    pub budget: WatcherBudget,
    /// The store the watchers read.
    pub store: Arc<Mutex<KvStore>>,
    /// The store's revision after each applied write.
    pub revisions: watch::Receiver<i64>,
    /// Becomes true when the server stops.
    pub stop: watch::Receiver<bool>,
    /// Cluster and member ids for response headers.
    pub header: pb::ResponseHeader,
    /// The current Raft term, for response headers.
    pub raft_term: Arc<dyn Fn() -> u64 + Send + Sync>,
    /// The progress notification interval.
    pub progress_interval: Duration,
}

impl StreamContext {
    /// Serves one stream until the client goes away, the request stream
    /// fails, or the server stops (then the stream ends with
    /// `Unavailable`). A client that only closes its sending side keeps
    /// receiving events, as with etcd.
    pub async fn run<R>(
        mut self,
        requests: R,
        responses: mpsc::Sender<Result<pb::WatchResponse, Status>>,
    ) where
        R: Stream<Item = Result<pb::WatchRequest, Status>> + Send + Unpin,
    {
        let mut requests = requests;
        let mut session = WatchSession::new(self.header).with_budget(self.budget.clone());
        let mut known_revision = *self.revisions.borrow_and_update();
        let mut ticker = self.progress_ticker();
        let mut reading = true;
        loop {
            let has_work = session.has_work(known_revision);
            let accepts = reading && session.accepts_requests();
            // A watcher refused for lack of permission, answered after the
            // select (its branch cannot wait for room in the channel).
            let mut refused = None;
            tokio::select! {
                biased;
                () = stopped(&mut self.stop) => {
                    stopping(&responses);
                    break;
                }
                () = responses.closed() => break,
                request = requests.next(), if accepts => match request {
                    Some(Ok(request)) => refused = self.receive(&mut session, request),
                    None => reading = false,
                    Some(Err(status)) => {
                        tracing::debug!(%status, "watch stream failed");
                        break;
                    }
                },
                permit = responses.reserve(), if has_work => {
                    let Ok(permit) = permit else { break };
                    self.send_next_response(&mut session, permit);
                }
                changed = self.revisions.changed() => match changed {
                    Ok(()) => known_revision = *self.revisions.borrow_and_update(),
                    // The node stopped applying: nothing more will come.
                    Err(_) => {
                        stopping(&responses);
                        break;
                    }
                },
                _ = ticker.tick() => self.progress_tick(&mut session),
            }
            if let Some(refusal) = refused {
                if responses.send(Ok(refusal)).await.is_err() {
                    break;
                }
            }
        }
        tracing::debug!(watchers = session.watchers_count(), "watch stream ended");
    }

    /// The timer of idle progress notifications: first due one interval
    /// after the stream opens; a tick missed while the task was busy is
    /// delayed, not made up in a burst.
    fn progress_ticker(&self) -> tokio::time::Interval {
        let start = tokio::time::Instant::now() + self.progress_interval;
        let mut ticker = tokio::time::interval_at(start, self.progress_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker
    }

    /// Takes one request from the client into `session`, unless it creates
    /// a watcher the caller may not read: then the refusal to send is
    /// returned instead (sent after the select, whose branch cannot wait
    /// for room in the channel).
    fn receive(
        &self,
        session: &mut WatchSession,
        request: pb::WatchRequest,
    ) -> Option<pb::WatchResponse> {
        session.set_raft_term((self.raft_term)());
        let term = (self.raft_term)();
        let store = lock(&self.store);
        let refusal = denied(&self.caller, self.header, term, &request, &store);
        if refusal.is_none() {
            session.receive(request, &store);
        }
        refusal
    }

    /// Sends the session's next response, if it has one, into the room
    /// `permit` holds: the store is read only once the client can take
    /// what is read.
    fn send_next_response(
        &self,
        session: &mut WatchSession,
        permit: mpsc::Permit<'_, Result<pb::WatchResponse, Status>>,
    ) {
        session.set_raft_term((self.raft_term)());
        if let Some(response) = session.next_response(&lock(&self.store)) {
            permit.send(Ok(response));
        }
    }

    /// Gives the watchers that asked for progress notifications one, if
    /// they have been idle.
    fn progress_tick(&self, session: &mut WatchSession) {
        session.set_raft_term((self.raft_term)());
        session.progress_tick(&lock(&self.store));
    }
}

/// etcd's answer to a watcher `caller` may not read: created and canceled
/// at once, with the reason.
fn denied(
    caller: &Caller,
    header: pb::ResponseHeader,
    raft_term: u64,
    request: &pb::WatchRequest,
    store: &KvStore,
) -> Option<pb::WatchResponse> {
    let Some(pb::watch_request::RequestUnion::CreateRequest(create)) = &request.request_union
    else {
        return None;
    };
    let refusal = caller
        .check_range(store, &create.key, &create.range_end, Permission::Read)
        .err()?;
    {
        Some(pb::WatchResponse {
            header: Some(pb::ResponseHeader {
                revision: store.revision(),
                raft_term,
                ..header
            }),
            watch_id: -1,
            created: true,
            canceled: true,
            cancel_reason: refusal.message().to_string(),
            ..Default::default()
        })
    }
}

/// Ends a stream because this member stops, with the code etcd clients
/// retry on: they reopen their watchers on another member, from the
/// revision after the last one they saw. A clean end of stream would make
/// them give up instead. Best effort: a client whose buffer is full gets a
/// reset connection soon enough, which they retry too.
fn stopping(responses: &mpsc::Sender<Result<pb::WatchResponse, Status>>) {
    let _ = responses.try_send(Err(Status::unavailable("etcdserver: server stopped")));
}

/// Waits until `stop` turns true (or its sender is gone). Its output
/// borrows nothing, so the select branches of [`StreamContext::run`] may
/// borrow the context while this waits.
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// The store, locked for one read.
fn lock(store: &Mutex<KvStore>) -> std::sync::MutexGuard<'_, KvStore> {
    store.lock().expect("store lock")
}

#[cfg(test)]
mod synced_group_tests;
#[cfg(test)]
mod tests;
