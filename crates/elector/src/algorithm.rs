//! Which election algorithm an elector runs, and the winner rule of the two
//! that elect by id order.

use bellwether_core::bully::Winner;
use std::fmt;
use std::str::FromStr;

/// The algorithm every node of a group runs. All nodes must agree; the
/// handshake refuses a peer that runs another one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Raft's election (terms, votes from a majority, PreVote, CheckQuorum)
    /// with no replicated log: at most one leader per term, and a minority
    /// side of a partition elects nobody.
    Raft,
    /// Garcia-Molina's Bully: the best live id by `Winner` leads. No
    /// quorum: both sides of a partition elect a leader.
    Bully(Winner),
    /// Chang and Roberts' Ring: an election message collects live ids
    /// around the ring, and the best by `Winner` leads. No quorum either.
    Ring(Winner),
    /// Multi-Paxos with a distinguished proposer and leader leases: a
    /// majority accepts the leader's ballot, a minority elects nobody, and
    /// a deposed leader stops acting before its successor can start.
    Paxos,
}

impl Algorithm {
    /// `"raft"`, `"bully"`, `"ring"` or `"paxos"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Raft => "raft",
            Algorithm::Bully(_) => "bully",
            Algorithm::Ring(_) => "ring",
            Algorithm::Paxos => "paxos",
        }
    }

    /// The winner rule, for the algorithms that have one.
    pub fn winner(self) -> Option<Winner> {
        match self {
            Algorithm::Raft | Algorithm::Paxos => None,
            Algorithm::Bully(winner) | Algorithm::Ring(winner) => Some(winner),
        }
    }

    /// True when a minority cannot elect (Raft, Paxos): only then is there
    /// at most one leader per token under a partition.
    pub fn has_quorum(self) -> bool {
        matches!(self, Algorithm::Raft | Algorithm::Paxos)
    }

    /// Parses `"raft"`, `"bully"`, `"ring"` or `"paxos"` with a winner rule
    /// (`"highest"` or `"lowest"`; Raft and Paxos take none).
    pub fn parse(name: &str, winner: Option<&str>) -> Result<Algorithm, String> {
        let winner = match winner {
            None | Some("highest") => Winner::Highest,
            Some("lowest") => Winner::Lowest,
            Some(other) => {
                return Err(format!(
                    "unknown winner rule {other:?}: use \"highest\" or \"lowest\""
                ))
            }
        };
        match name {
            "raft" if winner == Winner::Lowest => {
                Err("raft has no winner rule: a majority elects whoever campaigns first".into())
            }
            "paxos" if winner == Winner::Lowest => {
                Err("paxos has no winner rule: the highest ballot a majority accepts leads".into())
            }
            "raft" => Ok(Algorithm::Raft),
            "paxos" => Ok(Algorithm::Paxos),
            "bully" => Ok(Algorithm::Bully(winner)),
            "ring" => Ok(Algorithm::Ring(winner)),
            other => Err(format!(
                "unknown algorithm {other:?}: use raft, bully, ring or paxos"
            )),
        }
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.winner() {
            None => f.write_str(self.name()),
            Some(winner) => write!(f, "{} ({} id wins)", self.name(), winner.as_str()),
        }
    }
}

impl FromStr for Algorithm {
    type Err = String;

    /// `"raft"`, `"bully"`, `"ring"`, `"paxos"`, `"bully-lowest"` or
    /// `"ring-lowest"`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.split_once('-') {
            Some((name, winner)) => Algorithm::parse(name, Some(winner)),
            None => Algorithm::parse(text, None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_unknown_ones_get_a_clear_error() {
        assert_eq!("raft".parse(), Ok(Algorithm::Raft));
        assert_eq!("bully".parse(), Ok(Algorithm::Bully(Winner::Highest)));
        assert_eq!("ring-lowest".parse(), Ok(Algorithm::Ring(Winner::Lowest)));
        assert_eq!("paxos".parse(), Ok(Algorithm::Paxos));
        let error = "zab".parse::<Algorithm>().unwrap_err();
        assert!(error.contains("unknown algorithm \"zab\""), "{error}");
        assert!(Algorithm::parse("paxos", Some("lowest")).is_err());
        assert!(Algorithm::Paxos.has_quorum());
        assert!(Algorithm::parse("bully", Some("middle")).is_err());
        assert!(Algorithm::parse("raft", Some("lowest")).is_err());
        assert!(Algorithm::Raft.has_quorum());
        assert!(!Algorithm::Ring(Winner::Lowest).has_quorum());
    }
}
