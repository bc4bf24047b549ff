//! The Multi-Paxos messages: phase 1 (`Prepare`, `Promise`), phase 2
//! (`Accept`, `Accepted`) and `Reject`, the negative answer to both.
//!
//! The leader's `Accept` doubles as its heartbeat: with no entries it only
//! renews the acceptors' lease promises and carries the commit index.

use super::ballot::Ballot;
use crate::protocol::Message;

/// One accepted log entry: the ballot it was accepted in and its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The ballot whose `Accept` carried it.
    pub ballot: Ballot,
    /// The value. In this election-only Multi-Paxos a value is the token of
    /// the ballot that first proposed it (a leader's no-op) or a value given
    /// to [`super::PaxosNode::propose`].
    pub value: u64,
}

/// A Multi-Paxos wire message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PaxosMessage {
    /// Phase 1a: "promise to ignore ballots below `ballot`, and tell me what
    /// you accepted from `from_slot` on."
    Prepare {
        /// The proposer's new ballot.
        ballot: Ballot,
        /// The first slot the proposer does not know to be chosen.
        from_slot: u64,
    },
    /// Phase 1b: the promise, with every entry accepted at or after the
    /// `Prepare`'s `from_slot`.
    Promise {
        /// The ballot promised.
        ballot: Ballot,
        /// `(slot, entry)`, ascending.
        entries: Vec<(u64, Entry)>,
    },
    /// Phase 2a, and the leader's heartbeat: "accept these values for the
    /// slots from `first_slot` on, in `ballot`."
    Accept {
        /// The leader's ballot.
        ballot: Ballot,
        /// The slot of the first value.
        first_slot: u64,
        /// Values for consecutive slots; empty for a plain heartbeat.
        values: Vec<u64>,
        /// Slots up to here are chosen (the leader's commit index).
        commit: u64,
        /// The leader's tick when it sent this: echoed back, so that the
        /// leader can date the lease promises it collects on its own clock.
        sent_tick: u64,
    },
    /// Phase 2b: the acceptor accepted an `Accept` and promised the lease.
    Accepted {
        /// The ballot accepted.
        ballot: Ballot,
        /// Every slot of that `Accept` up to here is accepted.
        through_slot: u64,
        /// The `Accept`'s `sent_tick`.
        sent_tick: u64,
    },
    /// The acceptor has promised a higher ballot than the one asked for.
    Reject {
        /// The ballot refused.
        ballot: Ballot,
        /// The acceptor's promise, which the proposer must exceed.
        promised: Ballot,
    },
}

/// Kind names in a fixed order, for reports.
const KINDS: [&str; 5] = ["prepare", "promise", "accept", "accepted", "reject"];

impl PaxosMessage {
    /// The ballot the message is about, so that every receiver learns how
    /// high rounds have gone.
    pub fn ballot(&self) -> Ballot {
        match self {
            PaxosMessage::Prepare { ballot, .. }
            | PaxosMessage::Promise { ballot, .. }
            | PaxosMessage::Accept { ballot, .. }
            | PaxosMessage::Accepted { ballot, .. } => *ballot,
            PaxosMessage::Reject { promised, .. } => *promised,
        }
    }
}

impl PaxosMessage {
    /// True when every ballot is in range ([`Ballot::is_valid`]) and every
    /// slot is in `1..=LOG_SLOTS_MAX`, with a promise's entries below the
    /// ballot promised. A message that is not is dropped unread: a faulty
    /// or hostile peer must not crash this node or veto its elections.
    pub fn is_well_formed(&self) -> bool {
        use super::node::LOG_SLOTS_MAX;
        let slot_ok = |slot: u64| (1..=LOG_SLOTS_MAX).contains(&slot);
        match self {
            PaxosMessage::Prepare { ballot, from_slot } => ballot.is_valid() && slot_ok(*from_slot),
            PaxosMessage::Promise { ballot, entries } => {
                ballot.is_valid()
                    && entries.iter().all(|(slot, entry)| {
                        slot_ok(*slot) && entry.ballot.is_valid() && entry.ballot <= *ballot
                    })
            }
            PaxosMessage::Accept {
                ballot,
                first_slot,
                values,
                commit,
                ..
            } => {
                ballot.is_valid()
                    && slot_ok(*first_slot)
                    && values.len() <= super::node::ACCEPT_VALUES_MAX
                    && first_slot.saturating_add(values.len() as u64) <= LOG_SLOTS_MAX + 1
                    && *commit <= LOG_SLOTS_MAX
            }
            PaxosMessage::Accepted {
                ballot,
                through_slot,
                ..
            } => ballot.is_valid() && *through_slot <= LOG_SLOTS_MAX,
            PaxosMessage::Reject { ballot, promised } => ballot.is_valid() && promised.is_valid(),
        }
    }
}

impl Message for PaxosMessage {
    fn kind(&self) -> &'static str {
        match self {
            PaxosMessage::Prepare { .. } => KINDS[0],
            PaxosMessage::Promise { .. } => KINDS[1],
            PaxosMessage::Accept { .. } => KINDS[2],
            PaxosMessage::Accepted { .. } => KINDS[3],
            PaxosMessage::Reject { .. } => KINDS[4],
        }
    }

    fn all_kinds() -> &'static [&'static str] {
        &KINDS
    }
}
