//! The check of the kubernetes workload (see `kubernetes.rs`): etcd's watch
//! guarantees, as kube-apiserver relies on them (KEP-4743, and etcd's
//! "Watch API guarantees" in its API docs), over what the watchers
//! recorded and the writes the clients had acknowledged.
//!
//! Every write of a run is a txn under one prefix that every watcher
//! watches, so every revision after a watcher's list has events for it.
//! The *truth* is every event anyone saw, by revision: the acknowledged
//! writes' and every watcher's. Two sources that disagree on a revision are
//! a violation. Each watcher's log is then replayed, from each list on:
//!
//! - **ordered**: revisions never go back, within a response or across;
//! - **once**: no event is delivered twice;
//! - **atomic**: a revision's events (one txn's) come in one response, all
//!   of them;
//! - **no gap**: the revisions delivered after a list at R run R+1, R+2, …
//!   with none skipped, across the stream breaks the watcher resumed over;
//! - **exact resumption**: a watcher resumes from the revision after the
//!   last one it saw, the resumed stream starts there, and a resumption is
//!   refused as compacted only if that revision really is compacted (the
//!   watcher then lists again, which is recorded, not a violation);
//! - **progress**: a progress notification at R means every event up to R
//!   was sent, so none at or below R may come after it and none may be
//!   missing;
//! - **replay**: the list, with every event after it applied (each `prev_kv`
//!   matching what the replay held), equals a list taken at the revision
//!   the watch reached.

use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// Violation messages kept, at most (all are counted).
const MESSAGES_MAX: usize = 20;

/// A key's value and its last modification, as a list or a replay has it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Item {
    pub key: String,
    pub value: String,
    pub mod_revision: i64,
}

/// One event as a watcher received it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Event {
    /// The event's `kv.mod_revision`: its txn's revision.
    pub revision: i64,
    pub key: String,
    /// The value put; `None` for a delete.
    pub value: Option<String>,
    /// `prev_kv`: the value and mod revision before, if the key existed.
    pub prev: Option<(String, i64)>,
}

/// What one watcher did and saw, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Entry {
    /// A paginated list of the prefix, all pages at `revision`: the watch
    /// starts over from it.
    Listed { revision: i64, items: Vec<Item> },
    /// A watch stream created from `from` (after a list, or resumed).
    Opened { from: i64 },
    /// One response's events, in the order received.
    Events(Vec<Event>),
    /// A response without events (requested or periodic progress):
    /// everything up to `revision` was sent.
    Progress { revision: i64 },
    /// The stream broke (member killed, paused, cut off, or a timeout).
    Broken { why: String },
    /// A create from `from` refused: compacted at `compact_revision`.
    Compacted { from: i64, compact_revision: i64 },
    /// A paginated list at `revision`, taken when the watch had reached it,
    /// to compare with the replay.
    Checked { revision: i64, items: Vec<Item> },
}

/// One acknowledged txn: its revision and what it did, key by key (`None`
/// for a delete).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Write {
    pub revision: i64,
    pub ops: Vec<(String, Option<String>)>,
}

/// What the check found and how much it looked at.
#[derive(Debug, Default)]
pub struct Findings {
    /// The first [`MESSAGES_MAX`] violations.
    pub violations: Vec<String>,
    /// All violations.
    pub violation_count: usize,
    /// Events replayed.
    pub events: usize,
    /// Streams resumed after a break (not after a list).
    pub resumptions: usize,
    /// Lists after the first, each after a refused resumption.
    pub relists: usize,
    /// Progress notifications checked.
    pub progress: usize,
    /// Lists compared with the replay.
    pub replays: usize,
}

impl Findings {
    fn violation(&mut self, message: String) {
        self.violation_count += 1;
        if self.violations.len() < MESSAGES_MAX {
            self.violations.push(message);
        }
    }
}

/// Every event anyone saw: revision → key → value (`None`: deleted).
type Truth = BTreeMap<i64, BTreeMap<String, Option<String>>>;

