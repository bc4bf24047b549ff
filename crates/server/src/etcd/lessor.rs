//! The leader's lease clock: when each lease expires, and the task that
//! revokes expired leases through the log.
//!
//! The store (replicated) knows which leases exist and their granted TTL;
//! it has no clock. Expiry is the leader's decision alone: it keeps a
//! deadline per lease in memory, renews it on keep-alive, and proposes a
//! revoke when it passes. Every replica then applies the same revoke at the
//! same log position, so keys vanish everywhere in one revision.
//!
//! A new leader cannot know how long ago each lease was last kept alive, so
//! it starts every lease's countdown afresh from its full TTL when it takes
//! over ("extension on leader change", as etcd 3.4 does without
//! checkpoints). A failover can therefore make a lease live longer than its
//! TTL, never shorter: a client that keeps its lease alive never loses it to
//! a failover.
//!
//! The lessor is *primary* only after its member has become leader and
//! applied an entry of its own term: before that its store may miss recent
//! grants, and answering "lease not found" to a keep-alive would wrongly
//! tell a client its lease is gone. Until then keep-alives get
//! "no leader" and clients retry.

use super::backend::EtcdBackend;
use super::command::Command;
use bellwether_api::etcdserverpb as pb;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the leader looks for expired leases. A lease is revoked at
/// most this much after its deadline (plus one commit).
const CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// Most revokes proposed per check, so a mass expiry cannot flood the log
/// queue; the rest wait for the next check.
const REVOKES_PER_CHECK_MAX: usize = 256;
/// A revoke proposed but not yet applied is not proposed again before this
/// much time has passed.
const REVOKE_RETRY: Duration = Duration::from_secs(1);

/// What a keep-alive found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed for this many seconds.
    Renewed(i64),
    /// The lease does not exist or has expired.
    NotFound,
    /// This member is not (yet) the primary lessor: ask the leader.
    NotPrimary,
}

#[derive(Debug, Default)]
struct LessorState {
    /// The term this member leads and has rebuilt the deadlines for; `None`
    /// when not primary.
    primary_term: Option<u64>,
    /// Deadline of each lease known to exist.
    deadlines: BTreeMap<i64, Instant>,
    /// Revokes proposed, and when.
    revoking: BTreeMap<i64, Instant>,
}

/// The lease clock of one member. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Lessor {
    state: Arc<Mutex<LessorState>>,
}

