//! [`RaftNode`]: one member's Raft state machine, and the term rules every
//! message goes through (paper §5.1) before it reaches a role handler.
//!
//! Behaviour lives beside this file, one concern per file: `election.rs`
//! (timers, PreVote, votes, the hint), `leader.rs` (heartbeats, CheckQuorum,
//! transfer, priority), `replication.rs` (leader side of AppendEntries and
//! commitment), `follower.rs` (follower side), `reads.rs` (ReadIndex and
//! leases), `membership.rs`, `snapshot.rs` and `proposal.rs`.

use super::config::RaftConfig;
use super::durable::{HardState, RaftDurable, RaftPersist};
use super::entry::{ClusterConfig, Entry, Snapshot};
use super::log::RaftLog;
use super::message::RaftMessage;
use super::output::RaftOutput;
use super::progress::Progress;
use super::reads::ReadQueue;
use super::snapshot::{IncomingSnapshot, PendingRestore};
use crate::adaptive_detector::{AdaptiveDetector, DetectorState};
use crate::protocol::{Envelope, Protocol, Ready, Role, Status};
use crate::rng::Rng;
use crate::types::{LogIndex, NodeId, Term};
use std::collections::BTreeMap;

/// At most this many messages per member may wait in the outbox between two
/// calls to `ready()`. A runtime that drains after every input never comes
/// close; the bound turns a runtime that forgets to drain into a loud crash
/// instead of unbounded memory.
pub const OUTBOX_MESSAGES_PER_PEER_MAX: usize = 1_024;

/// A leadership transfer under way (thesis §3.10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transfer {
    /// The member that should become leader.
    pub target: NodeId,
    /// Leader-local tick at which the transfer began; it is abandoned after
    /// one minimum election timeout.
    pub started_tick: u64,
    /// Whether TimeoutNow has been sent already (it is sent once).
    pub timeout_now_sent: bool,
}

