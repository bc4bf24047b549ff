//! Leader side of log replication (paper §5.3) and commitment (§5.4.2),
//! with per-follower flow control: a probing follower gets one
//! AppendEntries at a time, a replicating one gets a bounded pipeline.

use super::message::RaftMessage;
use super::node::RaftNode;
use super::progress::ReplicationState;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId, Term};

impl RaftNode {
    /// Sends whatever each follower can take now.
    pub(super) fn broadcast_append(&mut self) {
        for peer in self.replicas() {
            self.send_appends_to(peer);
        }
    }

    /// Fills `peer`'s pipeline.
    pub(super) fn send_appends_to(&mut self, peer: NodeId) {
        // Each round either sends one message or stops; the pipeline bound
        // caps the loop.
        for _ in 0..=self.config.inflight_appends_max {
            if !self.send_append(peer) {
                break;
            }
        }
    }

    /// Sends one AppendEntries (or snapshot chunk) to `peer` if flow control
    /// allows and there is something to send. Returns whether it sent.
    pub(super) fn send_append(&mut self, peer: NodeId) -> bool {
        assert_eq!(self.role, Role::Leader, "only a leader replicates");
        let inflight_max = self.config.inflight_appends_max;
        let last = self.log.last_index();
        let Some(progress) = self.progress.get(&peer) else {
            return false;
        };
        if let ReplicationState::Snapshot { paused, .. } = progress.state {
            if !paused {
                self.send_snapshot_chunk(peer);
                return true;
            }
            return false;
        }
        if !progress.can_send(inflight_max) {
            return false;
        }
        let next = progress.next_index;
        let probing = matches!(progress.state, ReplicationState::Probe { .. });
        if next > last && !(probing && progress.match_index < last) {
            return false;
        }
        if next <= self.log.snapshot_index() {
            self.start_snapshot(peer);
            return true;
        }
        let prev_log_index = LogIndex(next.0 - 1);
        let prev_log_term = self
            .log
            .term(prev_log_index)
            .expect("prev is at or after the snapshot");
        let entries = if next <= last {
            self.log.slice(
                next,
                self.config.append_entries_max,
                self.config.append_bytes_max,
            )
        } else {
            Vec::new()
        };
        let sent_last = LogIndex(prev_log_index.0 + entries.len() as u64);
        let progress = self.progress.get_mut(&peer).expect("checked above");
        progress.on_sent(sent_last, inflight_max);
        progress.commit_sent = progress.commit_sent.max(self.commit.min(sent_last));
        let message = RaftMessage::AppendEntries {
            term: self.term,
            prev_log_index,
            prev_log_term,
            entries,
            leader_commit: self.commit,
        };
        self.send(peer, message);
        true
    }

    /// A follower answered AppendEntries in our term.
    pub(super) fn handle_append_response(
        &mut self,
        from: NodeId,
        success: bool,
        match_index: LogIndex,
        hint_index: LogIndex,
        hint_term: Option<Term>,
    ) {
        if self.role != Role::Leader {
            return;
        }
        self.record_contact(from);
        let Some(progress) = self.progress.get_mut(&from) else {
            return;
        };
        if success {
            if let ReplicationState::Snapshot { last_index, .. } = progress.state {
                if match_index < last_index {
                    return;
                }
                progress.state = ReplicationState::Probe { paused: false };
            }
            progress.on_match(match_index);
            // It may now hold the whole log without knowing the commit.
            self.commit_notice_pending = true;
            if self.maybe_commit() {
                if self.role != Role::Leader {
                    return; // It committed its own removal and stepped down.
                }
                // Followers learn the new commit index with the next
                // AppendEntries or heartbeat.
                self.replication_pending = true;
            }
            self.send_appends_to(from);
            self.send_timeout_now_if_ready();
            return;
        }
        if hint_index <= progress.match_index {
            // Over one connection a follower's answers come in order and a
            // healthy log never shrinks in a term, so this follower lost
            // entries it had acknowledged (it repairs, `promises.rs`).
            // Forgetting its match is safe whatever the cause: the leader
            // only counts less, and the probe finds the truth.
            progress.on_lost_entries(hint_index);
            self.send_append(from);
            return;
        }
        // §5.3 fast backtracking: skip the follower's whole conflicting term
        // when we do not have it, or jump to the end of it when we do.
        let next = match hint_term.and_then(|term| self.log.last_index_of_term(term)) {
            Some(end_of_term) => end_of_term.next(),
            None => hint_index,
        };
        let progress = self.progress.get_mut(&from).expect("checked above");
        let next = next.min(progress.next_index);
        progress.on_refusal(next);
        self.send_append(from);
    }

    /// Advances the commit index to the highest index stored on a quorum of
    /// voters, if that entry is from the current term (§5.4.2). Returns
    /// whether it moved.
    pub(super) fn maybe_commit(&mut self) -> bool {
        assert_eq!(self.role, Role::Leader);
        let last = self.log.last_index();
        let mut matched: Vec<LogIndex> = self
            .cluster
            .voters
            .iter()
            .map(|v| {
                if *v == self.id {
                    last
                } else {
                    self.progress.get(v).map_or(LogIndex(0), |p| p.match_index)
                }
            })
            .collect();
        matched.sort_unstable_by(|a, b| b.cmp(a));
        let Some(candidate) = matched.get(self.quorum() - 1).copied() else {
            return false;
        };
        if candidate <= self.commit || self.log.term(candidate) != Some(self.term) {
            return false;
        }
        assert!(candidate <= last, "cannot commit beyond the log");
        self.commit = candidate;
        self.commit_unpersisted = true;
        self.commit_notice_pending = true;
        self.on_leader_commit();
        true
    }

    /// Tells the commit index to each follower that holds the whole log:
    /// no AppendEntries would carry it to them before the next heartbeat.
    /// The notice is a heartbeat of round 0, which confirms no read and is
    /// not answered. A follower that deduces the commit from the leader's
    /// durable notices (`durable_notice.rs`) is not sent one: with one
    /// client that saves a message each way per write and follower.
    pub(super) fn send_commit_notices(&mut self) {
        assert_eq!(self.role, Role::Leader, "only a leader commits");
        let last = self.log.last_index();
        let commit = self.commit.min(last);
        for peer in self.replicas() {
            let covered = self.announced_covers(peer, commit);
            let Some(progress) = self.progress.get_mut(&peer) else {
                continue;
            };
            let lacks_it = progress.commit_sent < commit;
            if lacks_it
                && progress.match_index == last
                && progress.state == ReplicationState::Replicate
            {
                progress.commit_sent = commit;
                if covered {
                    continue;
                }
                let notice = RaftMessage::Heartbeat {
                    term: self.term,
                    commit,
                    round: 0,
                };
                self.send(peer, notice);
            }
        }
    }

    /// Consequences of a commit advance on the leader.
    fn on_leader_commit(&mut self) {
        self.start_reads_waiting_for_commit();
        self.release_confirmed_reads();
        if self.commit >= self.cluster_index && !self.is_voter() {
            // Removed from the cluster and the removal is committed: hand
            // over by stepping down (thesis §4.2.2).
            self.become_follower(self.term, None);
        }
    }
}
