//! Storage faults, and the guard a restart runs against them.
//!
//! A disk can lose what it was given: a log deleted, a log cut short, a
//! record that no longer reads back, a write it had fsync'd and then
//! dropped. Raft assumes none of that happens; a member that comes back
//! with less than it acknowledged can elect a leader that lacks committed
//! entries. The server guards against it with a promise record kept apart
//! from the log and an audit at start (`bellwether_core::raft::promises`,
//! docs/architecture.md, "Amnesia").
//!
//! The simulator injects those faults into a stopped node's disk image and
//! restarts it through the same decision the server's data directory makes
//! ([`bellwether_core::raft::recover`]). The record is rewritten after every
//! completed persist, as the server writes it after the log's fsync and
//! before any message that depends on it leaves. The record itself is
//! never damaged: it is the small file kept apart, and a disk that loses
//! both it and the log leaves a member that cannot be audited (the server
//! refuses to start such a directory).
//!
//! Which protocols keep a record is the runner's choice
//! ([`World::guard_disks`]): Raft and the member driver on it.

use super::{Application, World};
use crate::event::NodeIndex;
use bellwether_core::raft::{recover, PromiseRecord, RaftDurable, Repair};
use bellwether_core::{LogIndex, NodeId, Protocol, Rng, Term};

/// One way a disk loses data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiskFault {
    /// The log and its hard state are gone (the WAL directory deleted).
    WipedLog,
    /// The log is cut at a random point; the hard state written after that
    /// point may be gone too.
    TruncatedLog,
    /// A record in the log no longer reads back (a checksum fails): the
    /// log cannot be read at all until it is set aside.
    CorruptRecord,
    /// The disk dropped the last write it had fsync'd: the newest entries,
    /// or the newest term and vote.
    LostWrite,
}

impl DiskFault {
    /// Every fault, in the order the planner draws from.
    pub const ALL: [DiskFault; 4] = [
        DiskFault::WipedLog,
        DiskFault::TruncatedLog,
        DiskFault::CorruptRecord,
        DiskFault::LostWrite,
    ];

    /// Lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskFault::WipedLog => "wiped log",
            DiskFault::TruncatedLog => "truncated log",
            DiskFault::CorruptRecord => "corrupt record",
            DiskFault::LostWrite => "lost fsync'd write",
        }
    }
}

/// A node built at restart, and what the audit said about its disk.
pub type Recovered<P> = (P, Vec<String>);

/// How a protocol's durable image is recorded, audited and damaged.
pub struct DiskGuard<P: Protocol> {
    /// The promise record a runtime writes once `durable` is synced by the
    /// node that wrote it.
    pub record: fn(&P, &P::Durable) -> PromiseRecord,
    /// Builds node `id` at a restart from its disk image, first checked
    /// against the record (when the guard audits) and rewritten as the
    /// runtime rewrites its directory. `Err` says why it refuses to start.
    #[allow(clippy::type_complexity)]
    pub recover: fn(
        &P::Config,
        NodeId,
        &[NodeId],
        &mut P::Durable,
        Image<'_>,
        Rng,
    ) -> Result<Recovered<P>, String>,
    /// Damages an image as the fault says (not [`DiskFault::CorruptRecord`],
    /// which the world keeps as a flag); returns what it did.
    pub damage: fn(&mut P::Durable, DiskFault, &mut Rng) -> String,
    /// False for the control that ignores the record: a damaged member
    /// comes back as a blank voter, as before the guard existed.
    pub audit: bool,
}

/// What a restart knows of its disk besides the image.
#[derive(Clone, Copy, Debug)]
pub struct Image<'a> {
    /// The promise record, unless the guard ignores it or none was written.
    pub record: Option<&'a PromiseRecord>,
    /// The log cannot be read (a corrupt record).
    pub unreadable: bool,
}

/// Raft's image checked against its record as the server's data directory
/// does: the image is replaced by what the member starts from, and the
/// repair to start is returned with what was found. A log that cannot be
/// read, with no record to say what it held, is refused.
pub fn audit_raft_image(
    durable: &mut RaftDurable,
    image: Image<'_>,
) -> Result<(Option<Repair>, Vec<String>), String> {
    match image.record {
        Some(record) => {
            let log = (!image.unreadable).then(|| std::mem::take(durable));
            let recovery = recover(record, log);
            *durable = recovery.durable;
            let mut found: Vec<String> = recovery
                .audit
                .findings
                .iter()
                .map(ToString::to_string)
                .collect();
            if image.unreadable {
                found.insert(0, "the log could not be read".to_string());
            }
            if recovery.set_aside {
                found.push("log set aside".to_string());
            }
            Ok((recovery.audit.repair, found))
        }
        None if image.unreadable => {
            Err("its log cannot be read and no promise record says what it held".to_string())
        }
        None => Ok((None, Vec::new())),
    }
}

