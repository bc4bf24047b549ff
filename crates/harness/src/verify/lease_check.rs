//! The checks of the lease workload (see `lease.rs`), on what the clients
//! and the watcher recorded: pure, so that each can be shown to fail.
//!
//! - every acknowledged put appears once, at the revision its answer gave,
//!   under the lease it named; a refused put never appears; a key nobody
//!   wrote never appears;
//! - every key that was put is deleted exactly once, after its put, and all
//!   keys of one lease in the same revision, by the revision an
//!   acknowledged revoke answered with;
//! - never early: no answer that arrived while the lease was guaranteed
//!   said it was gone, and the watcher received no deletion of its keys
//!   then, unless the client had sent a revoke;
//! - no lease id was granted twice; no key or lease is left;
//! - the watch saw every revision of the run, in order.
//!
//! The checks on events run only when the watch followed the whole run.

use super::lease::{LeaseHistory, PutOutcome, WatchedEvent};
use std::collections::{BTreeMap, BTreeSet};

/// Anomalies listed per check, at most, so that a report stays readable.
const EXAMPLES_MAX: usize = 3;

/// What the run found at the end, besides the history.
pub struct Leftovers {
    /// Keys still under the prefix after the wait (`usize::MAX`: the
    /// cluster never answered).
    pub keys: usize,
    /// Leases still alive after the wait.
    pub leases: Vec<i64>,
    /// The store's revision at the end.
    pub final_revision: i64,
}

/// Every anomaly in `history`, one line each (empty: none).
pub fn check(history: &LeaseHistory, leftovers: &Leftovers) -> Vec<String> {
    let mut found = Vec::new();
    match &history.watch_trouble {
        Some(why) => found.push(format!("the watch could not follow the run: {why}")),
        None => {
            let by_key = events_by_key(&history.events);
            check_puts(history, &by_key, &mut found);
            check_deletes(history, &by_key, &mut found);
            check_deletions_not_early(history, &by_key, &mut found);
            check_revisions(history, leftovers.final_revision, &mut found);
        }
    }
    check_answers_not_early(history, &mut found);
    let mut ids = BTreeSet::new();
    for lease in &history.leases {
        if !ids.insert(lease.id) {
            found.push(format!("lease {} was granted twice", lease.id));
        }
    }
    if leftovers.keys > 0 && leftovers.keys != usize::MAX {
        found.push(format!("{} leased keys never went away", leftovers.keys));
    }
    if !leftovers.leases.is_empty() {
        found.push(format!(
            "{} leases never expired (first: {})",
            leftovers.leases.len(),
            leftovers.leases[0]
        ));
    }
    found
}

/// The watched events of each key, in the order they came.
fn events_by_key(events: &[WatchedEvent]) -> BTreeMap<&str, Vec<&WatchedEvent>> {
    let mut by_key: BTreeMap<&str, Vec<&WatchedEvent>> = BTreeMap::new();
    for event in events {
        by_key.entry(event.key.as_str()).or_default().push(event);
    }
    by_key
}

fn note(found: &mut Vec<String>, count: &mut usize, line: String) {
    *count += 1;
    if *count <= EXAMPLES_MAX {
        found.push(line);
    }
}