/// Builds the truth from the acknowledged writes and every watcher's
/// events, reporting revisions on which two sources disagree.
fn truth(writes: &[Write], logs: &[Vec<Entry>], findings: &mut Findings) -> Truth {
    let mut truth = Truth::new();
    let mut add = |revision: i64, key: &str, value: &Option<String>, findings: &mut Findings| {
        let at = truth.entry(revision).or_default();
        match at.get(key) {
            Some(known) if known != value => findings.violation(format!(
                "revision {revision}: key {key} is {known:?} in one source and {value:?} in another"
            )),
            Some(_) => {}
            None => {
                at.insert(key.to_string(), value.clone());
            }
        }
    };
    for write in writes {
        for (key, value) in &write.ops {
            add(write.revision, key, value, findings);
        }
    }
    for entry in logs.iter().flatten() {
        if let Entry::Events(events) = entry {
            for event in events {
                add(event.revision, &event.key, &event.value, findings);
            }
        }
    }
    truth
}

/// One watcher's position while its log is replayed.
struct Replay<'a> {
    watcher: usize,
    truth: &'a Truth,
    /// The revision the next event must have, at least; `None` before a
    /// list (at the start, and after a refused resumption).
    next: Option<i64>,
    /// The state: the last list with every event since applied.
    state: BTreeMap<String, (String, i64)>,
    /// Events delivered since the last list, by (revision, key).
    delivered: BTreeSet<(i64, String)>,
    /// The highest progress notification since the last list.
    progress: i64,
    /// A stream was opened on this list already (the next is a resumption).
    opened: bool,
    /// The stream just resumed from this revision, until its first event.
    resumed_from: Option<i64>,
}

/// Checks a run: the acknowledged writes and each watcher's log.
pub fn check(writes: &[Write], logs: &[Vec<Entry>]) -> Findings {
    let mut findings = Findings::default();
    let truth = truth(writes, logs, &mut findings);
    for (watcher, log) in logs.iter().enumerate() {
        let mut replay = Replay {
            watcher,
            truth: &truth,
            next: None,
            state: BTreeMap::new(),
            delivered: BTreeSet::new(),
            progress: 0,
            opened: false,
            resumed_from: None,
        };
        for entry in log {
            replay.entry(entry, &mut findings);
        }
    }
    findings
}

