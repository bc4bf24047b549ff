//! Replication invariants (Raft paper, Figure 3), one method per property,
//! fed by the KV application's hooks after every event that could break
//! them:
//!
//! - **Log Matching**: two logs holding an entry with the same index and
//!   term hold identical entries up to it. Each node's persisted log is
//!   summarised as a chain of prefix hashes; every (index, term) must always
//!   map to one prefix hash, on every node, for the whole run.
//! - **State Machine Safety**: no two nodes apply different entries at one
//!   index.
//! - **Leader Completeness**: a new leader's log holds every entry applied
//!   anywhere so far.
//! - **Commit index never decreases** (per node incarnation), and
//!   **applied ≤ committed**.

use crate::checkers::Violation;
use bellwether_core::raft::{Entry, Payload, RaftDurable, RaftNode, RaftPersist};
use bellwether_core::{LogIndex, NodeId};
use std::collections::{BTreeMap, HashMap};

/// One node's persisted log as prefix hashes.
#[derive(Clone, Debug, Default)]
struct HashedLog {
    /// Index of the entry before `hashes[0]` (the snapshot point).
    base_index: u64,
    /// Prefix hash at `base_index`; `None` when unknown (then this node is
    /// not checked until it restarts).
    base_hash: Option<u64>,
    /// `hashes[k]` = prefix hash at `base_index + 1 + k`.
    hashes: Vec<u64>,
}

/// The checker's memory of the run.
#[derive(Debug, Default)]
pub struct ReplicationChecker {
    /// (index, term) → prefix hash, for every entry any node ever persisted.
    prefixes: HashMap<(u64, u64), u64>,
    /// Per node.
    logs: Vec<HashedLog>,
    /// index → (term, entry hash) of every entry applied anywhere.
    applied: BTreeMap<u64, (u64, u64)>,
    /// Per node: highest commit index seen in this incarnation.
    commits: Vec<LogIndex>,
}

