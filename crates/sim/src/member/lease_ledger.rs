//! [`LeaseLedger`]: what the etcd workload knows of its leases, to check
//! that none expires early.
//!
//! A client's lease is guaranteed until its TTL has passed since the client
//! sent the request that granted or last renewed it (a keep-alive answered
//! "renewed"), as etcd's clients count it. The members' lease clocks expire
//! leases by proposing revokes; the ledger notes when each expiry revoke
//! was first applied anywhere, and at the end that must be no earlier than
//! the lease's guarantee, less what the members' clock drift allows.
//!
//! The expiry revokes are also operations of the history (one client id
//! each), so the linearizability checker sees keys vanish where they did.

use super::etcd_entries::LEASE_TTL_SECONDS;
use super::protocol::OpRef;
use crate::linearizability::{ClientId, Command, Operation, Response};
use bellwether_etcd::Renewal;
use std::collections::BTreeMap;

/// History client ids from here up are expiry revokes, one each.
const EXPIRY_HISTORY_CLIENT_BASE: u64 = 1 << 40;

/// What the workload knows of its leases (see the module doc).
#[derive(Default)]
pub struct LeaseLedger {
    /// Operations of the history already looked at for grants.
    scanned: usize,
    /// Leases still kept alive, and how many more keep-alives each gets.
    pub renewing: BTreeMap<i64, u32>,
    /// Keep-alives in flight by attempt: lease, and when it was sent.
    in_flight: BTreeMap<u32, (i64, u64)>,
    attempts: u32,
    /// Per lease, until when (µs) a client was promised it lives, and the
    /// TTL (µs) of the promise that said so: a fast clock takes its share
    /// off that TTL.
    guaranteed_until: BTreeMap<i64, (u64, u64)>,
    /// Per lease, when its expiry revoke was first applied.
    expired_at: BTreeMap<i64, u64>,
    /// Expiry revokes handed to a member and not answered, by operation id.
    expiries_open: BTreeMap<u64, (Command, u64)>,
    expiries_recorded: u64,
    /// Keep-alives answered "renewed".
    pub renewed: u64,
}

impl LeaseLedger {
    /// Takes in the operations completed since the last call: each
    /// acknowledged leased put grants a lease guaranteed for its TTL from
    /// when it was sent, which then gets `keep_alives(lease)` keep-alives.
    pub fn note_grants(&mut self, history: &[Operation], mut keep_alives: impl FnMut() -> u32) {
        for op in &history[self.scanned..] {
            let (Command::LeasedPut { value, .. }, Some(_)) = (op.command, op.complete_us()) else {
                continue;
            };
            let lease = i64::try_from(value.0).expect("lease ids are positive");
            self.promise(lease, op.invoke_us, ttl_us());
            self.renewing.insert(lease, keep_alives());
        }
        self.scanned = history.len();
    }

    fn promise(&mut self, lease: i64, from_us: u64, ttl_us: u64) {
        let promised = (from_us + ttl_us, ttl_us);
        let until = self.guaranteed_until.entry(lease).or_default();
        if promised.0 > until.0 {
            *until = promised;
        }
    }

    /// A keep-alive of `lease` sent at `now_us`: its attempt number.
    pub fn keep_alive_sent(&mut self, lease: i64, now_us: u64) -> u32 {
        self.attempts += 1;
        self.in_flight.insert(self.attempts, (lease, now_us));
        self.attempts
    }

    /// What a keep-alive found.
    pub fn keep_alive_answered(&mut self, op: OpRef, renewal: Renewal) {
        let Some((lease, sent_us)) = self.in_flight.remove(&op.attempt) else {
            return;
        };
        if let Renewal::Renewed(ttl) = renewal {
            self.renewed += 1;
            let ttl_us = u64::try_from(ttl).expect("a granted TTL") * 1_000_000;
            self.promise(lease, sent_us, ttl_us);
        }
    }

    /// A member's lease clock handed out an expiry revoke at `now_us`.
    pub fn expiry_proposed(&mut self, op: OpRef, command: Command, now_us: u64) {
        self.expiries_open.insert(op.op_id(), (command, now_us));
    }

