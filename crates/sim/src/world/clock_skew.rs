//! A scripted fault for lease reads (thesis §6.4): the leader's clock runs
//! at one rate and its followers' at another, then the leader is cut off
//! and heals. With rates far apart, the old leader's lease outlives the
//! followers' stickiness, and it may serve a read after the new leader
//! has committed writes; within the documented drift bound it may not.

use super::{Application, World};
use crate::event::NodeIndex;
use crate::partition::Partition;
use bellwether_core::Protocol;

impl<P: Protocol, A: Application<P>> World<P, A> {
    /// Sets `leader`'s tick to `leader_tick_us` and every other host's to
    /// `follower_tick_us`, runs 300 ms, isolates `leader` for 600 ms (the
    /// others must elect a new leader meanwhile), heals, and runs 1 s
    /// more. Panics if no other leader was elected or a checker failed:
    /// the scenario did not happen as scripted.
    pub fn isolate_leader_with_skewed_clocks(
        &mut self,
        leader: NodeIndex,
        leader_tick_us: u64,
        follower_tick_us: u64,
    ) {
        for (index, host) in self.hosts.iter_mut().enumerate() {
            host.tick_interval_us = if index == leader {
                leader_tick_us
            } else {
                follower_tick_us
            };
        }
        self.run_for(300_000)
            .expect("no checker fails before the cut");
        self.partition(&Partition::Isolated { node: leader });
        self.run_for(600_000)
            .expect("no checker fails while cut off");
        let others: Vec<u64> = self.acting_leaders().iter().map(|(id, _)| id.0).collect();
        assert!(
            !others.is_empty() && others.iter().all(|id| id - 1 != leader as u64),
            "the majority elected a new leader ({others:?})"
        );
        self.heal_links();
        self.run_for(1_000_000)
            .expect("no checker fails after healing");
        assert!(self.violation().is_none(), "{:?}", self.violation());
    }
}