/// One Raft member. Build it with [`Protocol::new`]; drive it with `tick`,
/// `step` and `peer_unreachable`; drain `ready()` after each call.
#[derive(Debug)]
pub struct RaftNode {
    /// Settings shared by the cluster.
    pub(super) config: RaftConfig,
    /// This member.
    pub(super) id: NodeId,
    /// Members given at construction; the configuration until the log or a
    /// snapshot says otherwise.
    pub(super) bootstrap: ClusterConfig,
    /// The configuration in force: the latest one in the log, committed or
    /// not (thesis §4.1).
    pub(super) cluster: ClusterConfig,
    /// Log index of the entry that set `cluster` (0 = bootstrap/snapshot).
    pub(super) cluster_index: LogIndex,
    /// The only source of randomness: election timeouts.
    pub(super) rng: Rng,
    /// Persistent: latest term seen.
    pub(super) term: Term,
    /// Persistent: vote cast in `term`.
    pub(super) voted_for: Option<NodeId>,
    /// Persistent: the log.
    pub(super) log: RaftLog,
    /// Highest index known committed; never decreases.
    pub(super) commit: LogIndex,
    /// Highest index handed to the application.
    pub(super) applied: LogIndex,
    /// Term or vote changed since the last `ready()`.
    pub(super) hard_state_dirty: bool,
    /// The commit index advanced since the hard state was last handed out.
    /// The commit index on disk is only a hint for restarts (a restarted
    /// node may re-apply its log up to it before hearing from a leader;
    /// nothing depends on it for safety), so it never costs an fsync of
    /// its own: it rides along with the next `ready()` that persists
    /// anything else. Persisting it alone made a leader fsync twice per
    /// write, once for the entry and once more before applying it.
    pub(super) commit_unpersisted: bool,
    /// The latest snapshot (sent to followers that lag behind it).
    pub(super) snapshot: Option<Snapshot>,
    /// A snapshot to persist in the next `ready()`.
    pub(super) snapshot_to_persist: Option<Snapshot>,
    /// Follower: a snapshot being received in chunks.
    pub(super) incoming_snapshot: Option<IncomingSnapshot>,
    /// Whether the application restores a snapshot from the leader off its
    /// loop (see [`RaftNode::restore_in_background`]).
    pub(super) restores_in_background: bool,
    /// A snapshot from the leader handed out and not yet restored by the
    /// application: committed entries wait until it is.
    pub(super) pending_restore: Option<PendingRestore>,
    /// Output for the application, other than committed entries.
    pub(super) pending_output: Vec<RaftOutput>,
    /// Current role.
    pub(super) role: Role,
    /// The leader of `term` as far as this node knows.
    pub(super) leader: Option<NodeId>,
    /// Local logical clock, one per tick. Never leaves the node: other nodes'
    /// clocks may run at other rates.
    pub(super) now_tick: u64,
    /// Ticks since the election timer was last reset.
    pub(super) election_elapsed_ticks: u64,
    /// Current randomized election timeout in
    /// `[election_ticks_min, 2 * election_ticks_min)`.
    pub(super) election_timeout_ticks: u64,
    /// Local tick at which the leader was last heard from (stickiness).
    pub(super) leader_contact_tick: Option<u64>,
    /// Local tick at which this node last gave a real vote (to itself or
    /// another). With stickiness, it votes for nobody else for
    /// `election_ticks_min` after, so the node it voted for can count on
    /// that from the moment it asked (its leadership lease, `reads.rs`).
    pub(super) vote_granted_tick: Option<u64>,
    /// Local tick at which this node last sent its vote requests: the start
    /// of its leadership lease if it wins.
    pub(super) campaign_tick: u64,
    /// The transport said the connection to `leader` broke; stickiness no
    /// longer protects that leader from this node's point of view.
    pub(super) leader_lost: bool,
    /// Local tick at which a hint-triggered PreVote will start.
    pub(super) hint_campaign_tick: Option<u64>,
    /// Follower: learns when the leader's messages arrive and suspects a
    /// silent leader before the election timeout (off when `None`).
    pub(super) detector: Option<AdaptiveDetector>,
    /// Fault injection: the leadership window ignores the detector (see
    /// `keep_timeout_leadership_for_fault_injection`).
    #[cfg(feature = "fault-injection")]
    pub(super) timeout_leadership: bool,
    /// Fault injection: committed entries are handed out while a restore
    /// is pending (see `apply_while_restoring_for_fault_injection`).
    #[cfg(feature = "fault-injection")]
    pub(super) ignore_pending_restore: bool,
    /// Answers collected by the current (pre-)campaign: voter → granted.
    pub(super) votes: BTreeMap<NodeId, bool>,
    /// Leader only: ticks since the last heartbeat broadcast.
    pub(super) heartbeat_elapsed_ticks: u64,
    /// Leader only: the tick it took office, for the rotation policy.
    pub(super) leader_since_tick: u64,
    /// Leader only: what it knows of each other member.
    pub(super) progress: BTreeMap<NodeId, Progress>,
    /// Leader only: a leadership transfer under way.
    pub(super) transfer: Option<Transfer>,
    /// Leader only: new entries await sending at the next `ready()`, so that
    /// proposals made in between travel in one message per follower.
    pub(super) replication_pending: bool,
    /// Leader only: the commit index advanced; followers with nothing left
    /// to receive learn it at the next `ready()` instead of at the next
    /// heartbeat (a follower answers a client forwarded through it only
    /// once it applies the entry, so a heartbeat interval there would be
    /// the write's latency).
    pub(super) commit_notice_pending: bool,
    /// Leader only: linearizable reads waiting for confirmation.
    pub(super) reads: ReadQueue,
    /// Leader only: the highest index it announced durable in its term
    /// (see `durable_notice.rs`); followers may have committed up to it.
    pub(super) announced_durable: LogIndex,
    /// Leader only: the configuration index its last durable notice named.
    pub(super) announced_config_index: LogIndex,
    /// Follower: the highest durable index the leader of this term
    /// announced, with the configuration index that notice named.
    pub(super) leader_durable: (LogIndex, LogIndex),
    /// Messages produced since the last `ready()`.
    pub(super) outbox: Vec<Envelope<RaftMessage>>,
    /// Set while this member repairs a log that lost what it had
    /// acknowledged (`promises.rs`): it does not campaign, and votes as if
    /// its log still ended at the entry this names.
    pub(super) repair: Option<super::promises::Repair>,
}

