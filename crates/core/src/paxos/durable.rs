//! What a Paxos acceptor must never forget (Lamport, "Paxos Made Simple",
//! §2.3: "an acceptor must remember this information even if it fails and
//! then restarts"): the highest ballot it promised and every value it
//! accepted, each with its ballot.

use super::ballot::Ballot;
use super::message::Entry;
use std::collections::BTreeMap;

/// The acceptor's durable state, as a runtime hands it back on restart.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaxosDurable {
    /// The highest ballot promised; `Ballot::ZERO` when none.
    pub promised: Ballot,
    /// Accepted entries by slot.
    pub log: BTreeMap<u64, Entry>,
}

/// One change to persist (and fsync) before the messages of the same
/// `ready()` are sent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PaxosPersist {
    /// A new promise, if it rose.
    pub promised: Option<Ballot>,
    /// Newly accepted entries, in the order they were accepted.
    pub entries: Vec<(u64, Entry)>,
}

impl PaxosPersist {
    /// True when there is nothing to write.
    pub fn is_empty(&self) -> bool {
        self.promised.is_none() && self.entries.is_empty()
    }
}

impl PaxosDurable {
    /// Applies one persisted change. A promise never goes back, and an entry
    /// is only ever replaced by one from a ballot at least as high.
    pub fn apply(&mut self, persist: PaxosPersist) {
        if let Some(promised) = persist.promised {
            assert!(promised >= self.promised, "a promise never goes back");
            self.promised = promised;
        }
        for (slot, entry) in persist.entries {
            assert!(slot >= 1, "slot 0 holds nothing");
            assert!(entry.ballot <= self.promised, "accepted above the promise");
            if let Some(old) = self.log.get(&slot) {
                assert!(old.ballot <= entry.ballot, "an entry went back");
            }
            self.log.insert(slot, entry);
        }
    }
}
