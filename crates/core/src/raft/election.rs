//! Follower, pre-candidate and candidate behaviour: the election timer,
//! PreVote (thesis §9.6), RequestVote (paper §5.2, §5.4.1) and the
//! connection-loss hint.

use super::message::RaftMessage;
use super::node::RaftNode;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId, Term};

/// How a campaign starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Campaign {
    /// Ask first (PreVote), if enabled; otherwise a normal election.
    PreVote,
    /// Raise the term and ask for votes.
    Election,
    /// Raise the term at the leader's request (TimeoutNow): voters set
    /// stickiness aside.
    Transfer,
}

impl RaftNode {
    /// One tick for a non-leader: the election timer and any hint-triggered
    /// campaign.
    pub(super) fn tick_election(&mut self) {
        assert!(self.role != Role::Leader, "a leader runs no election timer");
        self.election_elapsed_ticks += 1;
        if !self.is_voter() {
            // Learners and removed members never campaign (thesis §4.2.1).
            return;
        }
        self.check_leader_silence();
        if self
            .hint_campaign_tick
            .is_some_and(|at| self.now_tick >= at)
        {
            self.hint_campaign_tick = None;
            self.campaign(Campaign::PreVote);
            return;
        }
        if self.election_elapsed_ticks >= self.election_timeout_ticks {
            self.campaign(Campaign::PreVote);
            return;
        }
        let retry = self.config.heartbeat_ticks;
        if self.role == Role::PreCandidate && self.election_elapsed_ticks.is_multiple_of(retry) {
            self.retry_pre_vote();
        }
    }

    /// Asks again the voters that have not answered this pre-vote. A voter
    /// that still heard the old leader a moment ago ignores a pre-vote
    /// without answering; once its lease lapses, a repeated request succeeds
    /// instead of waiting for a whole new election timeout. Pre-votes change
    /// nothing, so repeating them is harmless.
    fn retry_pre_vote(&mut self) {
        let request = RaftMessage::PreVoteRequest {
            term: self.term.next(),
            last_log_index: self.log.last_index(),
            last_log_term: self.log.last_term(),
        };
        let silent: Vec<NodeId> = self
            .peers()
            .filter(|p| !self.votes.contains_key(p))
            .collect();
        for peer in silent {
            self.send(peer, request.clone());
        }
    }

    /// Starts a pre-vote or an election (§5.2).
    pub(super) fn campaign(&mut self, kind: Campaign) {
        assert!(self.role != Role::Leader, "a leader never campaigns");
        assert!(self.is_voter(), "only voters campaign");
        self.hint_campaign_tick = None;
        self.reset_election_timer();
        self.votes.clear();
        self.votes.insert(self.id, true);
        self.leader = None;
        let message = if kind == Campaign::PreVote && self.config.pre_vote {
            // The term stays as it is: only a successful pre-vote raises it.
            self.role = Role::PreCandidate;
            RaftMessage::PreVoteRequest {
                term: self.term.next(),
                last_log_index: self.log.last_index(),
                last_log_term: self.log.last_term(),
            }
        } else {
            self.raise_term(self.term.next());
            self.voted_for = Some(self.id);
            self.vote_granted_tick = Some(self.now_tick);
            // A new promise: an older hint must not void it.
            self.leader_lost = false;
            self.campaign_tick = self.now_tick;
            self.role = Role::Candidate;
            RaftMessage::VoteRequest {
                term: self.term,
                last_log_index: self.log.last_index(),
                last_log_term: self.log.last_term(),
                leadership_transfer: kind == Campaign::Transfer,
            }
        };
        if self.votes.len() >= self.quorum() {
            // A single-voter cluster wins at once.
            self.on_quorum_granted();
            return;
        }
        let peers: Vec<NodeId> = self.peers().collect();
        for peer in peers {
            self.send(peer, message.clone());
        }
    }

    /// The current (pre-)campaign reached a quorum of grants.
    fn on_quorum_granted(&mut self) {
        match self.role {
            Role::PreCandidate => self.campaign(Campaign::Election),
            Role::Candidate if self.lease_expired_before_winning() => {
                // The votes came too late (a voter was paused with our
                // request in its buffer): the earliest of them may have
                // been given to someone else since, so this win would
                // start with an expired lease, overlapping a newer leader.
                self.become_follower(self.term, None);
            }
            Role::Candidate => self.become_leader(),
            role => panic!("quorum of grants while {}", role.as_str()),
        }
    }

    /// With lease-based CheckQuorum, true when the leadership this
    /// candidate is about to take would already be over: its vote requests
    /// left one leadership window (minus the margin) ago.
    fn lease_expired_before_winning(&self) -> bool {
        self.config.check_quorum
            && self.config.leader_stickiness
            && self.quorum() > 1
            && self.now_tick
                >= self.campaign_tick + self.leadership_window_ticks()
                    - self.leadership_margin_ticks()
    }

