//! Ballots: the totally ordered numbers that make Paxos safe.
//!
//! A ballot is `(round, priority, node)`, compared in that order (Lamport,
//! "Paxos Made Simple", §2.2: proposals need distinct, ordered numbers). The
//! node id makes every ballot unique to one proposer, so two proposers can
//! never both complete phase 1 for the same ballot. The priority makes a
//! preferred node win a round that two proposers started together.

use crate::types::NodeId;
use std::fmt;

/// Largest node id a ballot can carry in its [`Ballot::token`].
pub const NODE_ID_MAX: u64 = 0xFFFF;
/// Largest priority a ballot can carry in its [`Ballot::token`].
pub const PRIORITY_MAX: u32 = 0xFF;
/// Largest round a ballot can carry in its [`Ballot::token`] (2^40 - 1: a
/// new round every millisecond for 34 years).
pub const ROUND_MAX: u64 = (1 << 40) - 1;

/// A Paxos ballot (proposal number).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Ballot {
    /// Raised by every new proposer: the main order.
    pub round: u64,
    /// The proposer's priority: breaks ties between proposers of one round.
    pub priority: u32,
    /// The proposer: makes the ballot unique to it.
    pub node: NodeId,
}

impl Ballot {
    /// The ballot below every real one: nothing promised yet.
    pub const ZERO: Ballot = Ballot {
        round: 0,
        priority: 0,
        node: NodeId(0),
    };

    /// True when every field fits the token, with room for one more round:
    /// a message carrying any other ballot is dropped, so a peer cannot
    /// make this node promise a ballot it could not report or exceed.
    pub fn is_valid(self) -> bool {
        self.round < ROUND_MAX && self.priority <= PRIORITY_MAX && self.node.0 <= NODE_ID_MAX
    }

    /// The ballot as one number that orders like the ballot itself:
    /// `round << 24 | priority << 16 | node`. It is the fencing token and
    /// the "term" reported in [`crate::Status`].
    pub fn token(self) -> u64 {
        assert!(self.round <= ROUND_MAX, "round {} too large", self.round);
        assert!(self.priority <= PRIORITY_MAX, "priority too large");
        assert!(self.node.0 <= NODE_ID_MAX, "node id too large");
        (self.round << 24) | (u64::from(self.priority) << 16) | self.node.0
    }
}

impl fmt::Display for Ballot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "b{}.{}.{}", self.round, self.priority, self.node.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ballot(round: u64, priority: u32, node: u64) -> Ballot {
        Ballot {
            round,
            priority,
            node: NodeId(node),
        }
    }

    #[test]
    fn tokens_order_like_ballots() {
        let ballots = [
            Ballot::ZERO,
            ballot(1, 0, 9),
            ballot(1, 1, 2),
            ballot(1, 1, 3),
            ballot(2, 0, 1),
            ballot(ROUND_MAX, PRIORITY_MAX, NODE_ID_MAX),
        ];
        for pair in ballots.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].token() < pair[1].token(), "{} {}", pair[0], pair[1]);
        }
    }

    #[test]
    #[should_panic(expected = "node id too large")]
    fn an_id_beyond_the_token_is_refused() {
        ballot(1, 0, NODE_ID_MAX + 1).token();
    }
}
