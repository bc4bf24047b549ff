//! The term of every stored entry, in a few words of memory.
//!
//! The WAL does not keep entries in memory (the core does), but it must know
//! terms to decide whether a new snapshot matches the log (Raft §7), to
//! write `prev_term` into each new segment header, and to check that appends
//! never lower the term. Terms never decrease along a Raft log and change
//! only at elections, so the log's terms compress to one run per term.

use bellwether_core::{LogIndex, Term};

/// Terms of the entries `anchor_index ..= last_index`, as runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TermRuns {
    /// An entry whose term is known and before which nothing is tracked:
    /// index 0 (term 0), the last compacted entry, or a snapshot's last
    /// entry after the log was reset to it.
    anchor_index: LogIndex,
    /// Term of the entry at `anchor_index`.
    anchor_term: Term,
    /// `(first index, term)` of each run after the anchor, ascending in both.
    runs: Vec<(LogIndex, Term)>,
    /// Index of the last entry; equals `anchor_index` when no run follows.
    last_index: LogIndex,
}

impl TermRuns {
    /// A log that ends at `index`, whose entry there has `term`.
    pub(crate) fn anchored(index: LogIndex, term: Term) -> Self {
        TermRuns {
            anchor_index: index,
            anchor_term: term,
            runs: Vec::new(),
            last_index: index,
        }
    }

    /// Index of the last entry.
    pub(crate) fn last_index(&self) -> LogIndex {
        self.last_index
    }

    /// Term of the last entry.
    pub(crate) fn last_term(&self) -> Term {
        self.runs.last().map_or(self.anchor_term, |run| run.1)
    }

    /// Term of the entry at `index`, if tracked.
    pub(crate) fn term_at(&self, index: LogIndex) -> Option<Term> {
        if index < self.anchor_index || index > self.last_index {
            return None;
        }
        let runs_started = self.runs.partition_point(|run| run.0 <= index);
        Some(match runs_started {
            0 => self.anchor_term,
            n => self.runs[n - 1].1,
        })
    }

    /// Records an entry appended at `index`, dropping any entries from
    /// `index` on first (conflict truncation).
    pub(crate) fn append(&mut self, index: LogIndex, term: Term) {
        assert!(
            index > self.anchor_index && index.0 <= self.last_index.0 + 1,
            "appends stay after the anchor and leave no gap"
        );
        if index <= self.last_index {
            self.runs.retain(|run| run.0 < index);
        }
        if term != self.last_term() {
            assert!(
                term > self.last_term(),
                "terms never decrease along the log"
            );
            self.runs.push((index, term));
        }
        self.last_index = index;
    }

    /// Forgets entries up to `through`, keeping the term of the entry at
    /// `through` as the new anchor.
    pub(crate) fn compact(&mut self, through: LogIndex) {
        if through <= self.anchor_index || through > self.last_index {
            return;
        }
        let term = self.term_at(through).expect("through is tracked");
        self.runs.retain(|run| run.0 > through);
        self.anchor_index = through;
        self.anchor_term = term;
        assert!(self.runs.iter().all(|run| run.0 > self.anchor_index));
    }

    /// Number of runs held; bounded by the number of terms in the log.
    #[cfg(test)]
    pub(crate) fn run_count(&self) -> usize {
        self.runs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_found_across_runs_and_truncation() {
        let mut runs = TermRuns::anchored(LogIndex(0), Term(0));
        for (index, term) in [(1, 1), (2, 1), (3, 2), (4, 2), (5, 4)] {
            runs.append(LogIndex(index), Term(term));
        }
        assert_eq!(runs.run_count(), 3);
        assert_eq!(runs.term_at(LogIndex(0)), Some(Term(0)));
        assert_eq!(runs.term_at(LogIndex(2)), Some(Term(1)));
        assert_eq!(runs.term_at(LogIndex(4)), Some(Term(2)));
        assert_eq!(runs.term_at(LogIndex(6)), None);
        runs.append(LogIndex(4), Term(5));
        assert_eq!(runs.last_index(), LogIndex(4));
        assert_eq!(runs.term_at(LogIndex(3)), Some(Term(2)));
        assert_eq!(runs.term_at(LogIndex(4)), Some(Term(5)));
        assert_eq!(runs.term_at(LogIndex(5)), None);
    }

    #[test]
    fn compaction_moves_the_anchor_and_keeps_later_terms() {
        let mut runs = TermRuns::anchored(LogIndex(0), Term(0));
        for (index, term) in [(1, 1), (2, 2), (3, 2), (4, 3)] {
            runs.append(LogIndex(index), Term(term));
        }
        runs.compact(LogIndex(3));
        assert_eq!(runs.term_at(LogIndex(2)), None);
        assert_eq!(runs.term_at(LogIndex(3)), Some(Term(2)));
        assert_eq!(runs.term_at(LogIndex(4)), Some(Term(3)));
        assert_eq!(runs.run_count(), 1);
    }

    #[test]
    #[should_panic(expected = "never decrease")]
    fn a_lower_term_is_refused() {
        let mut runs = TermRuns::anchored(LogIndex(5), Term(3));
        runs.append(LogIndex(6), Term(2));
    }
}