impl RaftNode {
    /// The persistent state, as the runtime should have stored it.
    pub fn hard_state(&self) -> HardState {
        HardState {
            term: self.term,
            voted_for: self.voted_for,
            commit: self.commit,
        }
    }

    /// The in-memory log.
    pub fn log(&self) -> &RaftLog {
        &self.log
    }

    /// Highest committed index known here.
    pub fn commit_index(&self) -> LogIndex {
        self.commit
    }

    /// Highest index the application's state reflects: handed to it, and
    /// not behind a snapshot it is still restoring (whose state is then
    /// still that of the index before it).
    pub fn applied_index(&self) -> LogIndex {
        self.pending_restore
            .as_ref()
            .map_or(self.applied, |pending| pending.state_at)
    }

    /// The configuration in force.
    pub fn cluster(&self) -> &ClusterConfig {
        &self.cluster
    }

    /// The leadership transfer under way, if this node leads and started one.
    pub fn transfer(&self) -> Option<Transfer> {
        self.transfer
    }

    /// The settings this node runs with.
    pub fn config(&self) -> &RaftConfig {
        &self.config
    }

    /// Leader only: what it knows of `peer`.
    pub fn progress(&self, peer: NodeId) -> Option<&Progress> {
        self.progress.get(&peer)
    }

    /// Voters needed for a majority.
    pub(super) fn quorum(&self) -> usize {
        self.cluster.voters.len() / 2 + 1
    }

    /// True when this node may vote and campaign: a voter of the
    /// configuration that is not repairing its log.
    pub(super) fn is_voter(&self) -> bool {
        self.cluster.voters.contains(&self.id) && self.repair.is_none()
    }

    /// Puts this member into repair (`promises.rs`): until its log is as
    /// up-to-date as `repair` names, it does not campaign and grants votes
    /// only to candidates at least that up-to-date. Call before the first
    /// tick, with the term and vote the audit restored already in the
    /// durable state.
    pub fn start_repair(&mut self, repair: super::promises::Repair) {
        assert!(self.role == Role::Follower, "a repair starts as a follower");
        self.repair = Some(repair);
        self.check_repair();
    }

    /// The repair under way, if any.
    pub fn repair(&self) -> Option<super::promises::Repair> {
        self.repair
    }

    /// Ends the repair once the log is as up-to-date as the one the member
    /// had acknowledged.
    pub(super) fn check_repair(&mut self) {
        let Some(repair) = self.repair else { return };
        if repair.is_reached_by(self.log.last_term(), self.log.last_index()) {
            self.repair = None;
        }
    }

