//! Leader behaviour: heartbeats (§5.2), CheckQuorum, leadership transfer
//! (thesis §3.10) and the priority rule.
//!
//! # Priority rule
//!
//! Every `heartbeat_ticks`, a leader that is not already transferring looks
//! for voters `p` with
//!
//! 1. `priority(p) > priority(leader)` (strictly),
//! 2. caught up: `p` has matched the leader's whole log, and
//! 3. steadily reachable: `p` has answered without a silence of
//!    `election_ticks_min` for at least `election_ticks_min` ticks.
//!
//! If any exist it transfers leadership to the one with the highest priority,
//! the lowest id breaking ties. So whenever the cluster is stable, the leader
//! has the highest priority among the caught-up, reachable voters. Priority
//! never affects voting, so it can delay but never block an election.

use super::entry::{Entry, Payload};
use super::message::RaftMessage;
use super::node::{RaftNode, Transfer};
use super::progress::{Progress, ReplicationState};
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId};

/// Why a leadership transfer was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransferError {
    /// Only the leader can hand over leadership.
    NotLeader,
    /// The target is not another voter of this cluster.
    UnknownTarget(NodeId),
    /// No other voter has answered recently, so none could win.
    NoReachableVoter,
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransferError::NotLeader => write!(f, "this node is not the leader"),
            TransferError::UnknownTarget(id) => write!(f, "{id} is not another voter"),
            TransferError::NoReachableVoter => write!(f, "no other voter is reachable"),
        }
    }
}

impl std::error::Error for TransferError {}

impl RaftNode {
    /// Becomes leader of the current term after winning a quorum of votes,
    /// and appends a no-op so that an entry of this term commits at once
    /// (§5.4.2: only entries of the current term commit by counting).
    pub(super) fn become_leader(&mut self) {
        assert_eq!(self.role, Role::Candidate, "only a candidate can win");
        assert_eq!(self.voted_for, Some(self.id), "a winner voted for itself");
        self.role = Role::Leader;
        self.leader = Some(self.id);
        self.leader_since_tick = self.now_tick;
        self.hint_campaign_tick = None;
        self.transfer = None;
        let (now, next) = (self.now_tick, self.log.last_index().next());
        self.progress = self
            .replicas()
            .into_iter()
            .map(|p| (p, Progress::new(now, next)))
            .collect();
        self.reads.reset();
        let noop = Entry {
            term: self.term,
            index: next,
            payload: Payload::Noop,
        };
        self.log.append(noop);
        let round = self.start_round();
        self.broadcast_heartbeat(round);
        self.replication_pending = true;
        self.maybe_commit();
    }

    /// One tick as leader.
    pub(super) fn tick_leader(&mut self) {
        assert_eq!(self.role, Role::Leader, "only a leader ticks as one");
        if self.config.check_quorum && !self.keeps_role() {
            // CheckQuorum: without a quorum this node cannot commit, and a
            // majority elsewhere may soon have a new leader.
            self.become_follower(self.term, None);
            return;
        }
        if let Some(transfer) = self.transfer {
            if self.now_tick - transfer.started_tick >= self.config.election_ticks_min {
                self.transfer = None;
            }
        }
        self.heartbeat_elapsed_ticks += 1;
        if self.heartbeat_elapsed_ticks >= self.config.heartbeat_ticks {
            let round = self.start_round();
            self.broadcast_heartbeat(round);
            self.hand_over_to_priority();
            self.rotate_if_due();
        }
    }

    /// The rotation policy (`rotate_after_ticks`): after leading that long,
    /// hand leadership to the next voter in id order (wrapping around)
    /// that is reachable and has matched this leader's whole log, so that
    /// every node leads in turn. A lagging next voter is skipped; with no
    /// caught-up voter, the leader keeps leading and tries again at the
    /// next heartbeat.
    fn rotate_if_due(&mut self) {
        let period = self.config.rotate_after_ticks;
        if period == 0
            || self.transfer.is_some()
            || self.role != Role::Leader
            || self.now_tick - self.leader_since_tick < period
        {
            return;
        }
        let window = self.config.election_ticks_min;
        let now = self.now_tick;
        let mut voters: Vec<NodeId> = self.cluster.voters.iter().copied().collect();
        voters.sort_unstable();
        let after = voters.partition_point(|v| *v <= self.id);
        voters.rotate_left(after);
        let next = voters.into_iter().find(|v| {
            *v != self.id
                && self.is_caught_up(*v)
                && self
                    .progress
                    .get(v)
                    .is_some_and(|p| now - p.last_contact_tick < window)
        });
        if let Some(target) = next {
            let result = self.transfer_leadership(Some(target));
            assert!(result.is_ok(), "a caught-up voter is a valid target");
        }
    }