impl Replay<'_> {
    fn entry(&mut self, entry: &Entry, findings: &mut Findings) {
        let w = self.watcher;
        match entry {
            Entry::Listed { revision, items } => {
                if self.next.is_some() || self.opened {
                    findings.relists += 1;
                }
                self.next = Some(revision + 1);
                self.state = items
                    .iter()
                    .map(|i| (i.key.clone(), (i.value.clone(), i.mod_revision)))
                    .collect();
                self.delivered.clear();
                self.progress = 0;
                self.opened = false;
                self.resumed_from = None;
            }
            Entry::Opened { from } => {
                let Some(next) = self.next else {
                    findings.violation(format!(
                        "watcher {w}: opened a watch from {from} without a list"
                    ));
                    return;
                };
                if *from != next {
                    findings.violation(format!(
                        "watcher {w}: resumed from {from}, but it had everything up to {} and nothing after",
                        next - 1
                    ));
                }
                if self.opened {
                    findings.resumptions += 1;
                    self.resumed_from = Some(*from);
                }
                self.opened = true;
                self.next = Some(*from);
            }
            Entry::Events(events) => self.events(events, findings),
            Entry::Progress { revision } => self.progress(*revision, findings),
            Entry::Broken { .. } => self.resumed_from = None,
            Entry::Compacted {
                from,
                compact_revision,
            } => {
                if from >= compact_revision {
                    findings.violation(format!(
                        "watcher {w}: a watch from {from} was refused as compacted at {compact_revision}, which keeps {from}"
                    ));
                }
                self.next = None;
            }
            Entry::Checked { revision, items } => self.compare(*revision, items, findings),
        }
    }

    /// One response's events: grouped by revision, each group a txn.
    fn events(&mut self, events: &[Event], findings: &mut Findings) {
        let w = self.watcher;
        let Some(mut next) = self.next else {
            findings.violation(format!("watcher {w}: events without a list"));
            return;
        };
        let mut groups: Vec<(i64, Vec<&Event>)> = Vec::new();
        for event in events {
            findings.events += 1;
            match groups.last_mut() {
                Some((revision, group)) if *revision == event.revision => group.push(event),
                _ => groups.push((event.revision, vec![event])),
            }
        }
        for (revision, group) in groups {
            if revision < next {
                self.behind(revision, next, &group, findings);
                continue;
            }
            self.gap(next, revision, findings);
            let expected = self.truth.get(&revision).map_or(0, BTreeMap::len);
            if group.len() < expected {
                findings.violation(format!(
                    "watcher {w}: revision {revision} came with {} of its txn's {expected} events in one response",
                    group.len()
                ));
            }
            for event in group {
                self.apply(event, findings);
            }
            next = revision + 1;
            self.resumed_from = None;
        }
        self.next = Some(next);
    }

    /// A group at `revision` below `next`: delivered twice, after a
    /// progress notification that covered it, the rest of a split txn, or
    /// out of order.
    fn behind(&self, revision: i64, next: i64, group: &[&Event], findings: &mut Findings) {
        let w = self.watcher;
        let key = &group[0].key;
        let message = if self.delivered.contains(&(revision, key.clone())) {
            format!("watcher {w}: revision {revision} (key {key}) delivered twice")
        } else if let Some(from) = self.resumed_from.filter(|from| revision < *from) {
            format!("watcher {w}: resumed from {from}, the stream started at {revision}")
        } else if revision <= self.progress {
            format!(
                "watcher {w}: a progress notification at {} came before revision {revision}",
                self.progress
            )
        } else if revision == next - 1 {
            format!("watcher {w}: revision {revision}'s txn split over two responses")
        } else {
            format!(
                "watcher {w}: revision {revision} came after revision {}",
                next - 1
            )
        };
        findings.violation(message);
    }

    /// Reports the revisions from `next` up to (not with) `upto` that the
    /// watch skipped: every revision has events under the prefix.
    fn gap(&self, next: i64, upto: i64, findings: &mut Findings) {
        if upto <= next {
            return;
        }
        let w = self.watcher;
        let known = self.truth.range(next..upto).count() as i64;
        let missing = upto - next;
        let how = match self.resumed_from {
            Some(from) => format!("resumed from {from}, the stream started at {upto}"),
            None => format!("went from {} to {upto}", next - 1),
        };
        findings.violation(format!(
            "watcher {w}: gap: {how}, skipping {missing} revisions ({known} with events someone saw)"
        ));
    }

    /// Applies one event to the replayed state, checking its `prev_kv`.
    fn apply(&mut self, event: &Event, findings: &mut Findings) {
        let w = self.watcher;
        let held = self.state.get(&event.key);
        let prev = event.prev.as_ref().map(|(v, r)| (v.clone(), *r));
        if held.cloned() != prev {
            findings.violation(format!(
                "watcher {w}: revision {}: key {}'s previous value is {prev:?}, the replay holds {held:?}",
                event.revision, event.key
            ));
        }
        match &event.value {
            Some(value) => {
                self.state
                    .insert(event.key.clone(), (value.clone(), event.revision));
            }
            None => {
                self.state.remove(&event.key);
            }
        }
        self.delivered.insert((event.revision, event.key.clone()));
    }

    /// A progress notification at `revision`: every event up to it was
    /// sent, so no known revision from `next` to it may be missing.
    fn progress(&mut self, revision: i64, findings: &mut Findings) {
        let w = self.watcher;
        findings.progress += 1;
        let Some(next) = self.next else {
            findings.violation(format!("watcher {w}: progress without a list"));
            return;
        };
        if revision >= next {
            if let Some((missing, _)) = self.truth.range(next..=revision).next() {
                findings.violation(format!(
                    "watcher {w}: a progress notification at {revision} came before revision {missing}"
                ));
            }
            self.next = Some(revision + 1);
        }
        self.progress = self.progress.max(revision);
    }

    /// A list at `revision`, taken when the watch had reached it, must
    /// equal the replay.
    fn compare(&mut self, revision: i64, items: &[Item], findings: &mut Findings) {
        let w = self.watcher;
        if self.next != Some(revision + 1) {
            return; // not at that revision: nothing to compare
        }
        findings.replays += 1;
        let listed: BTreeMap<&String, (&String, i64)> = items
            .iter()
            .map(|i| (&i.key, (&i.value, i.mod_revision)))
            .collect();
        let keys: BTreeSet<&String> = listed.keys().copied().chain(self.state.keys()).collect();
        let differ: Vec<String> = keys
            .into_iter()
            .filter(|k| listed.get(k).copied() != self.state.get(*k).map(|(v, r)| (v, *r)))
            .map(|k| {
                format!(
                    "{k}: listed {:?}, replayed {:?}",
                    listed.get(k),
                    self.state.get(k)
                )
            })
            .collect();
        if let Some(first) = differ.first() {
            findings.violation(format!(
                "watcher {w}: the list at {revision} and the watch replayed on its list differ in {} keys (first {first})",
                differ.len()
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(revision: i64, key: &str, value: &str, prev: Option<(&str, i64)>) -> Event {
        Event {
            revision,
            key: key.to_string(),
            value: Some(value.to_string()),
            prev: prev.map(|(v, r)| (v.to_string(), r)),
        }
    }

    fn delete(revision: i64, key: &str, prev: (&str, i64)) -> Event {
        Event {
            revision,
            key: key.to_string(),
            value: None,
            prev: Some((prev.0.to_string(), prev.1)),
        }
    }

    fn item(key: &str, value: &str, mod_revision: i64) -> Item {
        Item {
            key: key.to_string(),
            value: value.to_string(),
            mod_revision,
        }
    }

    /// Revisions 11 to 15 after a list at 10 holding a=a0@10:
    /// 11 put b, 12 put a and c in one txn, 13 delete b, 14 put a, 15 put d.
    fn events() -> Vec<Event> {
        vec![
            put(11, "b", "b1", None),
            put(12, "a", "a1", Some(("a0", 10))),
            put(12, "c", "c1", None),
            delete(13, "b", ("b1", 11)),
            put(14, "a", "a2", Some(("a1", 12))),
            put(15, "d", "d1", None),
        ]
    }

    fn writes() -> Vec<Write> {
        let ops = |pairs: &[(&str, Option<&str>)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect()
        };
        vec![
            Write {
                revision: 11,
                ops: ops(&[("b", Some("b1"))]),
            },
            Write {
                revision: 12,
                ops: ops(&[("a", Some("a1")), ("c", Some("c1"))]),
            },
            Write {
                revision: 13,
                ops: ops(&[("b", None)]),
            },
            Write {
                revision: 14,
                ops: ops(&[("a", Some("a2"))]),
            },
            Write {
                revision: 15,
                ops: ops(&[("d", Some("d1"))]),
            },
        ]
    }

    fn listed() -> Entry {
        Entry::Listed {
            revision: 10,
            items: vec![item("a", "a0", 10)],
        }
    }

    fn final_check() -> Entry {
        Entry::Checked {
            revision: 15,
            items: vec![
                item("a", "a2", 14),
                item("c", "c1", 12),
                item("d", "d1", 15),
            ],
        }
    }

    /// A clean log: list, watch, a break after 12 and a resumption from
    /// 13, a progress notification, the final list.
    fn clean() -> Vec<Entry> {
        let e = events();
        vec![
            listed(),
            Entry::Opened { from: 11 },
            Entry::Events(e[0..1].to_vec()),
            Entry::Events(e[1..3].to_vec()),
            Entry::Broken {
                why: "killed".to_string(),
            },
            Entry::Opened { from: 13 },
            Entry::Events(e[3..5].to_vec()),
            Entry::Progress { revision: 14 },
            Entry::Events(e[5..6].to_vec()),
            Entry::Progress { revision: 15 },
            final_check(),
        ]
    }

    fn violations(log: Vec<Entry>) -> Vec<String> {
        let found = check(&writes(), &[clean(), log]);
        assert_eq!(found.violation_count, found.violations.len());
        found.violations
    }

    fn caught(log: Vec<Entry>, what: &str) {
        let found = violations(log);
        assert!(
            found.iter().any(|v| v.contains(what)),
            "{what:?} not caught: {found:?}"
        );
    }

    #[test]
    fn a_clean_history_passes_and_is_counted() {
        let found = check(&writes(), &[clean(), clean()]);
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        assert_eq!(found.events, 12);
        assert_eq!(found.resumptions, 2);
        assert_eq!(found.progress, 4);
        assert_eq!(found.replays, 2);
        assert_eq!(found.relists, 0);
    }

    #[test]
    fn events_out_of_order_are_caught() {
        let e = events();
        let mut log = clean();
        log[6] = Entry::Events(vec![e[4].clone(), e[3].clone()]);
        caught(log, "revision 13 came after revision 14");
    }

    #[test]
    fn an_event_delivered_twice_is_caught() {
        let e = events();
        let mut log = clean();
        log[3] = Entry::Events(vec![e[0].clone(), e[1].clone(), e[2].clone()]);
        caught(log, "revision 11 (key b) delivered twice");
    }

    #[test]
    fn a_txn_split_over_two_responses_is_caught() {
        let e = events();
        let mut log = clean();
        log[3] = Entry::Events(vec![e[1].clone()]);
        log.insert(4, Entry::Events(vec![e[2].clone()]));
        let found = violations(log);
        assert!(
            found
                .iter()
                .any(|v| v.contains("revision 12 came with 1 of its txn's 2 events")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|v| v.contains("revision 12's txn split over two responses")),
            "{found:?}"
        );
    }

    #[test]
    fn a_gap_is_caught() {
        let mut log = clean();
        log[2] = Entry::Events(vec![]);
        caught(
            log,
            "gap: went from 10 to 12, skipping 1 revisions (1 with events",
        );
        // A revision no source saw is a gap too.
        let mut log = clean();
        log.truncate(9);
        log.push(Entry::Events(vec![put(17, "e", "e1", None)]));
        caught(
            log,
            "gap: went from 15 to 17, skipping 1 revisions (0 with events",
        );
    }

    #[test]
    fn a_wrong_resumption_is_caught() {
        let e = events();
        // The stream resumed from 13 starts at 14.
        let mut log = clean();
        log[6] = Entry::Events(vec![e[4].clone()]);
        caught(log, "resumed from 13, the stream started at 14");
        // It starts at 12, again.
        let mut log = clean();
        log[6] = Entry::Events(vec![e[1].clone(), e[2].clone(), e[3].clone()]);
        caught(log, "delivered twice");
        // The watcher resumed from the wrong revision.
        let mut log = clean();
        log[5] = Entry::Opened { from: 14 };
        caught(log, "resumed from 14, but it had everything up to 12");
        // A refusal as compacted of a revision that was kept.
        let mut log = clean();
        log.truncate(5);
        log.push(Entry::Compacted {
            from: 13,
            compact_revision: 12,
        });
        caught(log, "refused as compacted at 12, which keeps 13");
    }

    #[test]
    fn an_early_progress_notification_is_caught() {
        let e = events();
        // Progress at 14 before 13 and 14 were sent, then they come.
        let mut log = clean();
        log[6] = Entry::Progress { revision: 14 };
        log[7] = Entry::Events(e[3..5].to_vec());
        caught(log, "a progress notification at 14 came before revision 13");
        // Progress at 14 and 13, 14 never come.
        let mut log = clean();
        log.remove(6);
        caught(log, "a progress notification at 14 came before revision 13");
    }

    #[test]
    fn a_list_that_differs_from_the_replay_is_caught() {
        let mut log = clean();
        log[10] = Entry::Checked {
            revision: 15,
            items: vec![item("a", "a2", 14), item("d", "d1", 15)],
        };
        caught(
            log,
            "the list at 15 and the watch replayed on its list differ in 1 keys (first c",
        );
        // A wrong prev_kv, or a list the events do not follow from.
        let mut log = clean();
        log[0] = Entry::Listed {
            revision: 10,
            items: vec![item("a", "a-1", 9)],
        };
        caught(log, "revision 12: key a's previous value is Some((\"a0\", 10)), the replay holds Some((\"a-1\", 9))");
    }

    #[test]
    fn two_sources_that_disagree_on_a_revision_are_caught() {
        let mut log = clean();
        log[8] = Entry::Events(vec![put(15, "d", "d-other", None)]);
        caught(
            log,
            "revision 15: key d is Some(\"d1\") in one source and Some(\"d-other\") in another",
        );
    }

    #[test]
    fn a_relist_after_a_compacted_resumption_is_counted_not_a_violation() {
        let e = events();
        let mut log = clean();
        log.truncate(5);
        log.extend([
            Entry::Compacted {
                from: 13,
                compact_revision: 14,
            },
            Entry::Listed {
                revision: 14,
                items: vec![item("a", "a2", 14), item("c", "c1", 12)],
            },
            Entry::Opened { from: 15 },
            Entry::Events(e[5..6].to_vec()),
            final_check(),
        ]);
        let found = check(&writes(), &[log]);
        assert!(found.violations.is_empty(), "{:?}", found.violations);
        assert_eq!((found.relists, found.resumptions, found.replays), (1, 0, 1));
    }
}
