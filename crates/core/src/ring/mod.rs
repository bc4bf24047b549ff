//! The Ring election algorithm (G. LeLann, "Distributed systems: towards a
//! formal approach", IFIP Congress 1977; E. Chang and R. Roberts, "An
//! improved algorithm for decentralized extrema-finding in circular
//! configurations of processes", CACM 22(5), 1979), as a sans-IO state
//! machine behind [`crate::Protocol`].
//!
//! # The algorithm
//!
//! The ring is the sorted member ids; a node's successor is the next id,
//! wrapping around, skipping members suspected dead. An initiator sends
//! `Election { initiator, ids: [itself] }` to its successor; every node
//! appends its id and passes it on (LeLann). When it returns to the initiator,
//! `ids` holds every live node and the best of them under the [`Winner`] rule
//! wins. If the initiator died on the way, the message reaches a node already
//! in `ids`, which finishes the job instead. A `Coordinator { leader, members,
//! epoch }` then circulates once; every node records the leader and epoch and
//! suspects exactly the members missing from `members`. The named leader
//! leads from the moment the `Coordinator` reaches it (at once if it started
//! the round).
//!
//! Chang and Roberts' extinction limits concurrent elections: a node taking
//! part in an election started by `j` drops an `Election` started by a worse
//! `i` and passes on (switching to `i`) one started by a better `i`. One
//! initiator costs n `Election` hops, n `Coordinator` hops and 2n `Ack`s;
//! with n initiators the `Election` hops are O(n log n) on average over ring
//! orders and O(n²) in the worst order. Because the ring is the ids in
//! ascending order, the order is fixed by the winner rule: when every node
//! starts at once, under [`Winner::Highest`] each election meets a better
//! node at its first hop (2n - 1 hops in all), while under [`Winner::Lowest`]
//! each travels on until it reaches the best node (n(n + 1)/2 hops in all).
//! Walking the ring downwards for `Lowest` would make both rules cost the
//! same.
//!
//! Every `Election` and `Coordinator` hop is acknowledged with `Ack
//! { sequence }`. With no `Ack` within `ack_timeout_ticks`, the sender
//! suspects that successor and passes the message to the next one; hearing
//! anything from a suspected node clears the suspicion. A node with no
//! unsuspected successor is alone and leads itself. A node whose election or
//! `Coordinator` round has not finished within `round_timeout_ticks` starts a
//! new election, as does every node on its first tick.
//!
//! Failure detection is a leader heartbeat: the leader sends `Heartbeat`
//! every `heartbeat_ticks` to every other member, and a follower that hears
//! nothing for its leader timeout, drawn from `[leader_timeout_ticks_min,
//! 2 * leader_timeout_ticks_min)` with the injected [`crate::Rng`], starts an
//! election. A transport hint about the leader starts it at once, without
//! suspecting the leader (a wrong hint must not route the election around a
//! live leader); a hint about any other member makes the ring skip it.
//!
//! # One leader at a time in a fault-free run
//!
//! With no loss, no partitions and one-way latency at most 5 ticks, no two
//! nodes are ever in the Leader role at once, including when all boot
//! together:
//!
//! - An `Ack` returns within 10 ticks, under `ack_timeout_ticks` (15), so no
//!   live node is ever skipped: every election that completes lists every
//!   live node and names the same winner, the best live node. (A successor
//!   that spoke after a message left is resent the message, not skipped.)
//! - A leader drops every `Election` started by a worse node, so such an
//!   election never completes while it is alive. An `Election` started by a
//!   better node makes it step down as it passes on. So by the time any
//!   election completes and a new leader is named, every old leader on the
//!   ring has stepped down.
//! - At boot, the best node's election is never dropped (its initiator beats
//!   every other) and every other node's election is dropped at the latest by
//!   the best node, so exactly one election completes.
//! - An election completes only at a node still taking part in it, and a
//!   node drops a `Coordinator` older than one it accepted, so an election
//!   overtaken by a newer result cannot name a second leader.
//! - Heartbeats arrive every 50 ticks and the leader timeout is at least 150,
//!   so no follower deposes a live leader.
//!
//! This covers boot, a leader crash and a better node's recovery. It does not
//! cover every crash-restart schedule: a node that was tried while it was
//! down stays suspected until it is heard from, and if two elections run
//! while a restarted node is still suspected by different members, each can
//! miss a live node and they can name two leaders until the heartbeats merge
//! them. That is the no-quorum weakness described next, reached through
//! crashes instead of partitions.
//!
//! # Epochs, and why they are not a safe fencing token
//!
//! Each node keeps `epoch`, the highest election epoch it has seen. Every
//! message but `Ack` carries it, and receivers raise theirs to the maximum.
//! An `Election` collects the maximum of the ring as it travels, so the
//! completing node announces an epoch above every epoch any live member
//! knows. [`crate::Status`] reports the epoch as the term and, while leading,
//! as the fencing token; a leader that learns of a higher epoch moves past it
//! and announces that in a heartbeat.
//!
//! The epoch is still **not** a safe fencing token. Ring has no quorum: on
//! each side of a partition the ring closes over the reachable members and
//! elects a leader, so two leaders can exist at once, possibly with the older
//! one holding the larger epoch. The simulator measures what this costs; use
//! Raft when safety must not depend on timing.
//!
//! # Split-brain healing
//!
//! A leader that hears a better leader's heartbeat steps down and follows it.
//! A leader that hears a worse leader's heartbeat answers at once with a
//! heartbeat to every member under a fresh epoch, on which the worse leader
//! steps down. Followers switch to the better leader on its heartbeat, and a
//! live member that was skipped as dead and is better than the leader takes
//! over with an election of its own.
//!
//! The algorithm persists nothing: its durable state is `()`.

mod config;
mod coordinator;
mod election;
mod leadership;
mod message;
mod node;
mod relay;
mod state;

#[cfg(test)]
mod tests;

pub use crate::bully::Winner;
pub use config::{RingConfig, MEMBERS_MAX, PENDING_MAX};
pub use message::RingMessage;
pub use node::{RingNode, MESSAGES_PER_CALL_MAX, OUTBOX_MAX};