fn mix(mut state: u64, word: u64) -> u64 {
    state ^= word
        .wrapping_add(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(state << 6)
        .wrapping_add(state >> 2);
    state = (state ^ (state >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    state ^ (state >> 29)
}

/// Hash of one entry's content.
fn entry_hash(entry: &Entry) -> u64 {
    let mut h = mix(entry.term.0, entry.index.0);
    match &entry.payload {
        Payload::Noop => h = mix(h, 1),
        Payload::Command(data) => {
            h = mix(h, 2);
            for chunk in data.chunks(8) {
                let mut word = [0u8; 8];
                word[..chunk.len()].copy_from_slice(chunk);
                h = mix(h, u64::from_le_bytes(word));
            }
        }
        Payload::Membership(config) => {
            h = mix(h, 3);
            for id in config.voters.iter().chain(config.learners.iter()) {
                h = mix(h, id.0);
            }
        }
    }
    h
}

fn violation(property: &'static str, time_us: u64, detail: String) -> Violation {
    Violation {
        property,
        time_us,
        detail,
    }
}

impl ReplicationChecker {
    /// A checker for `nodes` nodes.
    pub fn new(nodes: usize) -> Self {
        ReplicationChecker {
            logs: vec![
                HashedLog {
                    base_hash: Some(0),
                    ..HashedLog::default()
                };
                nodes
            ],
            commits: vec![LogIndex(0); nodes],
            ..ReplicationChecker::default()
        }
    }

    /// A node booted from `disk`: rebuild its hashed log from what it holds.
    pub fn on_boot(&mut self, node: usize, disk: &RaftDurable) {
        let base_index = disk.snapshot.as_ref().map_or(0, |s| s.meta.last_index.0);
        let base_term = disk.snapshot.as_ref().map_or(0, |s| s.meta.last_term.0);
        let base_hash = if base_index == 0 {
            Some(0)
        } else {
            self.prefixes.get(&(base_index, base_term)).copied()
        };
        self.logs[node] = HashedLog {
            base_index,
            base_hash,
            hashes: Vec::new(),
        };
        self.commits[node] = LogIndex(0);
        let mut chain = base_hash;
        for entry in &disk.entries {
            chain = chain.map(|h| mix(h, entry_hash(entry)));
            self.logs[node].hashes.push(chain.unwrap_or(0));
        }
    }

    /// Log Matching over what `node` is about to persist.
    pub fn on_persist(
        &mut self,
        node: usize,
        persist: &RaftPersist,
        time_us: u64,
    ) -> Result<(), Violation> {
        let log = &mut self.logs[node];
        if let Some(snapshot) = &persist.snapshot {
            let (index, term) = (snapshot.meta.last_index.0, snapshot.meta.last_term.0);
            let known =
                if index > log.base_index && index <= log.base_index + log.hashes.len() as u64 {
                    log.base_hash
                        .map(|_| log.hashes[(index - log.base_index - 1) as usize])
                } else {
                    None
                };
            // The run-wide record of (index, term) comes first: this node's
            // own entry at that index may be one the snapshot replaces.
            let recorded = self.prefixes.get(&(index, term)).copied();
            let own_matches = known.is_some() && (recorded.is_none() || recorded == known);
            let hash = recorded.or(known);
            let known = if own_matches { known } else { None };
            let keep_from = (index.saturating_sub(log.base_index)) as usize;
            let suffix = if known.is_some() && keep_from <= log.hashes.len() {
                log.hashes.split_off(keep_from)
            } else {
                Vec::new()
            };
            *log = HashedLog {
                base_index: index,
                base_hash: hash,
                hashes: suffix,
            };
        }
        let Some(first) = persist.entries.first() else {
            return Ok(());
        };
        let log = &mut self.logs[node];
        let keep = (first.index.0 - log.base_index - 1) as usize;
        assert!(keep <= log.hashes.len(), "persisted entries leave a gap");
        log.hashes.truncate(keep);
        let Some(base_hash) = log.base_hash else {
            return Ok(());
        };
        let mut chain = log.hashes.last().copied().unwrap_or(base_hash);
        for entry in &persist.entries {
            chain = mix(chain, entry_hash(entry));
            log.hashes.push(chain);
            let recorded = *self
                .prefixes
                .entry((entry.index.0, entry.term.0))
                .or_insert(chain);
            if recorded != chain {
                return Err(violation(
                    "log-matching",
                    time_us,
                    format!(
                        "n{} holds entry ({}, {}) after a prefix that differs from another node's",
                        node + 1,
                        entry.index,
                        entry.term
                    ),
                ));
            }
        }
        Ok(())
    }

    /// State Machine Safety and in-order application.
    pub fn on_apply(&mut self, node: usize, entry: &Entry, time_us: u64) -> Result<(), Violation> {
        let hash = entry_hash(entry);
        let recorded = *self
            .applied
            .entry(entry.index.0)
            .or_insert((entry.term.0, hash));
        if recorded != (entry.term.0, hash) {
            return Err(violation(
                "state-machine-safety",
                time_us,
                format!(
                    "n{} applied a different entry at {} (term {} vs {})",
                    node + 1,
                    entry.index,
                    entry.term,
                    recorded.0
                ),
            ));
        }
        Ok(())
    }

    /// Commit never decreases; applied never exceeds it.
    pub fn on_progress(
        &mut self,
        node: usize,
        raft: &RaftNode,
        time_us: u64,
    ) -> Result<(), Violation> {
        let commit = raft.commit_index();
        if commit < self.commits[node] {
            return Err(violation(
                "commit-monotonic",
                time_us,
                format!(
                    "n{} commit went back from {} to {}",
                    node + 1,
                    self.commits[node],
                    commit
                ),
            ));
        }
        self.commits[node] = commit;
        if raft.applied_index() > commit {
            return Err(violation(
                "applied-le-committed",
                time_us,
                format!(
                    "n{} applied {} beyond commit {}",
                    node + 1,
                    raft.applied_index(),
                    commit
                ),
            ));
        }
        Ok(())
    }

    /// Leader Completeness for a node that just became leader.
    pub fn on_leader(&self, node: usize, raft: &RaftNode, time_us: u64) -> Result<(), Violation> {
        let log = raft.log();
        let from = log.snapshot_index().0 + 1;
        for (index, (term, _)) in self.applied.range(from..) {
            if log.term(LogIndex(*index)).map(|t| t.0) != Some(*term) {
                return Err(violation(
                    "leader-completeness",
                    time_us,
                    format!(
                        "new leader {} lacks committed entry ({index}, t{term})",
                        NodeId(node as u64 + 1)
                    ),
                ));
            }
        }
        Ok(())
    }
}
