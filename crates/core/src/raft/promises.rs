//! What a member promised its peers, checked against what its log holds
//! after a restart: the guard against amnesia.
//!
//! Raft's safety rests on every member keeping what it acknowledged. A
//! member that lost its log (a wiped or replaced disk, a deleted or
//! truncated write-ahead log, a corrupt record, a write the disk dropped
//! after an fsync) and comes back as a plain voter can vote for a
//! candidate that lacks a committed entry, or vote twice in one term, and
//! acknowledged writes vanish (`docs/architecture.md`, "Amnesia").
//!
//! So storage keeps a small [`PromiseRecord`] apart from the log, written
//! and fsync'd after the log's own fsync and before any message that
//! depends on it leaves: the term and vote, and the last entry the disk
//! held (every acknowledgement, and every leader's count of its own log,
//! claims at most that). [`audit`] compares it with the recovered log. A
//! member whose log no longer holds what it promised keeps its promised
//! term and vote and is put into repair ([`Repair`], carried out by
//! [`super::RaftNode::start_repair`]) until its log again reaches the
//! last entry it had acknowledged. Meanwhile it never campaigns, and it
//! grants a vote or pre-vote only to a candidate whose log is at least as
//! up-to-date as the log it had before the damage, as well as the one it
//! has now. It follows a leader and acknowledges what it truly holds.
//!
//! Why that is safe: Raft's election restriction (§5.4.1) and the proof
//! of Leader Completeness (§5.4.3) use only the voter's last term and
//! index, and the Log Matching property of the candidate's log, never the
//! rest of the voter's log. A damaged member comparing candidates with its
//! recorded last entry votes exactly as it would have with its log intact
//! (Protocol-Aware Recovery, Alagappan et al., FAST 2018, makes the same
//! point: a damaged replica must not take part in choosing what is
//! committed as if it had forgotten). Once its log reaches that entry
//! again, by Log Matching it holds every entry it held before, and the
//! repair is over. Should a majority be damaged and no live member's log
//! reach their records, no candidate can win: the cluster refuses to
//! elect rather than lose an acknowledged write.

use super::durable::RaftDurable;
use crate::types::{LogIndex, NodeId, Term};
use std::fmt;

/// A member's promises as of its last fsync, kept apart from its log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PromiseRecord {
    /// The term it had reached: it answered nothing of an older one since.
    pub term: Term,
    /// Its vote in `term`.
    pub voted_for: Option<NodeId>,
    /// The term of the last entry its disk held.
    pub last_term: Term,
    /// The index of that entry: what its acknowledgements may have claimed.
    pub last_index: LogIndex,
    /// Set while the member is repairing: what it must hold again before
    /// it votes. Kept across restarts, so a member that stops half-way
    /// through a repair resumes it instead of passing the audit with a
    /// log it only partly got back.
    pub repair: Option<Repair>,
}

impl PromiseRecord {
    /// The record a runtime writes once `durable` is synced: its term and
    /// vote, its last entry (the snapshot's when the log after it is empty),
    /// and the repair under way.
    pub fn of(durable: &RaftDurable, repair: Option<Repair>) -> Self {
        let (last_term, last_index) = match (durable.entries.last(), &durable.snapshot) {
            (Some(entry), _) => (entry.term, entry.index),
            (None, Some(snapshot)) => (snapshot.meta.last_term, snapshot.meta.last_index),
            (None, None) => (Term(0), LogIndex(0)),
        };
        PromiseRecord {
            term: durable.hard_state.term,
            voted_for: durable.hard_state.voted_for,
            last_term,
            last_index,
            repair,
        }
    }
}

/// What a damaged member must get back before it campaigns, and the floor
/// it holds candidates to meanwhile: the last entry it had acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repair {
    /// The term of that entry.
    pub last_term: Term,
    /// Its index.
    pub last_index: LogIndex,
}

impl Repair {
    /// True when a log ending at `(last_term, last_index)` is at least as
    /// up-to-date as the log the member had acknowledged (§5.4.1's order):
    /// such a log, by Log Matching, holds every entry the old one held that
    /// any leader may have counted as committed.
    pub fn is_reached_by(&self, last_term: Term, last_index: LogIndex) -> bool {
        (last_term, last_index) >= (self.last_term, self.last_index)
    }
}

/// One way the log fell short of the record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finding {
    /// The log's term is older than the promised one.
    TermLost {
        /// On disk.
        found: Term,
        /// Promised.
        promised: Term,
    },
    /// The vote of the promised term is missing from the log.
    VoteLost {
        /// The term.
        term: Term,
        /// Whom it voted for.
        voted_for: NodeId,
    },
    /// The log no longer holds the last entry it had acknowledged.
    EntriesLost {
        /// The log's last index now.
        found: LogIndex,
        /// The entry it had acknowledged.
        acknowledged: (Term, LogIndex),
    },
    /// A repair was under way when the member stopped.
    RepairUnfinished,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Finding::TermLost { found, promised } => {
                write!(
                    f,
                    "the log is at term {} but the member had reached term {}",
                    found.0, promised.0
                )
            }
            Finding::VoteLost { term, voted_for } => {
                write!(
                    f,
                    "the log lost the vote for n{} in term {}",
                    voted_for.0, term.0
                )
            }
            Finding::EntriesLost {
                found,
                acknowledged: (term, index),
            } => write!(
                f,
                "the log ends at index {} but the member had acknowledged up to index {} (term {})",
                found.0, index.0, term.0
            ),
            Finding::RepairUnfinished => write!(f, "a repair from the leader was under way"),
        }
    }
}

