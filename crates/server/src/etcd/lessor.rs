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
use bellwether_kv::IdMap;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the leader looks for expired leases, and the resolution of
/// its deadlines. A lease is revoked at most this much after its deadline
/// (plus one commit), never before it.
const CHECK_INTERVAL: Duration = Duration::from_millis(100);
/// Most revokes proposed per check, so a mass expiry cannot flood the log
/// queue; the rest wait for the next check.
const REVOKES_PER_CHECK_MAX: usize = 256;
/// Most leases one check looks at while a pass over the deadlines is under
/// way (see [`LessorState`]): a few tenths of a millisecond of the loop's
/// time, so a pass over a million leases spans about fifteen checks.
const SCAN_LEASES_PER_CHECK: usize = 65_536;
/// A revoke proposed but not yet applied is not proposed again before this
/// much time has passed.
const REVOKE_RETRY: Duration = Duration::from_secs(1);
/// A deadline too far away for the clock (about 13.6 years of
/// [`CHECK_INTERVAL`]s): it never fires, so such a lease lives until it is
/// revoked, which is longer than its TTL, never shorter.
const NEVER: Tick = Tick::MAX;

/// A point on the lessor's clock: whole [`CHECK_INTERVAL`]s since its
/// state began. Four bytes where an `Instant` takes sixteen: the primary
/// keeps one deadline for every lease, and there can be a million.
type Tick = u32;

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

/// The primary's deadlines.
///
/// One deadline per lease, in an [`IdMap`] (16 bytes a lease). A
/// keep-alive only moves a deadline later, so `earliest`, a lower bound of
/// every deadline not yet found expired, stays true without being touched;
/// checks do nothing until it comes. Then a pass over the deadlines, at
/// most [`SCAN_LEASES_PER_CHECK`] a check, collects the leases that have
/// expired (proposed for revoking at most [`REVOKES_PER_CHECK_MAX`] a
/// check) and finds the next bound.
///
/// Why passes instead of a timing wheel: the wheel held every id once more
/// (8 bytes and its vectors' spare room, about 10 bytes a lease), a third
/// of what the primary holds per lease. A pass reads 16 bytes a lease in id
/// order, and runs only when a lease may have expired. The price: with
/// more than [`SCAN_LEASES_PER_CHECK`] leases a pass spans several checks,
/// so a lease can be revoked up to one check per that many leases late
/// (about 1.5 s with a million), never early; etcd 3.4 itself looks for
/// expired leases every 500 ms.
#[derive(Debug)]
struct LessorState {
    /// The term this member leads and has rebuilt the deadlines for; `None`
    /// when not primary.
    primary_term: Option<u64>,
    /// When tick 0 began.
    epoch: Instant,
    /// The deadline of each lease known to exist (it expires once that tick
    /// has begun), revoking ones included.
    deadlines: IdMap<Tick>,
    /// No lease outside `expired` and `revoking` has a deadline before
    /// this tick.
    earliest: Tick,
    /// The pass under way, if any.
    pass: Option<Pass>,
    /// Leases found expired, not yet proposed for revoking.
    expired: BTreeSet<i64>,
    /// Leases released on disconnect (see [`Lessor::shorten`]) and the
    /// exact instant each expires; a renewal takes a lease out. Timers
    /// revoke them at that instant, without waiting for a tick.
    released: BTreeMap<i64, Instant>,
    /// Revokes proposed and not yet applied, and when they were proposed.
    revoking: BTreeMap<i64, Instant>,
}

/// A pass over the deadlines, in id order.
#[derive(Clone, Copy, Debug)]
struct Pass {
    /// The next id to look at.
    from: i64,
    /// The earliest deadline not yet due, among the leases looked at and
    /// those given a deadline since the pass began.
    earliest: Tick,
}

impl Default for LessorState {
    fn default() -> Self {
        LessorState {
            primary_term: None,
            epoch: Instant::now(),
            deadlines: IdMap::new(),
            earliest: NEVER,
            pass: None,
            expired: BTreeSet::new(),
            revoking: BTreeMap::new(),
            released: BTreeMap::new(),
        }
    }
}

