//! Building the member from what the log and the last snapshot hold.

use super::persist::watermark_of;
use super::{ProposeReply, ReadReply};
use crate::config::NodeConfig;
use crate::data_dir::Opened;
use crate::status_tracker::unix_ms;
use bellwether_core::raft::{RaftConfig, RaftDurable, RaftNode, Repair};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng};
use bellwether_member::{Member, MemberParts, Roster, StateMachine};
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

/// The member as the log and the last snapshot left it, in repair when
/// the audit found its log short of what it had promised.
pub(super) fn recover_member(
    config: &NodeConfig,
    wal: &WalStorage,
    durable: RaftDurable,
    repair: Option<Repair>,
    mut machine: Box<dyn StateMachine>,
) -> Member<ProposeReply, ReadReply> {
    let snapshot = durable.snapshot.as_ref().map_or((LogIndex(0), 0), |s| {
        machine.restore(s.meta.last_index, s.data.bytes());
        (s.meta.last_index, s.data.len())
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