    /// Other voters, in id order.
    pub(super) fn peers(&self) -> impl Iterator<Item = NodeId> + '_ {
        let me = self.id;
        self.cluster
            .voters
            .iter()
            .copied()
            .filter(move |v| *v != me)
    }

    /// Every other member that receives the log (voters and learners).
    pub(super) fn replicas(&self) -> Vec<NodeId> {
        self.cluster.members().filter(|m| *m != self.id).collect()
    }

    /// Queues one message.
    pub(super) fn send(&mut self, to: NodeId, message: RaftMessage) {
        assert_ne!(to, self.id, "a node never messages itself");
        let bound = OUTBOX_MESSAGES_PER_PEER_MAX
            * (self.cluster.voters.len() + self.cluster.learners.len() + 1);
        assert!(
            self.outbox.len() < bound,
            "outbox over {bound}: ready() not drained"
        );
        self.outbox.push(Envelope { to, message });
    }

    /// Leader stickiness: true while this node would defend its leader
    /// against a vote for a higher term.
    pub(super) fn in_lease(&self) -> bool {
        if !self.config.leader_stickiness {
            return false;
        }
        if self.role == Role::Leader {
            return true;
        }
        // A node that just started may have acknowledged a leader's
        // heartbeat before it went down; leader leases count on that
        // promise, so it keeps it for one minimum election timeout after
        // starting, with no memory of whom it followed.
        if self.now_tick < self.config.election_ticks_min {
            return true;
        }
        // A vote given within one minimum election timeout is a promise to
        // its candidate, whose lease counts on it; a connection-loss hint
        // about the leader it became releases it, as it releases the
        // leader's own stickiness.
        if !self.leader_lost
            && self
                .vote_granted_tick
                .is_some_and(|granted| self.now_tick - granted < self.config.election_ticks_min)
        {
            return true;
        }
        match (self.leader, self.leader_contact_tick) {
            (Some(_), Some(contact)) => {
                !self.leader_lost && self.now_tick - contact < self.config.election_ticks_min
            }
            _ => false,
        }
    }

    /// Restarts the election timer with a fresh random timeout (§5.2).
    pub(super) fn reset_election_timer(&mut self) {
        let min = self.config.election_ticks_min;
        self.election_elapsed_ticks = 0;
        self.election_timeout_ticks = self.rng.range(min, min + self.config.election_jitter_ticks);
    }

    /// Moves to a higher term, forgetting the vote. Persisted before the next
    /// message leaves.
    pub(super) fn raise_term(&mut self, term: Term) {
        assert!(
            term > self.term,
            "terms only grow: {} -> {}",
            self.term,
            term
        );
        self.term = term;
        self.voted_for = None;
        self.hard_state_dirty = true;
        // Both describe the leader of the old term.
        self.announced_durable = LogIndex(0);
        self.announced_config_index = LogIndex(0);
        self.leader_durable = (LogIndex(0), LogIndex(0));
    }

    /// Becomes a follower of `leader` (or of nobody yet) in `term`.
    pub(super) fn become_follower(&mut self, term: Term, leader: Option<NodeId>) {
        if term > self.term {
            self.raise_term(term);
        }
        assert!(term == self.term, "cannot follow in an older term");
        if self.role == Role::Leader {
            self.reads.fail_all(&mut self.pending_output);
        }
        self.role = Role::Follower;
        self.leader = leader;
        self.votes.clear();
        self.progress.clear();
        self.transfer = None;
        self.replication_pending = false;
        self.hint_campaign_tick = None;
        if leader.is_some() {
            self.leader_contact_tick = Some(self.now_tick);
            self.leader_lost = false;
        }
        if let Some(detector) = &mut self.detector {
            // A silence starts over with each leader (or with none).
            detector.forget();
        }
        self.reset_election_timer();
    }

    /// The adaptive detector's state, when it is on.
    pub fn detector_state(&self) -> Option<DetectorState> {
        self.detector.as_ref().map(AdaptiveDetector::state)
    }

    /// Applies the term rules of §5.1 (plus stickiness and PreVote's
    /// exceptions) and then hands the message to its handler.
    fn step_message(&mut self, from: NodeId, message: RaftMessage) {
        let term = message.term();
        if term > self.term && !self.accept_higher_term(from, &message) {
            return;
        }
        if term < self.term {
            self.answer_stale(from, &message);
            return;
        }
        match message {
            RaftMessage::PreVoteRequest { .. } | RaftMessage::VoteRequest { .. } => {
                self.handle_vote_request(from, &message)
            }
            RaftMessage::PreVoteResponse { term, granted } => {
                self.handle_pre_vote_response(from, term, granted)
            }
            RaftMessage::VoteResponse { term, granted } => {
                self.handle_vote_response(from, term, granted)
            }
            RaftMessage::Heartbeat { commit, round, .. } => {
                self.handle_heartbeat(from, commit, round)
            }
            RaftMessage::HeartbeatResponse {
                round,
                last_log_index,
                ..
            } => self.handle_heartbeat_response(from, round, last_log_index),
            RaftMessage::TimeoutNow { term } => self.handle_timeout_now(from, term),
            RaftMessage::AppendEntries {
                prev_log_index,
                prev_log_term,
                entries,
                leader_commit,
                ..
            } => self.handle_append_entries(
                from,
                prev_log_index,
                prev_log_term,
                entries,
                leader_commit,
            ),
            RaftMessage::AppendResponse {
                success,
                match_index,
                hint_index,
                hint_term,
                ..
            } => self.handle_append_response(from, success, match_index, hint_index, hint_term),
            RaftMessage::InstallSnapshot {
                meta,
                offset,
                total_bytes,
                data,
                ..
            } => self.handle_install_snapshot(from, meta, offset, total_bytes, data),
            RaftMessage::InstallSnapshotResponse {
                last_index,
                received_bytes,
                ..
            } => self.handle_install_snapshot_response(from, last_index, received_bytes),
            RaftMessage::LeaderDurable {
                index,
                config_index,
                ..
            } => self.handle_leader_durable(from, index, config_index),
        }
    }

    /// A message from a higher term. Returns false when it must be dropped
    /// without touching our term.
    fn accept_higher_term(&mut self, from: NodeId, message: &RaftMessage) -> bool {
        match message {
            RaftMessage::VoteRequest {
                leadership_transfer,
                ..
            } if self.in_lease() && !leadership_transfer => false,
            RaftMessage::PreVoteRequest { .. } if self.in_lease() => false,
            // A pre-vote never raises the receiver's term, and a granted
            // pre-vote answer merely echoes the term we asked about.
            RaftMessage::PreVoteRequest { .. } => true,
            RaftMessage::PreVoteResponse { granted: true, .. } => true,
            RaftMessage::Heartbeat { term, .. }
            | RaftMessage::LeaderDurable { term, .. }
            | RaftMessage::TimeoutNow { term }
            | RaftMessage::AppendEntries { term, .. }
            | RaftMessage::InstallSnapshot { term, .. } => {
                self.become_follower(*term, Some(from));
                true
            }
            other => {
                self.become_follower(other.term(), None);
                true
            }
        }
    }

    /// A message from an older term: mostly ignored, but answered where the
    /// sender would otherwise be stuck (etcd #8243 and the stale-leader case).
    fn answer_stale(&mut self, from: NodeId, message: &RaftMessage) {
        match message {
            // A leader from an older term, e.g. one that was paused or cut
            // off: tell it our term so it steps down. Without this, a node
            // whose term ran ahead could never rejoin, because stickiness and
            // PreVote stop it from raising anyone else's term.
            // Round 0: a read round of an older term confirms nothing now.
            RaftMessage::Heartbeat { .. } => self.send(from, self.heartbeat_response(0)),
            RaftMessage::AppendEntries { .. } | RaftMessage::InstallSnapshot { .. } => {
                self.send(from, self.heartbeat_response(0))
            }
            // A pre-candidate with an older term would otherwise wait forever
            // for an answer it can use; the refusal carries our term so it
            // catches up and can campaign in a term that can win.
            RaftMessage::PreVoteRequest { .. } => self.send(
                from,
                RaftMessage::PreVoteResponse {
                    term: self.term,
                    granted: false,
                },
            ),
            _ => {}
        }
    }

    /// This node's answer to a heartbeat, at its own term.
    pub(super) fn heartbeat_response(&self, round: u64) -> RaftMessage {
        RaftMessage::HeartbeatResponse {
            term: self.term,
            round,
            last_log_index: self.log.last_index(),
        }
    }

    /// Committed entries not yet handed out, bounded per `ready()`.
    fn take_committed(&mut self, output: &mut Vec<RaftOutput>) {
        if self.pending_restore.is_some() && !self.ignores_pending_restore() {
            return;
        }
        let last = LogIndex(
            self.commit
                .0
                .min(self.applied.0 + self.config.apply_batch_entries_max as u64),
        );
        if last <= self.applied {
            return;
        }
        assert!(
            self.applied >= self.log.snapshot_index(),
            "applied entries precede the log"
        );
        let count = (last.0 - self.applied.0) as usize;
        let entries = self.log.held_from(self.applied.next(), count);
        assert_eq!(entries.len(), count, "committed entries are held");
        let taken = super::log::entries_within(entries, self.config.apply_batch_bytes_max);
        output.reserve(taken.len());
        output.extend(taken.iter().cloned().map(RaftOutput::Apply));
        self.applied = LogIndex(self.applied.0 + taken.len() as u64);
        assert!(self.applied <= last, "applied within the commit index");
    }
}