impl LessorState {
    /// The tick under way at `at`, short of [`NEVER`].
    fn tick_at(&self, at: Instant) -> Tick {
        let ticks = at.saturating_duration_since(self.epoch).as_nanos() / CHECK_INTERVAL.as_nanos();
        ticks.min(u128::from(NEVER - 1)) as Tick
    }

    /// The first tick that begins at or after `now + ttl_seconds`: a
    /// deadline rounded up, so that rounding never shortens a lease.
    fn deadline_after(&self, now: Instant, ttl_seconds: i64) -> Tick {
        let end = now.saturating_duration_since(self.epoch) + seconds(ttl_seconds);
        let ticks = end.as_nanos().div_ceil(CHECK_INTERVAL.as_nanos());
        ticks.min(u128::from(NEVER)) as Tick
    }

    /// When tick `tick` begins.
    fn instant_of(&self, tick: Tick) -> Instant {
        self.epoch + CHECK_INTERVAL * tick
    }

    /// Sets the deadline of a lease that is not being revoked.
    fn set_deadline(&mut self, id: i64, deadline: Tick) {
        assert!(
            !self.revoking.contains_key(&id),
            "a lease being revoked gets no new deadline"
        );
        self.deadlines.insert(id, deadline);
        self.earliest = self.earliest.min(deadline);
        if let Some(pass) = &mut self.pass {
            pass.earliest = pass.earliest.min(deadline);
        }
    }

    /// Forgets a lease the store no longer holds. An id left in `expired`
    /// is skipped when its turn comes.
    fn forget(&mut self, id: i64) {
        self.deadlines.remove(id);
        self.revoking.remove(&id);
        self.released.remove(&id);
    }

    /// Returns up to `most` leases whose deadline has passed by tick `now`,
    /// marked revoking since `at`; first goes on with the pass under way,
    /// or starts one when the earliest deadline may have come.
    fn take_expired(&mut self, now: Tick, at: Instant, most: usize) -> Vec<i64> {
        if self.pass.is_none() && self.earliest <= now {
            self.pass = Some(Pass {
                from: i64::MIN,
                earliest: NEVER,
            });
        }
        if self.pass.is_some() {
            self.scan(now, SCAN_LEASES_PER_CHECK);
        }
        let mut taken = Vec::new();
        while taken.len() < most {
            let Some(id) = self.expired.pop_first() else {
                break;
            };
            let still_due = self.deadlines.get(id).is_some_and(|d| *d <= now);
            if still_due && !self.revoking.contains_key(&id) {
                self.revoking.insert(id, at);
                taken.push(id);
            }
        }
        taken
    }

    /// Looks at up to `most` leases of the pass under way: collects those
    /// expired by tick `now` and not being revoked, and at the end of the
    /// pass sets `earliest` to the first deadline after them.
    fn scan(&mut self, now: Tick, most: usize) {
        let Some(mut pass) = self.pass else {
            return;
        };
        let mut next = None;
        for (looked_at, (id, deadline)) in self.deadlines.iter_from(pass.from).enumerate() {
            if looked_at == most {
                next = Some(id);
                break;
            }
            if *deadline > now {
                pass.earliest = pass.earliest.min(*deadline);
            } else if !self.revoking.contains_key(&id) {
                self.expired.insert(id);
            }
        }
        match next {
            Some(from) => self.pass = Some(Pass { from, ..pass }),
            None => {
                self.earliest = pass.earliest;
                self.pass = None;
            }
        }
    }

    /// Every revoking lease is known, and no known lease waits past the
    /// bound (checked in full only in debug builds: it reads every lease).
    fn is_consistent(&self) -> bool {
        if cfg!(debug_assertions) && self.pass.is_none() {
            assert!(self
                .deadlines
                .iter()
                .all(|(id, deadline)| *deadline >= self.earliest
                    || self.revoking.contains_key(&id)
                    || self.expired.contains(&id)));
        }
        self.revoking
            .keys()
            .all(|id| self.deadlines.contains_key(*id))
    }
}

