//! The winner rule: which end of the id order an election prefers.
//!
//! Garcia-Molina's Bully algorithm ("Elections in a Distributed Computing
//! System", IEEE Trans. Computers, 1982) lets the node of highest priority
//! win; Chang and Roberts (CACM, 1979) elect the largest id on a ring.
//! Both only need a total order on node ids, so the rule is one setting that
//! Bully and Ring share. It lives here, with Bully, and Ring imports it, so
//! that there is exactly one definition.

use crate::types::NodeId;

/// Which node an election prefers. Every member of a cluster must use the same
/// rule, or two nodes may each believe they are the better one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Winner {
    /// The highest id wins, as in the papers.
    #[default]
    Highest,
    /// The lowest id wins, e.g. so that the oldest member (lowest id) leads.
    Lowest,
}

impl Winner {
    /// True when `candidate` beats `other` under this rule. Ids are unique, so
    /// for two distinct ids exactly one of them is preferred; an id never
    /// beats itself.
    pub fn prefers(self, candidate: NodeId, other: NodeId) -> bool {
        match self {
            Winner::Highest => candidate > other,
            Winner::Lowest => candidate < other,
        }
    }

    /// The best id in `ids` under this rule, or `None` when `ids` is empty.
    pub fn best(self, ids: &[NodeId]) -> Option<NodeId> {
        let best = match self {
            Winner::Highest => ids.iter().max().copied(),
            Winner::Lowest => ids.iter().min().copied(),
        };
        if let Some(best) = best {
            assert!(
                ids.iter().all(|id| !self.prefers(*id, best)),
                "no id may beat the best one"
            );
        }
        best
    }

    /// Lower-case name for reports and configuration files.
    pub fn as_str(self) -> &'static str {
        match self {
            Winner::Highest => "highest",
            Winner::Lowest => "lowest",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn highest_prefers_larger_ids_and_lowest_smaller_ones() {
        assert!(Winner::Highest.prefers(NodeId(3), NodeId(2)));
        assert!(!Winner::Highest.prefers(NodeId(2), NodeId(3)));
        assert!(Winner::Lowest.prefers(NodeId(2), NodeId(3)));
        assert!(!Winner::Lowest.prefers(NodeId(2), NodeId(2)));
    }

    #[test]
    fn best_picks_the_preferred_end() {
        let ids = [NodeId(4), NodeId(1), NodeId(9), NodeId(5)];
        assert_eq!(Winner::Highest.best(&ids), Some(NodeId(9)));
        assert_eq!(Winner::Lowest.best(&ids), Some(NodeId(1)));
        assert_eq!(Winner::Lowest.best(&[]), None);
    }
}
