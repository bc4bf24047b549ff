//! [`SimLessor`]: a simulated member's lease clock, the server's
//! decisions ([`LeaseClock`], the `kv` crate's) on the member's simulated
//! wall clock. It is driven the way the server drives its lessor
//! (`crates/server/src/etcd/lessor.rs`):
//!
//! - its time is the host's clock (the simulated time at the host's
//!   rate), which the workload hands it, not the member's count of ticks:
//!   the server's lessor reads `Instant`, which jumps ahead across a pause
//!   while the member's ticks catch up one by one;
//!
//! - the state machine tells it every grant and revoke it applies
//!   (`LeaseApplied`, through the queue its state machine fills);
//! - every [`LEASE_CHECK_INTERVAL`] (checked each time the workload hands
//!   it the time, after every input of its member) it follows the member's
//!   status and collects the expired leases; the workload hands their revokes to the
//!   member through the event queue, behind what the member was already
//!   given, as the server's lessor task queues its proposals behind what
//!   the member's loop is doing. A member that wakes from a pause thus
//!   decides on the status it had (its first catch-up tick comes before
//!   anything else), and its revokes arrive after the messages that
//!   waited meanwhile, which may tell it of a new leader;
//! - a keep-alive is renewed only after a read barrier, where the member
//!   still leads.
//!
//! An expiry revoke of a lease that still has its key is an operation in
//! the history (the workload gives each its own client id), so the
//! linearizability checker sees keys vanish where the log says they did.

use super::etcd_entries::{entry_tag, expiry_entry, key_of, SharedStore, Write};
use super::protocol::OpRef;
use super::tagged_machine::LeaseEvents;
use crate::linearizability::{Command, Key, Value};
use bellwether_etcd::{
    store_leases, Leadership, LeaseApplied, LeaseClock, Renewal, LEASE_CHECK_INTERVAL,
};
use bellwether_member::Request;
use std::time::Duration;

/// Client ids from here up name lease clocks, whose expiry revokes are
/// operations too (one client id per member incarnation).
pub const LESSOR_CLIENT_BASE: u64 = 1 << 20;

/// How a simulated lessor proposes its expiry revokes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LessorMode {
    /// Only where its member leads, never forwarded, as the server does.
    #[default]
    Faithful,
    /// BROKEN, for tests: as a client's write, forwarded by a member that
    /// has stepped down to the leader it now knows (the bug `verify
    /// --workload lease` found in session 32).
    ForwardsRevokes,
}

/// A simulated member's lease clock (see the module doc).
pub struct SimLessor {
    clock: LeaseClock,
    events: LeaseEvents,
    /// How much longer than its TTL a lease lives from a takeover.
    extension: Duration,
    /// The host's clock, as last handed in.
    wall: Duration,
    next_check: Duration,
    mode: LessorMode,
    /// The client id of this incarnation's expiry revokes.
    client: u64,
    revokes: u32,
    /// Revokes decided and not yet taken by the workload.
    due: Vec<Request<OpRef, OpRef>>,
    /// Revokes handed to the member since the workload last looked.
    proposed: Vec<(OpRef, Command)>,
    /// Leases whose expiry revoke this member applied since the workload
    /// last looked.
    expired: Vec<i64>,
}

impl SimLessor {
    /// The lease clock of member incarnation `boot`, told of applied
    /// leases through `events`.
    pub fn new(events: LeaseEvents, extension: Duration, mode: LessorMode, boot: u64) -> Self {
        SimLessor {
            clock: LeaseClock::default(),
            events,
            extension,
            wall: Duration::ZERO,
            next_check: Duration::ZERO,
            mode,
            client: LESSOR_CLIENT_BASE + boot,
            revokes: 0,
            due: Vec::new(),
            proposed: Vec::new(),
            expired: Vec::new(),
        }
    }

    /// Takes in what the store applied, at the last time handed in.
    fn catch_up(&mut self) {
        let now = self.wall;
        let events = std::mem::take(&mut *self.events.lock().expect("one thread"));
        for applied in events {
            // A lease clock's expiry revoke that removed a lease: the
            // ledger checks it came no earlier than the lease's guarantee.
            if let LeaseApplied::Revoked {
                id,
                by_client: false,
                existed: true,
            } = applied
            {
                self.expired.push(id);
            }
            self.clock.applied(now, applied);
        }
    }

    /// The host's clock reads `now`: a check, if one is due, on what the
    /// member's status says of its `leadership`.
    pub fn on_clock(&mut self, now: Duration, leadership: Leadership, store: &SharedStore) {
        self.wall = self.wall.max(now);
        self.catch_up();
        if now >= self.next_check {
            self.next_check = now + LEASE_CHECK_INTERVAL;
            let checked = self.clock.check(now, leadership, self.extension, || {
                store_leases(&store.lock().expect("one thread"))
            });
            assert!(!checked.rebuilt, "the lease clock lost track of a lease");
            for id in checked.due {
                let request = self.revoke(id, store);
                self.due.push(request);
            }
        }
    }

    /// The revokes decided since the last call, for the member.
    pub fn take_requests(&mut self) -> Vec<Request<OpRef, OpRef>> {
        std::mem::take(&mut self.due)
    }

    /// The client id of this incarnation's expiry revokes.
    pub fn client(&self) -> u64 {
        self.client
    }

    /// The request that revokes lease `id`.
    fn revoke(&mut self, id: i64, store: &SharedStore) -> Request<OpRef, OpRef> {
        // The workload's leases carry at most one key, the one their leased
        // put wrote, and once a later put detaches it none comes back: the
        // model's revoke names that key. A revoke of a lease without a key
        // changes nothing the model sees, so it stays out of the history
        // (where, on some key, it would only widen the checker's search).
        let key = store
            .lock()
            .expect("one thread")
            .lease_keys(id)
            .ok()
            .and_then(|keys| keys.iter().find_map(|k| key_of(k)));
        self.revokes += 1;
        let command = expiry_entry(id);
        let reply = OpRef {
            client: self.client,
            attempt: self.revokes,
            key: key.unwrap_or(Key(0)),
            renew: None,
            write: Some(Write::Revoke),
            entry: entry_tag(&command),
        };
        let lease = Value(u64::try_from(id).expect("the workload's lease ids are positive"));
        if key.is_some() {
            let revoke = Command::Revoke {
                key: reply.key,
                lease,
            };
            self.proposed.push((reply, revoke));
        }
        match self.mode {
            LessorMode::Faithful => Request::ProposeHere { command, reply },
            LessorMode::ForwardsRevokes => Request::Propose { command, reply },
        }
    }

    /// A keep-alive for lease `id` whose read barrier passed, on a member
    /// that leads `term`, if it still does.
    pub fn renew(&mut self, term: Option<u64>, id: i64, store: &SharedStore) -> Renewal {
        self.catch_up();
        let Some(term) = term else {
            return Renewal::NotPrimary;
        };
        let ttl = store
            .lock()
            .expect("one thread")
            .lease(id)
            .map(|l| l.ttl_seconds);
        self.clock.renew(self.wall, term, id, ttl)
    }

    /// The revokes handed out since the last call, with their operations.
    pub fn take_proposed(&mut self) -> Vec<(OpRef, Command)> {
        std::mem::take(&mut self.proposed)
    }

    /// The leases whose expiry revoke this member applied since the last
    /// call.
    pub fn take_expired(&mut self) -> Vec<i64> {
        self.catch_up();
        std::mem::take(&mut self.expired)
    }
}
