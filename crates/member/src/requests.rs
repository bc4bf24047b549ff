//! Client requests, served here or forwarded to the leader, and the
//! forwarding messages between a follower and its leader.
//!
//! A leader proposes a write or starts a ReadIndex read itself. A follower
//! that knows its leader forwards both over the peer connection (see
//! [`crate::forwarding`]); one that cannot (no connection, too many in
//! flight) answers "not the leader" naming it, and the runtime hands the
//! request to the member again (`EtcdBackend::propose` in the server).
//! A call for another member's process ([`Request::Call`]) travels the
//! same connection.

use crate::client_error::ClientError;
use crate::effect::{Answer, Effect};
use crate::forward::Forward;
use crate::forwarding;
use crate::member::Member;
use bellwether_core::raft::{ProposeError, ReadError};
use bellwether_core::Protocol;
use bellwether_core::{NodeId, Role};

/// A client's request to this member.
#[derive(Debug)]
pub enum Request<W, R> {
    /// Replicate and apply `command`; answer with the state machine's reply.
    Propose {
        /// The command bytes.
        command: Vec<u8>,
        /// Where the answer goes.
        reply: W,
    },
    /// [`Request::Propose`], but only if this member leads: never
    /// forwarded. For what only the leader may decide, such as a lease's
    /// expiry: a deposed leader's revoke, forwarded to its successor, would
    /// revoke a lease the successor has renewed since.
    ProposeHere {
        /// The command bytes.
        command: Vec<u8>,
        /// Where the answer goes.
        reply: W,
    },
    /// Answer once everything committed before the request is applied here
    /// and the leader is confirmed (ReadIndex).
    ReadBarrier {
        /// Where the answer goes.
        reply: R,
    },
    /// Carry `body` to member `to`'s process over the peer connection
    /// (see [`Forward::Call`]); answer with what it answers. For what
    /// needs another member's process rather than the log, such as a
    /// lease renewal on the leader's lease clock.
    Call {
        /// The member called: another one.
        to: NodeId,
        /// What is asked, in the runtime's encoding.
        body: Vec<u8>,
        /// Where the answer goes.
        reply: W,
    },
}

impl<W, R> Member<W, R> {
    /// A client's request.
    pub fn request(&mut self, request: Request<W, R>) {
        match request {
            Request::Propose { command, reply } => match self.leader_elsewhere() {
                Some(leader) => self.forward_write(leader, &command, reply),
                None => self.propose(command, reply),
            },
            Request::ProposeHere { command, reply } => self.propose(command, reply),
            Request::ReadBarrier { reply } => match self.leader_elsewhere() {
                Some(leader) => self.forward_read(leader, reply),
                None => self.read_here(reply),
            },
            Request::Call { to, body, reply } => self.call(to, body, reply),
        }
    }

    /// Sends a call to `to`'s process, or answers "unreachable" when `to`
    /// is this member or too many requests are in flight.
    fn call(&mut self, to: NodeId, body: Vec<u8>, reply: W) {
        if to == self.id {
            // The runtime serves its own process's calls itself.
            return self.answer_write(reply, Err(ClientError::Unreachable { member: to }));
        }
        match self.forwarding.call(to, reply, self.now) {
            Ok(request) => {
                let call = Forward::Call { request, body };
                self.effects.push_back(Effect::Forward(to, call));
            }
            Err(reply) => self.answer_write(reply, Err(ClientError::Busy)),
        }
    }

    /// The runtime's answer to member `to`'s call `request` (see
    /// [`Effect::Call`]).
    pub fn answer_call(&mut self, to: NodeId, request: u64, body: Vec<u8>) {
        let answer = Forward::CallAnswer { request, body };
        self.effects.push_back(Effect::Forward(to, answer));
    }

    /// The runtime could not take member `to`'s call `request`.
    pub fn refuse_call(&mut self, to: NodeId, request: u64) {
        let refused = Forward::CallRefused { request };
        self.effects.push_back(Effect::Forward(to, refused));
    }

    /// Starts a leadership transfer to `target`, with etcd's error texts
    /// where etcd has one.
    pub fn move_leader(&mut self, target: NodeId) -> Result<(), String> {
        if !self.is_leader() {
            return Err("etcdserver: not leader".into());
        }
        if target == self.id {
            return Ok(());
        }
        if let Some(preferred) = self.raft.priority_would_undo(target) {
            let priority = |id: NodeId| self.raft.config().priority(id);
            return Err(format!(
                "etcdserver: cannot move leadership to {:x}: n{} has priority {} and n{} has {}, so the priority rule would hand leadership straight back; move it to n{}, or change peer_priority",
                target.0,
                target.0,
                priority(target),
                preferred.0,
                priority(preferred),
                preferred.0
            ));
        }
        match self.raft.transfer_leadership(Some(target)) {
            Ok(_) => {
                tracing::info!(target = target.0, "moving leadership");
                Ok(())
            }
            Err(error) => Err(format!(
                "etcdserver: cannot move leadership to {:x}: {error}",
                target.0
            )),
        }
    }

