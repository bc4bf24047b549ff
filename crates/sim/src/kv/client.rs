//! A simulated client of the KV store: one operation at a time, sent to the
//! node it believes leads, following redirects, and recorded in the history
//! with its invoke and completion times.

use crate::event::NodeIndex;
use crate::linearizability::Command;

/// An operation the client is waiting on.
#[derive(Clone, Copy, Debug)]
pub struct PendingOp {
    /// What it asked.
    pub command: Command,
    /// When it asked first.
    pub invoke_us: u64,
    /// After this it gives up and records the outcome as indeterminate.
    pub deadline_us: u64,
    /// Id of the current attempt (see [`Client::attempts`]).
    pub attempt: u32,
    /// Node the current attempt went to.
    pub target: NodeIndex,
    /// A write attempt reached a leader's log: it may take effect even if no
    /// answer comes, so it is never sent again.
    pub proposed: bool,
}

/// One client.
#[derive(Clone, Debug)]
pub struct Client {
    /// Its id in the history.
    pub id: u64,
    /// Operations started so far (also its op-id sequence).
    pub ops_started: u32,
    /// Attempts sent so far, over all operations: names each attempt
    /// uniquely, so a late reply to an old attempt is never taken for a
    /// reply to a new one.
    pub attempts: u32,
    /// The operation in progress.
    pub op: Option<PendingOp>,
    /// Node it believes leads.
    pub guess: NodeIndex,
    /// Last value it saw per key, for compare-and-set.
    pub last_seen: std::collections::BTreeMap<u64, Option<u64>>,
}

impl Client {
    /// Op id of the current attempt: unique per client and attempt.
    pub fn op_id(&self) -> u64 {
        let attempt = self.op.map_or(0, |op| op.attempt) as u64;
        (self.id << 32) | attempt
    }

    /// Names a new attempt of the current operation, aimed at `guess`.
    pub fn next_attempt(&mut self) -> u32 {
        self.attempts += 1;
        let (attempts, guess) = (self.attempts, self.guess);
        let op = self.op.as_mut().expect("an operation is in progress");
        op.attempt = attempts;
        op.target = guess;
        attempts
    }
}
