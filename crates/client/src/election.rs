//! [`Election`]: one leader at a time among the sessions that campaign
//! under a name, with a fencing token that only grows.
//!
//! A campaign writes the campaigner's key (see [`crate::keys`]) and waits
//! until every key created before it is gone. A waiting campaigner watches
//! only the key just before its own, so a resignation wakes exactly one
//! waiter, never the whole line. The leader's token is its key's create
//! revision: a later leader's key was created later, so tokens strictly
//! increase across successive leaders of one name.
//!
//! The token does what no timeout can: [`Leadership::guard`] is a compare
//! to put in front of every write the leader makes, and the store refuses
//! the write once the key is gone, even from a leader that was paused and
//! does not know it was deposed.

use crate::client::Client;
use crate::error::{Error, Result};
use crate::keys::{self, WatchEnd};
use crate::session::{Session, SessionState};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use std::sync::Arc;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

/// How many leader changes an observer buffers before it waits for its
/// reader.
pub const OBSERVE_BUFFER_MAX: usize = 64;

/// The longest a campaign or an observer waits on a watch before reading
/// the line again.
pub const REREAD_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// The leader of an election as read from the store.
///
/// ```no_run
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// let client = bellwether_client::Client::connect(["127.0.0.1:7201"])?;
/// if let Some(leader) = bellwether_client::leader_of(&client, "cron").await? {
///     println!("{} leads with token {}", String::from_utf8_lossy(&leader.value), leader.token);
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderInfo {
    /// The leader's key.
    pub key: Vec<u8>,
    /// The value the leader campaigned (or last proclaimed) with.
    pub value: Vec<u8>,
    /// The leader's fencing token: its key's create revision.
    pub token: i64,
    /// The leader's lease.
    pub lease: i64,
}

impl LeaderInfo {
    /// From a stored key.
    fn from_kv(kv: mvccpb::KeyValue) -> LeaderInfo {
        LeaderInfo {
            key: kv.key,
            value: kv.value,
            token: kv.create_revision,
            lease: kv.lease,
        }
    }
}

/// Where a campaign stands.
///
/// ```
/// use bellwether_client::LeadershipState;
/// let state = LeadershipState::Leader { token: 42, key: b"cron/1".to_vec() };
/// assert!(matches!(state, LeadershipState::Leader { token: 42, .. }));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeadershipState {
    /// The key is being written.
    Campaigning,
    /// Waiting in line; `leader` leads now (if anyone does).
    Follower {
        /// The current leader, if any key is ahead of the line.
        leader: Option<LeaderInfo>,
        /// This campaign's own token, which it will lead with.
        token: i64,
    },
    /// Leading.
    Leader {
        /// The fencing token.
        token: i64,
        /// The leader key.
        key: Vec<u8>,
    },
    /// The session was lost, the key deleted, or the campaign resigned.
    /// Final: campaign again with a new session to lead again.
    Lost,
}

/// An election: a name and the session that campaigns in it.
///
/// ```no_run
/// use bellwether_client::{Client, Election, Session, SessionOptions};
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// let client = Client::connect(["127.0.0.1:7201"])?;
/// let session = Session::new(&client, SessionOptions::default()).await?;
/// let election = Election::new(&session, "shard-7")?;
/// let leadership = election.campaign("instance-a").await?;
/// leadership.proclaim("instance-a, serving").await?;
/// leadership.resign().await?;
/// # Ok(())
/// # }
/// ```
pub struct Election {
    /// The cluster.
    client: Client,
    /// The election's name.
    name: String,
    /// The campaigning session's lease.
    lease_id: i64,
    /// The campaigning session's state.
    session_state: watch::Receiver<SessionState>,
}