/// Every acknowledged put appears once, at its revision, under its lease;
/// no put appears that nobody made; no key is put twice.
fn check_puts(
    history: &LeaseHistory,
    by_key: &BTreeMap<&str, Vec<&WatchedEvent>>,
    found: &mut Vec<String>,
) {
    let mut count = 0;
    let mut written = BTreeSet::new();
    for lease in &history.leases {
        for (key, outcome) in &lease.keys {
            written.insert(key.as_str());
            let puts: Vec<&&WatchedEvent> = by_key
                .get(key.as_str())
                .map(|events| events.iter().filter(|e| e.put).collect())
                .unwrap_or_default();
            let line = match (outcome, puts.as_slice()) {
                (_, [a, _, ..]) => Some(format!("{key} was put twice (revision {})", a.revision)),
                (PutOutcome::Acked(at), []) => {
                    Some(format!("the acknowledged put of {key} (revision {at}) was lost"))
                }
                (PutOutcome::Refused, [put]) => Some(format!(
                    "the put of {key} was refused, yet applied at revision {}",
                    put.revision
                )),
                (PutOutcome::Acked(at), [put]) if put.revision != *at || put.lease != lease.id => {
                    Some(format!(
                        "{key} was acknowledged at revision {at} under lease {}, but put at {} under lease {}",
                        lease.id, put.revision, put.lease
                    ))
                }
                (PutOutcome::Unanswered, [put]) if put.lease != lease.id => Some(format!(
                    "{key} was put under lease {}, not {}",
                    put.lease, lease.id
                )),
                _ => None,
            };
            if let Some(line) = line {
                note(found, &mut count, line);
            }
        }
    }
    for key in by_key.keys().filter(|key| !written.contains(**key)) {
        note(
            found,
            &mut count,
            format!("{key} appeared, but nobody wrote it"),
        );
    }
    if count > EXAMPLES_MAX {
        found.push(format!("{count} put anomalies in all"));
    }
}

/// Every key that was put is deleted exactly once, after its put; a
/// lease's keys all go in one revision, by the revision an acknowledged
/// revoke answered with.
fn check_deletes(
    history: &LeaseHistory,
    by_key: &BTreeMap<&str, Vec<&WatchedEvent>>,
    found: &mut Vec<String>,
) {
    let mut count = 0;
    for lease in &history.leases {
        let mut revisions = BTreeSet::new();
        for (key, _) in &lease.keys {
            let Some(events) = by_key.get(key.as_str()) else {
                continue;
            };
            let deletes: Vec<i64> = events
                .iter()
                .filter(|e| !e.put)
                .map(|e| e.revision)
                .collect();
            let put = events.iter().find(|e| e.put).map(|e| e.revision);
            let line = match (put, deletes.as_slice()) {
                (Some(_), []) => Some(format!("{key} was never deleted")),
                (_, [_, _, ..]) => Some(format!(
                    "{key} was deleted {} times: {deletes:?}",
                    deletes.len()
                )),
                (Some(put), [delete]) if *delete <= put => Some(format!(
                    "{key} was deleted at revision {delete}, before its put at {put}"
                )),
                (None, [delete]) => Some(format!("{key} was deleted at {delete} but never put")),
                _ => None,
            };
            if let Some(line) = line {
                note(found, &mut count, line);
            }
            revisions.extend(deletes);
        }
        if revisions.len() > 1 {
            let line = format!(
                "lease {}'s keys went in {} revisions {revisions:?}, not one",
                lease.id,
                revisions.len()
            );
            note(found, &mut count, line);
        }
        if let (Some(revoked), Some(last)) = (lease.revoked_at, revisions.last()) {
            if *last > revoked {
                let line = format!(
                    "lease {} was revoked at revision {revoked}, but its keys went at {last}",
                    lease.id
                );
                note(found, &mut count, line);
            }
        }
    }
    if count > EXAMPLES_MAX {
        found.push(format!("{count} delete anomalies in all"));
    }
}

/// No answer that arrived while its lease was guaranteed said the lease
/// was gone.
fn check_answers_not_early(history: &LeaseHistory, found: &mut Vec<String>) {
    let early: Vec<_> = history
        .leases
        .iter()
        .flat_map(|lease| lease.gone.iter().map(move |gone| (lease.id, gone)))
        .filter(|(_, gone)| gone.at_us < gone.guaranteed_until_us)
        .collect();
    if let Some((lease, first)) = early.first() {
        found.push(format!(
            "{} answers said a lease was gone while it was still guaranteed (first: {} found lease {lease} gone {} ms before its guaranteed end)",
            early.len(),
            first.what,
            (first.guaranteed_until_us - first.at_us) / 1_000
        ));
    }
}