/// The lease clock of one member. Cheap to clone.
///
/// The state machine tells it about every grant and revoke it applies
/// ([`applied_grant`](Lessor::applied_grant),
/// [`applied_revoke`](Lessor::applied_revoke)), whichever member's client
/// asked for them, so its deadlines always cover the store's leases and a
/// check never reads the store.
#[derive(Clone, Debug, Default)]
pub struct Lessor {
    state: Arc<Mutex<LessorState>>,
    /// Milliseconds added to every lease's TTL when this member takes over
    /// (see [`Lessor::set_takeover_extension`]).
    takeover_extension_ms: Arc<std::sync::atomic::AtomicU64>,
}

impl Lessor {
    fn state(&self) -> std::sync::MutexGuard<'_, LessorState> {
        self.state.lock().expect("lessor lock")
    }

    /// Sets how much longer than its TTL every lease lives from a takeover:
    /// a deposed leader that has not yet noticed (cut off, it steps down
    /// only at its check-quorum timeout) may still answer keep-alives for
    /// that long, and a client counts its lease from such an answer. Two
    /// election timeouts cover it.
    pub fn set_takeover_extension(&self, extension: Duration) {
        let ms = u64::try_from(extension.as_millis()).unwrap_or(u64::MAX);
        self.takeover_extension_ms
            .store(ms, std::sync::atomic::Ordering::Relaxed);
    }

    /// A grant was applied: if this member is primary the lease starts its
    /// countdown now.
    pub fn applied_grant(&self, id: i64, ttl_seconds: i64) {
        let mut state = self.state();
        if state.primary_term.is_some() && !state.deadlines.contains_key(id) {
            let deadline = state.deadline_after(Instant::now(), ttl_seconds);
            state.set_deadline(id, deadline);
        }
    }

    /// A revoke (by a client or by expiry) was applied.
    pub fn applied_revoke(&self, id: i64) {
        self.state().forget(id);
    }

    /// The store was replaced by a snapshot: forget everything; the next
    /// check rebuilds from the store if this member is (still) primary.
    pub fn restored(&self) {
        *self.state() = LessorState::default();
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
        // A primary lessor knows every lease the store holds (rebuilt on
        // taking over, told of every grant since): one it does not know was
        // revoked after the caller looked it up. Past its deadline a lease
        // is as good as revoked: renewing it would resurrect a lease whose
        // keys are being deleted.
        let today = state.tick_at(now);
        let live = state.deadlines.get(id).is_some_and(|d| *d > today);
        if !live || state.revoking.contains_key(&id) {
            return Renewal::NotFound;
        }
        let deadline = state.deadline_after(now, ttl);
        state.set_deadline(id, deadline);
        state.released.remove(&id);
        Renewal::Renewed(ttl)
    }

    /// Moves lease `id`'s deadline to `within` from now if that is
    /// sooner: the keep-alive stream of a session that asked to be released
    /// on disconnect has ended. Returns the instant it now expires, for a
    /// timer to call [`Lessor::expire_released`] at; `None` where this
    /// member is not primary, for a lease that is unknown, expired or being
    /// revoked, or whose deadline is sooner already.
    pub fn shorten(&self, id: i64, within: Duration) -> Option<Instant> {
        let mut state = self.state();
        if state.primary_term.is_none() || state.revoking.contains_key(&id) {
            return None;
        }
        let now = Instant::now();
        let today = state.tick_at(now);
        let current = state.deadlines.get(id).copied().filter(|d| *d > today)?;
        let at = now + within;
        if at >= state.instant_of(current) {
            return None;
        }
        // The tick deadline, rounded up like every deadline, is the
        // fallback should the timer not run; the timer revokes at `at`.
        let end = now.saturating_duration_since(state.epoch) + within;
        let ticks = end.as_nanos().div_ceil(CHECK_INTERVAL.as_nanos());
        let tick = (ticks.min(u128::from(NEVER)) as Tick).max(today + 1);
        state.set_deadline(id, tick.min(current));
        state.released.insert(id, at);
        assert!(
            state.deadlines.get(id).is_some_and(|d| *d <= current),
            "a shortened deadline moved later"
        );
        Some(at)
    }

    /// Marks lease `id` revoking if it was released on disconnect to expire
    /// at `at`, that instant has come, and no keep-alive renewed it since.
    /// Returns whether the caller must now propose its revoke.
    pub fn expire_released(&self, id: i64, at: Instant) -> bool {
        let mut state = self.state();
        let now = Instant::now();
        let due = state.primary_term.is_some()
            && state.released.get(&id) == Some(&at)
            && now >= at
            && state.deadlines.contains_key(id)
            && !state.revoking.contains_key(&id);
        if due {
            state.released.remove(&id);
            state.revoking.insert(id, now);
        }
        due
    }

    /// Seconds lease `id` has left, if this member is primary and knows
    /// it.
    pub fn remaining_seconds(&self, id: i64) -> Option<i64> {
        let state = self.state();
        state.primary_term?;
        let deadline = *state.deadlines.get(id)?;
        let left = state
            .instant_of(deadline)
            .saturating_duration_since(Instant::now());
        Some(left.as_secs_f64().round() as i64)
    }

    /// True while this member is the primary lessor.
    pub fn is_primary(&self) -> bool {
        self.state().primary_term.is_some()
    }

    /// One check: follow leadership, rebuild from the store (`leases`: id
    /// and granted TTL of each) on taking over, and return the leases to
    /// revoke now: expired ones, and revokes proposed at least
    /// [`REVOKE_RETRY`] ago that have not been applied.
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
        if state.primary_term != Some(term) {
            // Taking over: every lease gets its full TTL from now.
            let live = leases();
            *state = LessorState {
                primary_term: Some(term),
                epoch: now,
                ..LessorState::default()
            };
            let extension = Duration::from_millis(
                self.takeover_extension_ms
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
            for (id, ttl) in &live {
                let deadline = state.deadline_after(now + extension, *ttl);
                state.set_deadline(*id, deadline);
            }
            tracing::info!(
                term,
                leases = live.len(),
                "lessor: primary; every lease restarts its TTL"
            );
            return Vec::new();
        }
        let mut due: Vec<i64> = state
            .revoking
            .iter()
            .filter(|(_, at)| now.duration_since(**at) >= REVOKE_RETRY)
            .map(|(id, _)| *id)
            .take(REVOKES_PER_CHECK_MAX)
            .collect();
        let today = state.tick_at(now);
        for id in &due {
            state.revoking.insert(*id, now);
        }
        let expired = state.take_expired(today, now, REVOKES_PER_CHECK_MAX - due.len());
        due.extend(expired);
        if !state.is_consistent() {
            // A bug, not an input: but a panic here would stop lease expiry
            // for good (and poison the lock the apply loop takes). Start
            // over from the store at the next check instead.
            debug_assert!(false, "every lease is known exactly once");
            tracing::error!("lessor: deadlines inconsistent; rebuilding from the store");
            *state = LessorState::default();
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
                (status.role == bellwether_core::Role::Leader
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
                propose_revoke(&backend, id);
            }
        }
    }
}

