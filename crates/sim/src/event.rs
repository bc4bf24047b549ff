//! The simulator's event queue: a min-heap on (virtual time, sequence).
//!
//! The sequence number breaks ties in insertion order, so two events at the
//! same microsecond always run in the same order and a seed replays exactly.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Index of a simulated node (node id minus one).
pub type NodeIndex = usize;

/// Something that happens at one instant of virtual time.
#[derive(Debug)]
pub enum Event<M> {
    /// A node's clock ticks. `generation` goes stale when the node crashes
    /// or pauses, so ticks scheduled before that are skipped.
    Tick {
        /// Which node.
        node: NodeIndex,
        /// Tick generation this event belongs to.
        generation: u64,
    },
    /// A message arrives at `to`.
    Deliver {
        /// Sender.
        from: NodeIndex,
        /// Receiver.
        to: NodeIndex,
        /// Receiver incarnation when sent: a restart resets the connection,
        /// so messages to the previous incarnation are lost.
        incarnation: u64,
        /// Payload.
        message: M,
    },
    /// The disk of `node` finished an fsync: everything queued is durable.
    DiskDone {
        /// Which node.
        node: NodeIndex,
        /// Incarnation that queued the writes; a crash voids them.
        incarnation: u64,
    },
    /// A timer of the application running on top of the cluster.
    App {
        /// The application's own token.
        token: u64,
    },
    /// The transport tells `node` that its connection to `peer` broke.
    Hint {
        /// Receiver of the hint.
        node: NodeIndex,
        /// Receiver incarnation when the hint was raised.
        incarnation: u64,
        /// The peer whose connection broke.
        peer: NodeIndex,
    },
}

struct Queued<M> {
    time_us: u64,
    sequence: u64,
    event: Event<M>,
}

impl<M> PartialEq for Queued<M> {
    fn eq(&self, other: &Self) -> bool {
        (self.time_us, self.sequence) == (other.time_us, other.sequence)
    }
}

impl<M> Eq for Queued<M> {}

impl<M> PartialOrd for Queued<M> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<M> Ord for Queued<M> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap and we want the earliest first.
        (other.time_us, other.sequence).cmp(&(self.time_us, self.sequence))
    }
}

/// Upper bound on queued events; a run that exceeds it has a runaway
/// message storm, which is a bug worth a loud stop.
pub const QUEUED_EVENTS_MAX: usize = 4_000_000;

/// Pending events ordered by time.
pub struct EventQueue<M> {
    heap: BinaryHeap<Queued<M>>,
    next_sequence: u64,
}

impl<M> Default for EventQueue<M> {
    fn default() -> Self {
        EventQueue {
            heap: BinaryHeap::new(),
            next_sequence: 0,
        }
    }
}

impl<M> EventQueue<M> {
    /// Schedules `event` at `time_us`.
    pub fn push(&mut self, time_us: u64, event: Event<M>) {
        assert!(
            self.heap.len() < QUEUED_EVENTS_MAX,
            "event queue over {QUEUED_EVENTS_MAX}"
        );
        self.heap.push(Queued {
            time_us,
            sequence: self.next_sequence,
            event,
        });
        self.next_sequence += 1;
    }

    /// Time of the earliest event.
    pub fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|q| q.time_us)
    }

    /// Removes the earliest event.
    pub fn pop(&mut self) -> Option<(u64, Event<M>)> {
        self.heap.pop().map(|q| (q.time_us, q.event))
    }

    /// Number of pending events.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// True when nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}