    /// Sends a heartbeat to every other member. `round` is a ReadIndex
    /// round to confirm, or 0.
    pub(super) fn broadcast_heartbeat(&mut self, round: u64) {
        self.heartbeat_elapsed_ticks = 0;
        for peer in self.replicas() {
            let matched = self
                .progress
                .get(&peer)
                .map_or(LogIndex(0), |p| p.match_index);
            let commit = self.commit.min(matched);
            if let Some(progress) = self.progress.get_mut(&peer) {
                progress.commit_sent = progress.commit_sent.max(commit);
                progress.on_heartbeat_sent(round);
            }
            let message = RaftMessage::Heartbeat {
                term: self.term,
                commit,
                round,
            };
            self.send(peer, message);
        }
    }

    /// Whether this leader acts as one now: it leads, and under CheckQuorum
    /// its term of office (`still_leads`) has not run out. What it
    /// reports (`status`) follows this, so that nothing is done in its
    /// name once another node could have been elected.
    pub(super) fn holds_office(&self) -> bool {
        self.role == Role::Leader && (!self.config.check_quorum || self.still_leads())
    }

    /// Whether this leader keeps the Leader role at a tick. Without the
    /// adaptive detector, only while it holds office. With it, the office
    /// lasts one detector floor from the newest round a quorum confirmed,
    /// so a stall of a few hundred milliseconds (a follower's fsync, this
    /// leader's own loop, with the other follower paused) can run it out
    /// while the followers still hear this leader. Stepping down then
    /// would cost a new term for nothing. So the leader keeps the role
    /// and its heartbeats, stops acting (`holds_office`), refuses votes
    /// (`in_lease`), and acts again as soon as a quorum confirms a newer
    /// round; it steps down only after a minimum election timeout with no
    /// quorum, as CheckQuorum does without the detector. A follower that
    /// stopped hearing it may still be elected after its own detector's
    /// threshold: a newer term then ends this leadership as any would,
    /// and its office had lapsed before that vote could be given.
    fn keeps_role(&self) -> bool {
        if self.config.detector_bounds().is_some() && self.config.leader_stickiness {
            self.quorum_recently_heard()
        } else {
            self.still_leads()
        }
    }

    /// The term of office. With stickiness, the leadership lease
    /// (`reads.rs`): the leader stops acting (and, without the detector,
    /// steps down) before any other node can be elected, so two nodes
    /// never both act as leader (with clock-rate drift within the margin,
    /// and no leadership transfer under way).
    /// Without stickiness nothing stops a follower from voting early, and
    /// the older rule applies: a quorum answered within one minimum
    /// election timeout.
    fn still_leads(&self) -> bool {
        if self.config.leader_stickiness {
            self.now_tick < self.leadership_end_tick()
        } else {
            self.quorum_recently_heard()
        }
    }

    /// True when a quorum of voters, counting this leader, answered within
    /// `election_ticks_min` ticks.
    fn quorum_recently_heard(&self) -> bool {
        let window = self.config.election_ticks_min;
        let recent = self
            .progress
            .iter()
            .filter(|(id, p)| {
                self.cluster.voters.contains(id) && self.now_tick - p.last_contact_tick < window
            })
            .count();
        let me = usize::from(self.is_voter());
        recent + me >= self.quorum()
    }

    /// Any answer from `from` in our term proves it is reachable.
    pub(super) fn record_contact(&mut self, from: NodeId) {
        let (now, window) = (self.now_tick, self.config.election_ticks_min);
        if let Some(progress) = self.progress.get_mut(&from) {
            progress.record_contact(now, window);
        }
    }

    /// A member answered a heartbeat in our term.
    pub(super) fn handle_heartbeat_response(
        &mut self,
        from: NodeId,
        round: u64,
        last_log_index: LogIndex,
    ) {
        if self.role != Role::Leader {
            return;
        }
        self.record_contact(from);
        let last = self.log.last_index();
        let Some(progress) = self.progress.get_mut(&from) else {
            return;
        };
        progress.round_acked = progress.round_acked.max(round);
        if last_log_index < progress.match_index && round > 0 && round == progress.round_sent {
            // Only the answer to the latest round: an older answer may
            // have been overtaken (the simulator showed healthy followers
            // reset by older ones).
            // Its log lost entries it had acknowledged: answers over one
            // connection come in order, and a healthy follower's log never
            // shrinks below what it matched in this term. It repairs
            // (`promises.rs`); forgetting its match only makes the leader
            // count less.
            progress.on_lost_entries(last_log_index.next());
        } else if progress.appends_lost(round, last_log_index) {
            // Appends streamed before this heartbeat never reached it (a
            // dropped connection or a full queue). Resend from the match
            // point.
            let next = progress.match_index.next();
            progress.on_refusal(next);
        } else if progress.state == ReplicationState::Replicate
            && progress.inflight.len() >= self.config.inflight_appends_max
        {
            // A full pipeline whose answers may all have been lost: free one
            // slot, so the next append's answer can acknowledge everything.
            progress.inflight.pop_front();
        }
        // A paused probe resumes on any sign of life; a follower that is
        // behind gets entries without waiting for the next proposal.
        progress.unpause(round);
        if progress.match_index < last {
            self.send_appends_to(from);
        }
        if round > 0 {
            self.release_confirmed_reads();
        }
        self.send_timeout_now_if_ready();
    }

