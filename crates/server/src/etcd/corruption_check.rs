//! The leader's periodic consistency check, as etcd's `--experimental-
//! corrupt-check-time` runs it: every interval the leader hashes its
//! retained history at its current revision (HashKV) and asks every other
//! member for the same revision's hash, through a call over the peer
//! connection (`member_call.rs`). A member that answers with the
//! same compact revision and another hash holds different data for the
//! same log: the leader raises the CORRUPT alarm for it, through the log,
//! and from then on every member refuses writes until an operator clears
//! it (`etcdctl alarm disarm`) after replacing that member's data.
//!
//! A member that has not applied the revision yet answers "future
//! revision" and is skipped this round; one that compacted elsewhere (a
//! different compact revision) cannot be compared and is skipped too.

use super::backend::EtcdBackend;
use super::member_call::MemberCall;
use bellwether_api::etcdserverpb as pb;
use bellwether_core::NodeId;
use bellwether_etcd::command::Command;
use bellwether_kv::{AlarmKind, KvError, KvStore};
use std::time::Duration;

/// How long one member gets to answer its HashKV.
const ANSWER_WAIT: Duration = Duration::from_secs(5);

/// The hash HashKV answers: CRC-32C over every retained write at or below
/// `revision` (0: the current one), each as its key (length-prefixed),
/// revision, then either a tombstone byte or its create revision,
/// version, lease and value (length-prefixed), integers little-endian.
pub fn hash_kv(store: &KvStore, revision: i64) -> Result<u32, KvError> {
    let mut hash = 0;
    let mut buffer = Vec::new();
    let upto = if revision <= 0 {
        store.revision()
    } else {
        revision
    };
    for write in store.retained_writes(revision)? {
        // Members compare hashes of the same revision: nothing later counts.
        assert!(
            write.revision <= upto,
            "HashKV hashes only writes at or below its revision"
        );
        buffer.clear();
        buffer.extend_from_slice(&(write.key.len() as u64).to_le_bytes());
        buffer.extend_from_slice(write.key);
        buffer.extend_from_slice(&write.revision.to_le_bytes());
        match write.kv {
            None => buffer.push(0),
            Some(kv) => {
                buffer.push(1);
                for field in [kv.create_revision, kv.version, kv.lease] {
                    buffer.extend_from_slice(&field.to_le_bytes());
                }
                buffer.extend_from_slice(&(kv.value.len() as u64).to_le_bytes());
                buffer.extend_from_slice(&kv.value);
            }
        }
        hash = crc32c::crc32c_append(hash, &buffer);
    }
    Ok(hash)
}

/// Runs until the task is aborted: every `interval`, on the leader, one
/// round of the check.
pub async fn run(backend: EtcdBackend, interval: Duration) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await; // The first tick is immediate; wait one interval.
    loop {
        ticker.tick().await;
        if backend.is_leader() {
            check_once(&backend).await;
        }
    }
}

/// One round: returns the members found to differ (each now alarmed).
pub async fn check_once(backend: &EtcdBackend) -> Vec<NodeId> {
    let hashing = backend.clone();
    let ours = tokio::task::spawn_blocking(move || {
        let store = hashing.store();
        // 0: the current revision, always served (an explicit revision
        // equal to the compact revision is refused, as etcd refuses it).
        let hash = hash_kv(&store, 0).expect("the current revision is always served");
        assert!(
            store.compact_revision() <= store.revision(),
            "the store never compacts past its revision"
        );
        (store.revision(), store.compact_revision(), hash)
    })
    .await;
    let Ok((revision, compact_revision, ours)) = ours else {
        return Vec::new();
    };
    let mut differing = Vec::new();
    for member in backend
        .member_ids()
        .into_iter()
        .filter(|m| *m != backend.member_id)
    {
        let Some(answer) = ask(backend, member, revision).await else {
            continue;
        };
        let answered_by = answer.header.map(|h| h.member_id);
        if answered_by != Some(member.0) {
            tracing::warn!(
                member = member.0,
                ?answered_by,
                "consistency check: another member answered at this member's address; skipped"
            );
            continue;
        }
        if answer.compact_revision == compact_revision && answer.hash != ours {
            tracing::error!(
                member = member.0,
                revision,
                ours,
                theirs = answer.hash,
                "member's history hash differs from the leader's at the same revision: raising the CORRUPT alarm"
            );
            raise_corrupt(backend, member).await;
            differing.push(member);
        }
    }
    differing
}

/// `member`'s HashKV at `revision`, or `None` if it cannot be compared now.
async fn ask(backend: &EtcdBackend, member: NodeId, revision: i64) -> Option<pb::HashKvResponse> {
    let call = MemberCall::HashKv { revision };
    match tokio::time::timeout(ANSWER_WAIT, backend.call(member, &call)).await {
        Ok(Ok(answer)) => Some(answer),
        Ok(Err(status)) => {
            tracing::debug!(member = member.0, %status, "consistency check: no comparable hash this round");
            None
        }
        Err(_) => None,
    }
}

/// Raises the CORRUPT alarm for `member` unless it is raised already.
async fn raise_corrupt(backend: &EtcdBackend, member: NodeId) {
    let raised = backend
        .store()
        .alarms()
        .any(|a| a.member_id == member.0 && a.kind == AlarmKind::Corrupt);
    if raised {
        return;
    }
    let command = Command::Alarm(pb::AlarmRequest {
        action: pb::alarm_request::AlarmAction::Activate as i32,
        member_id: member.0,
        alarm: pb::AlarmType::Corrupt as i32,
    });
    if let Err(error) = backend.write::<pb::AlarmResponse>(&command).await {
        tracing::warn!(member = member.0, %error, "could not raise the CORRUPT alarm; the next round retries");
    }
}