impl Election {
    /// The election `name`, campaigned in by `session`.
    pub fn new(session: &Session, name: &str) -> Result<Election> {
        keys::check_name(name)?;
        Ok(Election {
            client: session.client().clone(),
            name: name.to_string(),
            lease_id: session.lease_id(),
            session_state: session.state(),
        })
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Campaigns with `value` and returns once this session leads.
    pub async fn campaign(&self, value: impl Into<Vec<u8>>) -> Result<Leadership> {
        let leadership = self.start_campaign(value).await?;
        leadership.wait_leader().await?;
        Ok(leadership)
    }

    /// Writes this session's key and returns at once; the campaign goes on
    /// in the background ([`Leadership::state`], [`Leadership::wait_leader`]).
    pub async fn start_campaign(&self, value: impl Into<Vec<u8>>) -> Result<Leadership> {
        let value = value.into();
        keys::check_value(&value)?;
        if *self.session_state.borrow() == SessionState::Lost {
            return Err(Error::SessionLost);
        }
        let key = keys::campaign_key(&self.name, self.lease_id);
        let token = create_key(&self.client, &key, &value, self.lease_id).await?;
        let (state, _) = watch::channel(LeadershipState::Campaigning);
        let shared = Arc::new(Shared {
            client: self.client.clone(),
            prefix: keys::prefix(&self.name),
            key,
            token,
            lease_id: self.lease_id,
            state,
        });
        let task = tokio::spawn(follow(shared.clone(), self.session_state.clone()));
        Ok(Leadership { shared, task })
    }

    /// The current leader, if any.
    pub async fn leader(&self) -> Result<Option<LeaderInfo>> {
        leader_of(&self.client, &self.name).await
    }

    /// Every change of leader of `name`, starting with the current one
    /// (`None` while nobody leads). It never ends on the latest leader:
    /// after a watch failure or a compaction it reads the leader again.
    pub fn observe(client: &Client, name: &str) -> Result<mpsc::Receiver<Option<LeaderInfo>>> {
        keys::check_name(name)?;
        let (sender, receiver) = mpsc::channel(OBSERVE_BUFFER_MAX);
        tokio::spawn(observe(client.clone(), name.to_string(), sender));
        Ok(receiver)
    }
}

/// The current leader of `name`: the oldest key under its prefix.
pub async fn leader_of(client: &Client, name: &str) -> Result<Option<LeaderInfo>> {
    let (first, _) = keys::first_under(client, &keys::prefix(name), 0, false).await?;
    Ok(first.map(LeaderInfo::from_kv))
}

/// Creates `key` with `value` on `lease` unless it exists (a repeated
/// campaign of the same session), and returns its create revision.
async fn create_key(client: &Client, key: &[u8], value: &[u8], lease: i64) -> Result<i64> {
    let txn = pb::TxnRequest {
        compare: vec![keys::created_at(key, 0)],
        success: vec![keys::put_op(key, value, lease)],
        failure: vec![keys::get_op(key)],
    };
    let response = client.txn(txn).await?;
    if response.succeeded {
        return response
            .header
            .map(|h| h.revision)
            .ok_or(Error::Malformed("a txn answer without a header"));
    }
    let Some(pb::response_op::Response::ResponseRange(range)) = response
        .responses
        .into_iter()
        .next()
        .and_then(|op| op.response)
    else {
        return Err(Error::Malformed("a failed txn without its read"));
    };
    let existing = range.kvs.into_iter().next().ok_or(Error::Malformed(
        "the key vanished between compare and read",
    ))?;
    if existing.value != value {
        // The same session campaigns again with a new value.
        let txn = pb::TxnRequest {
            compare: vec![keys::created_at(key, existing.create_revision)],
            success: vec![keys::put_op(key, value, lease)],
            failure: Vec::new(),
        };
        if !client.txn(txn).await?.succeeded {
            return Err(Error::NotLeader);
        }
    }
    Ok(existing.create_revision)
}

/// A campaign's key and token, shared with its background task.
struct Shared {
    /// The cluster.
    client: Client,
    /// `NAME/`.
    prefix: Vec<u8>,
    /// This campaign's key.
    key: Vec<u8>,
    /// The key's create revision: the fencing token.
    token: i64,
    /// The session's lease.
    lease_id: i64,
    /// Publishes the state.
    state: watch::Sender<LeadershipState>,
}

/// A campaign in an election: waiting in line, leading, or lost.
///
/// ```no_run
/// use bellwether_client::{Client, Election, LeadershipState, Session, SessionOptions};
/// # async fn run() -> Result<(), bellwether_client::Error> {
/// # let client = Client::connect(["127.0.0.1:7201"])?;
/// # let session = Session::new(&client, SessionOptions::default()).await?;
/// let leadership = Election::new(&session, "cron")?.start_campaign("a").await?;
/// let mut state = leadership.state();
/// while state.changed().await.is_ok() {
///     match &*state.borrow() {
///         LeadershipState::Leader { token, .. } => println!("leading with token {token}"),
///         LeadershipState::Follower { leader, .. } => println!("following {leader:?}"),
///         LeadershipState::Lost => break,
///         LeadershipState::Campaigning => {}
///     }
/// }
/// # Ok(())
/// # }
/// ```
pub struct Leadership {
    /// The key and token.
    shared: Arc<Shared>,
    /// Follows the line and the key; aborted on drop.
    task: JoinHandle<()>,
}

impl Leadership {
    /// The fencing token: the leader key's create revision.
    pub fn token(&self) -> i64 {
        self.shared.token
    }

