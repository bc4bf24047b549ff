//! The leader's lease clock in the server: a [`LeaseClock`] (the decisions,
//! in the `kv` crate, which the simulator also runs) on the process's
//! monotonic clock, and the task that revokes expired leases through the
//! log.
//!
//! The store (replicated) knows which leases exist and their granted TTL;
//! it has no clock. Expiry is the leader's decision alone (see
//! [`LeaseClock`]): a new leader restarts every lease from its full TTL,
//! so a failover can make a lease live longer, never shorter.
//!
//! The lessor is *primary* only after its member has become leader and
//! applied an entry of its own term: before that its store may miss recent
//! grants, and answering "lease not found" to a keep-alive would wrongly
//! tell a client its lease is gone. Until then keep-alives get
//! "no leader" and clients retry.

use super::backend::EtcdBackend;
use bellwether_api::etcdserverpb as pb;
use bellwether_etcd::command::Command;
pub use bellwether_etcd::Renewal;
use bellwether_etcd::{store_leases, Leadership, LeaseApplied, LeaseClock, LEASE_CHECK_INTERVAL};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The lease clock of one member. Cheap to clone.
///
/// The state machine tells it about every grant and revoke it applies
/// ([`applied`](Lessor::applied)), whichever member's client
/// asked for them, so its deadlines always cover the store's leases and a
/// check never reads the store.
#[derive(Clone, Debug)]
pub struct Lessor {
    clock: Arc<Mutex<LeaseClock>>,
    /// The origin of the clock's time.
    origin: Instant,
    /// Milliseconds added to every lease's TTL when this member takes over
    /// (see [`Lessor::set_takeover_extension`]).
    takeover_extension_ms: Arc<AtomicU64>,
}

impl Default for Lessor {
    fn default() -> Self {
        Lessor {
            clock: Arc::default(),
            origin: Instant::now(),
            takeover_extension_ms: Arc::default(),
        }
    }
}

impl Lessor {
    fn clock(&self) -> std::sync::MutexGuard<'_, LeaseClock> {
        self.clock.lock().expect("lessor lock")
    }

    /// The clock's time now.
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    /// Sets how much longer than its TTL every lease lives from a takeover:
    /// a deposed leader that has not yet noticed (cut off, it steps down
    /// only at its check-quorum timeout) may still answer keep-alives for
    /// that long, and a client counts its lease from such an answer. Two
    /// election timeouts cover it.
    pub fn set_takeover_extension(&self, extension: Duration) {
        let ms = u64::try_from(extension.as_millis()).unwrap_or(u64::MAX);
        self.takeover_extension_ms.store(ms, Ordering::Relaxed);
    }

    /// The state machine applied a lease change (see
    /// [`LeaseClock::applied`]): a grant starts its countdown now if this
    /// member is primary; a revoke or a restore forgets.
    pub fn applied(&self, applied: LeaseApplied) {
        let now = self.now();
        self.clock().applied(now, applied);
    }

    /// A keep-alive, on a member that leads `term`, for lease `id`, whose
    /// granted TTL is `ttl_seconds` if the store still holds it.
    pub fn renew(&self, term: u64, id: i64, ttl_seconds: Option<i64>) -> Renewal {
        let now = self.now();
        self.clock().renew(now, term, id, ttl_seconds)
    }

    /// Moves lease `id`'s deadline to `within` from now if that is sooner
    /// (see [`LeaseClock::shorten`]). Returns the instant it now expires,
    /// for a timer to call [`Lessor::expire_released`] at.
    pub fn shorten(&self, id: i64, within: Duration) -> Option<Instant> {
        let now = self.now();
        let at = self.clock().shorten(now, id, within)?;
        Some(self.origin + at)
    }

    /// Marks lease `id` revoking if it was released on disconnect to expire
    /// at `at`, that instant has come, and no keep-alive renewed it since.
    /// Returns whether the caller must now propose its revoke.
    pub fn expire_released(&self, id: i64, at: Instant) -> bool {
        let now = self.now();
        let at = at.saturating_duration_since(self.origin);
        self.clock().expire_released(now, id, at)
    }

    /// Seconds lease `id` has left, if this member is primary and knows
    /// it.
    pub fn remaining_seconds(&self, id: i64) -> Option<i64> {
        let now = self.now();
        self.clock().remaining_seconds(now, id)
    }

    /// The term this member's lessor is primary for, if any.
    pub fn primary_term(&self) -> Option<u64> {
        self.clock().primary_term()
    }

    /// One check (see [`LeaseClock::check`]): the leases to revoke now.
    fn check(&self, leadership: Leadership, leases: impl FnOnce() -> Vec<(i64, i64)>) -> Vec<i64> {
        let now = self.now();
        let extension = Duration::from_millis(self.takeover_extension_ms.load(Ordering::Relaxed));
        let checked = self.clock().check(now, leadership, extension, leases);
        if let Some(leases) = checked.took_over {
            tracing::info!(
                ?leadership,
                leases,
                "lessor: primary; every lease restarts its TTL"
            );
        }
        if checked.rebuilt {
            tracing::error!("lessor: deadlines inconsistent; rebuilding from the store");
        }
        checked.due
    }

    /// Runs the expiry loop until the node stops.
    pub async fn run(self, backend: EtcdBackend) {
        let mut ticker = tokio::time::interval(LEASE_CHECK_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if backend.status.has_changed().is_err() {
                return; // the node is gone
            }
            let leadership = {
                let status = backend.status.borrow();
                let leads = status.role == bellwether_core::Role::Leader
                    && status.leader == Some(backend.member_id);
                let caught_up = status.committed_in_term && status.applied >= status.commit;
                Leadership::of(leads.then_some(status.term), caught_up)
            };
            let due = self.check(leadership, || store_leases(&backend.store()));
            for id in due {
                propose_revoke(&backend, id);
            }
        }
    }
}

