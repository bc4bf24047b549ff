//! Handing the core's committed output to the state machine, and answering
//! the clients waiting on it.
//!
//! A write is answered only from the apply of its own entry: a local
//! proposal from its entry at the index and term it was proposed in, a
//! forwarded one from the entry carrying this member's request id. A read
//! is answered once the state machine has reached the index the leader
//! confirmed.

use crate::client_error::ClientError;
use crate::effect::Effect;
use crate::forward::Forward;
use crate::forwarding;
use crate::member::Member;
use bellwether_core::raft::{Entry, Payload, RaftOutput};
use bellwether_core::Protocol;

impl<W, R> Member<W, R> {
    /// Carries out each output in order; true if there was any.
    pub fn apply_all(&mut self, outputs: Vec<RaftOutput>) -> bool {
        let any = !outputs.is_empty();
        for output in outputs {
            self.apply(output);
        }
        any
    }

    /// Hands one output to the state machine and answers waiting clients.
    pub fn apply(&mut self, output: RaftOutput) {
        match output {
            RaftOutput::Apply(entry) => {
                self.batch.applied_bytes += entry.size_bytes();
                self.apply_entry(entry)
            }
            RaftOutput::Restore(snapshot) => {
                // Decoded on another thread (`snapshot_decoded`); the core
                // holds later entries back until then.
                let job = self.machine.restore_later(snapshot.data.clone());
                self.effects.push_back(Effect::RestoreSnapshot {
                    index: snapshot.meta.last_index,
                    job,
                });
                self.snapshots
                    .restored(snapshot.meta.last_index, snapshot.data.len());
                // Proposals covered by a snapshot from the leader: their
                // answers are gone with the entries, and whether each was
                // kept (committed by the next leader) or replaced cannot be
                // told from a snapshot. So their outcome is unknown: "not
                // applied" would invite a retry that applies a kept write
                // twice.
                let later = self.proposals.split_off(&snapshot.meta.last_index.next());
                for (_, (_, _, reply)) in std::mem::replace(&mut self.proposals, later) {
                    self.answer_write(reply, Err(ClientError::LeaderChanged));
                }
                let mut answers = Vec::new();
                self.forwarding.restored(&mut answers);
                self.effects.extend(answers.into_iter().map(Effect::Answer));
            }
            RaftOutput::ReadReady { id, index } => {
                if let Some(reply) = self.reads.remove(&id) {
                    self.confirmed_reads.push((index, reply));
                } else if let Some((follower, request)) = self.forwarding.remote_read(id) {
                    let confirmed = Forward::ReadIndexConfirmed { request, index };
                    self.effects.push_back(Effect::Forward(follower, confirmed));
                }
            }
            RaftOutput::ReadFailed { id } => {
                let leader = self.raft.status().leader;
                if let Some(reply) = self.reads.remove(&id) {
                    self.answer_read(reply, Err(ClientError::not_leader(leader)));
                } else if let Some((follower, request)) = self.forwarding.remote_read(id) {
                    let refused = Forward::ReadIndexRefused { request, leader };
                    self.effects.push_back(Effect::Forward(follower, refused));
                }
            }
        }
    }

    /// Applies a committed entry and answers the client that wrote it, if
    /// it waits here.
    fn apply_entry(&mut self, entry: Entry) {
        assert!(
            entry.index <= self.raft.commit_index(),
            "entry {} applied before it committed (commit {})",
            entry.index,
            self.raft.commit_index()
        );
        let answer = match &entry.payload {
            Payload::Command(command) => {
                self.snapshots.note_applied(command.len(), self.now);
                let (forwarded, command) = forwarding::open(command);
                let answer = self.machine.apply(entry.index, command);
                // A write this member forwarded is never also one of its
                // local proposals: the answer goes to its client.
                match self.forwarding.applied(forwarded) {
                    Some(reply) => {
                        self.answer_write(reply, Ok(answer));
                        None
                    }
                    None => Some(answer),
                }
            }
            _ => {
                self.snapshots.note_applied(0, self.now);
                None
            }
        };
        let mut settled = Vec::new();
        self.forwarding.applied_term(entry.term, &mut settled);
        self.effects.extend(settled.into_iter().map(Effect::Answer));
        if let Some((term, proposed_at, reply)) = self.proposals.remove(&entry.index) {
            let result = match answer {
                Some(answer) if term == entry.term => {
                    self.effects
                        .push_back(Effect::ProposalApplied { proposed_at });
                    Ok(answer)
                }
                _ => Err(ClientError::NotApplied),
            };
            self.answer_write(reply, result);
        }
    }

    /// Answers the confirmed reads whose index is applied. Called once per
    /// `Ready`, after all of its output, not once per applied entry.
    pub fn release_confirmed_reads(&mut self) {
        if self.confirmed_reads.is_empty() {
            return;
        }
        let applied = self.raft.applied_index();
        let mut index = 0;
        while index < self.confirmed_reads.len() {
            if self.confirmed_reads[index].0 <= applied {
                let (_, reply) = self.confirmed_reads.swap_remove(index);
                self.answer_read(reply, Ok(()));
            } else {
                index += 1;
            }
        }
    }
}