    /// The leader key.
    pub fn key(&self) -> &[u8] {
        &self.shared.key
    }

    /// The state now and every change to come.
    pub fn state(&self) -> watch::Receiver<LeadershipState> {
        self.shared.state.subscribe()
    }

    /// Whether this campaign leads now (by its local view).
    pub fn is_leader(&self) -> bool {
        matches!(*self.shared.state.borrow(), LeadershipState::Leader { .. })
    }

    /// Waits until this campaign leads; fails once it is lost.
    pub async fn wait_leader(&self) -> Result<i64> {
        let mut state = self.state();
        let reached = state
            .wait_for(|s| matches!(s, LeadershipState::Leader { .. } | LeadershipState::Lost))
            .await
            .map_err(|_| Error::SessionLost)?;
        match &*reached {
            LeadershipState::Leader { token, .. } => Ok(*token),
            _ => Err(Error::SessionLost),
        }
    }

    /// Waits until this campaign is lost.
    pub async fn lost(&self) {
        let mut state = self.state();
        let _ = state.wait_for(|s| *s == LeadershipState::Lost).await;
    }

    /// A compare that holds only while this campaign's key stands: put it
    /// in front of every write made as leader.
    pub fn guard(&self) -> pb::Compare {
        keys::created_at(&self.shared.key, self.shared.token)
    }

    /// Runs `operations` only while this campaign's key stands; returns
    /// whether they ran.
    pub async fn guarded(&self, operations: Vec<pb::RequestOp>) -> Result<bool> {
        // A txn of reads only (none at all, or serializable ones) may be
        // answered from a member's own store, on etcd as here; a
        // linearizable read in the other branch makes the answer current.
        let txn = pb::TxnRequest {
            compare: vec![self.guard()],
            success: operations,
            failure: vec![keys::get_op(&self.shared.key)],
        };
        let response = self
            .shared
            .client
            .call_once(|link| {
                let txn = txn.clone();
                async move { Ok(Client::kv(link).txn(txn).await?.into_inner()) }
            })
            .await?;
        Ok(response.succeeded)
    }

    /// Replaces the leader's value (what observers see). Fails with
    /// [`Error::NotLeader`] if the key is gone.
    pub async fn proclaim(&self, value: impl Into<Vec<u8>>) -> Result<()> {
        let value = value.into();
        keys::check_value(&value)?;
        if !self.is_leader() {
            return Err(Error::NotLeader);
        }
        let txn = pb::TxnRequest {
            compare: vec![self.guard()],
            success: vec![keys::put_op(&self.shared.key, &value, self.shared.lease_id)],
            failure: Vec::new(),
        };
        if self.shared.client.txn(txn).await?.succeeded {
            Ok(())
        } else {
            Err(Error::NotLeader)
        }
    }