    /// A forwarded request from a follower, or a leader's answer to one of
    /// ours.
    pub fn forwarded(&mut self, from: NodeId, forward: Forward) {
        match forward {
            Forward::Propose {
                request,
                term,
                command,
            } => {
                if !self.forwarding.first_sight(from, request) {
                    return;
                }
                // Only in the term the follower sent it for: see
                // `Forward::Propose`.
                let proposed = if term == self.raft.status().term {
                    self.raft.propose(command)
                } else {
                    Err(ProposeError::NotLeader {
                        leader: self.raft.status().leader,
                    })
                };
                if let Err(error) = proposed {
                    let busy = !matches!(error, ProposeError::NotLeader { .. });
                    let leader = self.raft.status().leader;
                    let refused = Forward::ProposeRefused {
                        request,
                        leader,
                        busy,
                    };
                    self.effects.push_back(Effect::Forward(from, refused));
                }
            }
            Forward::ReadIndex { request } => {
                let id = self.take_read_id();
                match self.raft.read_index(id) {
                    Ok(()) => self.forwarding.serve_remote_read(id, from, request),
                    Err(_) => {
                        let leader = self.raft.status().leader;
                        let refused = Forward::ReadIndexRefused { request, leader };
                        self.effects.push_back(Effect::Forward(from, refused));
                    }
                }
            }
            Forward::ProposeRefused {
                request,
                leader,
                busy,
            } => {
                let answer = self.forwarding.write_refused(request, leader, busy);
                self.effects.extend(answer.map(Effect::Answer));
            }
            Forward::ReadIndexConfirmed { request, index } => {
                if let Some(reply) = self.forwarding.read_confirmed(request) {
                    self.confirmed_reads.push((index, reply));
                }
            }
            Forward::ReadIndexRefused { request, leader } => {
                let answer = self.forwarding.read_refused(request, leader);
                self.effects.extend(answer.map(Effect::Answer));
            }
            Forward::Call { request, body } => {
                self.effects.push_back(Effect::Call {
                    from,
                    request,
                    body,
                });
            }
            Forward::CallAnswer { request, body } => {
                if let Some(reply) = self.forwarding.call_answered(request) {
                    self.answer_write(reply, Ok(body));
                }
            }
            Forward::CallRefused { request } => {
                if let Some((reply, member)) = self.forwarding.unsent_call(request) {
                    self.answer_write(reply, Err(ClientError::Unreachable { member }));
                }
            }
        }
    }

    /// The leader, when this member follows a known one.
    fn leader_elsewhere(&self) -> Option<NodeId> {
        let status = self.raft.status();
        let leader = status.leader?;
        (status.role != Role::Leader && leader != self.id).then_some(leader)
    }

    /// Proposes a local client's command.
    fn propose(&mut self, command: Vec<u8>, reply: W) {
        match self.raft.propose(forwarding::local_command(command)) {
            Ok(index) => {
                let term = self.raft.status().term;
                self.proposals.insert(index, (term, self.now, reply));
            }
            Err(ProposeError::NotLeader { leader }) => {
                self.answer_write(reply, Err(ClientError::not_leader(leader)))
            }
            Err(_) => self.answer_write(reply, Err(ClientError::Busy)),
        }
    }

    /// A fresh id for a ReadIndex read.
    pub(crate) fn take_read_id(&mut self) -> u64 {
        let id = self.next_read_id;
        self.next_read_id += 1;
        id
    }

    /// Starts a ReadIndex read for a local client.
    fn read_here(&mut self, reply: R) {
        let id = self.take_read_id();
        match self.raft.read_index(id) {
            Ok(()) => {
                self.reads.insert(id, reply);
            }
            Err(ReadError::NotLeader { leader }) => {
                self.answer_read(reply, Err(ClientError::not_leader(leader)))
            }
            Err(ReadError::Busy) => self.answer_read(reply, Err(ClientError::Busy)),
        }
    }

    /// Sends a write to `leader` over the peer connection, or answers "not
    /// the leader" naming it when too many are in flight.
    fn forward_write(&mut self, leader: NodeId, command: &[u8], reply: W) {
        let term = self.raft.status().term;
        match self
            .forwarding
            .write((leader, term), command, reply, self.now)
        {
            Ok((request, command)) => {
                let propose = Forward::Propose {
                    request,
                    term,
                    command,
                };
                self.effects.push_back(Effect::Forward(leader, propose));
            }
            Err(reply) => self.answer_write(reply, Err(ClientError::not_leader(Some(leader)))),
        }
    }

    /// Asks `leader` for a read index over the peer connection, or answers
    /// "not the leader" naming it when too many are in flight.
    fn forward_read(&mut self, leader: NodeId, reply: R) {
        match self.forwarding.read(leader, reply, self.now) {
            Ok(request) => {
                let read = Forward::ReadIndex { request };
                self.effects.push_back(Effect::Forward(leader, read));
            }
            Err(reply) => self.answer_read(reply, Err(ClientError::not_leader(Some(leader)))),
        }
    }

    /// Queues a write's answer.
    pub(crate) fn answer_write(&mut self, reply: W, result: Result<Vec<u8>, ClientError>) {
        self.effects
            .push_back(Effect::Answer(Answer::Write(reply, result)));
    }

    /// Queues a read's answer.
    pub(crate) fn answer_read(&mut self, reply: R, result: Result<(), ClientError>) {
        self.effects
            .push_back(Effect::Answer(Answer::Read(reply, result)));
    }
}
