//! The checks of the lease workload (see `lease.rs`), on what the clients
//! and the watcher recorded: pure, so that each can be shown to fail.

use super::lease::{LeaseHistory, PutOutcome, WatchedEvent};
use std::collections::{BTreeMap, BTreeSet};

/// Anomalies listed per check, at most, so that a report stays readable.
const EXAMPLES_MAX: usize = 3;

/// What the run found at the end, besides the history.
pub struct Leftovers {
    /// Keys still under the prefix after the wait.
    pub keys: usize,
    /// Granted leases still alive after the wait.
    pub leases: Vec<i64>,
    /// The store's revision at the end.
    pub final_revision: i64,
}

/// Every anomaly in `history`, one line each (empty: none).
pub fn check(history: &LeaseHistory, leftovers: &Leftovers) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(why) = &history.watch_trouble {
        found.push(format!("the watch could not follow the run: {why}"));
    }
    let by_key = events_by_key(&history.events);
    check_puts(history, &by_key, &mut found);
    check_deletes(history, &by_key, &mut found);
    check_reads(history, &mut found);
    check_revisions(history, leftovers.final_revision, &mut found);
    let mut ids = BTreeSet::new();
    for lease in &history.leases {
        if !ids.insert(lease.id) {
            found.push(format!("lease {} was granted twice", lease.id));
        }
    }
    if leftovers.keys > 0 {
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

/// A read made while the lease was guaranteed found its key.
fn check_reads(history: &LeaseHistory, found: &mut Vec<String>) {
    let early: Vec<_> = history
        .reads
        .iter()
        .filter(|read| !read.present && read.complete_us < read.guaranteed_until_us)
        .collect();
    if let Some(first) = early.first() {
        found.push(format!(
            "{} reads found a key whose lease was still guaranteed (first: {} of lease {}, {} ms before its deadline)",
            early.len(),
            first.key,
            first.lease,
            (first.guaranteed_until_us - first.complete_us) / 1_000
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
    use super::super::lease::{LeaseRead, LeaseRecord};
    use super::*;

    fn event(revision: i64, key: &str, put: bool, lease: i64) -> WatchedEvent {
        WatchedEvent {
            revision,
            key: key.to_string(),
            put,
            lease,
        }
    }

    /// Lease 7 with two acknowledged keys put at 2 and 3, both expired at 4.
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
                revoked_at: None,
            }],
            first_revision: 1,
            events: vec![
                event(2, "k/a", true, 7),
                event(3, "k/b", true, 7),
                event(4, "k/a", false, 0),
                event(4, "k/b", false, 0),
            ],
            reads: vec![LeaseRead {
                lease: 7,
                key: "k/a".into(),
                complete_us: 1_000,
                guaranteed_until_us: 2_000,
                present: true,
            }],
            ..LeaseHistory::default()
        };
        let leftovers = Leftovers {
            keys: 0,
            leases: Vec::new(),
            final_revision: 4,
        };
        (history, leftovers)
    }

    #[test]
    fn a_clean_history_passes() {
        let (history, leftovers) = clean();
        assert_eq!(check(&history, &leftovers), Vec::<String>::new());
    }

    #[test]
    fn a_lost_acknowledged_put_is_caught() {
        let (mut history, leftovers) = clean();
        history.events.retain(|e| e.key != "k/b");
        history.events[1].revision = 3;
        let found = check(&history, &leftovers).join("\n");
        assert!(
            found.contains("the acknowledged put of k/b (revision 3) was lost"),
            "{found}"
        );
    }

    #[test]
    fn a_lease_that_expires_twice_or_in_two_revisions_is_caught() {
        let (mut history, mut leftovers) = clean();
        history.events[3].revision = 5;
        history.events.push(event(6, "k/b", false, 0));
        leftovers.final_revision = 6;
        let found = check(&history, &leftovers).join("\n");
        assert!(found.contains("k/b was deleted 2 times"), "{found}");
        assert!(
            found.contains("lease 7's keys went in 3 revisions"),
            "{found}"
        );
    }

    #[test]
    fn an_early_expiry_is_caught() {
        let (mut history, leftovers) = clean();
        history.reads[0].present = false;
        let found = check(&history, &leftovers).join("\n");
        assert!(
            found.contains("1 reads found a key whose lease was still guaranteed"),
            "{found}"
        );
    }

    #[test]
    fn a_revoke_answered_before_its_keys_went_is_caught() {
        let (mut history, leftovers) = clean();
        history.leases[0].revoked_at = Some(3);
        let found = check(&history, &leftovers).join("\n");
        assert!(
            found.contains("revoked at revision 3, but its keys went at 4"),
            "{found}"
        );
    }

    #[test]
    fn leftovers_phantoms_and_watch_gaps_are_caught() {
        let (mut history, mut leftovers) = clean();
        history.events.push(event(6, "k/z", true, 9));
        leftovers.final_revision = 6;
        leftovers.keys = 1;
        leftovers.leases = vec![9];
        let found = check(&history, &leftovers).join("\n");
        assert!(
            found.contains("k/z appeared, but nobody wrote it"),
            "{found}"
        );
        assert!(
            found.contains("the watch missed 1 revisions of the run (first: 5)"),
            "{found}"
        );
        assert!(found.contains("1 leased keys never went away"), "{found}");
        assert!(
            found.contains("1 leases never expired (first: 9)"),
            "{found}"
        );
    }
}