/// Damages a Raft image (see [`DiskGuard::damage`]).
pub fn damage_raft_image(durable: &mut RaftDurable, fault: DiskFault, rng: &mut Rng) -> String {
    let snapshot_point = durable
        .snapshot
        .as_ref()
        .map_or((Term(0), LogIndex(0)), |s| {
            (s.meta.last_term, s.meta.last_index)
        });
    match fault {
        DiskFault::WipedLog | DiskFault::CorruptRecord => {
            let had = durable.entries.len();
            *durable = RaftDurable::default();
            format!("log wiped ({had} entries, its snapshot and hard state)")
        }
        DiskFault::TruncatedLog => {
            let keep = rng.range(0, durable.entries.len() as u64 + 1) as usize;
            let cut = durable.entries.len() - keep;
            durable.entries.truncate(keep);
            let hard_state_lost = rng.chance(0.5);
            if hard_state_lost {
                let last_term = durable.entries.last().map_or(snapshot_point.0, |e| e.term);
                durable.hard_state.term = durable.hard_state.term.min(last_term);
                durable.hard_state.voted_for = None;
            }
            clamp_commit(durable, snapshot_point.1);
            format!(
                "log cut: {cut} entries lost{}",
                if hard_state_lost {
                    ", with the term and vote after them"
                } else {
                    ""
                }
            )
        }
        DiskFault::LostWrite => {
            if durable.hard_state.voted_for.is_some() && rng.chance(0.5) {
                durable.hard_state.voted_for = None;
                return "the write of its last vote lost".to_string();
            }
            let lost = rng.range(1, 9).min(durable.entries.len() as u64) as usize;
            if lost == 0 {
                durable.hard_state.voted_for = None;
                let floor = snapshot_point.0;
                durable.hard_state.term =
                    floor.max(Term(durable.hard_state.term.0.saturating_sub(1)));
                return "the write of its last term lost".to_string();
            }
            let keep = durable.entries.len() - lost;
            durable.entries.truncate(keep);
            clamp_commit(durable, snapshot_point.1);
            format!("the write of its last {lost} entries lost")
        }
    }
}

fn clamp_commit(durable: &mut RaftDurable, snapshot_index: LogIndex) {
    let last = durable.entries.last().map_or(snapshot_index, |e| e.index);
    durable.hard_state.commit = durable.hard_state.commit.min(last);
}

impl<P: Protocol, A: Application<P>> World<P, A> {
    /// Keeps a promise record for every node from now on and audits their
    /// disks at restart (see the module doc).
    pub fn guard_disks(&mut self, guard: DiskGuard<P>) {
        self.disk_guard = Some(guard);
    }

    /// True when the disks are guarded and can be damaged.
    pub fn has_disk_guard(&self) -> bool {
        self.disk_guard.is_some()
    }

    /// True while node `index` repairs a log that lost data (as its promise
    /// record says): it does not count toward a quorum that could elect
    /// without it.
    pub fn is_repairing(&self, index: NodeIndex) -> bool {
        let host = &self.hosts[index];
        host.unreadable
            || host
                .promises
                .as_ref()
                .is_some_and(|record| record.repair.is_some())
    }

    /// Damages the disk of stopped node `index`. A fault on a running node
    /// would be seen only at its next start, so the world asks for a
    /// stopped one. Lowers the monotonic-term checker's floor to what the
    /// damaged disk holds: the checkers must catch what a member does with
    /// a damaged disk, not the damage itself.
    pub fn damage_disk(&mut self, index: NodeIndex, fault: DiskFault) {
        assert!(
            self.hosts[index].node.is_none(),
            "disks are damaged while their node is down"
        );
        let Some(guard) = &self.disk_guard else {
            return;
        };
        let damage = guard.damage;
        let what = if fault == DiskFault::CorruptRecord {
            self.hosts[index].unreadable = true;
            "a record in its log no longer reads back".to_string()
        } else {
            damage(&mut self.hosts[index].disk, fault, &mut self.rng)
        };
        self.stats.disk_faults += 1;
        let term = P::durable_term(&self.hosts[index].disk);
        self.term_monotonic.disk_damaged(index, term);
        self.trace_line(|| format!("n{}'s disk: {} ({what})", index + 1, fault.as_str()));
    }

