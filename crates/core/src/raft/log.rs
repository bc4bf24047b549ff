//! The in-memory Raft log: entries after the latest snapshot (paper §5.3,
//! §7). Storage is the durable copy; this is the working copy the algorithm
//! reads, and it remembers which suffix the runtime has not persisted yet.

use super::entry::{ClusterConfig, Entry, Payload, SnapshotMeta};
use crate::types::{LogIndex, Term};

/// Why a follower refused entries: the leader's `prev` entry is not in its
/// log. The hint lets the leader skip a whole term at once (§5.3, "the
/// leader can decrement nextIndex to bypass all of the conflicting entries
/// in that term").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// First index the leader should try next.
    pub hint_index: LogIndex,
    /// Term of the follower's entry at the leader's `prev` index, if it has
    /// one; the leader skips to the end of that term in its own log.
    pub hint_term: Option<Term>,
}

/// Entries `snapshot_index + 1 ..= last_index`, in order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RaftLog {
    /// Last index covered by the snapshot (0 = none).
    snapshot_index: LogIndex,
    /// Term of that entry.
    snapshot_term: Term,
    /// `entries[k].index == snapshot_index + 1 + k`.
    entries: Vec<Entry>,
    /// Lowest index changed since the runtime last took the unpersisted
    /// suffix; `None` when everything is persisted.
    unpersisted_from: Option<LogIndex>,
}

impl RaftLog {
    /// A log restored from storage: a snapshot point and the entries after it.
    pub fn restore(snapshot: Option<&SnapshotMeta>, entries: Vec<Entry>) -> Self {
        let (snapshot_index, snapshot_term) =
            snapshot.map_or((LogIndex(0), Term(0)), |m| (m.last_index, m.last_term));
        for (k, entry) in entries.iter().enumerate() {
            assert_eq!(
                entry.index.0,
                snapshot_index.0 + 1 + k as u64,
                "log entries must be contiguous"
            );
        }
        assert!(
            entries.windows(2).all(|pair| pair[0].term <= pair[1].term),
            "log terms must never decrease"
        );
        RaftLog {
            snapshot_index,
            snapshot_term,
            entries,
            unpersisted_from: None,
        }
    }

    /// A log of no-op entries with these terms at indexes 1, 2, … (tests).
    pub fn from_terms(terms: Vec<Term>) -> Self {
        let entries = terms
            .into_iter()
            .enumerate()
            .map(|(k, term)| Entry {
                term,
                index: LogIndex(k as u64 + 1),
                payload: Payload::Noop,
            })
            .collect();
        Self::restore(None, entries)
    }

    /// Index of the last entry (or of the snapshot when empty).
    pub fn last_index(&self) -> LogIndex {
        LogIndex(self.snapshot_index.0 + self.entries.len() as u64)
    }

    /// Term of the last entry.
    pub fn last_term(&self) -> Term {
        self.entries.last().map_or(self.snapshot_term, |e| e.term)
    }

    /// First index still held as an entry.
    pub fn first_index(&self) -> LogIndex {
        LogIndex(self.snapshot_index.0 + 1)
    }

    /// Last index covered by the snapshot.
    pub fn snapshot_index(&self) -> LogIndex {
        self.snapshot_index
    }

    /// Term of `index`, if known: the snapshot point or a held entry.
    pub fn term(&self, index: LogIndex) -> Option<Term> {
        if index == self.snapshot_index {
            return Some(self.snapshot_term);
        }
        self.entry(index).map(|e| e.term)
    }

    /// The entry at `index`, if held.
    pub fn entry(&self, index: LogIndex) -> Option<&Entry> {
        if index <= self.snapshot_index {
            return None;
        }
        self.entries
            .get((index.0 - self.snapshot_index.0 - 1) as usize)
    }

    /// Held entries from `from` on, at most `count_max` of them, borrowed.
    pub fn held_from(&self, from: LogIndex, count_max: usize) -> &[Entry] {
        assert!(from > self.snapshot_index, "{from} is compacted");
        let start = (from.0 - self.snapshot_index.0 - 1) as usize;
        let held = self.entries.get(start..).unwrap_or_default();
        &held[..held.len().min(count_max)]
    }

    /// Entries from `from` on, at most `count_max` of them and about
    /// `bytes_max` bytes (always at least one if any exist).
    pub fn slice(&self, from: LogIndex, count_max: usize, bytes_max: usize) -> Vec<Entry> {
        // Measured first, so the copy allocates once.
        entries_within(self.held_from(from, count_max), bytes_max).to_vec()
    }

    /// The election restriction (§5.4.1): a log ending at
    /// `(last_term, last_index)` is at least as up-to-date as this one when
    /// its last term is higher, or equal with an index at least as high.
    pub fn is_behind_or_equal(&self, last_term: Term, last_index: LogIndex) -> bool {
        (last_term, last_index) >= (self.last_term(), self.last_index())
    }

