//! The peer transport shared by a bellwether member and an embedded
//! elector: what crosses the network between the nodes of one group.
//!
//! - [`frame`]: length-prefixed frames, refused over a limit before any
//!   allocation;
//! - [`handshake`]: the first frame of every connection, which names the
//!   group, both ends and a fingerprint of the group's settings, so that a
//!   node of another group or with another member list is refused with a
//!   clear log line;
//! - [`connection`]: one batching outbound connection per peer with
//!   reconnect and backoff, the inbound side, and the connection-loss hint
//!   ([`PeerEvent::Lost`]) that lets an election start at once when a
//!   peer's process dies;
//! - [`tls`]: optional mutual TLS, both ends certified by the group's CA;
//! - [`raft_wire`], [`bully_wire`], [`ring_wire`], [`paxos_wire`]: the one
//!   binary form of each core algorithm's messages.
//!
//! It is generic over the message type ([`WireMessage`]) and over where its
//! counters go ([`Observer`]), so that the member (Raft plus forwarded client
//! requests) and the elector (any algorithm) run the same code.

pub mod bully_wire;
pub mod connection;
pub mod frame;
pub mod handshake;
pub mod paxos_wire;
pub mod raft_wire;
pub mod ring_wire;
pub mod tls;
pub mod wakeups;

pub use bellwether_storage::codec::Malformed;
pub use connection::{
    accept, spawn_outbound, Identity, Members, PeerEvent, INBOUND_CONNECTIONS_MAX,
    INBOUND_QUEUE_MAX, OUTBOUND_QUEUE_MAX,
};
pub use frame::{
    put_frame, put_frame_with, read_frame, read_frame_up_to, FrameError, FRAME_BYTES_MAX,
    HANDSHAKE_BYTES_MAX,
};
pub use handshake::{fingerprint, Hello, Refusal};
pub use tls::{PeerStream, PeerTls, TlsError};
pub use wakeups::Wakeups;

/// A message the transport can carry: it names its kind (for the
/// messages-sent counter) and has one binary form.
pub trait WireMessage: Sized + Send + 'static {
    /// Stable lower-case name of this message's type.
    fn kind(&self) -> &'static str;
    /// Appends the binary form to `out`.
    fn encode(&self, out: &mut Vec<u8>);
    /// Decodes one message; every byte must be used, and garbage gets an
    /// error, never a panic.
    fn decode(bytes: &[u8]) -> Result<Self, Malformed>;
}

/// Where the transport reports what it did, for metrics.
pub trait Observer: Send + Sync + 'static {
    /// One message of `kind` was written to the connection to `peer`.
    fn sent(&self, peer: u64, kind: &'static str);
    /// One inbound connection was refused, for `reason`
    /// ([`Refusal::as_str`], `"too_many_connections"`, or `"tls"` for a
    /// failed TLS handshake).
    fn refused(&self, reason: &'static str);
}