/// What [`audit`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Audit {
    /// Every shortfall, in the order checked; empty for a healthy log.
    pub findings: Vec<Finding>,
    /// The repair to carry out, if any.
    pub repair: Option<Repair>,
}

/// Checks `durable` (the recovered log) against `record` (the promises),
/// and restores the term and vote from the record where the log lost
/// them, so that the member never answers as if it had not made them.
pub fn audit(record: &PromiseRecord, durable: &mut RaftDurable) -> Audit {
    let mut findings = Vec::new();
    let hard = &mut durable.hard_state;
    if hard.term < record.term {
        findings.push(Finding::TermLost {
            found: hard.term,
            promised: record.term,
        });
        hard.term = record.term;
        hard.voted_for = record.voted_for;
    } else if hard.term == record.term && hard.voted_for.is_none() {
        if let Some(voted_for) = record.voted_for {
            findings.push(Finding::VoteLost {
                term: record.term,
                voted_for,
            });
            hard.voted_for = Some(voted_for);
        }
    }
    let (snapshot_index, snapshot_term) = durable
        .snapshot
        .as_ref()
        .map_or((LogIndex(0), Term(0)), |s| {
            (s.meta.last_index, s.meta.last_term)
        });
    let last_index = durable.entries.last().map_or(snapshot_index, |e| e.index);
    let term_at = |index: LogIndex| {
        if index == snapshot_index {
            return Some(snapshot_term);
        }
        let offset = index.0.checked_sub(snapshot_index.0 + 1)?;
        durable.entries.get(offset as usize).map(|e| e.term)
    };
    // An entry the snapshot covers is held, whatever its term was.
    let holds =
        record.last_index <= snapshot_index || term_at(record.last_index) == Some(record.last_term);
    if !holds {
        findings.push(Finding::EntriesLost {
            found: last_index,
            acknowledged: (record.last_term, record.last_index),
        });
    }
    if record.repair.is_some() {
        findings.push(Finding::RepairUnfinished);
    }
    let repair = match record.repair {
        Some(repair) => Some(repair),
        None if findings.is_empty() => None,
        None => Some(Repair {
            last_term: record.last_term,
            last_index: record.last_index,
        }),
    };
    // A damaged log's commit hint may name entries it no longer holds.
    let hard = &mut durable.hard_state;
    hard.commit = hard.commit.min(last_index);
    Audit { findings, repair }
}

/// What a member starts from after [`recover`]: the decision the server's
/// data directory carries out on disk and the simulator on its image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recovery {
    /// The durable state to build the node from.
    pub durable: RaftDurable,
    /// What the audit found, and the repair to start.
    pub audit: Audit,
    /// True when nothing of the recovered log is trusted: it is moved
    /// aside (kept, never deleted) and the member starts with an empty
    /// log and the record's term and vote.
    pub set_aside: bool,
}