    /// Appends one entry created by this node as leader.
    pub fn append(&mut self, entry: Entry) {
        assert_eq!(
            entry.index,
            self.last_index().next(),
            "leader appends at the end"
        );
        assert!(
            entry.term >= self.last_term(),
            "terms never decrease along the log"
        );
        self.mark_unpersisted(entry.index);
        self.entries.push(entry);
    }

    /// The AppendEntries consistency check and conflict resolution (§5.3).
    /// Entries at or below `commit` are never truncated. Returns the index of
    /// the last entry now known to match the leader's log.
    pub fn try_append(
        &mut self,
        prev_index: LogIndex,
        prev_term: Term,
        entries: Vec<Entry>,
        commit: LogIndex,
    ) -> Result<LogIndex, Conflict> {
        match self.term(prev_index) {
            Some(term) if term == prev_term => {}
            Some(term) if prev_index > self.snapshot_index => {
                let first_of_term = self.first_index_of_term(prev_index, term);
                return Err(Conflict {
                    hint_index: first_of_term,
                    hint_term: Some(term),
                });
            }
            _ if prev_index > self.last_index() => {
                return Err(Conflict {
                    hint_index: self.last_index().next(),
                    hint_term: None,
                });
            }
            _ => {
                // Below our snapshot: those entries are committed and match.
                return Err(Conflict {
                    hint_index: self.snapshot_index.next(),
                    hint_term: None,
                });
            }
        }
        let last_new = LogIndex(prev_index.0 + entries.len() as u64);
        for entry in entries {
            match self.term(entry.index) {
                Some(term) if term == entry.term => continue,
                Some(_) => {
                    assert!(
                        entry.index > commit,
                        "conflict at committed {} (commit {commit})",
                        entry.index
                    );
                    self.truncate_from(entry.index);
                    self.append(entry);
                }
                None => {
                    if entry.index <= self.snapshot_index {
                        continue;
                    }
                    self.append(entry);
                }
            }
        }
        Ok(last_new)
    }

    /// First index of the run of `term` that ends at `index`.
    fn first_index_of_term(&self, index: LogIndex, term: Term) -> LogIndex {
        let mut first = index;
        while first > self.first_index() && self.term(LogIndex(first.0 - 1)) == Some(term) {
            first = LogIndex(first.0 - 1);
        }
        first
    }

    /// Last index holding `term` in this log, if any (leader side of the
    /// conflict hint).
    pub fn last_index_of_term(&self, term: Term) -> Option<LogIndex> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.term == term)
            .map(|e| e.index)
    }

    fn truncate_from(&mut self, index: LogIndex) {
        assert!(
            index > self.snapshot_index,
            "cannot truncate into the snapshot"
        );
        self.entries
            .truncate((index.0 - self.snapshot_index.0 - 1) as usize);
        self.mark_unpersisted(index);
    }

    fn mark_unpersisted(&mut self, index: LogIndex) {
        self.unpersisted_from = Some(self.unpersisted_from.map_or(index, |i| i.min(index)));
    }

    /// The last entry handed out by [`take_unpersisted`](Self::take_unpersisted)
    /// and not changed since: on disk once the runtime has carried out the
    /// `Ready` that took it.
    pub fn durable_last_index(&self) -> LogIndex {
        let last = self.last_index();
        self.unpersisted_from
            .map_or(last, |from| LogIndex(from.0.saturating_sub(1)).min(last))
    }

    /// Entries the runtime has not persisted yet (a contiguous suffix; its
    /// first index may be at or below what storage holds, meaning "truncate
    /// there first"). Marks them persisted.
    pub fn take_unpersisted(&mut self) -> Vec<Entry> {
        let Some(from) = self.unpersisted_from.take() else {
            return Vec::new();
        };
        if from > self.last_index() {
            // Truncated without new entries after: storage must drop the
            // suffix too. Signalled by the runtime's append of nothing, so
            // keep the marker until an entry follows (cannot happen today:
            // truncation is always followed by an append).
            return Vec::new();
        }
        let from = from.max(self.first_index());
        self.slice(from, usize::MAX, usize::MAX)
    }

    /// True when entries await persistence.
    pub fn has_unpersisted(&self) -> bool {
        self.unpersisted_from.is_some()
    }

    /// Drops entries up to and including `index`, which the snapshot `meta`
    /// now covers.
    pub fn compact(&mut self, meta: &SnapshotMeta) {
        assert!(
            meta.last_index > self.snapshot_index,
            "snapshots only move forward"
        );
        match self.term(meta.last_index) {
            Some(term) if term == meta.last_term => {
                let drop = (meta.last_index.0 - self.snapshot_index.0) as usize;
                self.entries.drain(..drop);
            }
            // The snapshot is not a prefix of this log (installed from the
            // leader): everything here is superseded.
            _ => self.entries.clear(),
        }
        self.snapshot_index = meta.last_index;
        self.snapshot_term = meta.last_term;
        if self.unpersisted_from.is_some_and(|i| i <= meta.last_index) {
            self.unpersisted_from =
                (self.last_index() > meta.last_index).then_some(meta.last_index.next());
        }
    }

    /// The configuration in force at the end of this log: the last
    /// membership entry, else `base` (the snapshot's or the bootstrap one).
    pub fn latest_config(&self, base: &ClusterConfig) -> (ClusterConfig, LogIndex) {
        for entry in self.entries.iter().rev() {
            if let Payload::Membership(config) = &entry.payload {
                return (config.clone(), entry.index);
            }
        }
        (base.clone(), self.snapshot_index)
    }
}