    /// Builds node `index` from its disk at boot: through the guard when
    /// there is one (`None` when it refuses to start), else as is.
    pub(super) fn build_node(&mut self, index: NodeIndex, rng: Rng) -> Option<P> {
        let id = super::Host::<P>::id_of(index);
        let Some(guard) = &self.disk_guard else {
            let disk = self.hosts[index].disk.clone();
            return Some(P::new(&self.protocol_config, id, &self.members, disk, rng));
        };
        let (recover_node, record_of) = (guard.recover, guard.record);
        let host = &mut self.hosts[index];
        let record = host.promises.filter(|_| guard.audit);
        let image = Image {
            record: record.as_ref(),
            unreadable: host.unreadable,
        };
        match recover_node(
            &self.protocol_config,
            id,
            &self.members,
            &mut host.disk,
            image,
            rng,
        ) {
            Ok((node, found)) => {
                host.unreadable = false;
                host.promises = Some(record_of(&node, &host.disk));
                if !found.is_empty() {
                    self.stats.disk_audits_failed += 1;
                    self.trace_line(|| format!("n{}'s audit: {}", index + 1, found.join("; ")));
                }
                Some(node)
            }
            Err(why) => {
                self.trace_line(|| format!("n{} refuses to start: {why}", index + 1));
                None
            }
        }
    }

    /// Rewrites node `index`'s promise record after a completed persist.
    pub(super) fn rewrite_promises(&mut self, index: NodeIndex) {
        let Some(guard) = &self.disk_guard else {
            return;
        };
        let host = &mut self.hosts[index];
        if let Some(node) = &host.node {
            host.promises = Some((guard.record)(node, &host.disk));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::raft::{Entry, HardState, Payload};

    fn image(terms: &[u64], vote: Option<u64>) -> RaftDurable {
        RaftDurable {
            hard_state: HardState {
                term: Term(*terms.last().unwrap_or(&0)),
                voted_for: vote.map(NodeId),
                commit: LogIndex(terms.len() as u64),
            },
            snapshot: None,
            entries: terms
                .iter()
                .enumerate()
                .map(|(k, t)| Entry {
                    term: Term(*t),
                    index: LogIndex(k as u64 + 1),
                    payload: Payload::Noop,
                })
                .collect(),
        }
    }

    /// Every fault leaves an image whose audit against the record of the
    /// image before it finds the loss, and the audited image keeps the
    /// recorded term and vote.
    #[test]
    fn every_fault_is_found_by_the_audit_and_the_term_and_vote_come_back() {
        let mut rng = Rng::derive(7, 1);
        for round in 0..400 {
            let fault = DiskFault::ALL[round % DiskFault::ALL.len()];
            let before = image(&[1, 1, 2, 3, 3, 3], Some(2));
            let record = PromiseRecord::of(&before, None);
            let mut after = before.clone();
            let unreadable = fault == DiskFault::CorruptRecord;
            if !unreadable {
                damage_raft_image(&mut after, fault, &mut rng);
            }
            let image = Image {
                record: Some(&record),
                unreadable,
            };
            let (repair, found) = audit_raft_image(&mut after, image).expect("audited");
            if after == before {
                continue; // a cut that kept everything
            }
            assert!(!found.is_empty(), "{fault:?}: nothing found");
            assert_eq!(after.hard_state.term, Term(3), "{fault:?}");
            assert_eq!(after.hard_state.voted_for, Some(NodeId(2)), "{fault:?}");
            if repair.is_some() {
                assert!(
                    after.entries.is_empty(),
                    "{fault:?}: a damaged log is set aside"
                );
            }
        }
    }

    #[test]
    fn an_unreadable_log_without_a_record_is_refused() {
        let mut durable = image(&[1, 2], None);
        let refused = audit_raft_image(
            &mut durable,
            Image {
                record: None,
                unreadable: true,
            },
        );
        assert!(refused.is_err());
    }
}
