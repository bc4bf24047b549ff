//! Automatic compaction of the key-value history, run by the leader.
//!
//! Every write keeps the previous version of its key so reads at older
//! revisions and watches from the past work. Without compaction that history
//! grows forever, and so does every member's memory. etcd leaves compaction
//! off by default and asks operators to configure it; bellwether keeps the
//! last [`RETAINED_REVISIONS`] revisions instead (like etcd's
//! `--auto-compaction-mode=revision --auto-compaction-retention=1000`), so
//! a member's memory stays bounded under any write load. A read or a watch
//! at an older revision gets etcd's "required revision has been compacted"
//! error, which clients already handle.
//!
//! Compaction is a log entry like any write, so every member drops the same
//! history at the same point.

use super::backend::EtcdBackend;
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::command::Command;

/// Revisions of history kept behind the current one.
pub const RETAINED_REVISIONS: i64 = 1_000;

/// The revision to compact to, if the history kept has grown past twice
/// what is retained (so compactions are occasional, not one per write).
pub fn compaction_target(revision: i64, compact_revision: i64) -> Option<i64> {
    let target = revision - RETAINED_REVISIONS;
    let due = target - compact_revision.max(1) >= RETAINED_REVISIONS;
    // A compaction never reaches the current revision (reads and watches
    // there must work) and never goes back.
    assert!(!due || (compact_revision < target && target < revision));
    due.then_some(target)
}

/// Runs until the node stops: on the leader, proposes a compaction whenever
/// an applied write makes [`compaction_target`] say so. It wakes on each
/// change of the store's revision rather than on a timer, so history cannot
/// pile up between checks under a heavy write load; one compaction is in
/// flight at a time.
pub async fn run(backend: EtcdBackend) {
    let mut revisions = backend.revisions.clone();
    while revisions.changed().await.is_ok() {
        if !backend.is_leader() {
            continue;
        }
        let target = {
            let store = backend.store();
            compaction_target(store.revision(), store.compact_revision())
        };
        let Some(revision) = target else { continue };
        let command = Command::Compact(pb::CompactionRequest {
            revision,
            physical: false,
        });
        match backend.write::<pb::CompactionResponse>(&command).await {
            Ok(_) => tracing::debug!(revision, "history compacted"),
            Err(_) => tracing::debug!(revision, "compaction not applied; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacts_only_once_twice_the_retained_history_has_built_up() {
        assert_eq!(compaction_target(1, 0), None);
        assert_eq!(compaction_target(RETAINED_REVISIONS * 2, 0), None);
        assert_eq!(
            compaction_target(RETAINED_REVISIONS * 2 + 1, 0),
            Some(RETAINED_REVISIONS + 1)
        );
        let after = RETAINED_REVISIONS + 1;
        assert_eq!(compaction_target(RETAINED_REVISIONS * 2 + 5, after), None);
        assert_eq!(
            compaction_target(after + RETAINED_REVISIONS * 2, after),
            Some(after + RETAINED_REVISIONS)
        );
    }
}