/// The state a node rebuilds from its durable state when it starts: the
/// log, the configuration in force, and the commit index. Kept apart from
/// [`Protocol::new`] so that the checks on what was read from disk stand
/// out from the fresh volatile state every node starts with.
struct Restored {
    /// Members given at construction.
    bootstrap: ClusterConfig,
    /// The configuration in force: the latest one in the log, else the
    /// snapshot's, else the bootstrap one.
    cluster: ClusterConfig,
    /// Log index of the entry that set `cluster` (0 = bootstrap/snapshot).
    cluster_index: LogIndex,
    /// The log: the snapshot's position and the entries after it.
    log: RaftLog,
    /// The commit hint on disk, kept within what the log holds.
    commit: LogIndex,
}

impl Restored {
    /// Rebuilds the log from `snapshot` and `entries`, and finds the
    /// configuration it implies. Panics when there is neither a snapshot
    /// nor a configuration entry and `members` leaves `id` out: the node
    /// was started with a wrong member list.
    fn new(
        id: NodeId,
        members: &[NodeId],
        hard_state: &HardState,
        snapshot: Option<&Snapshot>,
        entries: Vec<Entry>,
    ) -> Self {
        let bootstrap = ClusterConfig::voters(members.iter().copied());
        let snapshot_meta = snapshot.map(|s| s.meta.clone());
        let log = RaftLog::restore(snapshot_meta.as_ref(), entries);
        let base = snapshot_meta
            .as_ref()
            .map_or(bootstrap.clone(), |m| m.config.clone());
        let (cluster, cluster_index) = log.latest_config(&base);
        assert!(
            cluster.members().any(|m| m == id)
                || snapshot_meta.is_some()
                || cluster_index > LogIndex(0),
            "{id} must be one of the members {members:?}"
        );
        let snapshot_index = log.snapshot_index();
        let commit = hard_state.commit.max(snapshot_index).min(log.last_index());
        Restored {
            bootstrap,
            cluster,
            cluster_index,
            log,
            commit,
        }
    }
}

