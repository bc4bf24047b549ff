//! Each host's disk: output passes through it in order. With `fsync_us` of
//! zero it is synchronous; otherwise writes queue, one fsync makes everything
//! queued durable at once (group commit), and only then do the messages and
//! application output of those writes leave the node. A stalled disk holds
//! everything back; a crash loses whatever was not yet synced.

use super::{Application, World};
use crate::event::{Event, NodeIndex};
use crate::host::Host;
use bellwether_core::{Protocol, Ready};

impl<P: Protocol, A: Application<P>> World<P, A> {
    /// Queues `ready` behind earlier unsynced output, or completes it at
    /// once when nothing needs to wait.
    pub(super) fn write_through_disk(&mut self, index: NodeIndex, ready: Ready<P>) {
        let host = &self.hosts[index];
        let synchronous = self.config.fsync_us == 0 && host.disk_stalled_until_us <= self.now_us;
        if host.unsynced.is_empty() && (ready.persist.is_none() || synchronous) {
            self.complete(index, ready);
            return;
        }
        self.hosts[index].unsynced.push_back(ready);
        self.schedule_fsync(index);
    }

    fn schedule_fsync(&mut self, index: NodeIndex) {
        let host = &mut self.hosts[index];
        if host.disk_busy {
            return;
        }
        host.disk_busy = true;
        let at = self.now_us.max(host.disk_stalled_until_us) + self.config.fsync_us.max(1);
        let incarnation = host.incarnation;
        self.queue.push(
            at,
            Event::DiskDone {
                node: index,
                incarnation,
            },
        );
    }

    /// An fsync finished: everything queued so far is durable.
    pub(super) fn on_disk_done(&mut self, index: NodeIndex, incarnation: u64) {
        let host = &mut self.hosts[index];
        if host.node.is_none() || host.incarnation != incarnation || !host.disk_busy {
            return;
        }
        if host.disk_stalled_until_us > self.now_us {
            // Stalled after this fsync was scheduled: it ends with the stall.
            let at = host.disk_stalled_until_us + self.config.fsync_us.max(1);
            self.queue.push(
                at,
                Event::DiskDone {
                    node: index,
                    incarnation,
                },
            );
            return;
        }
        host.disk_busy = false;
        let batch: Vec<Ready<P>> = host.unsynced.drain(..).collect();
        for ready in batch {
            self.complete(index, ready);
        }
        // A node may have waited for this fsync to carry on (the member
        // driver takes no input while its disk works); a paused one carries
        // on once resumed.
        if self.hosts[index].is_running() {
            self.flush(index);
        }
        self.observe_after_disk(index);
    }

    /// Persists, then sends, then queues output for the application.
    fn complete(&mut self, index: NodeIndex, ready: Ready<P>) {
        if let Some(persist) = ready.persist {
            A::on_persisted(self, index, &persist);
            P::apply_persist(&mut self.hosts[index].disk, persist);
            self.rewrite_promises(index);
            let term = P::durable_term(&self.hosts[index].disk);
            let result = self
                .term_monotonic
                .observe_durable(self.now_us, index, term);
            if let Err(violation) = result {
                self.report_violation(violation);
            }
        }
        for envelope in ready.messages {
            self.send(index, Host::<P>::index_of(envelope.to), envelope.message);
        }
        self.outputs
            .extend(ready.output.into_iter().map(|o| (index, o)));
    }

    /// Makes node `index`'s disk answer nothing until `until_us`: fsyncs
    /// started before then finish only after it (hashicorp/raft #503).
    pub fn stall_disk(&mut self, index: NodeIndex, until_us: u64) {
        self.trace_line(|| {
            format!(
                "n{} disk stalls until {:.1} ms",
                index + 1,
                until_us as f64 / 1000.0
            )
        });
        let host = &mut self.hosts[index];
        host.disk_stalled_until_us = host.disk_stalled_until_us.max(until_us);
    }

    /// Hands queued output to the application, in order. Not re-entrant:
    /// output produced while the application reacts joins the same queue.
    pub(super) fn drain_outputs(&mut self) {
        if self.draining_outputs {
            return;
        }
        self.draining_outputs = true;
        while let Some((index, output)) = self.outputs.pop_front() {
            if self.hosts[index].node.is_some() {
                A::on_output(self, index, output);
            }
        }
        self.draining_outputs = false;
    }
}