impl Lessor {
    fn state(&self) -> std::sync::MutexGuard<'_, LessorState> {
        self.state.lock().expect("lessor lock")
    }

    /// A lease this member granted as leader starts its countdown.
    pub fn granted(&self, id: i64, ttl_seconds: i64) {
        let mut state = self.state();
        if state.primary_term.is_some() {
            state
                .deadlines
                .insert(id, Instant::now() + seconds(ttl_seconds));
        }
    }

    /// A lease was revoked by a client.
    pub fn revoked(&self, id: i64) {
        let mut state = self.state();
        state.deadlines.remove(&id);
        state.revoking.remove(&id);
    }

    /// A keep-alive for lease `id`, whose granted TTL is `ttl_seconds` if
    /// the store still holds it.
    pub fn renew(&self, id: i64, ttl_seconds: Option<i64>) -> Renewal {
        let mut state = self.state();
        if state.primary_term.is_none() {
            return Renewal::NotPrimary;
        }
        let now = Instant::now();
        let Some(ttl) = ttl_seconds else {
            return Renewal::NotFound;
        };
        // Past its deadline the lease is as good as revoked: renewing it
        // would resurrect a lease whose keys are being deleted.
        if state.deadlines.get(&id).is_some_and(|d| *d <= now) || state.revoking.contains_key(&id) {
            return Renewal::NotFound;
        }
        state.deadlines.insert(id, now + seconds(ttl));
        Renewal::Renewed(ttl)
    }

    /// Seconds lease `id` has left, if this member is primary and knows
    /// it.
    pub fn remaining_seconds(&self, id: i64) -> Option<i64> {
        let state = self.state();
        state.primary_term?;
        let left = state
            .deadlines
            .get(&id)?
            .saturating_duration_since(Instant::now());
        Some(left.as_secs_f64().round() as i64)
    }

    /// True while this member is the primary lessor.
    pub fn is_primary(&self) -> bool {
        self.state().primary_term.is_some()
    }

    /// One check: follow leadership, rebuild on taking over, reconcile with
    /// the store, and return the leases to revoke now.
    fn check(
        &self,
        leading_term: Option<u64>,
        leases: impl FnOnce() -> Vec<(i64, i64)>,
    ) -> Vec<i64> {
        let now = Instant::now();
        let mut state = self.state();
        let Some(term) = leading_term else {
            *state = LessorState::default();
            return Vec::new();
        };
        let live = leases();
        if state.primary_term != Some(term) {
            // Taking over: every lease gets its full TTL from now.
            state.primary_term = Some(term);
            state.revoking.clear();
            state.deadlines = live
                .iter()
                .map(|(id, ttl)| (*id, now + seconds(*ttl)))
                .collect();
            tracing::info!(
                term,
                leases = live.len(),
                "lessor: primary; every lease restarts its TTL"
            );
            return Vec::new();
        }
        // Reconcile: leases granted through another path start now; leases
        // gone from the store are forgotten.
        let ids: BTreeSet<i64> = live.iter().map(|(id, _)| *id).collect();
        state.deadlines.retain(|id, _| ids.contains(id));
        state.revoking.retain(|id, _| ids.contains(id));
        for (id, ttl) in live {
            state.deadlines.entry(id).or_insert(now + seconds(ttl));
        }
        let due: Vec<i64> = state
            .deadlines
            .iter()
            .filter(|(id, deadline)| {
                **deadline <= now
                    && state
                        .revoking
                        .get(id)
                        .is_none_or(|at| now.duration_since(*at) >= REVOKE_RETRY)
            })
            .map(|(id, _)| *id)
            .take(REVOKES_PER_CHECK_MAX)
            .collect();
        for id in &due {
            state.revoking.insert(*id, now);
        }
        due
    }

    /// Runs the expiry loop until the node stops.
    pub async fn run(self, backend: EtcdBackend) {
        let mut ticker = tokio::time::interval(CHECK_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if backend.status.has_changed().is_err() {
                return; // the node is gone
            }
            let leading_term = {
                let status = backend.status.borrow();
                (status.role == "leader"
                    && status.leader == Some(backend.member_id)
                    && status.committed_in_term
                    && status.applied >= status.commit)
                    .then_some(status.term)
            };
            let due = self.check(leading_term, || {
                let store = backend.store();
                store
                    .leases()
                    .into_iter()
                    .filter_map(|id| store.lease(id).map(|l| (id, l.ttl_seconds)))
                    .collect()
            });
            for id in due {
                let backend = backend.clone();
                tokio::spawn(async move {
                    let command = Command::LeaseRevoke(pb::LeaseRevokeRequest { id });
                    match backend.write::<pb::LeaseRevokeResponse>(&command).await {
                        Ok(_) => tracing::debug!(lease = id, "lease expired and revoked"),
                        Err(_) => {
                            tracing::debug!(lease = id, "expiry revoke not applied; will retry")
                        }
                    }
                });
            }
        }
    }
}

fn seconds(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follower_is_not_primary_and_answers_nothing() {
        let lessor = Lessor::default();
        assert!(lessor.check(None, Vec::new).is_empty());
        assert_eq!(lessor.renew(1, Some(10)), Renewal::NotPrimary);
        assert_eq!(lessor.remaining_seconds(1), None);
    }

    #[test]
    fn taking_over_restarts_every_lease_from_its_full_ttl() {
        let lessor = Lessor::default();
        assert!(lessor.check(Some(3), || vec![(1, 10), (2, 60)]).is_empty());
        assert_eq!(lessor.remaining_seconds(1), Some(10));
        assert_eq!(lessor.remaining_seconds(2), Some(60));
        assert_eq!(lessor.renew(1, Some(10)), Renewal::Renewed(10));
        assert_eq!(lessor.renew(7, None), Renewal::NotFound);
    }

    #[test]
    fn an_expired_lease_is_revoked_once_and_cannot_be_renewed() {
        let lessor = Lessor::default();
        lessor.check(Some(1), || vec![(5, 0)]);
        assert_eq!(lessor.check(Some(1), || vec![(5, 0)]), vec![5]);
        assert!(
            lessor.check(Some(1), || vec![(5, 0)]).is_empty(),
            "retried too soon"
        );
        assert_eq!(lessor.renew(5, Some(0)), Renewal::NotFound);
        // Once the revoke is applied the store no longer lists it.
        assert!(lessor.check(Some(1), Vec::new).is_empty());
        assert_eq!(lessor.remaining_seconds(5), None);
    }

    #[test]
    fn losing_leadership_forgets_every_deadline() {
        let lessor = Lessor::default();
        lessor.check(Some(1), || vec![(5, 30)]);
        assert!(lessor.is_primary());
        lessor.check(None, Vec::new);
        assert!(!lessor.is_primary());
        assert_eq!(lessor.remaining_seconds(5), None);
        // A later term rebuilds from the store again.
        lessor.check(Some(2), || vec![(5, 30)]);
        assert_eq!(lessor.remaining_seconds(5), Some(30));
    }
}