impl Protocol for RaftNode {
    type Config = RaftConfig;
    type Message = RaftMessage;
    type Durable = RaftDurable;
    type Persist = RaftPersist;
    type Output = RaftOutput;
    const NAME: &'static str = "raft";

    fn new(
        config: &RaftConfig,
        id: NodeId,
        members: &[NodeId],
        durable: RaftDurable,
        rng: Rng,
    ) -> Self {
        if let Err(error) = config.validate() {
            panic!("{error}");
        }
        let RaftDurable {
            hard_state,
            snapshot,
            entries,
        } = durable;
        let restored = Restored::new(id, members, &hard_state, snapshot.as_ref(), entries);
        let snapshot_index = restored.log.snapshot_index();
        let mut node = RaftNode {
            config: config.clone(),
            id,
            bootstrap: restored.bootstrap,
            cluster: restored.cluster,
            cluster_index: restored.cluster_index,
            rng,
            term: hard_state.term,
            voted_for: hard_state.voted_for,
            log: restored.log,
            commit: restored.commit,
            applied: snapshot_index,
            hard_state_dirty: false,
            commit_unpersisted: false,
            snapshot,
            snapshot_to_persist: None,
            incoming_snapshot: None,
            restores_in_background: false,
            pending_restore: None,
            pending_output: Vec::new(),
            role: Role::Follower,
            leader: None,
            now_tick: 0,
            election_elapsed_ticks: 0,
            election_timeout_ticks: 0,
            leader_contact_tick: None,
            vote_granted_tick: None,
            campaign_tick: 0,
            leader_lost: false,
            hint_campaign_tick: None,
            detector: config.detector_bounds().map(AdaptiveDetector::new),
            #[cfg(feature = "fault-injection")]
            timeout_leadership: false,
            #[cfg(feature = "fault-injection")]
            ignore_pending_restore: false,
            votes: BTreeMap::new(),
            heartbeat_elapsed_ticks: 0,
            leader_since_tick: 0,
            progress: BTreeMap::new(),
            transfer: None,
            replication_pending: false,
            commit_notice_pending: false,
            reads: ReadQueue::default(),
            announced_durable: LogIndex(0),
            announced_config_index: LogIndex(0),
            leader_durable: (LogIndex(0), LogIndex(0)),
            outbox: Vec::new(),
            repair: None,
        };
        node.reset_election_timer();
        node
    }