/// Proposes the revoke of an expired lease, in the background. One that is
/// not applied is proposed again by a later check (see [`REVOKE_RETRY`]).
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

fn seconds(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_kv::LEASE_TTL_SECONDS_MAX;

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
        assert_eq!(lessor.check(Some(1), Vec::new), vec![5]);
        assert!(
            lessor.check(Some(1), Vec::new).is_empty(),
            "retried too soon"
        );
        assert_eq!(lessor.renew(5, Some(0)), Renewal::NotFound);
        assert_eq!(lessor.remaining_seconds(5), Some(0));
        // Once the revoke is applied the lease is forgotten.
        lessor.applied_revoke(5);
        assert!(lessor.check(Some(1), Vec::new).is_empty());
        assert_eq!(lessor.remaining_seconds(5), None);
    }

    #[test]
    fn grants_applied_while_primary_start_at_once_and_others_at_takeover() {
        let lessor = Lessor::default();
        lessor.applied_grant(1, 30);
        assert_eq!(lessor.remaining_seconds(1), None, "not primary yet");
        // The store listed lease 1 when this member took over.
        lessor.check(Some(4), || vec![(1, 30)]);
        assert_eq!(lessor.remaining_seconds(1), Some(30));
        lessor.applied_grant(2, 10);
        assert_eq!(lessor.remaining_seconds(2), Some(10));
        lessor.applied_grant(2, 99);
        assert_eq!(
            lessor.remaining_seconds(2),
            Some(10),
            "a grant never resets"
        );
        // A lease the primary lessor does not know was revoked after the
        // caller looked it up: renewing it must not bring it back.
        assert_eq!(lessor.renew(9, Some(10)), Renewal::NotFound);
        assert_eq!(lessor.remaining_seconds(9), None);
        lessor.applied_revoke(9); // a failed revoke of an unknown lease
        assert_eq!(lessor.remaining_seconds(2), Some(10));
        // The store is never rescanned while primary.
        let rescanned = std::cell::Cell::new(false);
        lessor.check(Some(4), || {
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
        lessor.check(Some(1), || leases.clone());
        let first = lessor.check(Some(1), Vec::new);
        let second = lessor.check(Some(1), Vec::new);
        assert_eq!(first.len(), REVOKES_PER_CHECK_MAX);
        assert_eq!(second.len(), 44);
        let mut all: Vec<i64> = first.into_iter().chain(second).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=expired as i64).collect::<Vec<_>>());
        assert!(lessor.check(Some(1), Vec::new).is_empty());
        assert_eq!(lessor.renew(100_000, Some(60)), Renewal::Renewed(60));
    }

    #[test]
    fn a_renewed_lease_is_not_expired_at_its_old_deadline() {
        let mut state = LessorState::default();
        state.set_deadline(1, 5);
        state.set_deadline(1, 9); // a keep-alive: the deadline moves later
        assert!(state.take_expired(5, Instant::now(), 10).is_empty());
        assert_eq!(state.earliest, 9, "the scan found the next deadline");
        assert!(state.take_expired(8, Instant::now(), 10).is_empty());
        assert_eq!(state.take_expired(9, Instant::now(), 10), vec![1]);
        assert!(state.is_consistent());
    }

    #[test]
    fn a_takeover_extends_every_lease_by_the_set_extension() {
        let lessor = Lessor::default();
        lessor.set_takeover_extension(Duration::from_secs(2));
        lessor.check(Some(1), || vec![(1, 10)]);
        assert_eq!(lessor.remaining_seconds(1), Some(12));
    }

    #[test]
    fn shortening_moves_a_live_deadline_earlier_only() {
        let lessor = Lessor::default();
        let grace = Duration::from_millis(300);
        assert_eq!(lessor.shorten(1, grace), None, "not primary");
        lessor.check(Some(1), || vec![(1, 60), (2, 60), (3, 60)]);
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
        assert_eq!(lessor.renew(3, Some(60)), Renewal::Renewed(60));
        std::thread::sleep(Duration::from_millis(320));
        assert!(lessor.expire_released(1, at), "due at its instant");
        assert!(!lessor.expire_released(1, at), "only once");
        assert!(!lessor.expire_released(3, renewed_at), "renewed since");
        assert_eq!(
            lessor.renew(1, Some(60)),
            Renewal::NotFound,
            "being revoked"
        );
        assert_eq!(lessor.remaining_seconds(3), Some(60));
    }

    #[test]
    fn a_deadline_moved_earlier_fires_once_at_the_earlier_tick() {
        let mut state = LessorState::default();
        state.set_deadline(1, 9);
        state.set_deadline(1, 4);
        assert_eq!(state.take_expired(4, Instant::now(), 10), vec![1]);
        assert!(
            state.take_expired(9, Instant::now(), 10).is_empty(),
            "being revoked"
        );
    }

    #[test]
    fn nothing_is_scanned_before_the_earliest_deadline() {
        let mut state = LessorState::default();
        state.set_deadline(1, 20);
        state.set_deadline(2, 10);
        assert_eq!(state.earliest, 10);
        assert!(state.take_expired(9, Instant::now(), 10).is_empty());
        assert_eq!(state.earliest, 10, "no scan: the bound stands");
        assert_eq!(state.take_expired(10, Instant::now(), 10), vec![2]);
        assert_eq!(state.earliest, 20);
        assert!(state.is_consistent());
    }

    #[test]
    fn a_pass_over_many_leases_spans_checks_and_misses_none() {
        let mut state = LessorState::default();
        let leases = 2 * SCAN_LEASES_PER_CHECK as i64 + 10;
        for id in 1..=leases {
            state.set_deadline(id, if id % 2 == 0 { 5 } else { 50 });
        }
        let mut revoked = Vec::new();
        for _ in 0..3 {
            revoked.extend(state.take_expired(5, Instant::now(), usize::MAX));
            assert!(state.is_consistent());
        }
        assert!(state.pass.is_none(), "three checks finish the pass");
        assert_eq!(state.earliest, 50);
        assert_eq!(revoked.len() as i64, leases / 2);
        assert!(revoked.iter().all(|id| id % 2 == 0));
        // A lease granted mid-pass, below where the pass had got to, is
        // still covered by the bound.
        state.take_expired(49, Instant::now(), usize::MAX);
        assert!(state.pass.is_none(), "no pass before the bound");
        state.set_deadline(leases + 1, 60);
        assert!(state.take_expired(50, Instant::now(), 0).is_empty());
        assert!(state.pass.is_some(), "a pass begun, not finished");
        state.set_deadline(-5, 51); // behind the pass's cursor
        for _ in 0..3 {
            state.take_expired(50, Instant::now(), usize::MAX);
        }
        assert!(state.pass.is_none());
        assert_eq!(state.earliest, 51, "the mid-pass grant lowered the bound");
        assert!(state.is_consistent());
    }

    #[test]
    fn forgotten_leases_are_not_revoked() {
        let mut state = LessorState::default();
        for id in 1..=1_000 {
            state.set_deadline(id, 50);
        }
        for id in 101..=1_000 {
            state.forget(id);
        }
        assert!(state.is_consistent());
        let mut expired = state.take_expired(50, Instant::now(), 1_000);
        expired.sort_unstable();
        assert_eq!(expired, (1..=100).collect::<Vec<_>>());
    }

    #[test]
    fn a_lease_forgotten_while_waiting_its_turn_is_skipped() {
        let mut state = LessorState::default();
        for id in 1..=5 {
            state.set_deadline(id, 3);
        }
        assert_eq!(state.take_expired(3, Instant::now(), 2), vec![1, 2]);
        state.forget(3); // revoked by its client meanwhile
        assert_eq!(state.take_expired(3, Instant::now(), 10), vec![4, 5]);
    }

    #[test]
    fn a_lease_granted_again_after_its_revoke_expires_once() {
        let mut state = LessorState::default();
        state.set_deadline(7, 3);
        state.forget(7);
        state.set_deadline(7, 3);
        assert_eq!(state.take_expired(3, Instant::now(), 10), vec![7]);
        assert!(state.take_expired(3, Instant::now(), 10).is_empty());
    }

    #[test]
    fn deadlines_round_up_and_one_past_the_clock_never_fires() {
        let state = LessorState::default();
        let now = state.epoch + Duration::from_millis(1_234);
        for ttl in [0, 1, 2, 59, 3_600] {
            let deadline = state.deadline_after(now, ttl);
            assert!(
                state.instant_of(deadline) >= now + seconds(ttl),
                "ttl {ttl}"
            );
            assert!(state.instant_of(deadline) < now + seconds(ttl) + CHECK_INTERVAL);
        }
        assert_eq!(state.deadline_after(now, LEASE_TTL_SECONDS_MAX), NEVER);
        let far = state.epoch + Duration::from_secs(1 << 40);
        assert_eq!(
            state.tick_at(far),
            NEVER - 1,
            "the clock stops short of NEVER"
        );
        let mut state = state;
        state.set_deadline(1, NEVER);
        assert!(state
            .take_expired(state.tick_at(far), Instant::now(), 10)
            .is_empty());
    }

    #[test]
    fn a_restored_store_makes_the_next_check_rebuild() {
        let lessor = Lessor::default();
        lessor.check(Some(2), || vec![(1, 30)]);
        lessor.restored();
        assert!(!lessor.is_primary());
        lessor.check(Some(2), || vec![(7, 20)]);
        assert_eq!(lessor.remaining_seconds(1), None);
        assert_eq!(lessor.remaining_seconds(7), Some(20));
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