    /// Hands leadership to `target`, or to the most up-to-date reachable
    /// voter when `None`. TimeoutNow goes out as soon as the target's log
    /// matches ours; the transfer is abandoned after `election_ticks_min`.
    pub fn transfer_leadership(&mut self, target: Option<NodeId>) -> Result<NodeId, TransferError> {
        if self.role != Role::Leader {
            return Err(TransferError::NotLeader);
        }
        let target = match target {
            Some(t) if t == self.id || !self.cluster.voters.contains(&t) => {
                return Err(TransferError::UnknownTarget(t))
            }
            Some(t) => t,
            None => self
                .most_up_to_date_peer()
                .ok_or(TransferError::NoReachableVoter)?,
        };
        self.transfer = Some(Transfer {
            target,
            started_tick: self.now_tick,
            timeout_now_sent: false,
        });
        // A lease must not outlive the decision to hand over: the target
        // campaigns with stickiness set aside.
        self.reads.end_lease();
        self.send_append(target);
        self.send_timeout_now_if_ready();
        Ok(target)
    }

    /// The voter the priority rule would hand leadership to soon after a
    /// transfer to `target`: the leader itself or a voter heard from within
    /// an election timeout, whose priority is strictly above `target`'s
    /// (the highest such, lowest id on ties). `None` when no priorities are
    /// set or `target` ranks highest. A transfer to `target` would only be
    /// undone, so an operator's request for one is refused with this name.
    pub fn priority_would_undo(&self, target: NodeId) -> Option<NodeId> {
        if self.config.priorities.is_empty() {
            return None;
        }
        let floor = self.config.priority(target);
        let window = self.config.election_ticks_min;
        let heard = |id: &NodeId| {
            *id == self.id
                || self
                    .progress
                    .get(id)
                    .is_some_and(|p| self.now_tick - p.last_contact_tick < window)
        };
        self.cluster
            .voters
            .iter()
            .filter(|id| **id != target && self.config.priority(**id) > floor && heard(id))
            .max_by_key(|id| (self.config.priority(**id), std::cmp::Reverse(**id)))
            .copied()
    }

    /// The reachable voter with the most up-to-date log; priority, then the
    /// lowest id, break ties.
    fn most_up_to_date_peer(&self) -> Option<NodeId> {
        let window = self.config.election_ticks_min;
        self.progress
            .iter()
            .filter(|(id, p)| {
                self.cluster.voters.contains(id)
                    && p.reachable_since_tick.is_some()
                    && self.now_tick - p.last_contact_tick < window
            })
            .max_by_key(|(id, p)| {
                (
                    p.match_index,
                    self.config.priority(**id),
                    std::cmp::Reverse(**id),
                )
            })
            .map(|(id, _)| *id)
    }

    /// Sends TimeoutNow once the transfer target has caught up.
    pub(super) fn send_timeout_now_if_ready(&mut self) {
        let Some(transfer) = self.transfer else {
            return;
        };
        if transfer.timeout_now_sent || !self.is_caught_up(transfer.target) {
            return;
        }
        self.transfer = Some(Transfer {
            timeout_now_sent: true,
            ..transfer
        });
        self.reads.timeout_now_sent_in_term = true;
        self.send(transfer.target, RaftMessage::TimeoutNow { term: self.term });
        // The target now campaigns with stickiness set aside, so it may win
        // before this node hears of it: stop acting first, so that the two
        // never lead at once. If the target fails, an election timeout
        // elects someone (liveness only).
        self.become_follower(self.term, None);
        assert_eq!(self.role, Role::Follower);
    }

    /// The follower has matched our whole log.
    fn is_caught_up(&self, peer: NodeId) -> bool {
        self.progress.get(&peer).is_some_and(|p| {
            p.reachable_since_tick.is_some() && p.match_index == self.log.last_index()
        })
    }

    /// Applies the priority rule from the module docs.
    fn hand_over_to_priority(&mut self) {
        if self.transfer.is_some() || self.config.priorities.is_empty() {
            return;
        }
        let mine = self.config.priority(self.id);
        let window = self.config.election_ticks_min;
        let now = self.now_tick;
        let best = self
            .progress
            .iter()
            .filter(|(id, p)| {
                self.cluster.voters.contains(id)
                    && self.config.priority(**id) > mine
                    && self.is_caught_up(**id)
                    && now - p.last_contact_tick < window
                    && p.reachable_since_tick
                        .is_some_and(|since| now - since >= window)
            })
            .max_by_key(|(id, _)| (self.config.priority(**id), std::cmp::Reverse(**id)))
            .map(|(id, _)| *id);
        if let Some(target) = best {
            let result = self.transfer_leadership(Some(target));
            assert!(result.is_ok(), "a reachable voter is a valid target");
        }
    }
}