    /// Answers a PreVote or RequestVote whose term is not below ours.
    pub(super) fn handle_vote_request(&mut self, from: NodeId, request: &RaftMessage) {
        let ask = VoteAsk::of(request);
        // A repairing member also holds the candidate to the log it had
        // before the damage (`promises.rs`).
        let log_ok = self
            .log
            .is_behind_or_equal(ask.last_log_term, ask.last_log_index)
            && self
                .repair
                .is_none_or(|r| r.is_reached_by(ask.last_log_term, ask.last_log_index));
        let can_vote = self.may_vote(from, &ask);
        // A pre-candidate grants a rival's pre-vote like anyone else and
        // keeps its own pre-campaign. Yielding to a better-ranked rival
        // livelocked under partial connectivity: a hub that alone reached
        // a quorum kept yielding to rivals that could never win
        // (`crates/sim/tests/partial_connectivity.rs`, quorum loss). Two
        // pre-candidates that both pass split one real vote at worst, and
        // randomized timeouts end that.
        let granted = can_vote && log_ok;
        if granted {
            // Someone else is about to campaign; our own hinted campaign would
            // only split the vote.
            self.hint_campaign_tick = None;
        }
        let response = self.answer_vote(from, &ask, granted);
        self.send(from, response);
    }

    /// Whether this node may grant `ask` from `from`, the candidate's log
    /// aside: a pre-vote needs a term above ours, a vote needs this node to
    /// be free to give it in this term.
    fn may_vote(&self, from: NodeId, ask: &VoteAsk) -> bool {
        if ask.pre_vote {
            // A pre-vote is only for a term above ours; it binds nobody.
            ask.term > self.term
        } else {
            assert_eq!(ask.term, self.term, "term rules ran first");
            // Stickiness and vote promises hold within a term too: this
            // node may have reached the request's term through some other
            // message (a refusal carrying it) after promising another
            // candidate or hearing a leader.
            let promised = !ask.transfer && self.in_lease();
            self.voted_for == Some(from)
                || (self.voted_for.is_none() && self.leader.is_none() && !promised)
        }
    }

    /// The answer to `ask`. Granting a real vote binds this node first: it
    /// records the vote (to be persisted before the answer leaves) and
    /// restarts its election timer; a pre-vote binds nobody.
    fn answer_vote(&mut self, from: NodeId, ask: &VoteAsk, granted: bool) -> RaftMessage {
        if ask.pre_vote {
            // A grant echoes the requested term so the requester can count it
            // even if our term is older (etcd #8243); a refusal carries ours.
            return RaftMessage::PreVoteResponse {
                term: if granted { ask.term } else { self.term },
                granted,
            };
        }
        if granted {
            self.voted_for = Some(from);
            self.vote_granted_tick = Some(self.now_tick);
            // A new promise: a hint about an earlier leader (which set
            // this) must not void it.
            self.leader_lost = false;
            self.hard_state_dirty = true;
            self.reset_election_timer();
        }
        RaftMessage::VoteResponse {
            term: self.term,
            granted,
        }
    }

    /// Counts a pre-vote answer. `term` is the requested term when granted.
    pub(super) fn handle_pre_vote_response(&mut self, from: NodeId, term: Term, granted: bool) {
        if self.role != Role::PreCandidate || (granted && term != self.term.next()) {
            return;
        }
        self.record_vote(from, granted);
    }

    /// Counts a vote in the current term.
    pub(super) fn handle_vote_response(&mut self, from: NodeId, term: Term, granted: bool) {
        assert_eq!(term, self.term, "term rules ran first");
        if self.role != Role::Candidate {
            return;
        }
        self.record_vote(from, granted);
    }

    /// Records one answer and acts once the outcome is decided either way.
    fn record_vote(&mut self, from: NodeId, granted: bool) {
        self.votes.entry(from).or_insert(granted);
        let grants = self.votes.values().filter(|g| **g).count();
        let refusals = self.votes.len() - grants;
        if grants >= self.quorum() {
            self.on_quorum_granted();
        } else if refusals >= self.quorum() {
            // Lost: wait for the next timeout as a follower of nobody.
            self.become_follower(self.term, None);
        }
    }

    /// The leader asks this node to campaign now (thesis §3.10).
    pub(super) fn handle_timeout_now(&mut self, from: NodeId, term: Term) {
        assert_eq!(term, self.term, "term rules ran first");
        if self.role == Role::Leader || self.leader != Some(from) || !self.is_voter() {
            return;
        }
        self.campaign(Campaign::Transfer);
    }