impl LogIndex {
    /// The index after this one.
    pub fn next(self) -> LogIndex {
        LogIndex(self.0 + 1)
    }
}

/// The first of `entries` whose sizes add up to about `bytes_max`: always
/// the first entry, then each next one while the total stays within it.
pub(crate) fn entries_within(entries: &[Entry], bytes_max: usize) -> &[Entry] {
    if bytes_max == usize::MAX {
        return entries;
    }
    let mut bytes = 0;
    for (k, entry) in entries.iter().enumerate() {
        bytes += entry.size_bytes();
        if k > 0 && bytes > bytes_max {
            return &entries[..k];
        }
    }
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(index: u64, term: u64) -> Entry {
        Entry {
            term: Term(term),
            index: LogIndex(index),
            payload: Payload::Noop,
        }
    }

    #[test]
    fn up_to_date_compares_last_term_first_then_index() {
        let log = RaftLog::from_terms(vec![Term(1), Term(2), Term(2)]);
        assert!(
            log.is_behind_or_equal(Term(3), LogIndex(1)),
            "higher term wins"
        );
        assert!(log.is_behind_or_equal(Term(2), LogIndex(3)), "equal logs");
        assert!(
            !log.is_behind_or_equal(Term(2), LogIndex(2)),
            "shorter loses"
        );
        assert!(
            !log.is_behind_or_equal(Term(1), LogIndex(9)),
            "lower term loses"
        );
    }

    #[test]
    #[should_panic(expected = "never decrease")]
    fn decreasing_terms_are_refused() {
        RaftLog::from_terms(vec![Term(2), Term(1)]);
    }

    #[test]
    fn paper_5_3_append_checks_prev_and_truncates_conflicts() {
        let mut log = RaftLog::from_terms(vec![Term(1), Term(1), Term(2), Term(2)]);
        log.take_unpersisted();
        // Matching prev, conflicting entry at 3: truncate 3.. and append.
        let result = log.try_append(LogIndex(2), Term(1), vec![entry(3, 3)], LogIndex(2));
        assert_eq!(result, Ok(LogIndex(3)));
        assert_eq!((log.last_index(), log.last_term()), (LogIndex(3), Term(3)));
        assert_eq!(
            log.take_unpersisted(),
            vec![entry(3, 3)],
            "storage must rewrite from 3"
        );
        // A stale, shorter append does not truncate what follows.
        assert_eq!(
            log.try_append(LogIndex(1), Term(1), vec![entry(2, 1)], LogIndex(0)),
            Ok(LogIndex(2))
        );
        assert_eq!(log.last_index(), LogIndex(3));
        assert!(log.take_unpersisted().is_empty());
    }

    #[test]
    fn paper_5_3_fast_backtracking_hints() {
        let mut log = RaftLog::from_terms(vec![Term(1), Term(2), Term(2), Term(2)]);
        let missing = log.try_append(LogIndex(9), Term(4), vec![], LogIndex(0));
        assert_eq!(
            missing,
            Err(Conflict {
                hint_index: LogIndex(5),
                hint_term: None
            })
        );
        let wrong_term = log.try_append(LogIndex(4), Term(3), vec![], LogIndex(0));
        assert_eq!(
            wrong_term,
            Err(Conflict {
                hint_index: LogIndex(2),
                hint_term: Some(Term(2))
            })
        );
        assert_eq!(log.last_index_of_term(Term(2)), Some(LogIndex(4)));
        assert_eq!(log.last_index_of_term(Term(3)), None);
    }

    #[test]
    #[should_panic(expected = "conflict at committed")]
    fn committed_entries_are_never_truncated() {
        let mut log = RaftLog::from_terms(vec![Term(1), Term(1)]);
        let _ = log.try_append(LogIndex(1), Term(1), vec![entry(2, 2)], LogIndex(2));
    }

    #[test]
    fn compaction_keeps_the_suffix_and_answers_terms_at_the_snapshot() {
        let mut log = RaftLog::from_terms(vec![Term(1), Term(1), Term(2)]);
        log.take_unpersisted();
        let meta = SnapshotMeta {
            last_index: LogIndex(2),
            last_term: Term(1),
            config: ClusterConfig::default(),
        };
        log.compact(&meta);
        assert_eq!(log.first_index(), LogIndex(3));
        assert_eq!(log.term(LogIndex(2)), Some(Term(1)));
        assert_eq!(log.term(LogIndex(1)), None);
        assert_eq!(log.slice(LogIndex(3), 10, 1 << 20), vec![entry(3, 2)]);
    }
}