    fn durable_term(durable: &RaftDurable) -> Term {
        durable.hard_state.term
    }

    fn apply_persist(durable: &mut RaftDurable, persist: RaftPersist) {
        durable.apply(persist);
    }

    fn tick(&mut self) {
        self.now_tick += 1;
        if self.role == Role::Leader {
            self.tick_leader();
        } else {
            self.tick_election();
        }
    }

    fn step(&mut self, from: NodeId, message: RaftMessage) {
        if from == self.id {
            return;
        }
        // Votes count only from voters of our configuration. Everything
        // else from a stranger is still read: a member added by a
        // configuration change may hear from the leader before its log says
        // who the members are, and a (pre-)candidate whose log holds a newer
        // configuration than ours may need our vote to form its quorum
        // (thesis §4.1: servers vote for candidates outside their latest
        // configuration). Refusing those requests left a cluster with no
        // electable member once the most up-to-date logs named a voter that
        // the older logs had removed. Stickiness and PreVote still keep a
        // removed server from disrupting a live leader.
        let vote_answer = matches!(
            message,
            RaftMessage::PreVoteResponse { .. } | RaftMessage::VoteResponse { .. }
        );
        if vote_answer && !self.cluster.voters.contains(&from) {
            return;
        }
        self.step_message(from, message);
        self.check_repair();
        assert!(
            self.role != Role::Leader || self.leader == Some(self.id),
            "a leader names itself as the leader"
        );
    }

    fn peer_unreachable(&mut self, peer: NodeId) {
        self.handle_unreachable_hint(peer);
    }

    fn has_ready(&self) -> bool {
        self.hard_state_dirty
            || !self.outbox.is_empty()
            || self.replication_pending
            || self.commit_notice_pending
            || self.reads_waiting_for_round()
            || self.log.has_unpersisted()
            || self.snapshot_to_persist.is_some()
            || !self.pending_output.is_empty()
            || (self.commit > self.applied
                && (self.pending_restore.is_none() || self.ignores_pending_restore()))
            || self.durable_notice_due()
            || self.deducible_commit().is_some()
    }

    fn ready(&mut self) -> Ready<Self> {
        // What earlier Readys handed out is on disk by now: announce it, or
        // (a follower) commit what the leader announced.
        self.send_durable_notices();
        self.commit_durable();
        if self.replication_pending {
            self.replication_pending = false;
            self.broadcast_append();
        }
        if std::mem::take(&mut self.commit_notice_pending) && self.role == Role::Leader {
            self.send_commit_notices();
        }
        if self.role == Role::Leader && self.read_round_unsent() {
            let round = self.start_round();
            self.broadcast_heartbeat(round);
        }
        let snapshot = self.snapshot_to_persist.take();
        let entries = self.log.take_unpersisted();
        let write_hard_state = self.hard_state_dirty
            || (self.commit_unpersisted && (snapshot.is_some() || !entries.is_empty()));
        if write_hard_state {
            self.hard_state_dirty = false;
            self.commit_unpersisted = false;
        }
        let persist = RaftPersist {
            snapshot,
            entries,
            hard_state: write_hard_state.then(|| self.hard_state()),
        };
        let mut output = std::mem::take(&mut self.pending_output);
        self.take_committed(&mut output);
        Ready {
            persist: (!persist.is_empty()).then_some(persist),
            messages: std::mem::take(&mut self.outbox),
            output,
        }
    }

    fn status(&self) -> Status {
        // A leader out of office (`keeps_role`) says it follows nobody: it
        // must not be acted on, nor its term used as a fencing token.
        let lapsed = self.role == Role::Leader && !self.holds_office();
        Status {
            id: self.id,
            role: if lapsed { Role::Follower } else { self.role },
            term: self.term,
            leader: if lapsed { None } else { self.leader },
            fencing_token: (self.role == Role::Leader && !lapsed).then_some(self.term.0),
        }
    }

    fn catch_up_entries(&self) -> Option<u64> {
        // Election Restriction (paper §5.4.1): a leader already holds every
        // committed entry, so it never fetches any.
        (self.role == Role::Leader).then_some(0)
    }
}