/// Proposes the revoke of an expired lease, in the background. One that is
/// not applied is proposed again by a later check (see
/// [`bellwether_etcd::REVOKE_RETRY`]).
pub fn propose_revoke(backend: &EtcdBackend, id: i64) {
    let backend = backend.clone();
    tokio::spawn(async move {
        let command = Command::LeaseRevoke(pb::LeaseRevokeRequest { id });
        // Only as the leader: a lessor hears of a lost leadership only at
        // its next check, and its revoke, forwarded to the new leader, would
        // delete a lease that leader has renewed since (seen by `verify
        // --workload lease`: keys deleted 1.9 s before their guaranteed end).
        match backend
            .write_here::<pb::LeaseRevokeResponse>(&command)
            .await
        {
            Ok(_) => tracing::debug!(lease = id, "lease expired and revoked"),
            Err(_) => tracing::debug!(lease = id, "expiry revoke not applied; will retry"),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_etcd::REVOKES_PER_CHECK_MAX;

    #[test]
    fn a_follower_is_not_primary_and_answers_nothing() {
        let lessor = Lessor::default();
        assert!(lessor.check(Leadership::None, Vec::new).is_empty());
        assert_eq!(lessor.renew(1, 1, Some(10)), Renewal::NotPrimary);
        assert_eq!(lessor.remaining_seconds(1), None);
    }

    #[test]
    fn taking_over_restarts_every_lease_from_its_full_ttl() {
        let lessor = Lessor::default();
        assert!(lessor
            .check(Leadership::Ready(3), || vec![(1, 10), (2, 60)])
            .is_empty());
        assert_eq!(lessor.remaining_seconds(1), Some(10));
        assert_eq!(lessor.remaining_seconds(2), Some(60));
        assert_eq!(lessor.renew(3, 1, Some(10)), Renewal::Renewed(10));
        assert_eq!(lessor.renew(3, 7, None), Renewal::NotFound);
    }

    #[test]
    fn an_expired_lease_is_revoked_once_and_cannot_be_renewed() {
        let lessor = Lessor::default();
        lessor.check(Leadership::Ready(1), || vec![(5, 0)]);
        assert_eq!(lessor.check(Leadership::Ready(1), Vec::new), vec![5]);
        assert!(
            lessor.check(Leadership::Ready(1), Vec::new).is_empty(),
            "retried too soon"
        );
        assert_eq!(lessor.renew(1, 5, Some(0)), Renewal::NotFound);
        assert_eq!(lessor.remaining_seconds(5), Some(0));
        // Once the revoke is applied the lease is forgotten.
        lessor.applied(LeaseApplied::Revoked {
            id: 5,
            by_client: true,
            existed: true,
        });
        assert!(lessor.check(Leadership::Ready(1), Vec::new).is_empty());
        assert_eq!(lessor.remaining_seconds(5), None);
    }

    #[test]
    fn grants_applied_while_primary_start_at_once_and_others_at_takeover() {
        let lessor = Lessor::default();
        lessor.applied(LeaseApplied::Granted {
            id: 1,
            ttl_seconds: 30,
        });
        assert_eq!(lessor.remaining_seconds(1), None, "not primary yet");
        // The store listed lease 1 when this member took over.
        lessor.check(Leadership::Ready(4), || vec![(1, 30)]);
        assert_eq!(lessor.remaining_seconds(1), Some(30));
        lessor.applied(LeaseApplied::Granted {
            id: 2,
            ttl_seconds: 10,
        });
        assert_eq!(lessor.remaining_seconds(2), Some(10));
        lessor.applied(LeaseApplied::Granted {
            id: 2,
            ttl_seconds: 99,
        });
        assert_eq!(
            lessor.remaining_seconds(2),
            Some(10),
            "a grant never resets"
        );
        // A lease the primary lessor does not know was revoked after the
        // caller looked it up: renewing it must not bring it back.
        assert_eq!(lessor.renew(4, 9, Some(10)), Renewal::NotFound);
        assert_eq!(lessor.remaining_seconds(9), None);
        lessor.applied(LeaseApplied::Revoked {
            id: 9,
            by_client: true,
            existed: true,
        }); // a failed revoke of an unknown lease
        assert_eq!(lessor.remaining_seconds(2), Some(10));
        // The store is never rescanned while primary.
        let rescanned = std::cell::Cell::new(false);
        lessor.check(Leadership::Ready(4), || {
            rescanned.set(true);
            Vec::new()
        });
        assert!(!rescanned.get());
        assert_eq!(lessor.remaining_seconds(1), Some(30));
    }

    #[test]
    fn a_mass_expiry_is_revoked_in_bounded_checks_and_live_leases_stay() {
        let lessor = Lessor::default();
        let expired = REVOKES_PER_CHECK_MAX + 44;
        let mut leases: Vec<(i64, i64)> = (0..expired as i64).map(|id| (id + 1, 0)).collect();
        leases.push((100_000, 60));
        lessor.check(Leadership::Ready(1), || leases.clone());
        let first = lessor.check(Leadership::Ready(1), Vec::new);
        let second = lessor.check(Leadership::Ready(1), Vec::new);
        assert_eq!(first.len(), REVOKES_PER_CHECK_MAX);
        assert_eq!(second.len(), 44);
        let mut all: Vec<i64> = first.into_iter().chain(second).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=expired as i64).collect::<Vec<_>>());
        assert!(lessor.check(Leadership::Ready(1), Vec::new).is_empty());
        assert_eq!(lessor.renew(1, 100_000, Some(60)), Renewal::Renewed(60));
    }

    #[test]
    fn a_takeover_extends_every_lease_by_the_set_extension() {
        let lessor = Lessor::default();
        lessor.set_takeover_extension(Duration::from_secs(2));
        lessor.check(Leadership::Ready(1), || vec![(1, 10)]);
        assert_eq!(lessor.remaining_seconds(1), Some(12));
    }

    #[test]
    fn shortening_moves_a_live_deadline_earlier_only() {
        let lessor = Lessor::default();
        let grace = Duration::from_millis(300);
        assert_eq!(lessor.shorten(1, grace), None, "not primary");
        lessor.check(Leadership::Ready(1), || vec![(1, 60), (2, 60), (3, 60)]);
        let at = lessor.shorten(1, grace).expect("shortened");
        assert_eq!(lessor.remaining_seconds(1), Some(0));
        assert_eq!(lessor.remaining_seconds(2), Some(60), "others keep theirs");
        assert_eq!(
            lessor.shorten(1, Duration::from_secs(30)),
            None,
            "never later"
        );
        assert_eq!(lessor.shorten(9, grace), None, "unknown lease");
        assert!(!lessor.expire_released(1, at), "not before its instant");
        // A renewal takes a released lease back: its timer does nothing.
        let renewed_at = lessor.shorten(3, grace).expect("shortened");
        assert_eq!(lessor.renew(1, 3, Some(60)), Renewal::Renewed(60));
        std::thread::sleep(Duration::from_millis(320));
        assert!(lessor.expire_released(1, at), "due at its instant");
        assert!(!lessor.expire_released(1, at), "only once");
        assert!(!lessor.expire_released(3, renewed_at), "renewed since");
        assert_eq!(
            lessor.renew(1, 1, Some(60)),
            Renewal::NotFound,
            "being revoked"
        );
        assert_eq!(lessor.remaining_seconds(3), Some(60));
    }

    #[test]
    fn a_restored_store_makes_the_next_check_rebuild() {
        let lessor = Lessor::default();
        lessor.check(Leadership::Ready(2), || vec![(1, 30)]);
        lessor.applied(LeaseApplied::Restored);
        assert_eq!(lessor.primary_term(), None);
        lessor.check(Leadership::Ready(2), || vec![(7, 20)]);
        assert_eq!(lessor.remaining_seconds(1), None);
        assert_eq!(lessor.remaining_seconds(7), Some(20));
    }

    #[test]
    fn losing_leadership_forgets_every_deadline() {
        let lessor = Lessor::default();
        lessor.check(Leadership::Ready(1), || vec![(5, 30)]);
        assert_eq!(lessor.primary_term(), Some(1));
        lessor.check(Leadership::None, Vec::new);
        assert_eq!(lessor.primary_term(), None);
        assert_eq!(lessor.remaining_seconds(5), None);
        // A later term rebuilds from the store again.
        lessor.check(Leadership::Ready(2), || vec![(5, 30)]);
        assert_eq!(lessor.remaining_seconds(5), Some(30));
    }
}
