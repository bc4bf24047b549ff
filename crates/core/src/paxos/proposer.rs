//! The proposer and the distinguished proposer (Lamport, "Paxos Made
//! Simple", §3: "a single server is selected to be the leader, which acts
//! as the distinguished proposer").
//!
//! - Phase 1 runs once per leadership, for every slot from the proposer's
//!   commit index on (the Multi-Paxos optimisation). The promises return
//!   what the acceptors accepted there; for each slot the value of the
//!   highest ballot is kept, gaps are filled with no-ops, and one more no-op
//!   opens the ballot. The entries this node did not hold are what it had
//!   to fetch before it could serve ([`super::PaxosNode::catch_up_entries`]).
//! - Phase 2 proposes all of them in the new ballot. The node serves (takes
//!   the Leader role) once the no-op is chosen and, with leases, while the
//!   lease the acceptors promised with their `Accepted` holds.
//! - As leader it sends `Accept` every heartbeat, with whatever values each
//!   acceptor still lacks; a quorum's answers carry the commit index and
//!   the lease forward.

use super::ballot::Ballot;
use super::message::{Entry, PaxosMessage};
use super::node::{PaxosNode, ACCEPT_VALUES_MAX, LOG_SLOTS_MAX};
use super::state::{PeerProgress, Proposing, State};
use crate::types::NodeId;
use std::collections::BTreeMap;

/// Why [`PaxosNode::propose`] refused a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProposeError {
    /// Only a serving leader proposes.
    NotLeader,
    /// The log reached [`LOG_SLOTS_MAX`].
    LogFull,
}

impl PaxosNode {
    /// Phase 1a: a new ballot above every round seen, promised to itself.
    pub(crate) fn start_election(&mut self) {
        if self.now_tick < self.sticky_until_tick {
            // Still bound by a lease promise: wait it out.
            let until = self.sticky_until_tick;
            self.state = State::Follower {
                leader: None,
                deadline_tick: until,
            };
            return;
        }
        let ballot = Ballot {
            round: self.round_seen.max(self.promised.round) + 1,
            priority: self.config.priority(self.id),
            node: self.id,
        };
        self.promise(ballot);
        let from_slot = self.commit + 1;
        let own: Vec<(u64, Entry)> = self
            .log
            .range(from_slot..)
            .map(|(slot, entry)| (*slot, *entry))
            .collect();
        let deadline_tick = self.election_deadline();
        self.state = State::Preparing {
            ballot,
            from_slot,
            deadline_tick,
            promises: BTreeMap::from([(self.id, own)]),
        };
        for peer in self.peers() {
            self.outbox
                .push(peer, PaxosMessage::Prepare { ballot, from_slot });
        }
        self.on_promise(self.id, ballot, Vec::new());
    }

    /// Phase 1b arriving at the proposer.
    pub(crate) fn on_promise(&mut self, from: NodeId, ballot: Ballot, entries: Vec<(u64, Entry)>) {
        let quorum = self.quorum();
        let State::Preparing {
            ballot: asked,
            promises,
            ..
        } = &mut self.state
        else {
            return;
        };
        if *asked != ballot {
            return;
        }
        if from != self.id {
            promises.insert(from, entries);
        }
        if promises.len() >= quorum {
            self.take_office();
        }
    }

    /// Phase 1 succeeded: merge what the quorum accepted and start phase 2.
    fn take_office(&mut self) {
        let State::Preparing {
            ballot,
            from_slot,
            deadline_tick,
            promises,
        } = std::mem::replace(
            &mut self.state,
            State::Follower {
                leader: None,
                deadline_tick: 0,
            },
        )
        else {
            unreachable!("take_office runs in phase 1");
        };
        let mut merged: BTreeMap<u64, Entry> = BTreeMap::new();
        for (slot, entry) in promises.into_values().flatten() {
            if slot < from_slot {
                continue;
            }
            let best = merged.entry(slot).or_insert(entry);
            if entry.ballot > best.ballot {
                *best = entry;
            }
        }
        let fetched_entries = merged
            .iter()
            .filter(|(slot, entry)| self.log.get(slot).map(|e| e.value) != Some(entry.value))
            .count() as u64;
        let last = merged.keys().next_back().copied().unwrap_or(from_slot - 1);
        let noop_slot = last + 1;
        if noop_slot > LOG_SLOTS_MAX {
            self.follow(None);
            return;
        }
        let noop = ballot.token();
        for slot in from_slot..=noop_slot {
            // A slot no quorum member accepted anything in was never chosen:
            // a no-op fills it.
            let value = merged.get(&slot).map_or(noop, |entry| entry.value);
            self.accept(slot, ballot, value);
        }
        let peers = self
            .peers()
            .into_iter()
            .map(|peer| {
                let progress = PeerProgress {
                    next_slot: from_slot,
                    through_slot: from_slot - 1,
                    acked_tick: None,
                };
                (peer, progress)
            })
            .collect();
        self.state = State::Proposing(Proposing {
            ballot,
            base_slot: from_slot,
            noop_slot,
            fetched_entries,
            serving: false,
            deadline_tick,
            heartbeat_due_tick: self.now_tick,
            lease_end_tick: 0,
            peers,
        });
        self.send_accepts();
        self.update_progress();
    }