    /// The answer to an expiry revoke: the completed operation for the
    /// history, if it took effect. One refused never applies and leaves
    /// no operation; one whose fate is unknown stays open.
    pub fn expiry_answered(
        &mut self,
        op: OpRef,
        result: Result<Response, bellwether_member::ClientError>,
        now_us: u64,
    ) -> Option<Operation> {
        use bellwether_member::ClientError as E;
        match result {
            Ok(response) => {
                let (command, invoke_us) = self.expiries_open.remove(&op.op_id())?;
                let client = self.next_history_client();
                Some(Operation::ok(client, command, invoke_us, now_us, response))
            }
            Err(E::NotLeader { .. } | E::Busy | E::NotApplied) => {
                self.expiries_open.remove(&op.op_id());
                None
            }
            Err(E::LeaderChanged | E::TimedOut | E::Stopped) => None,
            Err(E::Unreachable { .. }) => unreachable!("an expiry is a proposal, not a call"),
        }
    }

    fn next_history_client(&mut self) -> ClientId {
        self.expiries_recorded += 1;
        ClientId(EXPIRY_HISTORY_CLIENT_BASE + self.expiries_recorded)
    }

    /// A member applied the expiry revoke of `lease` at `now_us`.
    pub fn expired(&mut self, lease: i64, now_us: u64) {
        self.expired_at.entry(lease).or_insert(now_us);
    }

    /// Leases expired so far.
    pub fn expiries(&self) -> usize {
        self.expired_at.len()
    }

    /// The expiry revokes whose fate is unknown, as indeterminate
    /// operations.
    pub fn finish(&mut self) -> Vec<Operation> {
        let open = std::mem::take(&mut self.expiries_open);
        open.into_values()
            .map(|(command, invoke_us)| {
                let client = self.next_history_client();
                Operation::indeterminate(client, command, invoke_us)
            })
            .collect()
    }

    /// An expiry revoke that never reached its member (the host was
    /// paused or had restarted): it has no fate to record.
    pub fn expiry_dropped(&mut self, op: OpRef) {
        self.expiries_open.remove(&op.op_id());
    }

    /// The first lease that expired before its guarantee by more than the
    /// allowance `slack_us(ttl_us)` for the TTL that promised it: when, and
    /// its details.
    pub fn expired_early(&self, slack_us: impl Fn(u64) -> u64) -> Option<(u64, String)> {
        self.expired_at.iter().find_map(|(lease, at_us)| {
            let (until_us, ttl_us) = *self.guaranteed_until.get(lease)?;
            let slack_us = slack_us(ttl_us);
            (*at_us + slack_us < until_us).then(|| {
                let detail = format!(
                    "lease {lease:#x} expired at {at_us} µs, {} µs before its guarantee (allowance {slack_us} µs)",
                    until_us - at_us
                );
                (*at_us, detail)
            })
        })
    }
}

/// The workload's lease TTL in µs.
pub fn ttl_us() -> u64 {
    u64::try_from(LEASE_TTL_SECONDS).expect("positive") * 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linearizability::{Key, Value};

    #[test]
    fn an_expiry_before_the_last_renewals_guarantee_is_early_beyond_the_drift_only() {
        let lease = 0x40;
        let mut ledger = LeaseLedger::default();
        let put = Command::LeasedPut {
            key: Key(1),
            value: Value(lease),
        };
        let granted = Operation::ok(ClientId(1), put, 1_000_000, 1_010_000, Response::Put);
        ledger.note_grants(&[granted], || 1);
        assert_eq!(ledger.renewing.get(&0x40), Some(&1));
        // Granted at 1 s (sent), so guaranteed until 3 s; renewed (sent)
        // at 2 s, so until 4 s.
        let attempt = ledger.keep_alive_sent(0x40, 2_000_000);
        let op = OpRef {
            client: 0,
            attempt,
            key: Key(0),
            renew: Some(0x40),
            write: None,
            entry: 0,
        };
        ledger.keep_alive_answered(op, Renewal::Renewed(2));
        ledger.expired(0x40, 3_950_000);
        assert_eq!(
            ledger.expired_early(|_| 60_000),
            None,
            "within the allowance"
        );
        // The allowance is asked for with the TTL of the promise that
        // holds: the renewal's, 2 s.
        let by_ttl = |ttl_us| if ttl_us == 2_000_000 { 60_000 } else { 0 };
        assert_eq!(ledger.expired_early(by_ttl), None, "the renewal's TTL");
        let (at, detail) = ledger.expired_early(|_| 1_000).expect("50 ms early");
        assert_eq!(at, 3_950_000);
        assert!(detail.contains("50000 µs before its guarantee"), "{detail}");
        // A keep-alive that found the lease gone promises nothing.
        let attempt = ledger.keep_alive_sent(0x40, 3_990_000);
        let op = OpRef { attempt, ..op };
        ledger.keep_alive_answered(op, Renewal::NotFound);
        assert!(ledger.expired_early(|_| 50_000).is_none());
    }
}
