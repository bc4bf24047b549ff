//! The in-process client API of a node: propose a command and wait for its
//! answer, or wait for a linearizable read barrier. The etcd-compatible
//! gRPC services are built on these two calls.

use bellwether_core::NodeId;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for the event loop, at most (back-pressure: senders
/// wait when it is full).
pub const CLIENT_QUEUE_MAX: usize = 4_096;

/// Why a request failed. Each says what the caller can do.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// Only the leader orders writes and confirms reads.
    #[error("not the leader; {}", match .leader { Some(l) => format!("the leader is {l}"), None => "no leader is known yet".to_string() })]
    NotLeader {
        /// The leader, if known.
        leader: Option<NodeId>,
    },
    /// Too much is in flight; retry after backing off.
    #[error("busy: too many requests in flight; retry after backing off")]
    Busy,
    /// The command was replaced by another leader's entry: it was not
    /// applied; retrying is safe.
    #[error("leadership changed before the command committed; it was not applied")]
    NotApplied,
    /// The node stopped.
    #[error("the node is shutting down")]
    Stopped,
    /// A write forwarded to a leader that lost leadership before this
    /// member applied it: it may or may not be applied.
    #[error("leader changed")]
    LeaderChanged,
    /// A forwarded write was not seen applied in time: it may or may not
    /// be applied.
    #[error("request timed out")]
    TimedOut,
}

impl ClientError {
    /// [`ClientError::NotLeader`], naming `leader` if one is known.
    pub fn not_leader(leader: Option<NodeId>) -> ClientError {
        ClientError::NotLeader { leader }
    }
}

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
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(ClientRequest::Propose { command, reply })
            .await
            .map_err(|_| ClientError::Stopped)?;
        answer.await.map_err(|_| ClientError::Stopped)?
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
