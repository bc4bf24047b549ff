//! Carrying out the member's steps for one batch: sending, persisting and
//! applying in the order the member planned (see `bellwether_member`'s
//! `ready_plan.rs` for why that order).

use super::{Node, NodeError, PeerEvent};
use crate::peer_message::PeerMessage;
use bellwether_core::raft::{RaftMessage, RaftOutput};
use bellwether_core::Envelope;
use bellwether_member::{ReadyPlan, Runtime, Step};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

impl Node {
    /// Carries out the member's steps until it has none left (see
    /// `bellwether_member`'s `ready_plan.rs` for why they come in this
    /// order), or until it yields: true when it yielded with more ready,
    /// which the loop carries out after one look at its other inputs.
    pub(super) async fn process_ready(
        &mut self,
        events: &mut mpsc::Receiver<PeerEvent>,
    ) -> Result<bool, NodeError> {
        if let Some(error) = self.snapshot_failed.take() {
            return Err(NodeError::Persist {
                path: self.config.data_dir.display().to_string(),
                error,
            });
        }
        self.member.begin_batch();
        let mut more_ready = false;
        loop {
            match self.member.next_step() {
                Step::Done => break,
                Step::Yield => {
                    more_ready = true;
                    break;
                }
                Step::PollForAnswers => self.poll_for_answers(events).await,
                Step::AnswerThenSend(messages) => {
                    self.carry_out_effects();
                    if !messages.is_empty() {
                        // Let the gRPC side write the answers first.
                        tokio::task::yield_now().await;
                        self.send_raft(messages);
                    }
                }
                Step::Ready(plan) => self.carry_out_plan(*plan, events).await?,
            }
        }
        self.carry_out_effects();
        Ok(more_ready)
    }

    /// Carries out one `Ready` in the plan's order.
    pub(super) async fn carry_out_plan(
        &mut self,
        plan: ReadyPlan,
        events: &mut mpsc::Receiver<PeerEvent>,
    ) -> Result<(), NodeError> {
        let sent_early = !plan.early.is_empty();
        self.send_raft(plan.early);
        if let Some(planned) = plan.persist {
            if self.config.runtime == Runtime::AppliesBeforeCommit {
                // Broken on purpose (`--unsafe-mutation`): the member's
                // own assertion must stop it.
                for entry in &planned.persist.entries {
                    self.member.apply(RaftOutput::Apply(entry.clone()));
                }
            }
            if planned.on_loop {
                let applied = self.member.apply_all(plan.apply_before);
                self.carry_out_effects();
                if sent_early || applied {
                    // Let the connections write the appends and the
                    // gRPC side the answers before the thread blocks.
                    tokio::task::yield_now().await;
                }
                self.metrics.wal_syncs_on_loop.inc();
                self.persist_here(planned.persist)?;
            } else {
                let syncing = self.start_persist(planned.persist, planned.record);
                self.metrics.wal_syncs_on_thread.inc();
                self.member.apply_all(plan.apply_before);
                self.carry_out_effects();
                self.finish_persist(syncing).await?;
            }
        }
        let late = self.member.checked(plan.late);
        self.send_raft(late);
        self.member.apply_all(plan.apply_after);
        self.collect_snapshot_jobs();
        let drain = self.member.finish_ready();
        self.carry_out_effects();
        if drain {
            // Nothing of this member ran during the fsync: let the
            // connections read what came meanwhile (with one client,
            // often the follower's answer that commits the entry).
            tokio::task::yield_now().await;
            self.drain_events(events);
        }
        Ok(())
    }

    /// Leader, just after fsyncing a lone write on its loop with the entry
    /// not yet committed: polls for the followers' answers for up to
    /// `answer_poll_us` instead of letting the thread sleep. Each round
    /// yields to the runtime, which polls the sockets without blocking and
    /// runs every other task of this member, then steps what arrived.
    ///
    /// Why: the first answer usually comes a few tens of microseconds after
    /// the leader's own fsync (on the test machine: median 48 µs, 90th
    /// percentile 87 µs), and waking a thread that went to sleep costs
    /// about 20–25 µs there (a virtual CPU that halted). Polling made a
    /// lone client's write about 7% faster (1-client p50 at the leader
    /// 0.243 -> 0.226 ms, six A/B pairs), for at most `answer_poll_us` of
    /// CPU per such write. The member asks for it only after a lone write's
    /// fsync on the loop (and no fsync on the blocking thread since, in the
    /// same wake-up), so a busy member never polls.
    ///
    /// It stops as soon as the entry commits, or anything stepped gives the
    /// core something to carry out (a forwarded write that arrived, a
    /// higher term), or this member stops leading, or the time is up.
    /// Local clients' requests wait meanwhile, at most `answer_poll_us`.
    pub(super) async fn poll_for_answers(&mut self, events: &mut mpsc::Receiver<PeerEvent>) {
        let budget = Duration::from_micros(self.config.answer_poll_us);
        let Some(awaited) = self.member.poll_target() else {
            return;
        };
        if budget.is_zero() {
            return;
        }
        let deadline = Instant::now() + budget;
        while self.member.awaits_answers(awaited) && Instant::now() < deadline {
            tokio::task::yield_now().await;
            self.drain_events(events);
        }
        let counter = if self.member.raft().commit_index() >= awaited {
            &self.metrics.answer_polls_answered
        } else {
            &self.metrics.answer_polls_expired
        };
        counter.inc();
    }

    /// Queues each message for its peer. A full queue means the peer is
    /// slow or gone: the message is dropped; Raft retransmits what matters.
    pub(super) fn send_raft(&self, envelopes: Vec<Envelope<RaftMessage>>) {
        for envelope in envelopes {
            if let Some(queue) = self.outbound.get(&envelope.to) {
                let _ = queue.try_send(PeerMessage::Raft(envelope.message));
            }
        }
    }
}
