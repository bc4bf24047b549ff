//! The partition shapes that real clusters hit, as sets of blocked links.

use crate::event::NodeIndex;
use crate::network::Network;
use std::fmt;

/// A partition shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Partition {
    /// Two groups that cannot reach each other in either direction.
    Symmetric {
        /// One side; everything else is the other side.
        side: Vec<NodeIndex>,
    },
    /// `node` can still send but receives nothing (`inbound`), or receives
    /// but cannot send (`!inbound`): a half-broken link (etcd #9563).
    OneWay {
        /// The half-connected node.
        node: NodeIndex,
        /// Which direction is cut.
        inbound: bool,
    },
    /// `bridge` reaches both groups, which cannot reach each other
    /// (openraft #2080).
    Bridge {
        /// The node connected to both halves.
        bridge: NodeIndex,
        /// One half (excluding the bridge); the rest is the other half.
        side: Vec<NodeIndex>,
    },
    /// `node` (typically the leader) is cut off from everyone.
    Isolated {
        /// The isolated node.
        node: NodeIndex,
    },
    /// These links are cut, both ways; every other link works. Partial
    /// connectivity (OmniPaxos, EuroSys 2023): two nodes that cannot reach
    /// each other may both reach a third.
    Links {
        /// The cut pairs.
        pairs: Vec<(NodeIndex, NodeIndex)>,
    },
}

impl Partition {
    /// Blocks this partition's links in `network` (on top of what is blocked).
    pub fn apply(&self, network: &mut Network, nodes: usize) {
        let all = 0..nodes;
        match self {
            Partition::Symmetric { side } => {
                for a in side {
                    for b in all.clone().filter(|b| !side.contains(b)) {
                        network.set_blocked(*a, b, true);
                        network.set_blocked(b, *a, true);
                    }
                }
            }
            Partition::OneWay { node, inbound } => {
                for other in all.filter(|o| o != node) {
                    if *inbound {
                        network.set_blocked(other, *node, true);
                    } else {
                        network.set_blocked(*node, other, true);
                    }
                }
            }
            Partition::Bridge { bridge, side } => {
                let other_side = all.clone().filter(|b| b != bridge && !side.contains(b));
                for b in other_side {
                    for a in side {
                        network.set_blocked(*a, b, true);
                        network.set_blocked(b, *a, true);
                    }
                }
            }
            Partition::Isolated { node } => {
                for other in all.filter(|o| o != node) {
                    network.set_blocked(*node, other, true);
                    network.set_blocked(other, *node, true);
                }
            }
            Partition::Links { pairs } => {
                for (a, b) in pairs {
                    network.set_blocked(*a, *b, true);
                    network.set_blocked(*b, *a, true);
                }
            }
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = |v: &[NodeIndex]| {
            v.iter()
                .map(|i| format!("n{}", i + 1))
                .collect::<Vec<_>>()
                .join(",")
        };
        match self {
            Partition::Symmetric { side } => {
                write!(f, "symmetric partition {{{}}} | rest", names(side))
            }
            Partition::OneWay {
                node,
                inbound: true,
            } => write!(f, "one-way: n{} receives nothing", node + 1),
            Partition::OneWay {
                node,
                inbound: false,
            } => write!(f, "one-way: n{} sends nothing", node + 1),
            Partition::Bridge { bridge, side } => {
                write!(
                    f,
                    "bridge n{} between {{{}}} and the rest",
                    bridge + 1,
                    names(side)
                )
            }
            Partition::Isolated { node } => write!(f, "n{} isolated", node + 1),
            Partition::Links { pairs } => {
                let cut: Vec<String> = pairs
                    .iter()
                    .map(|(a, b)| format!("n{}-n{}", a + 1, b + 1))
                    .collect();
                write!(f, "links cut: {}", cut.join(" "))
            }
        }
    }
}
