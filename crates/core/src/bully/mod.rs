//! The Bully algorithm (H. Garcia-Molina, "Elections in a Distributed
//! Computing System", IEEE Transactions on Computers C-31(1), 1982), as a
//! sans-IO state machine behind [`crate::Protocol`].
//!
//! # The algorithm
//!
//! A node that suspects the leader is gone holds an election: it sends
//! `Election` to every node *better* than itself (by the [`Winner`] rule:
//! highest or lowest id wins). Any better node that is alive replies `Answer`
//! and holds its own election. If no `Answer` arrives within
//! `answer_timeout_ticks`, no better node is alive: the node wins and sends
//! `Coordinator` to everyone. If an `Answer` does arrive, the node waits
//! `coordinator_timeout_ticks` for the winner's `Coordinator` and starts over
//! if it never comes. The best node alive always wins, which is why a
//! recovered better node takes over: it runs an election on its first tick,
//! finds no better node, and announces itself; the old leader steps down on
//! that `Coordinator`.
//!
//! Failure detection, which the paper leaves abstract, is a leader heartbeat:
//! the leader sends `Heartbeat` every `heartbeat_ticks`, and a follower that
//! hears nothing for its leader timeout, drawn from
//! `[leader_timeout_ticks_min, 2 * leader_timeout_ticks_min)` with the
//! injected [`crate::Rng`], holds an election. A transport hint that the
//! leader's connection broke ([`crate::Protocol::peer_unreachable`]) starts
//! the election at once; if the hint is wrong, the leader answers the
//! `Election` with `Answer` and `Coordinator` and keeps leading.
//!
//! Message cost of one election: n - 1 `Coordinator`s when the best surviving
//! node is the first to notice; up to O(n²) `Election`s and `Answer`s when the
//! worst node notices first and every better node holds its own election.
//!
//! # One leader at a time in a fault-free run
//!
//! With no loss, no partitions and one-way latency at most 5 ticks, no two
//! nodes are ever in the Leader role at the same instant, including when all
//! nodes boot together:
//!
//! - A node wins only when no better node answered within
//!   `answer_timeout_ticks` (15), longer than any round trip (10). So in a
//!   fault-free run a node never wins while a better node is alive: every
//!   winner is better than every other live node that could claim to lead.
//! - A winner sends `Coordinator` first and takes the Leader role only
//!   `takeover_delay_ticks` (10) later, longer than any one-way delay (5). Any
//!   old leader, necessarily worse, has received the `Coordinator` and stepped
//!   down by then. This delay is not in the paper; without it a recovered
//!   better node would lead alongside the old leader until its `Coordinator`
//!   arrived.
//! - Heartbeats arrive every 50 ticks and the leader timeout is at least 150,
//!   so no follower deposes a live leader.
//!
//! # Epochs, and why they are not a safe fencing token
//!
//! Each node keeps `epoch`, the highest election epoch it has seen; every
//! message carries it and receivers raise theirs to the maximum. A winner
//! announces `epoch + 1`, and [`crate::Status`] reports the epoch as the term
//! and, while leading, as the fencing token. A leader that learns of a higher
//! epoch moves past it and says so in a heartbeat, and a node that receives a
//! `Coordinator` or `Heartbeat` with a stale epoch replies with an `Answer`
//! carrying its own, so a restarted node (which remembers nothing) does not
//! keep leading under an old epoch.
//!
//! The epoch is still **not** a safe fencing token. Bully has no quorum: on
//! each side of a partition the best node elects itself, so two leaders can
//! exist at once, and nothing stops them from holding the same epoch or the
//! older leader from holding the larger one. A node that restarts before
//! anyone noticed its crash can even reuse an epoch. The simulator measures
//! what this costs; use Raft when safety must not depend on timing.
//!
//! # Split-brain healing
//!
//! When a partition heals, each leader hears the other's heartbeats. The
//! worse one steps down and follows the better one. The better one does not
//! hold an election (it already knows it beats the other claimant); it
//! re-announces at once with a heartbeat under a fresh, higher epoch, so that
//! the worse leader steps down within one message delay. A follower of the
//! worse leader switches on the better leader's next heartbeat; any follower
//! better than both takes over with an election of its own.
//!
//! The algorithm persists nothing: its durable state is `()`.

mod config;
mod config_error;
mod handlers;
mod message;
mod node;
pub(crate) mod outbox;
mod state;
mod winner;

#[cfg(test)]
mod tests;

pub use config::{BullyConfig, MEMBERS_MAX};
pub(crate) use config_error::{check_below, check_detector_floor, check_timeout};
pub use config_error::{ConfigError, TIMEOUT_TICKS_MAX};
pub use message::BullyMessage;
pub use node::{BullyNode, MESSAGES_PER_CALL_MAX, OUTBOX_MAX};
pub use winner::Winner;