/// Checks the log read back at a restart against `record` and decides
/// what the member starts from. `log` is `None` when the log could not be
/// read at all (a checksum, a cut record, a gap).
///
/// A log short of its record is set aside whole, not only its missing
/// tail: what is left may be stale as well as short (losing the newest
/// segment brings back entries a newer leader had overwritten), and a
/// follower that trusted them could commit them on the leader's next
/// heartbeat. The leader sends the log again.
pub fn recover(record: &PromiseRecord, log: Option<RaftDurable>) -> Recovery {
    let unreadable = log.is_none();
    let mut durable = log.unwrap_or_default();
    let audit = audit(record, &mut durable);
    let damaged = audit
        .findings
        .iter()
        .any(|f| *f != Finding::RepairUnfinished);
    let set_aside = damaged || unreadable;
    if set_aside {
        durable = RaftDurable {
            hard_state: super::HardState {
                commit: LogIndex(0),
                ..durable.hard_state
            },
            ..RaftDurable::default()
        };
    }
    Recovery {
        durable,
        audit,
        set_aside,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raft::{Entry, HardState, Payload};

    fn log_of(terms: &[u64]) -> RaftDurable {
        RaftDurable {
            hard_state: HardState {
                term: Term(*terms.last().unwrap_or(&0)),
                voted_for: None,
                commit: LogIndex(terms.len() as u64),
            },
            snapshot: None,
            entries: terms
                .iter()
                .enumerate()
                .map(|(k, t)| Entry {
                    term: Term(*t),
                    index: LogIndex(k as u64 + 1),
                    payload: Payload::Noop,
                })
                .collect(),
        }
    }

    fn record(term: u64, vote: Option<u64>, last: (u64, u64)) -> PromiseRecord {
        PromiseRecord {
            term: Term(term),
            voted_for: vote.map(NodeId),
            last_term: Term(last.0),
            last_index: LogIndex(last.1),
            repair: None,
        }
    }

    #[test]
    fn a_log_that_holds_its_promises_passes() {
        let mut durable = log_of(&[1, 1, 2, 2]);
        let audit = audit(&record(2, None, (2, 4)), &mut durable);
        assert_eq!(audit, Audit::default());
    }

    #[test]
    fn a_wiped_log_gets_its_term_and_vote_back_and_a_repair() {
        let mut durable = RaftDurable::default();
        let found = audit(&record(5, Some(2), (5, 200)), &mut durable);
        assert_eq!(durable.hard_state.term, Term(5));
        assert_eq!(durable.hard_state.voted_for, Some(NodeId(2)));
        assert_eq!(found.findings.len(), 2, "{:?}", found.findings);
        assert_eq!(
            found.repair,
            Some(Repair {
                last_term: Term(5),
                last_index: LogIndex(200)
            })
        );
    }

    #[test]
    fn a_truncated_tail_or_a_replaced_entry_is_found() {
        let mut short = log_of(&[1, 1, 2]);
        assert!(audit(&record(2, None, (2, 4)), &mut short).repair.is_some());
        // Same length, but the entry it acknowledged is not there: a write
        // the disk dropped, then an older copy read back.
        let mut replaced = log_of(&[1, 1, 1, 1]);
        replaced.hard_state.term = Term(2);
        let found = audit(&record(2, None, (2, 4)), &mut replaced);
        assert_eq!(
            found.findings,
            vec![Finding::EntriesLost {
                found: LogIndex(4),
                acknowledged: (Term(2), LogIndex(4))
            }]
        );
    }

    #[test]
    fn an_unfinished_repair_resumes_with_its_first_obligation() {
        let obligation = Repair {
            last_term: Term(3),
            last_index: LogIndex(90),
        };
        let mut durable = log_of(&[1, 4, 4]);
        let mut with_repair = record(4, None, (4, 3));
        with_repair.repair = Some(obligation);
        let found = audit(&with_repair, &mut durable);
        assert_eq!(found.repair, Some(obligation));
        assert_eq!(found.findings, vec![Finding::RepairUnfinished]);
    }

    #[test]
    fn a_repair_is_over_once_the_log_is_as_up_to_date_as_the_acknowledged_one() {
        let repair = Repair {
            last_term: Term(3),
            last_index: LogIndex(5),
        };
        assert!(!repair.is_reached_by(Term(3), LogIndex(4)));
        assert!(!repair.is_reached_by(Term(2), LogIndex(50)));
        assert!(repair.is_reached_by(Term(3), LogIndex(5)));
        assert!(repair.is_reached_by(Term(4), LogIndex(1)));
    }

    #[test]
    fn the_record_of_a_synced_log_passes_its_own_audit() {
        let mut durable = log_of(&[1, 2, 2]);
        durable.hard_state.voted_for = Some(NodeId(3));
        let record = PromiseRecord::of(&durable, None);
        assert_eq!(record, self::record(2, Some(3), (2, 3)));
        let recovery = recover(&record, Some(durable.clone()));
        assert!(!recovery.set_aside, "{:?}", recovery.audit);
        assert_eq!(recovery.durable, durable);
        assert_eq!(recovery.audit, Audit::default());
    }

    #[test]
    fn a_short_log_is_set_aside_whole_and_the_term_and_vote_kept() {
        let mut full = log_of(&[1, 1, 2, 2]);
        full.hard_state.voted_for = Some(NodeId(1));
        let record = PromiseRecord::of(&full, None);
        let mut short = log_of(&[1, 1]);
        short.hard_state.term = Term(1);
        let recovery = recover(&record, Some(short));
        assert!(recovery.set_aside);
        assert!(recovery.durable.entries.is_empty());
        assert_eq!(recovery.durable.hard_state.term, Term(2));
        assert_eq!(recovery.durable.hard_state.voted_for, Some(NodeId(1)));
        assert_eq!(recovery.durable.hard_state.commit, LogIndex(0));
        assert_eq!(
            recovery.audit.repair,
            Some(Repair {
                last_term: Term(2),
                last_index: LogIndex(4)
            })
        );
    }

    #[test]
    fn an_unreadable_log_is_set_aside_even_when_nothing_was_promised() {
        let recovery = recover(&PromiseRecord::default(), None);
        assert!(recovery.set_aside);
        assert_eq!(recovery.audit.repair, None);
        let recovery = recover(&record(3, None, (3, 9)), None);
        assert!(recovery.set_aside);
        assert!(recovery.audit.repair.is_some());
        assert_eq!(recovery.durable.hard_state.term, Term(3));
    }
}
