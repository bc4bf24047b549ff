//! The in-process client API of a node: propose a command and wait for its
//! answer, or wait for a linearizable read barrier. The etcd-compatible
//! gRPC services are built on these two calls, and on calls to another
//! member's process for what is not in the log (see
//! [`crate::member_calls`]).

use bellwether_core::NodeId;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for the event loop, at most (back-pressure: senders
/// wait when it is full).
pub const CLIENT_QUEUE_MAX: usize = 4_096;

pub use bellwether_member::ClientError;

/// A request to the event loop.
#[derive(Debug)]
pub enum ClientRequest {
    /// Replicate and apply `command`; answer with the state machine's reply.
    Propose {
        /// The command bytes.
        command: Vec<u8>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Vec<u8>, ClientError>>,
    },
    /// [`ClientRequest::Propose`], but only if this node leads: never
    /// forwarded to another member.
    ProposeHere {
        /// The command bytes.
        command: Vec<u8>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Vec<u8>, ClientError>>,
    },
    /// Answer once everything committed before the request is applied here
    /// and this node is confirmed leader (ReadIndex).
    ReadBarrier {
        /// Where the answer goes.
        reply: oneshot::Sender<Result<(), ClientError>>,
    },
    /// Hand leadership to `target` (Raft's TimeoutNow). Answered once the
    /// transfer has started; this leader stops acting when the target
    /// has caught up and the TimeoutNow leaves.
    MoveLeader {
        /// The member that should lead.
        target: NodeId,
        /// Where the answer goes: `Err` names why it cannot start.
        reply: oneshot::Sender<Result<(), String>>,
    },
    /// Carry `body` to member `to`'s process over the peer connection and
    /// answer with what it answers (see [`crate::member_calls`]).
    Call {
        /// The member called: another one.
        to: NodeId,
        /// What is asked.
        body: Vec<u8>,
        /// Where the answer goes.
        reply: oneshot::Sender<Result<Vec<u8>, ClientError>>,
    },
    /// This process's answer to member `to`'s call `request`: `Some`
    /// answered, `None` refused.
    AnswerCall {
        /// The calling member.
        to: NodeId,
        /// Its request id.
        request: u64,
        /// The answer, or `None`: refused.
        body: Option<Vec<u8>>,
    },
}

/// A cloneable handle to submit requests to a node.
#[derive(Clone, Debug)]
pub struct NodeClient {
    sender: mpsc::Sender<ClientRequest>,
}

impl NodeClient {
    /// A handle and the receiver the event loop drains.
    pub fn channel() -> (NodeClient, mpsc::Receiver<ClientRequest>) {
        let (sender, receiver) = mpsc::channel(CLIENT_QUEUE_MAX);
        (NodeClient { sender }, receiver)
    }

    /// Replicates `command` and returns the state machine's answer.
    pub async fn propose(&self, command: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        self.ask(|reply| ClientRequest::Propose { command, reply })
            .await
    }

    /// Proposes `command` only if this node leads; never forwards it.
    pub async fn propose_here(&self, command: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        self.ask(|reply| ClientRequest::ProposeHere { command, reply })
            .await
    }

    /// Sends the write request `make` builds around a reply channel and
    /// waits for its answer.
    async fn ask(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<Vec<u8>, ClientError>>) -> ClientRequest,
    ) -> Result<Vec<u8>, ClientError> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(make(reply))
            .await
            .map_err(|_| ClientError::Stopped)?;
        answer.await.map_err(|_| ClientError::Stopped)?
    }

    /// Carries `body` to member `to`'s process and returns its answer.
    pub async fn call(&self, to: NodeId, body: Vec<u8>) -> Result<Vec<u8>, ClientError> {
        self.ask(|reply| ClientRequest::Call { to, body, reply })
            .await
    }

    /// Answers member `to`'s call `request` (`None`: refuses it).
    pub async fn answer_call(&self, to: NodeId, request: u64, body: Option<Vec<u8>>) {
        let answer = ClientRequest::AnswerCall { to, request, body };
        // A stopped node has no one to answer to.
        let _ = self.sender.send(answer).await;
    }

    /// Starts handing leadership to `target`; only the leader can.
    pub async fn move_leader(&self, target: NodeId) -> Result<(), String> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(ClientRequest::MoveLeader { target, reply })
            .await
            .map_err(|_| ClientError::Stopped.to_string())?;
        answer.await.map_err(|_| ClientError::Stopped.to_string())?
    }

    /// Waits until a read of the local state machine is linearizable.
    pub async fn read_barrier(&self) -> Result<(), ClientError> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(ClientRequest::ReadBarrier { reply })
            .await
            .map_err(|_| ClientError::Stopped)?;
        answer.await.map_err(|_| ClientError::Stopped)?
    }
}