    /// One heartbeat round: each acceptor gets the values it lacks.
    fn send_accepts(&mut self) {
        let commit = self.commit;
        let now = self.now_tick;
        let State::Proposing(proposing) = &mut self.state else {
            unreachable!("only a proposer sends Accept");
        };
        proposing.heartbeat_due_tick = now + self.config.heartbeat_ticks;
        let ballot = proposing.ballot;
        let mut messages = Vec::with_capacity(proposing.peers.len());
        for (peer, progress) in &proposing.peers {
            let first_slot = progress.next_slot;
            let values: Vec<u64> = self
                .log
                .range(first_slot..)
                .take(ACCEPT_VALUES_MAX)
                .map(|(_, entry)| entry.value)
                .collect();
            let accept = PaxosMessage::Accept {
                ballot,
                first_slot,
                values,
                commit,
                sent_tick: now,
            };
            messages.push((*peer, accept));
        }
        for (peer, message) in messages {
            self.outbox.push(peer, message);
        }
    }

    /// Phase 2b arriving at the proposer.
    pub(crate) fn on_accepted(
        &mut self,
        from: NodeId,
        ballot: Ballot,
        through_slot: u64,
        sent_tick: u64,
    ) {
        let State::Proposing(proposing) = &mut self.state else {
            return;
        };
        if proposing.ballot != ballot || sent_tick > self.now_tick {
            return;
        }
        let last_slot = self.log.keys().next_back().copied().unwrap_or(0);
        let Some(progress) = proposing.peers.get_mut(&from) else {
            return;
        };
        let through_slot = through_slot.min(last_slot);
        progress.through_slot = progress.through_slot.max(through_slot);
        progress.next_slot = progress.next_slot.max(through_slot + 1);
        progress.acked_tick = progress.acked_tick.max(Some(sent_tick));
        self.update_progress();
    }

    /// Recomputes the commit index, the lease and whether the node serves.
    fn update_progress(&mut self) {
        let quorum = self.quorum();
        let last_slot = self.log.keys().next_back().copied().unwrap_or(0);
        let now = self.now_tick;
        let leases = self.config.leases;
        // Checked by `PaxosConfig::validate` when leases are on; unused
        // when they are off.
        let lease_ticks = self
            .config
            .promise_ticks()
            .saturating_sub(self.config.promise_margin_ticks());
        let State::Proposing(proposing) = &mut self.state else {
            return;
        };
        let mut through: Vec<u64> = proposing.peers.values().map(|p| p.through_slot).collect();
        through.push(last_slot);
        through.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = through[quorum - 1];
        let mut acked: Vec<Option<u64>> = proposing.peers.values().map(|p| p.acked_tick).collect();
        acked.push(Some(now));
        acked.sort_unstable_by(|a, b| b.cmp(a));
        if let Some(tick) = acked[quorum - 1] {
            proposing.lease_end_tick = proposing.lease_end_tick.max(tick + lease_ticks);
        }
        let lease_holds = !leases || now < proposing.lease_end_tick;
        let takes_office = !proposing.serving && chosen >= proposing.noop_slot && lease_holds;
        if takes_office {
            proposing.serving = true;
            self.catch_up_entries = Some(proposing.fetched_entries);
        }
        if chosen >= proposing.base_slot {
            self.advance_commit(chosen);
        }
    }

    /// Timers of a proposer: give up an unfinished phase 2, end an expired
    /// lease, send heartbeats.
    pub(crate) fn tick_proposer(&mut self) {
        let State::Proposing(proposing) = &self.state else {
            unreachable!("tick_proposer runs for a proposer");
        };
        if !proposing.serving && self.now_tick >= proposing.deadline_tick {
            self.start_election();
            return;
        }
        let own_quorum = self.quorum() == 1;
        if proposing.serving
            && self.config.leases
            && !own_quorum
            && self.now_tick >= proposing.lease_end_tick
        {
            // No quorum renewed the lease in time: another leader may be
            // elected from now on, so this one stops acting first.
            self.follow(None);
            return;
        }
        if self.now_tick >= proposing.heartbeat_due_tick {
            self.send_accepts();
        }
    }

    /// An acceptor promised a higher ballot than this node's.
    pub(crate) fn on_reject(&mut self, refused: Ballot, promised: Ballot) {
        let Some(own) = self.state.own_ballot() else {
            return;
        };
        if refused != own || promised <= own {
            return;
        }
        let serving = self.state.role() == crate::protocol::Role::Leader;
        if serving {
            // Someone raised the rounds (a node back from a partition): the
            // leader re-runs phase 1 above them at once. The acceptors that
            // promised it the lease take its new ballot; nobody else's.
            self.follow(None);
            self.start_election();
        } else {
            // Another proposer is ahead: back off for an election timeout
            // rather than duel with it.
            self.follow(None);
        }
    }

    /// Ticks left of this leader's lease on its own clock: until then no
    /// other node can take office while clocks drift within the margin.
    /// `None` when not serving or without leases; a leader that is its own
    /// quorum holds it for good.
    pub fn lease_remaining_ticks(&self) -> Option<u64> {
        let State::Proposing(proposing) = &self.state else {
            return None;
        };
        if !proposing.serving || !self.config.leases {
            return None;
        }
        if self.quorum() == 1 {
            return Some(u64::MAX);
        }
        proposing
            .lease_end_tick
            .checked_sub(self.now_tick)
            .filter(|t| *t > 0)
    }

    /// Proposes `value` for the next slot. Only a serving leader may.
    pub fn propose(&mut self, value: u64) -> Result<u64, ProposeError> {
        self.outbox.begin_call();
        let State::Proposing(proposing) = &self.state else {
            return Err(ProposeError::NotLeader);
        };
        if !proposing.serving {
            return Err(ProposeError::NotLeader);
        }
        let ballot = proposing.ballot;
        let slot = self.log.keys().next_back().copied().unwrap_or(0) + 1;
        if slot > LOG_SLOTS_MAX {
            return Err(ProposeError::LogFull);
        }
        self.accept(slot, ballot, value);
        self.send_accepts();
        Ok(slot)
    }
}
