//! The promise-record guards of the two protocols that keep one: plain
//! Raft (the KV workload) and the member driver on it (the etcd workload).
//! Both audit a restarted node's disk through `audit_raft_image`, the
//! decision the server's data directory makes, and start Raft in repair as
//! the server does.

use crate::kv::RaftLike;
use crate::member::{SimMember, SimMemberConfig};
use crate::world::{audit_raft_image, damage_raft_image, DiskGuard, Image, Recovered};
use bellwether_core::raft::{PromiseRecord, RaftConfig, RaftDurable};
use bellwether_core::{NodeId, Rng};

/// Plain Raft's guard (or a test's variant of it); `audit: false` is the
/// control that ignores it.
pub fn raft_guard<P: RaftLike>(audit: bool) -> DiskGuard<P> {
    DiskGuard {
        record: |node, durable| PromiseRecord::of(durable, node.raft().repair()),
        recover: recover_raft::<P>,
        damage: damage_raft_image,
        audit,
    }
}

/// The member driver's guard; `audit: false` is the control that ignores
/// it (the server's `--unsafe-mutation ignores-promises`).
pub fn member_guard(audit: bool) -> DiskGuard<SimMember> {
    DiskGuard {
        record: |member, durable| PromiseRecord::of(durable, member.repair()),
        recover: recover_member,
        damage: damage_raft_image,
        audit,
    }
}

fn recover_raft<P: RaftLike>(
    config: &RaftConfig,
    id: NodeId,
    members: &[NodeId],
    durable: &mut RaftDurable,
    image: Image<'_>,
    rng: Rng,
) -> Result<Recovered<P>, String> {
    let (repair, found) = audit_raft_image(durable, image)?;
    let mut node = P::new(config, id, members, durable.clone(), rng);
    if let Some(repair) = repair {
        node.raft_mut().start_repair(repair);
    }
    Ok((node, found))
}

fn recover_member(
    config: &SimMemberConfig,
    id: NodeId,
    members: &[NodeId],
    durable: &mut RaftDurable,
    image: Image<'_>,
    rng: Rng,
) -> Result<Recovered<SimMember>, String> {
    let (repair, found) = audit_raft_image(durable, image)?;
    let member = SimMember::start(config, id, members, durable.clone(), repair, rng);
    Ok((member, found))
}
