//! Follower side of heartbeats and AppendEntries (paper §5.3).

use super::entry::{Entry, Payload};
use super::message::RaftMessage;
use super::node::RaftNode;
use crate::protocol::Role;
use crate::types::{LogIndex, NodeId, Term};

impl RaftNode {
    /// Any message from the leader of our term: follow it and reset the
    /// election timer.
    pub(super) fn note_leader(&mut self, from: NodeId) {
        assert!(
            self.role != Role::Leader,
            "Election Safety violated: {} and {} both lead {}",
            self.id,
            from,
            self.term
        );
        if self.role != Role::Follower || self.leader != Some(from) {
            self.become_follower(self.term, Some(from));
        }
        self.leader_contact_tick = Some(self.now_tick);
        self.leader_lost = false;
        self.hint_campaign_tick = None;
        self.election_elapsed_ticks = 0;
        if let Some(detector) = &mut self.detector {
            detector.heard(self.now_tick);
        }
    }

    /// Raises the commit index; it never goes back.
    pub(super) fn advance_commit(&mut self, to: LogIndex) {
        if to > self.commit {
            assert!(to <= self.log.last_index(), "commit {to} beyond the log");
            self.commit = to;
            // A hint for restarts, persisted with the next write.
            self.commit_unpersisted = true;
        }
    }

    /// A heartbeat from the leader of our term.
    pub(super) fn handle_heartbeat(&mut self, from: NodeId, commit: LogIndex, round: u64) {
        self.note_leader(from);
        // The leader caps `commit` at what it knows we match.
        self.advance_commit(commit.min(self.log.last_index()));
        // Round 0 is a commit notice (`replication.rs`), sent only to a
        // follower that just acknowledged the whole log: an answer would
        // tell the leader nothing, and would cost a message per write.
        if round != 0 {
            self.send(from, self.heartbeat_response(round));
        }
    }

    /// AppendEntries from the leader of our term.
    pub(super) fn handle_append_entries(
        &mut self,
        from: NodeId,
        prev_log_index: LogIndex,
        prev_log_term: Term,
        mut entries: Vec<Entry>,
        leader_commit: LogIndex,
    ) {
        self.note_leader(from);
        let sent_last = LogIndex(prev_log_index.0 + entries.len() as u64);
        let (mut prev_index, mut prev_term) = (prev_log_index, prev_log_term);
        if prev_index < self.commit {
            // Committed entries match the leader's by Leader Completeness;
            // start the check at our commit index instead.
            if sent_last <= self.commit {
                self.send_append_success(from, sent_last);
                return;
            }
            entries.retain(|e| e.index > self.commit);
            prev_index = self.commit;
            prev_term = self
                .log
                .term(prev_index)
                .expect("the commit index is in the log or the snapshot");
        }
        let reconfigures = entries
            .iter()
            .any(|e| matches!(e.payload, Payload::Membership(_)) || e.index <= self.cluster_index);
        match self
            .log
            .try_append(prev_index, prev_term, entries, self.commit)
        {
            Ok(last_new) => {
                if reconfigures {
                    self.refresh_cluster_from_log();
                }
                self.advance_commit(leader_commit.min(last_new));
                self.send_append_success(from, last_new);
            }
            Err(conflict) => self.send(
                from,
                RaftMessage::AppendResponse {
                    term: self.term,
                    success: false,
                    match_index: LogIndex(0),
                    hint_index: conflict.hint_index,
                    hint_term: conflict.hint_term,
                },
            ),
        }
    }

    /// Acknowledges a match up to `index`.
    pub(super) fn send_append_success(&mut self, to: NodeId, index: LogIndex) {
        let message = RaftMessage::AppendResponse {
            term: self.term,
            success: true,
            match_index: index,
            hint_index: LogIndex(0),
            hint_term: None,
        };
        self.send(to, message);
    }
}
