//! Building the member from what the log and the last snapshot hold.

use super::persist::watermark_of;
use super::{ProposeReply, ReadReply};
use crate::config::NodeConfig;
use crate::data_dir::Opened;
use crate::status_tracker::unix_ms;
use bellwether_core::raft::{RaftConfig, RaftDurable, RaftNode, Repair, Snapshot, SnapshotData};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng};
use bellwether_member::{DecodedSnapshot, Member, MemberParts, Roster, StateMachine};
use bellwether_storage::WalStorage;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The core's timing and priorities from the member's configuration.
pub(super) fn raft_config(config: &NodeConfig) -> RaftConfig {
    let tick = config.tick_ms();
    let hint_ms: u64 = 3;
    RaftConfig {
        heartbeat_ticks: (config.heartbeat_ms / tick).max(1),
        election_ticks_min: (config.election_ms / tick).max(2),
        // [election_ms, 1.5 × election_ms): a silent failure is noticed
        // sooner than with the paper's [min, 2 × min); split votes stay rare
        // because rival pre-candidates yield by rank.
        election_jitter_ticks: (config.election_ms / tick / 2).max(1),
        // Lease reads need followers that never vote early inside the
        // lease: no connection-loss hint (CheckQuorum and stickiness are on
        // by default, and `RaftConfig::validate` checks all three).
        hint_slot_ticks: if config.lease_reads {
            0
        } else {
            hint_ms.div_ceil(tick).max(1)
        },
        lease_reads: config.lease_reads,
        detector_floor_heartbeats: config.detector_heartbeats,
        snapshot_bytes_max: config.snapshot_bytes_max(),
        priorities: config.priorities.clone(),
        ..RaftConfig::default()
    }
}

/// Says in one line what the audit of the data directory found and what
/// the member will do about it; nothing for a healthy directory.
pub(super) fn report_audit(config: &NodeConfig, opened: &Opened) {
    if opened.findings.is_empty() {
        return;
    }
    let found = opened.findings.join("; ");
    match (&opened.repair, &opened.moved_aside) {
        (Some(repair), aside) => tracing::warn!(
            node_id = config.id.0,
            moved_aside = ?aside,
            "data dir {}: {found}. Repairing from the leader: this member will not campaign, and votes only for a candidate whose log reaches index {} of term {}, until its own log does (see docs/architecture.md, Amnesia)",
            config.data_dir.display(),
            repair.last_index.0,
            repair.last_term.0,
        ),
        (None, _) => tracing::warn!(
            node_id = config.id.0,
            "data dir {}: {found}; the term and vote were restored from the promise record",
            config.data_dir.display(),
        ),
    }
}

/// The log's snapshot being decoded on another thread while the rest of
/// the log is read (`WalStorage::recover_observing`): at a million keys
/// the decode took 0.36 s and the read 0.48 s, one after the other.
pub(super) struct EarlyRestore {
    /// The snapshot it decodes.
    snapshot: Snapshot,
    /// The thread decoding it.
    decoding: std::thread::JoinHandle<DecodedSnapshot>,
}

impl EarlyRestore {
    /// Starts decoding `snapshot` for `machine` on a thread of its own;
    /// `None` when no thread could be started (the loop then restores it).
    pub(super) fn start(machine: &dyn StateMachine, snapshot: &Snapshot) -> Option<Self> {
        let job = machine.restore_later(snapshot.data.clone());
        let decoding = std::thread::Builder::new()
            .name("restore".into())
            .spawn(job)
            .ok()?;
        Some(EarlyRestore {
            snapshot: snapshot.clone(),
            decoding,
        })
    }

