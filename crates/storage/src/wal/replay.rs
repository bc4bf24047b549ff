//! Rebuilding the log from WAL records, in the order they were written.
//!
//! Replay applies each record as the writer did: an entry batch truncates the
//! log at its first index and extends it (Raft §5.3 conflict truncation is
//! therefore replayed, not special-cased), a hard-state record replaces the
//! hard state, a snapshot-reset record cuts the log back to a snapshot
//! (§7). It keeps only the entries after the newest snapshot, plus the term
//! of the snapshot's own last entry, which decides at the end whether the
//! log continues the snapshot or conflicts with it.
//!
//! Every rule a writer could not have broken is checked, so replay reports
//! gaps, decreasing terms and mismatched segment boundaries as corruption.

use super::segment_header::SegmentHeader;
use crate::corruption::Corruption;
use bellwether_core::raft::{Entry, HardState, SnapshotMeta};
use bellwether_core::{LogIndex, Term};

/// The log as rebuilt so far.
#[derive(Debug)]
pub(crate) struct ReplayLog {
    /// Last index of the newest snapshot (0 without one).
    snapshot_index: LogIndex,
    /// Its term.
    snapshot_term: Term,
    /// Term of the log's entry at `snapshot_index`, when the log reaches it.
    /// Invariant: known whenever `last_index >= snapshot_index`.
    anchor_term: Option<Term>,
    /// The entries `snapshot_index + 1 ..= last_index`; empty while the log
    /// ends at or before the snapshot.
    entries: Vec<Entry>,
    /// Where the log ends; `None` before the first segment header.
    last_index: Option<LogIndex>,
    /// The latest hard-state record.
    hard_state: HardState,
}

/// What replay produced.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct ReplayOutcome {
    /// The latest hard state (default if none was written).
    pub(crate) hard_state: HardState,
    /// Entries after the snapshot, contiguous.
    pub(crate) entries: Vec<Entry>,
    /// Whether the log did not continue the snapshot (it ended before it, or
    /// held another term at its last index) and was discarded; the WAL must
    /// then record a snapshot reset before anything else is appended.
    pub(crate) needs_reset: bool,
}

impl ReplayLog {
    /// An empty replay against the newest snapshot, if any.
    pub(crate) fn new(snapshot: Option<&SnapshotMeta>) -> Self {
        ReplayLog {
            snapshot_index: snapshot.map_or(LogIndex(0), |meta| meta.last_index),
            snapshot_term: snapshot.map_or(Term(0), |meta| meta.last_term),
            anchor_term: None,
            entries: Vec::new(),
            last_index: None,
            hard_state: HardState::default(),
        }
    }

    /// Term of the log's entry at `index`, if replay knows it.
    fn term_at(&self, index: LogIndex) -> Option<Term> {
        if index == self.snapshot_index {
            return self.anchor_term;
        }
        let offset = index.0.checked_sub(self.snapshot_index.0 + 1)?;
        self.entries.get(offset as usize).map(|entry| entry.term)
    }

    /// Cuts the log so that it ends at `index`.
    fn truncate_to(&mut self, index: LogIndex) {
        if index < self.snapshot_index {
            self.anchor_term = None;
            self.entries.clear();
        } else {
            let keep = index.0 - self.snapshot_index.0;
            self.entries.truncate(keep as usize);
        }
        self.last_index = Some(index);
    }

    /// Starts a segment: the first one fixes where the retained log begins,
    /// later ones must join the log exactly where the previous one ended.
    pub(crate) fn start_segment(&mut self, header: &SegmentHeader) -> Result<(), Corruption> {
        let prev_index = LogIndex(header.first_index.0 - 1);
        let Some(last_index) = self.last_index else {
            if prev_index > self.snapshot_index {
                return Err(Corruption::IndexGap {
                    expected: LogIndex(self.snapshot_index.0 + 1),
                    found: header.first_index,
                });
            }
            if prev_index == LogIndex(0) && header.prev_term != Term(0) {
                return Err(Corruption::Malformed("index 0 has a nonzero term".into()));
            }
            self.last_index = Some(prev_index);
            if prev_index == self.snapshot_index {
                self.anchor_term = Some(header.prev_term);
            }
            return Ok(());
        };
        let log_term = self.term_at(last_index);
        if prev_index != last_index || log_term.is_some_and(|term| term != header.prev_term) {
            return Err(Corruption::SegmentMismatch {
                header_index: prev_index,
                header_term: header.prev_term,
                log_index: last_index,
                log_term,
            });
        }
        Ok(())
    }

