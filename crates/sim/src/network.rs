//! The simulated network: latency, loss, duplication, reordering and
//! partitions expressed as blocked directed links.

use crate::event::NodeIndex;
use bellwether_core::Rng;

/// Fault knobs of the network. All zero means a fault-free network whose
/// latency stays within `[latency_us_min, latency_us_max]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NetworkFaults {
    /// Probability that a message is dropped.
    pub loss: f64,
    /// Probability that a message is delivered twice.
    pub duplicate: f64,
    /// Probability that a message is held back by up to ten times the maximum
    /// latency, which reorders it behind later messages.
    pub delay_spike: f64,
}

impl NetworkFaults {
    /// No loss, no duplication, no spikes.
    pub const NONE: NetworkFaults = NetworkFaults {
        loss: 0.0,
        duplicate: 0.0,
        delay_spike: 0.0,
    };
}

/// Links, latency distribution and current faults.
#[derive(Clone, Debug)]
pub struct Network {
    /// Number of nodes.
    nodes: usize,
    /// `blocked[from * nodes + to]`: that direction drops everything.
    blocked: Vec<bool>,
    /// Smallest one-way latency.
    pub latency_us_min: u64,
    /// Largest one-way latency when there are no delay spikes.
    pub latency_us_max: u64,
    /// Current fault probabilities.
    pub faults: NetworkFaults,
}

impl Network {
    /// A fully connected, fault-free network.
    pub fn new(nodes: usize, latency_us_min: u64, latency_us_max: u64) -> Self {
        assert!(latency_us_min >= 1 && latency_us_max >= latency_us_min);
        Network {
            nodes,
            blocked: vec![false; nodes * nodes],
            latency_us_min,
            latency_us_max,
            faults: NetworkFaults::NONE,
        }
    }

    /// One-way latency: the cube of a uniform draw stretched over
    /// `[min, max]`, so most messages are fast and a few approach the bound,
    /// as on a real LAN.
    pub fn sample_latency_us(&self, rng: &mut Rng) -> u64 {
        let u = rng.unit();
        let span = (self.latency_us_max - self.latency_us_min) as f64;
        let mut latency = self.latency_us_min + (u * u * u * span) as u64;
        if rng.chance(self.faults.delay_spike) {
            latency += rng.range(0, 10 * self.latency_us_max + 1);
        }
        latency
    }

    /// True when `from → to` drops everything.
    pub fn is_blocked(&self, from: NodeIndex, to: NodeIndex) -> bool {
        self.blocked[from * self.nodes + to]
    }

    /// Blocks or unblocks one direction.
    pub fn set_blocked(&mut self, from: NodeIndex, to: NodeIndex, blocked: bool) {
        assert_ne!(from, to, "a node always reaches itself");
        self.blocked[from * self.nodes + to] = blocked;
    }

    /// Removes every partition (faults are left as they are).
    pub fn heal_links(&mut self) {
        self.blocked.iter_mut().for_each(|b| *b = false);
    }

    /// True when any link is blocked.
    pub fn is_partitioned(&self) -> bool {
        self.blocked.iter().any(|b| *b)
    }
}
