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
}

impl Algorithm {
    /// `"raft"`, `"bully"` or `"ring"`.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Raft => "raft",
            Algorithm::Bully(_) => "bully",
            Algorithm::Ring(_) => "ring",
        }
    }

    /// The winner rule, for the algorithms that have one.
    pub fn winner(self) -> Option<Winner> {
        match self {
            Algorithm::Raft => None,
            Algorithm::Bully(winner) | Algorithm::Ring(winner) => Some(winner),
        }
    }

    /// True when a minority cannot elect (Raft): only then is there at most
    /// one leader per token under a partition.
    pub fn has_quorum(self) -> bool {
        matches!(self, Algorithm::Raft)
    }

    /// Parses `"raft"`, `"bully"`, `"ring"` with a winner rule
    /// (`"highest"` or `"lowest"`; Raft takes none).
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
            "raft" => Ok(Algorithm::Raft),
            "bully" => Ok(Algorithm::Bully(winner)),
            "ring" => Ok(Algorithm::Ring(winner)),
            other => Err(format!(
                "unknown algorithm {other:?}: use raft, bully or ring"
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

    /// `"raft"`, `"bully"`, `"ring"`, `"bully-lowest"` or `"ring-lowest"`.
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
        let error = "paxos".parse::<Algorithm>().unwrap_err();
        assert!(error.contains("unknown algorithm \"paxos\""), "{error}");
        assert!(Algorithm::parse("bully", Some("middle")).is_err());
        assert!(Algorithm::parse("raft", Some("lowest")).is_err());
        assert!(Algorithm::Raft.has_quorum());
        assert!(!Algorithm::Ring(Winner::Lowest).has_quorum());
    }
}