    /// Applies a batch of contiguous entries (as decoded from one record).
    pub(crate) fn apply_entries(&mut self, batch: Vec<Entry>) -> Result<(), Corruption> {
        let last_index = self.last_index.expect("records follow a segment header");
        let first = batch[0].index;
        if first.0 > last_index.0 + 1 {
            return Err(Corruption::IndexGap {
                expected: LogIndex(last_index.0 + 1),
                found: first,
            });
        }
        let mut previous = self.term_at(LogIndex(first.0 - 1));
        for entry in &batch {
            if let Some(term) = previous.filter(|term| entry.term < *term) {
                return Err(Corruption::TermDecreases {
                    index: entry.index,
                    term: entry.term,
                    previous: term,
                });
            }
            previous = Some(entry.term);
        }
        self.truncate_to(LogIndex(first.0 - 1));
        for entry in batch {
            self.last_index = Some(entry.index);
            if entry.index == self.snapshot_index {
                self.anchor_term = Some(entry.term);
            } else if entry.index > self.snapshot_index {
                assert!(
                    self.anchor_term.is_some(),
                    "the log reached the snapshot first"
                );
                self.entries.push(entry);
            }
        }
        Ok(())
    }

    /// Applies a hard-state record.
    pub(crate) fn apply_hard_state(&mut self, state: HardState) {
        self.hard_state = state;
    }

    /// Applies a snapshot-reset record: the log now ends at the entry at
    /// `index`, of `term`, which a snapshot covers.
    pub(crate) fn apply_snapshot_reset(
        &mut self,
        index: LogIndex,
        term: Term,
    ) -> Result<(), Corruption> {
        assert!(self.last_index.is_some(), "records follow a segment header");
        if index > self.snapshot_index {
            return Err(Corruption::MissingSnapshot {
                marker_index: index,
                snapshot_index: self.snapshot_index,
            });
        }
        self.truncate_to(index);
        self.entries.clear();
        self.anchor_term = (index == self.snapshot_index).then_some(term);
        Ok(())
    }

