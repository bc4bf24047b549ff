//! One simulated machine: the protocol node it runs, its disk, its clock rate
//! and whether it is up, crashed or paused.

use crate::event::NodeIndex;
use bellwether_core::{NodeId, Protocol, Ready, Status};
use std::collections::VecDeque;

/// Input that reached a paused node and waits in its socket buffers.
#[derive(Debug)]
pub enum HeldInput<M> {
    /// A message from a peer.
    Message(NodeIndex, M),
    /// A connection-loss hint about a peer.
    Hint(NodeIndex),
}

/// At most this many missed ticks are replayed on resume; more would only
/// repeat timeouts that have long expired.
pub const MISSED_TICKS_BURST_MAX: u64 = 100_000;

/// At most this many inputs wait for a paused node; beyond it the oldest are
/// dropped, as a full socket buffer would.
pub const HELD_INPUTS_MAX: usize = 10_000;

/// A machine in the simulation.
pub struct Host<P: Protocol> {
    /// The running node; `None` while crashed.
    pub node: Option<P>,
    /// What the node persisted; survives crashes.
    pub disk: P::Durable,
    /// Bumped at every restart; messages and hints for older incarnations
    /// are lost with the old connections.
    pub incarnation: u64,
    /// Bumped whenever scheduled ticks must be abandoned (crash, pause).
    pub tick_generation: u64,
    /// True while stopped (SIGSTOP): no ticks, input buffered.
    pub paused: bool,
    /// When the current pause began; on resume the node gets the ticks it
    /// missed in one burst, as a runtime that converts elapsed monotonic
    /// time into ticks would deliver them.
    pub paused_at_us: u64,
    /// Input buffered while paused, delivered in order on resume.
    pub held: VecDeque<HeldInput<P::Message>>,
    /// Interval between this node's ticks: the nominal tick stretched or
    /// shrunk by its clock-rate skew.
    pub tick_interval_us: u64,
    /// Last observed status, to detect changes after each event.
    pub last_status: Option<Status>,
    /// Output waiting for the disk: persisted in order, then its messages
    /// are sent. A crash loses all of it, as it loses unsynced writes.
    pub unsynced: VecDeque<Ready<P>>,
    /// An fsync is under way (a `DiskDone` event is scheduled).
    pub disk_busy: bool,
    /// The disk answers nothing before this time (a stalled fsync).
    pub disk_stalled_until_us: u64,
    /// The promise record kept apart from the disk image, when the world
    /// guards disks (`World::guard_disks`); never damaged.
    pub promises: Option<bellwether_core::raft::PromiseRecord>,
    /// A record in the log no longer reads back: the next start cannot
    /// read the log (`DiskFault::CorruptRecord`).
    pub unreadable: bool,
}

impl<P: Protocol> Host<P> {
    /// A host that has not booted yet.
    pub fn new(tick_interval_us: u64) -> Self {
        Host {
            node: None,
            disk: P::Durable::default(),
            incarnation: 0,
            tick_generation: 0,
            paused: false,
            paused_at_us: 0,
            held: VecDeque::new(),
            tick_interval_us,
            last_status: None,
            unsynced: VecDeque::new(),
            disk_busy: false,
            disk_stalled_until_us: 0,
            promises: None,
            unreadable: false,
        }
    }

    /// Up and not paused: able to act.
    pub fn is_running(&self) -> bool {
        self.node.is_some() && !self.paused
    }

    /// Node id of the host at `index`.
    pub fn id_of(index: NodeIndex) -> NodeId {
        NodeId(index as u64 + 1)
    }

    /// Index of the host running `id`.
    pub fn index_of(id: NodeId) -> NodeIndex {
        assert!(id.0 >= 1, "node ids start at 1");
        (id.0 - 1) as NodeIndex
    }
}
