//! The hook through which an application (a workload with its own state
//! machines and checkers) rides on a simulated cluster.
//!
//! Every method receives the whole world, so an application can propose on
//! a node, schedule its own timers and report violations. Output is handed
//! over in order and never re-entrantly.

use super::World;
use crate::event::NodeIndex;
use bellwether_core::{Protocol, Status};

/// An application running on every node of a simulated cluster.
pub trait Application<P: Protocol>: Sized {
    /// Node `node` just booted (first start or restart) from its disk.
    fn on_boot(_world: &mut World<P, Self>, _node: NodeIndex) {}

    /// Node `node` produced application output (after persisting it).
    fn on_output(_world: &mut World<P, Self>, _node: NodeIndex, _output: P::Output) {}

    /// Node `node`'s disk is about to apply `persist`.
    fn on_persisted(_world: &mut World<P, Self>, _node: NodeIndex, _persist: &P::Persist) {}

    /// Node `node`'s observable status changed (`None` = down).
    fn on_status(
        _world: &mut World<P, Self>,
        _node: NodeIndex,
        _old: Option<Status>,
        _new: Option<Status>,
    ) {
    }

    /// Node `node` was just flushed: everything it had ready went to its
    /// disk or the network. An application whose nodes answer clients on
    /// their own (not through output, which waits for the disk) collects
    /// the answers here.
    fn on_flushed(_world: &mut World<P, Self>, _node: NodeIndex) {}

    /// A timer the application scheduled with [`World::schedule_app_timer`].
    fn on_timer(_world: &mut World<P, Self>, _token: u64) {}

    /// Whether running node `node` must follow acting leader `leader` for
    /// the cluster to count as agreeing on it (the liveness checks). Every
    /// node, unless membership can change: a node outside the leader's
    /// configuration hears nothing from it and, not being a voter, never
    /// campaigns, so it may rightly keep a stale view forever.
    fn must_follow(_world: &World<P, Self>, _leader: NodeIndex, _node: NodeIndex) -> bool {
        true
    }
}

/// No application: elections only.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoApp;

impl<P: Protocol> Application<P> for NoApp {}
