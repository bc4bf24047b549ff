//! The one sans-IO interface that Raft, Bully and Ring all implement.
//!
//! A runtime (the simulator today, the server later) drives a node with
//! [`Protocol::tick`], [`Protocol::step`] and [`Protocol::peer_unreachable`],
//! then drains [`Protocol::ready`] and carries the output out **in order**:
//!
//! 1. persist [`Ready::persist`] (fsync) if present;
//! 2. only then send [`Ready::messages`];
//! 3. then hand [`Ready::output`] to the application.
//!
//! Step 2 may depend on step 1: a vote must never leave a node whose disk does
//! not yet record that vote, or a crash could make it vote twice in one term.
//! The core does no IO, reads no clock and draws randomness only from the
//! seed it was built with, so the same inputs always give the same outputs.

use crate::rng::Rng;
use crate::types::{NodeId, Term};
use std::fmt::Debug;

/// What a node believes its own part in the cluster is right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Follows a leader, or waits for one.
    Follower,
    /// Raft PreVote (thesis §9.6): asking whether an election could succeed,
    /// without raising its term.
    PreCandidate,
    /// Running an election.
    Candidate,
    /// Believes it leads. Under Raft, at most one node per term.
    Leader,
}

impl Role {
    /// Lower-case name for reports and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Follower => "follower",
            Role::PreCandidate => "pre-candidate",
            Role::Candidate => "candidate",
            Role::Leader => "leader",
        }
    }

    /// The role [`Role::as_str`] names, if `name` is one.
    pub fn parse(name: &str) -> Option<Role> {
        [
            Role::Follower,
            Role::PreCandidate,
            Role::Candidate,
            Role::Leader,
        ]
        .into_iter()
        .find(|role| role.as_str() == name)
    }
}

/// Everything an observer may ask a node at any instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// This node.
    pub id: NodeId,
    /// Its current role.
    pub role: Role,
    /// Raft: the current term. Bully and Ring: the highest election epoch seen.
    pub term: Term,
    /// The leader this node currently follows (itself when leading).
    pub leader: Option<NodeId>,
    /// Present only while leading: the token a leader attaches to side effects
    /// so that stale leaders can be fenced off. Raft uses the term, which is
    /// unique per leader; Bully and Ring use their epoch, which is not (they
    /// have no quorum), and the simulator measures what that costs.
    pub fencing_token: Option<u64>,
}

/// A message type that can name itself, so that runtimes can count messages
/// by type without knowing the algorithm.
pub trait Message: Clone + Debug {
    /// Stable, lower-case name of this message's type, e.g. `"vote_request"`.
    fn kind(&self) -> &'static str;
    /// Every kind this algorithm can send, in a fixed order for reports.
    fn all_kinds() -> &'static [&'static str];
}

/// One outgoing message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope<M> {
    /// Destination member.
    pub to: NodeId,
    /// The message itself.
    pub message: M,
}

/// Output of a node since the last call to [`Protocol::ready`], to be acted
/// on in field order.
#[derive(Debug)]
pub struct Ready<P: Protocol> {
    /// State to persist (and fsync) before anything below happens.
    pub persist: Option<P::Persist>,
    /// Messages to send, in the order they were produced.
    pub messages: Vec<Envelope<P::Message>>,
    /// Output for the application (committed entries, read states), handed
    /// over after persisting. Election-only algorithms have none.
    pub output: Vec<P::Output>,
}

impl<P: Protocol> Default for Ready<P> {
    fn default() -> Self {
        Ready {
            persist: None,
            messages: Vec::new(),
            output: Vec::new(),
        }
    }
}

impl<P: Protocol> Ready<P> {
    /// True when there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.persist.is_none() && self.messages.is_empty() && self.output.is_empty()
    }
}

/// A leader-election state machine driven by a runtime.
pub trait Protocol: Sized {
    /// The algorithm's static configuration (timeouts in ticks, options).
    type Config: Clone + Debug;
    /// The algorithm's wire messages.
    type Message: Message;
    /// Everything that survives a crash, as a runtime hands it back on
    /// restart. `Default` is the state of a brand-new node.
    type Durable: Clone + Debug + Default + PartialEq;
    /// One change to the durable state, as `ready()` asks for it.
    type Persist: Debug;
    /// Output for the application after persisting.
    type Output: Debug;

    /// Short algorithm name: `"raft"`, `"bully"` or `"ring"`.
    const NAME: &'static str;

    /// Builds node `id` of a cluster whose members are `members` (which
    /// includes `id`), from what it had persisted before. `rng` is the only
    /// source of randomness the node will ever use.
    fn new(
        config: &Self::Config,
        id: NodeId,
        members: &[NodeId],
        durable: Self::Durable,
        rng: Rng,
    ) -> Self;

    /// Applies one persisted change to an in-memory image of the disk. Real
    /// runtimes write to storage instead; the simulator and tests use this.
    fn apply_persist(durable: &mut Self::Durable, persist: Self::Persist);

    /// The term (or epoch) recorded in a durable image, so that runtimes
    /// can check it never goes back across restarts.
    fn durable_term(durable: &Self::Durable) -> Term;

    /// Advances logical time by one tick.
    fn tick(&mut self);

    /// Delivers one message that `from` sent to this node.
    fn step(&mut self, from: NodeId, message: Self::Message);

    /// A hint from the transport that the connection to `peer` broke, e.g. a
    /// TCP reset after the peer's process died. It may be wrong; acting on it
    /// must never cost safety, and a wrong one must not unseat a healthy
    /// leader.
    fn peer_unreachable(&mut self, peer: NodeId);

    /// True when [`Protocol::ready`] would return something.
    fn has_ready(&self) -> bool;

    /// Takes the pending output. See the module docs for the order in which
    /// the runtime must act on it.
    fn ready(&mut self) -> Ready<Self>;

    /// The node's observable state.
    fn status(&self) -> Status;

    /// Log entries this node had to fetch from others before its latest
    /// leadership could serve: what a new leader catches up on. `None` for
    /// algorithms without a log (Bully, Ring) and before a first leadership.
    /// Raft answers 0, since only an up-to-date candidate can win; Paxos
    /// answers what phase 1 brought in.
    fn catch_up_entries(&self) -> Option<u64> {
        None
    }
}