/// The watcher received no deletion of a lease's keys while the lease was
/// guaranteed, unless its client had sent a revoke by then.
fn check_deletions_not_early(
    history: &LeaseHistory,
    by_key: &BTreeMap<&str, Vec<&WatchedEvent>>,
    found: &mut Vec<String>,
) {
    let mut early = Vec::new();
    for lease in &history.leases {
        for (key, _) in &lease.keys {
            let deletes = by_key
                .get(key.as_str())
                .into_iter()
                .flatten()
                .filter(|e| !e.put);
            for delete in deletes {
                let revoked_before = lease
                    .revoke_sent_us
                    .is_some_and(|r| r <= delete.received_us);
                if delete.received_us < lease.guaranteed_until_us && !revoked_before {
                    early.push((key, lease, delete));
                }
            }
        }
    }
    if let Some((key, lease, delete)) = early.first() {
        found.push(format!(
            "{} keys were deleted while their lease was still guaranteed (first: {key} of lease {}, received {} ms before the lease's guaranteed end)",
            early.len(),
            lease.id,
            (lease.guaranteed_until_us - delete.received_us) / 1_000
        ));
    }
}

/// The watch saw every revision after the first, up to the end, in order.
fn check_revisions(history: &LeaseHistory, final_revision: i64, found: &mut Vec<String>) {
    if history.watch_trouble.is_some() {
        return;
    }
    if let Some(pair) = history
        .events
        .windows(2)
        .find(|p| p[1].revision < p[0].revision)
    {
        found.push(format!(
            "the watch went back from revision {} to {}",
            pair[0].revision, pair[1].revision
        ));
    }
    let seen: BTreeSet<i64> = history.events.iter().map(|e| e.revision).collect();
    let missing: Vec<i64> = (history.first_revision + 1..=final_revision)
        .filter(|r| !seen.contains(r))
        .collect();
    if let Some(first) = missing.first() {
        found.push(format!(
            "the watch missed {} revisions of the run (first: {first})",
            missing.len()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::lease::{GoneAnswer, LeaseRecord};
    use super::*;

    fn event(revision: i64, key: &str, put: bool, lease: i64) -> WatchedEvent {
        WatchedEvent {
            revision,
            key: key.to_string(),
            put,
            lease,
            // Received after every lease's guaranteed end unless a test
            // says otherwise.
            received_us: 10_000_000,
        }
    }

    /// Lease 7 (guaranteed until 3 s) with two acknowledged keys put at 2
    /// and 3, both expired at 4.
    fn clean() -> (LeaseHistory, Leftovers) {
        let history = LeaseHistory {
            leases: vec![LeaseRecord {
                id: 7,
                client: 0,
                ttl_seconds: 2,
                keys: vec![
                    ("k/a".into(), PutOutcome::Acked(2)),
                    ("k/b".into(), PutOutcome::Acked(3)),
                ],
                revoke_sent_us: None,
                revoked_at: None,
                guaranteed_until_us: 3_000_000,
                gone: vec![GoneAnswer {
                    what: "a read of k/a".into(),
                    at_us: 3_500_000,
                    guaranteed_until_us: 3_000_000,
                }],
                reads_present: 2,
            }],
            first_revision: 1,
            events: vec![
                event(2, "k/a", true, 7),
                event(3, "k/b", true, 7),
                event(4, "k/a", false, 0),
                event(4, "k/b", false, 0),
            ],
            ..LeaseHistory::default()
        };
        let leftovers = Leftovers {
            keys: 0,
            leases: Vec::new(),
            final_revision: 4,
        };
        (history, leftovers)
    }

    fn found(history: &LeaseHistory, leftovers: &Leftovers) -> String {
        check(history, leftovers).join("\n")
    }

    #[test]
    fn a_clean_history_passes() {
        let (history, leftovers) = clean();
        assert_eq!(found(&history, &leftovers), "");
    }

    #[test]
    fn lost_doubled_refused_and_misplaced_puts_are_caught() {
        let (mut history, leftovers) = clean();
        history.events.retain(|e| e.key != "k/b");
        history.events[1].revision = 3;
        let text = found(&history, &leftovers);
        assert!(
            text.contains("the acknowledged put of k/b (revision 3) was lost"),
            "{text}"
        );

        let (mut history, mut leftovers) = clean();
        history.events.push(event(5, "k/a", true, 7));
        leftovers.final_revision = 5;
        assert!(found(&history, &leftovers).contains("k/a was put twice"));

        let (mut history, leftovers) = clean();
        history.leases[0].keys[1].1 = PutOutcome::Refused;
        let text = found(&history, &leftovers);
        assert!(
            text.contains("the put of k/b was refused, yet applied at revision 3"),
            "{text}"
        );

        let (mut history, leftovers) = clean();
        history.events[1].lease = 8;
        let text = found(&history, &leftovers);
        assert!(text.contains("but put at 3 under lease 8"), "{text}");
    }

    #[test]
    fn a_lease_that_expires_twice_or_in_two_revisions_is_caught() {
        let (mut history, mut leftovers) = clean();
        history.events[3].revision = 5;
        history.events.push(event(6, "k/b", false, 0));
        leftovers.final_revision = 6;
        let text = found(&history, &leftovers);
        assert!(text.contains("k/b was deleted 2 times"), "{text}");
        assert!(
            text.contains("lease 7's keys went in 3 revisions"),
            "{text}"
        );
    }

    #[test]
    fn a_deletion_before_its_put_or_without_one_is_caught() {
        let (mut history, leftovers) = clean();
        history.events[2].revision = 1;
        history.events.swap(0, 2);
        let text = found(&history, &leftovers);
        assert!(
            text.contains("k/a was deleted at revision 1, before its put at 2"),
            "{text}"
        );
    }

    #[test]
    fn an_answer_that_a_guaranteed_lease_is_gone_is_caught() {
        let (mut history, leftovers) = clean();
        history.leases[0].gone[0].at_us = 2_900_000;
        let text = found(&history, &leftovers);
        assert!(
            text.contains("1 answers said a lease was gone while it was still guaranteed (first: a read of k/a found lease 7 gone 100 ms"),
            "{text}"
        );
    }

    #[test]
    fn a_deletion_received_while_the_lease_was_guaranteed_is_caught_unless_revoked() {
        let (mut history, leftovers) = clean();
        history.events[2].received_us = 2_000_000;
        let text = found(&history, &leftovers);
        assert!(
            text.contains("1 keys were deleted while their lease was still guaranteed (first: k/a of lease 7, received 1000 ms"),
            "{text}"
        );
        history.leases[0].revoke_sent_us = Some(1_900_000);
        history.leases[0].revoked_at = Some(4);
        assert_eq!(
            found(&history, &leftovers),
            "",
            "the client revoked it first"
        );
    }

    #[test]
    fn a_revoke_answered_before_its_keys_went_is_caught() {
        let (mut history, leftovers) = clean();
        history.leases[0].revoked_at = Some(3);
        let text = found(&history, &leftovers);
        assert!(
            text.contains("revoked at revision 3, but its keys went at 4"),
            "{text}"
        );
    }

    #[test]
    fn leftovers_phantoms_twice_granted_ids_and_watch_gaps_are_caught() {
        let (mut history, mut leftovers) = clean();
        history.events.push(event(6, "k/z", true, 9));
        history.leases.push(history.leases[0].clone());
        history.leases[1].keys.clear();
        leftovers.final_revision = 6;
        leftovers.keys = 1;
        leftovers.leases = vec![9];
        let text = found(&history, &leftovers);
        assert!(text.contains("k/z appeared, but nobody wrote it"), "{text}");
        assert!(
            text.contains("the watch missed 1 revisions of the run (first: 5)"),
            "{text}"
        );
        assert!(text.contains("lease 7 was granted twice"), "{text}");
        assert!(text.contains("1 leased keys never went away"), "{text}");
        assert!(text.contains("1 leases never expired (first: 9)"), "{text}");
    }

    #[test]
    fn a_watch_that_goes_back_is_caught() {
        let (mut history, leftovers) = clean();
        history.events.swap(0, 1);
        let text = found(&history, &leftovers);
        assert!(
            text.contains("the watch went back from revision 3 to 2"),
            "{text}"
        );
    }

    #[test]
    fn a_broken_watch_is_reported_instead_of_what_it_missed() {
        let (mut history, leftovers) = clean();
        history.events.clear();
        history.watch_trouble = Some("compacted".into());
        let text = found(&history, &leftovers);
        assert_eq!(text, "the watch could not follow the run: compacted");
    }
}