    /// Ends replay. The log is kept only if it holds the snapshot's last
    /// entry with the snapshot's term (Raft §7); otherwise it is discarded.
    pub(crate) fn finish(self) -> ReplayOutcome {
        let Some(last_index) = self.last_index else {
            return ReplayOutcome {
                hard_state: self.hard_state,
                entries: Vec::new(),
                needs_reset: false,
            };
        };
        let continues =
            last_index >= self.snapshot_index && self.anchor_term == Some(self.snapshot_term);
        let entries = if continues { self.entries } else { Vec::new() };
        if let Some(first) = entries.first() {
            assert_eq!(
                first.index.0,
                self.snapshot_index.0 + 1,
                "entries follow the snapshot"
            );
        }
        ReplayOutcome {
            hard_state: self.hard_state,
            entries,
            needs_reset: !continues,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::Payload;

    fn entries(first: u64, terms: &[u64]) -> Vec<Entry> {
        terms
            .iter()
            .enumerate()
            .map(|(offset, term)| Entry {
                term: Term(*term),
                index: LogIndex(first + offset as u64),
                payload: Payload::Noop,
            })
            .collect()
    }

    fn header(sequence: u64, first_index: u64, prev_term: u64) -> SegmentHeader {
        SegmentHeader {
            sequence,
            first_index: LogIndex(first_index),
            prev_term: Term(prev_term),
        }
    }

    fn snapshot(index: u64, term: u64) -> SnapshotMeta {
        SnapshotMeta {
            last_index: LogIndex(index),
            last_term: Term(term),
            ..SnapshotMeta::default()
        }
    }

    #[test]
    fn conflict_truncation_is_replayed() {
        let mut replay = ReplayLog::new(None);
        replay.start_segment(&header(1, 1, 0)).unwrap();
        replay.apply_entries(entries(1, &[1, 1, 1, 1])).unwrap();
        replay.apply_entries(entries(3, &[2, 2])).unwrap();
        let outcome = replay.finish();
        assert_eq!(outcome.entries, entries(1, &[1, 1, 2, 2]));
        assert!(!outcome.needs_reset);
    }

    #[test]
    fn gaps_decreasing_terms_and_bad_joins_are_corruption() {
        let mut replay = ReplayLog::new(None);
        replay.start_segment(&header(1, 1, 0)).unwrap();
        replay.apply_entries(entries(1, &[1, 2])).unwrap();
        assert!(matches!(
            replay.apply_entries(entries(4, &[2])),
            Err(Corruption::IndexGap { .. })
        ));
        assert!(matches!(
            replay.apply_entries(entries(3, &[1])),
            Err(Corruption::TermDecreases { .. })
        ));
        assert!(matches!(
            replay.start_segment(&header(2, 3, 1)),
            Err(Corruption::SegmentMismatch { .. })
        ));
        assert!(replay.start_segment(&header(2, 3, 2)).is_ok());
        let mut first = ReplayLog::new(Some(&snapshot(5, 1)));
        assert!(matches!(
            first.start_segment(&header(4, 8, 1)),
            Err(Corruption::IndexGap { .. })
        ));
    }

    #[test]
    fn entries_covered_by_the_snapshot_are_dropped() {
        let mut replay = ReplayLog::new(Some(&snapshot(3, 1)));
        replay.start_segment(&header(1, 1, 0)).unwrap();
        replay.apply_entries(entries(1, &[1, 1, 1, 2, 2])).unwrap();
        let outcome = replay.finish();
        assert_eq!(outcome.entries, entries(4, &[2, 2]));
        assert!(!outcome.needs_reset);
    }

    #[test]
    fn a_log_that_conflicts_with_the_snapshot_is_discarded() {
        let mut replay = ReplayLog::new(Some(&snapshot(3, 5)));
        replay.start_segment(&header(1, 1, 0)).unwrap();
        replay.apply_entries(entries(1, &[1, 1, 1, 2])).unwrap();
        let outcome = replay.finish();
        assert!(outcome.entries.is_empty());
        assert!(outcome.needs_reset);

        let mut short = ReplayLog::new(Some(&snapshot(9, 5)));
        short.start_segment(&header(1, 1, 0)).unwrap();
        short.apply_entries(entries(1, &[1])).unwrap();
        assert!(
            short.finish().needs_reset,
            "a log ending before the snapshot"
        );
    }

    #[test]
    fn a_reset_record_makes_later_entries_continue_the_snapshot() {
        let mut replay = ReplayLog::new(Some(&snapshot(3, 5)));
        replay.start_segment(&header(1, 1, 0)).unwrap();
        replay.apply_entries(entries(1, &[1, 1, 1, 2])).unwrap();
        replay.apply_snapshot_reset(LogIndex(3), Term(5)).unwrap();
        replay.apply_entries(entries(4, &[5, 6])).unwrap();
        let outcome = replay.finish();
        assert_eq!(outcome.entries, entries(4, &[5, 6]));
        assert!(!outcome.needs_reset);
        let mut ahead = ReplayLog::new(Some(&snapshot(3, 5)));
        ahead.start_segment(&header(1, 1, 0)).unwrap();
        assert!(matches!(
            ahead.apply_snapshot_reset(LogIndex(7), Term(5)),
            Err(Corruption::MissingSnapshot { .. })
        ));
    }

    #[test]
    fn a_first_segment_starting_at_the_snapshot_takes_its_term_from_the_header() {
        let mut replay = ReplayLog::new(Some(&snapshot(10, 3)));
        replay.start_segment(&header(7, 11, 3)).unwrap();
        replay.apply_entries(entries(11, &[3, 4])).unwrap();
        assert_eq!(replay.finish().entries, entries(11, &[3, 4]));
    }
}
