//! A bounded buffer of outgoing messages, shared by Bully and Ring.
//!
//! The runtime is expected to drain [`crate::Protocol::ready`] after every
//! call, so the buffer normally holds one call's output. Two limits keep it
//! bounded even if it does not: each call may add at most `per_call_max`
//! messages (asserted, since exceeding it is a bug in the algorithm), and the
//! buffer never holds more than `buffered_max` (further messages are dropped,
//! which the algorithms survive exactly as they survive a lossy network).

use crate::protocol::Envelope;
use crate::types::NodeId;

/// Outgoing messages not yet taken by the runtime.
#[derive(Debug)]
pub(crate) struct Outbox<M> {
    /// Messages in the order they were produced; the order is part of the
    /// deterministic output.
    messages: Vec<Envelope<M>>,
    /// Messages added since the current `tick`, `step` or hint began, checked
    /// against `per_call_max`.
    sent_this_call: usize,
    /// Most messages one call may produce; derived from the member bound.
    per_call_max: usize,
    /// Most messages the buffer holds if the runtime stops draining it.
    buffered_max: usize,
    /// Messages dropped because the buffer was full, for diagnostics.
    dropped_total: u64,
}

impl<M> Outbox<M> {
    /// An empty outbox with the given bounds.
    pub(crate) fn new(per_call_max: usize, buffered_max: usize) -> Self {
        assert!(per_call_max > 0, "a node must be able to send something");
        assert!(
            buffered_max >= per_call_max,
            "one call's output must fit in the buffer"
        );
        Outbox {
            messages: Vec::new(),
            sent_this_call: 0,
            per_call_max,
            buffered_max,
            dropped_total: 0,
        }
    }

    /// Starts counting the output of a new `tick`, `step` or hint.
    pub(crate) fn begin_call(&mut self) {
        self.sent_this_call = 0;
    }

    /// Queues `message` for `to`.
    pub(crate) fn push(&mut self, to: NodeId, message: M) {
        self.sent_this_call += 1;
        assert!(
            self.sent_this_call <= self.per_call_max,
            "one call produced more than {} messages",
            self.per_call_max
        );
        if self.messages.len() >= self.buffered_max {
            self.dropped_total += 1;
            return;
        }
        self.messages.push(Envelope { to, message });
        assert!(self.messages.len() <= self.buffered_max);
    }

    /// True when messages are waiting.
    pub(crate) fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Takes every waiting message, oldest first.
    pub(crate) fn take(&mut self) -> Vec<Envelope<M>> {
        std::mem::take(&mut self.messages)
    }

    /// Messages lost because the runtime did not drain the buffer in time.
    pub(crate) fn dropped_total(&self) -> u64 {
        self.dropped_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_buffer_drops_instead_of_growing() {
        let mut outbox = Outbox::new(2, 3);
        for _ in 0..3 {
            outbox.begin_call();
            outbox.push(NodeId(1), ());
            outbox.push(NodeId(2), ());
        }
        assert_eq!(outbox.take().len(), 3);
        assert_eq!(outbox.dropped_total(), 3);
        assert!(outbox.is_empty());
    }

    #[test]
    #[should_panic(expected = "more than 2 messages")]
    fn one_call_may_not_exceed_its_bound() {
        let mut outbox = Outbox::new(2, 10);
        outbox.begin_call();
        for _ in 0..3 {
            outbox.push(NodeId(1), ());
        }
    }
}