    /// The transport lost its connection to `peer`. When that is our leader,
    /// schedule a PreVote at this node's rank slot instead of waiting out the
    /// election timeout; the best-ranked survivor asks at once (see
    /// [`RaftNode::suspect_leader`]). A wrong hint costs one failed
    /// pre-vote: peers that still hear the leader ignore it, and the
    /// leader's next heartbeat restores this node as its follower.
    pub(super) fn handle_unreachable_hint(&mut self, peer: NodeId) {
        if self.config.hint_slot_ticks == 0 {
            return;
        }
        self.suspect_leader(peer, true);
    }

    /// The adaptive detector's part of the timer: a follower whose leader
    /// has been silent for longer than its learned pattern makes likely
    /// suspects it as a connection-loss hint would. Others that still hear
    /// the leader refuse the pre-vote that follows, so a wrong suspicion
    /// costs one refused pre-vote; their own detectors release them once
    /// they too stop hearing it.
    fn check_leader_silence(&mut self) {
        let Some(leader) = self.leader else { return };
        if self.role != Role::Follower || self.leader_lost {
            return;
        }
        let now = self.now_tick;
        if self.detector.as_mut().is_some_and(|d| d.suspects(now)) {
            self.suspect_leader(leader, false);
        }
    }

    /// This follower no longer trusts `peer`, its leader, to be alive: it
    /// stops defending it (stickiness) and schedules a pre-vote at its rank
    /// slot, so that the best-ranked survivor asks first.
    ///
    /// On a lost connection (`connection_lost`) the best-ranked survivor
    /// asks at once rather than at the next tick (up to a tick, 10 ms by
    /// default, sooner). A crashed process's connections all close at
    /// once, so the others have usually heard of it by the time the
    /// request arrives; one that has not ignores it, and asks itself at its
    /// own slot, which this node grants. Either way the others keep their
    /// slots, one apart.
    fn suspect_leader(&mut self, peer: NodeId, connection_lost: bool) {
        if self.role != Role::Follower || self.leader != Some(peer) {
            return;
        }
        self.leader_lost = true;
        if self.hint_campaign_tick.is_none() {
            let slot = self.config.hint_slot_ticks.max(1);
            let rank = self.rank_without(peer) as u64;
            if rank == 0 && connection_lost && self.is_voter() {
                self.campaign(Campaign::PreVote);
                return;
            }
            self.hint_campaign_tick = Some(self.now_tick + (rank + 1) * slot);
        }
    }

    /// This node's position among the voters other than `lost`, ordered by
    /// priority (highest first) and then id (lowest first).
    fn rank_without(&self, lost: NodeId) -> usize {
        let mine = self.rank_key(self.id);
        self.cluster
            .voters
            .iter()
            .filter(|v| **v != lost && self.rank_key(**v) < mine)
            .count()
    }

    /// Orders voters for who goes first: higher priority, then lower id.
    fn rank_key(&self, node: NodeId) -> (std::cmp::Reverse<u32>, NodeId) {
        (std::cmp::Reverse(self.config.priority(node)), node)
    }

    /// Fault injection for the simulator's own tests: forgets the vote of
    /// this term, breaking Election Safety on purpose so that the checkers
    /// can be shown to catch it. Not compiled into normal builds.
    #[cfg(feature = "fault-injection")]
    pub fn forget_vote_for_fault_injection(&mut self) {
        if self.voted_for != Some(self.id) {
            self.voted_for = None;
            // The promise that goes with the vote is forgotten too, or it
            // would still refuse the second candidate of the term.
            self.vote_granted_tick = None;
        }
    }
}

/// The parts of a PreVote or RequestVote that its answer depends on.
struct VoteAsk {
    /// The term the candidate asks for (a pre-vote's is one above its own).
    term: Term,
    /// Index of the candidate's last log entry, for the §5.4.1 check.
    last_log_index: LogIndex,
    /// Term of the candidate's last log entry, for the §5.4.1 check.
    last_log_term: Term,
    /// A pre-vote (binds nobody) rather than a vote.
    pre_vote: bool,
    /// A vote asked for at the leader's request (TimeoutNow): stickiness
    /// does not apply.
    transfer: bool,
}

impl VoteAsk {
    /// Reads `request`, which must be a PreVote or RequestVote.
    fn of(request: &RaftMessage) -> Self {
        match *request {
            RaftMessage::PreVoteRequest {
                term,
                last_log_index,
                last_log_term,
            } => VoteAsk {
                term,
                last_log_index,
                last_log_term,
                pre_vote: true,
                transfer: false,
            },
            RaftMessage::VoteRequest {
                term,
                last_log_index,
                last_log_term,
                leadership_transfer,
            } => VoteAsk {
                term,
                last_log_index,
                last_log_term,
                pre_vote: false,
                transfer: leadership_transfer,
            },
            _ => unreachable!("only vote requests are routed here"),
        }
    }
}
