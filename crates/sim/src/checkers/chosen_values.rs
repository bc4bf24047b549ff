//! Paxos consistency ("Paxos Made Simple", §2.1: "only a single value is
//! chosen"): every node that learns slot `s` is chosen must learn the same
//! value, over the whole run, across crashes and restarts.
//!
//! It rides on the cluster as an [`Application`], since the chosen slots are
//! the nodes' output. The first value learned for a slot is remembered; any
//! node that later learns another fails the run.

use super::Violation;
use crate::event::NodeIndex;
use crate::world::{Application, World};
use bellwether_core::paxos::PaxosOutput;
use bellwether_core::Protocol;
use std::collections::BTreeMap;

/// The value first learned for each slot, and by whom.
#[derive(Debug, Default)]
pub struct ChosenValues {
    /// Slot → (value, node index that learned it first).
    chosen: BTreeMap<u64, (u64, NodeIndex)>,
    /// Slots learned, counting every node's learning.
    pub learned_total: u64,
}

impl ChosenValues {
    /// Records that `node` learned `value` for `slot`; fails if another
    /// value was learned for it before.
    pub fn observe(
        &mut self,
        time_us: u64,
        node: NodeIndex,
        slot: u64,
        value: u64,
    ) -> Result<(), Violation> {
        self.learned_total += 1;
        let (first, by) = *self.chosen.entry(slot).or_insert((value, node));
        if first == value {
            return Ok(());
        }
        Err(Violation {
            property: "paxos-one-value-per-slot",
            time_us,
            detail: format!(
                "slot {slot}: n{} learned {first:#x}, n{} learned {value:#x}",
                by + 1,
                node + 1
            ),
        })
    }

    /// Slots with a chosen value.
    pub fn slots(&self) -> usize {
        self.chosen.len()
    }
}

impl<P: Protocol<Output = PaxosOutput>> Application<P> for ChosenValues {
    fn on_output(world: &mut World<P, Self>, node: NodeIndex, output: PaxosOutput) {
        let PaxosOutput::Chosen { slot, value } = output;
        let now = world.now_us();
        if let Err(violation) = world.app.observe(now, node, slot, value) {
            world.report_violation(violation);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_value_for_a_slot_is_caught_and_the_same_value_is_not() {
        let mut checker = ChosenValues::default();
        checker.observe(1, 0, 1, 7).unwrap();
        checker.observe(2, 1, 1, 7).unwrap();
        checker.observe(3, 1, 2, 9).unwrap();
        let violation = checker.observe(4, 2, 1, 8).unwrap_err();
        assert_eq!(violation.property, "paxos-one-value-per-slot");
        assert_eq!(checker.slots(), 2);
    }
}