    /// Gives the leadership (or the place in line) up: deletes the key, so
    /// the next campaigner leads at once. The session stays. Dropping a
    /// `Leadership` that is not lost does the same in the background.
    pub async fn resign(self) -> Result<()> {
        self.task.abort();
        self.shared.state.send_replace(LeadershipState::Lost);
        let txn = pb::TxnRequest {
            compare: vec![self.guard()],
            success: vec![keys::delete_op(&self.shared.key)],
            failure: Vec::new(),
        };
        self.shared.client.txn(txn).await?;
        Ok(())
    }
}

impl Drop for Leadership {
    /// A campaign dropped before it resigned or was lost (a campaign
    /// future cancelled by a timeout, a guard that goes out of scope)
    /// withdraws its key, as etcd does for a cancelled campaign: a key left
    /// in line would later lead with nobody acting on it, and hold the name
    /// for the session's whole life.
    fn drop(&mut self) {
        self.task.abort();
        let lost = *self.shared.state.borrow() == LeadershipState::Lost;
        if lost {
            return;
        }
        self.shared.state.send_replace(LeadershipState::Lost);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let shared = self.shared.clone();
        runtime.spawn(async move {
            let txn = pb::TxnRequest {
                compare: vec![keys::created_at(&shared.key, shared.token)],
                success: vec![keys::delete_op(&shared.key)],
                failure: Vec::new(),
            };
            if let Err(error) = shared.client.txn(txn).await {
                tracing::debug!(%error, "withdrawing a dropped campaign failed");
            }
        });
    }
}

/// Follows the line until this campaign leads, then its key, until it is
/// lost; publishes each state.
async fn follow(shared: Arc<Shared>, mut session: watch::Receiver<SessionState>) {
    loop {
        let lost = session.wait_for(|s| *s == SessionState::Lost);
        let step = tokio::select! {
            _ = lost => Err(Error::SessionLost),
            step = follow_step(&shared) => step,
        };
        match step {
            Ok(true) => continue,
            Ok(false) | Err(Error::SessionLost) | Err(Error::NotLeader) => {
                shared.state.send_replace(LeadershipState::Lost);
                return;
            }
            Err(error) => {
                // Unreachable cluster or a failed watch: look again. The
                // session's deadline ends this if it lasts.
                tracing::debug!(%error, "campaign step failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}

/// One look at the line, and one wait for it to move. Returns whether to
/// look again (`false` once the key is gone).
async fn follow_step(shared: &Shared) -> Result<bool> {
    let client = &shared.client;
    let (predecessor, revision) =
        keys::first_under(client, &shared.prefix, shared.token - 1, true).await?;
    // The exact key: a prefix read would also match longer keys that
    // begin with this one (lease ids of other lengths).
    let mine = client
        .range(pb::RangeRequest {
            key: shared.key.clone(),
            ..pb::RangeRequest::default()
        })
        .await?
        .kvs
        .into_iter()
        .next();
    if mine.is_none_or(|kv| kv.create_revision != shared.token) {
        return Err(Error::NotLeader);
    }
    let watched = match predecessor {
        None => {
            shared.state.send_if_modified(|state| {
                let changed = !matches!(state, LeadershipState::Leader { .. });
                if changed {
                    *state = LeadershipState::Leader {
                        token: shared.token,
                        key: shared.key.clone(),
                    };
                }
                changed
            });
            shared.key.clone()
        }
        Some(predecessor) => {
            let (leader, _) = keys::first_under(client, &shared.prefix, 0, false).await?;
            let follower = LeadershipState::Follower {
                leader: leader.map(LeaderInfo::from_kv),
                token: shared.token,
            };
            shared.state.send_if_modified(|state| {
                let changed = *state != follower;
                if changed {
                    *state = follower;
                }
                changed
            });
            predecessor.key
        }
    };
    // The key (ours or the predecessor's) is single, not a prefix. The
    // wait is bounded: a watch on a member cut off from the others (or
    // behind a dead connection) may never fire, so the line is read again
    // (linearizably, which fails over) every REREAD_INTERVAL.
    let wait = keys::wait_event(client, &watched, Vec::new(), revision + 1, true);
    if let Ok(waited) = tokio::time::timeout(REREAD_INTERVAL, wait).await {
        waited?;
    }
    Ok(true)
}

/// Sends every change of leader of `name` to `sender` until it closes.
async fn observe(client: Client, name: String, sender: mpsc::Sender<Option<LeaderInfo>>) {
    let prefix = keys::prefix(&name);
    let mut last: Option<Option<LeaderInfo>> = None;
    loop {
        let read = keys::first_under(&client, &prefix, 0, false).await;
        let revision = match read {
            Ok((first, revision)) => {
                let leader = first.map(LeaderInfo::from_kv);
                if last.as_ref() != Some(&leader) {
                    if sender.send(leader.clone()).await.is_err() {
                        return;
                    }
                    last = Some(leader);
                }
                revision
            }
            Err(error) => {
                tracing::debug!(%error, "observe: read failed; retrying");
                if sender.is_closed() {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let end = keys::prefix_end(&prefix);
        let wait = keys::wait_event(&client, &prefix, end, revision + 1, false);
        let waited = tokio::select! {
            _ = sender.closed() => return,
            // Bounded, like a campaign's wait: read again after a while.
            waited = tokio::time::timeout(REREAD_INTERVAL, wait) => match waited {
                Ok(waited) => waited,
                Err(_) => continue,
            },
        };
        match waited {
            Ok(WatchEnd::Event) | Ok(WatchEnd::Compacted) | Ok(WatchEnd::Broken) => {}
            Err(error) => {
                tracing::debug!(%error, "observe: watch failed; retrying");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
}
