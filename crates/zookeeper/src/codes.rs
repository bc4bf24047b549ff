//! ZooKeeper's numbers on the wire: operation codes, error codes, create
//! modes, and watch event types and states. Clients compare these numbers,
//! so they are ZooKeeper's own, never renumbered.

/// Operation codes of a request header.
pub mod op {
    /// A watch notification (the reply's type, never requested).
    pub const NOTIFICATION: i32 = 0;
    /// `create`.
    pub const CREATE: i32 = 1;
    /// `delete`.
    pub const DELETE: i32 = 2;
    /// `exists`.
    pub const EXISTS: i32 = 3;
    /// `getData`.
    pub const GET_DATA: i32 = 4;
    /// `setData`.
    pub const SET_DATA: i32 = 5;
    /// `getACL`.
    pub const GET_ACL: i32 = 6;
    /// `setACL`.
    pub const SET_ACL: i32 = 7;
    /// `getChildren`.
    pub const GET_CHILDREN: i32 = 8;
    /// `sync`.
    pub const SYNC: i32 = 9;
    /// A ping.
    pub const PING: i32 = 11;
    /// `getChildren2`: children and the parent's stat.
    pub const GET_CHILDREN2: i32 = 12;
    /// `check`: a version guard, inside a multi.
    pub const CHECK: i32 = 13;
    /// `multi`: an atomic batch.
    pub const MULTI: i32 = 14;
    /// `create2`: create, answering the new node's stat.
    pub const CREATE2: i32 = 15;
    /// `createContainer`.
    pub const CREATE_CONTAINER: i32 = 19;
    /// `deleteContainer`: the leader's deletion of a due container or TTL
    /// node (logged; never taken from a client).
    pub const DELETE_CONTAINER: i32 = 20;
    /// `reconfig`: the leader's record of the cluster's members in
    /// `/zookeeper/config` (logged; never taken from a client, which
    /// cannot reconfigure a bellwether cluster through ZooKeeper).
    pub const RECONFIG: i32 = 16;
    /// `checkWatches`.
    pub const CHECK_WATCHES: i32 = 17;
    /// `removeWatches`.
    pub const REMOVE_WATCHES: i32 = 18;
    /// `createTTL`.
    pub const CREATE_TTL: i32 = 21;
    /// `multiRead`: a batch of reads.
    pub const MULTI_READ: i32 = 22;
    /// An auth packet.
    pub const AUTH: i32 = 100;
    /// `setWatches`, sent on reconnect.
    pub const SET_WATCHES: i32 = 101;
    /// `setWatches2`: `setWatches` with persistent watches.
    pub const SET_WATCHES2: i32 = 105;
    /// `addWatch`: a persistent (recursive) watch.
    pub const ADD_WATCH: i32 = 106;
    /// `getEphemerals`.
    pub const GET_EPHEMERALS: i32 = 103;
    /// `getAllChildrenNumber`.
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    /// `whoAmI`.
    pub const WHO_AM_I: i32 = 107;
    /// A session's creation (logged; never sent by a client).
    pub const CREATE_SESSION: i32 = -10;
    /// `closeSession`.
    pub const CLOSE_SESSION: i32 = -11;
    /// An error result inside a multi's answer.
    pub const ERROR: i32 = -1;
}

/// Reserved request ids (xids).
pub mod xid {
    /// A watch notification.
    pub const NOTIFICATION: i32 = -1;
    /// A ping.
    pub const PING: i32 = -2;
    /// An auth packet.
    pub const AUTH: i32 = -4;
    /// `setWatches`.
    pub const SET_WATCHES: i32 = -8;
}

/// Error codes of a reply header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum ErrorCode {
    /// Success.
    Ok = 0,
    /// A server error.
    SystemError = -1,
    /// A multi's operation not run because another one failed.
    RuntimeInconsistency = -2,
    /// A request could not be decoded.
    MarshallingError = -5,
    /// The operation is not implemented.
    Unimplemented = -6,
    /// Bad arguments (an invalid path, say).
    BadArguments = -8,
    /// The session is not known.
    UnknownSession = -12,
    /// The node does not exist.
    NoNode = -101,
    /// Not authorized.
    NoAuth = -102,
    /// No such watch to check or remove.
    NoWatcher = -121,
    /// The version did not match.
    BadVersion = -103,
    /// Ephemeral nodes have no children.
    NoChildrenForEphemerals = -108,
    /// The node exists.
    NodeExists = -110,
    /// The node has children.
    NotEmpty = -111,
    /// The session expired.
    SessionExpired = -112,
    /// An invalid ACL.
    InvalidAcl = -114,
    /// Authentication failed.
    AuthFailed = -115,
    /// A write on a read-only server.
    NotReadOnly = -119,
}

impl ErrorCode {
    /// The number on the wire.
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// Create modes (a create's flags).
pub mod create_mode {
    /// A persistent node.
    pub const PERSISTENT: i32 = 0;
    /// An ephemeral node: deleted with its session.
    pub const EPHEMERAL: i32 = 1;
    /// A persistent node with a sequence suffix.
    pub const PERSISTENT_SEQUENTIAL: i32 = 2;
    /// An ephemeral node with a sequence suffix.
    pub const EPHEMERAL_SEQUENTIAL: i32 = 3;
    /// A container node.
    pub const CONTAINER: i32 = 4;
    /// A persistent node with a TTL.
    pub const PERSISTENT_WITH_TTL: i32 = 5;
    /// A sequential persistent node with a TTL.
    pub const PERSISTENT_SEQUENTIAL_WITH_TTL: i32 = 6;
}

/// Watch event types.
pub mod event_type {
    /// A session state change, with no node.
    pub const NONE: i32 = -1;
    /// The node was created.
    pub const NODE_CREATED: i32 = 1;
    /// The node was deleted.
    pub const NODE_DELETED: i32 = 2;
    /// The node's data changed.
    pub const NODE_DATA_CHANGED: i32 = 3;
    /// The node's children changed.
    pub const NODE_CHILDREN_CHANGED: i32 = 4;
}

/// Session states in a watch event.
pub mod keeper_state {
    /// Connected.
    pub const SYNC_CONNECTED: i32 = 3;
}