    /// What the thread decoded, if it decoded `snapshot` (the very bytes,
    /// not just equal ones); `None` for another snapshot, whose decode is
    /// thrown away.
    fn decoded_for(self, snapshot: &Snapshot) -> Option<DecodedSnapshot> {
        let same = self.snapshot.meta == snapshot.meta
            && match (&self.snapshot.data, &snapshot.data) {
                (SnapshotData::Memory(ours), SnapshotData::Memory(theirs)) => {
                    std::sync::Arc::ptr_eq(ours, theirs)
                }
                _ => false,
            };
        let decoded = match self.decoding.join() {
            Ok(decoded) => decoded,
            // As a decode on this thread would have: the panic goes on.
            Err(panic) => std::panic::resume_unwind(panic),
        };
        same.then_some(decoded)
    }
}

/// The member as the log and the last snapshot left it, in repair when
/// the audit found its log short of what it had promised. `early` is the
/// decode of the log's snapshot started while the log was read.
pub(super) fn recover_member(
    config: &NodeConfig,
    wal: &WalStorage,
    durable: RaftDurable,
    repair: Option<Repair>,
    mut machine: Box<dyn StateMachine>,
    early: Option<EarlyRestore>,
) -> Member<ProposeReply, ReadReply> {
    let snapshot = durable.snapshot.as_ref().map_or((LogIndex(0), 0), |s| {
        let applied = s.meta.last_index;
        match early.and_then(|early| early.decoded_for(s)) {
            Some(decoded) => machine.restore_decoded(applied, decoded),
            None => machine.restore(applied, s.data.bytes()),
        }
        (applied, s.data.len())
    });
    let members: Vec<NodeId> = config.peers.keys().copied().collect();
    let seed = unix_ms() ^ (u64::from(std::process::id()) << 32) ^ config.id.0;
    let mut raft = if config.join_voters.is_empty() {
        RaftNode::new(
            &raft_config(config),
            config.id,
            &members,
            durable,
            Rng::new(seed),
        )
    } else {
        let voters = &config.join_voters;
        RaftNode::joining(
            &raft_config(config),
            config.id,
            voters,
            durable,
            Rng::new(seed),
        )
    };
    if let Some(repair) = repair {
        raft.start_repair(repair);
    }
    // Forwarded request ids start from the clock at boot (see
    // `bellwether_member::forwarding`).
    let first_request = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_micros() as u64);
    Member::new(MemberParts {
        id: config.id,
        raft,
        machine,
        roster: Roster::new(&config.peers, &config.peer_client, &config.peer_http),
        durable: watermark_of(wal),
        snapshot,
        first_request,
        now: Duration::ZERO,
        snapshot_schedule: Default::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::{ClusterConfig, SnapshotMeta};
    use bellwether_core::Term;
    use bellwether_member::NullMachine;
    use std::sync::Arc;

    fn snapshot(bytes: Vec<u8>) -> Snapshot {
        Snapshot {
            meta: SnapshotMeta {
                last_index: LogIndex(7),
                last_term: Term(2),
                config: ClusterConfig::voters([NodeId(1)]),
            },
            data: SnapshotData::Memory(Arc::new(bytes)),
        }
    }

    #[test]
    fn an_early_decode_counts_only_for_the_very_snapshot_recovery_returned() {
        let read = snapshot(vec![1, 2, 3]);
        let early = EarlyRestore::start(&NullMachine, &read).expect("a thread");
        let decoded = early.decoded_for(&read).expect("the same snapshot");
        let bytes = decoded.downcast::<SnapshotData>().expect("the bytes");
        assert_eq!(bytes.bytes(), &[1, 2, 3]);

        // Equal bytes read again (an audit set the first log aside and
        // opened another): not the snapshot the thread decoded.
        let early = EarlyRestore::start(&NullMachine, &read).expect("a thread");
        assert!(early.decoded_for(&snapshot(vec![1, 2, 3])).is_none());
        let early = EarlyRestore::start(&NullMachine, &read).expect("a thread");
        let mut later = read.clone();
        later.meta.last_index = LogIndex(9);
        assert!(early.decoded_for(&later).is_none(), "another index");
    }
}
