//! [`LeaseClock`]: the leader's lease clock, without a clock of its own.
//! Every method takes the time, as a [`Duration`] since any fixed origin
//! the caller keeps, so the server drives it from `Instant` and the
//! simulator from its simulated clock, and both run the same decisions:
//! when each lease expires, what a keep-alive renews, what to revoke.
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
//! The clock is *primary* only after its member has become leader and
//! applied an entry of its own term: before that its store may miss recent
//! grants, and answering "lease not found" to a keep-alive would wrongly
//! tell a client its lease is gone. Until then keep-alives get
//! "not primary" and clients retry.

use crate::machine::LeaseApplied;
use bellwether_kv::{IdMap, KvStore};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How often the leader looks for expired leases, and the resolution of
/// its deadlines. A lease is revoked at most twice this after its deadline
/// (its deadline rounded up to a tick, then the check that finds it) plus
/// one commit, never before it. A ZooKeeper session is such a lease, and
/// its contenders wait for it: at 100 ms the next holder of an election
/// took over 84 to 189 ms after the session timeout (`bench zookeeper`,
/// session 37). A check that finds nothing due reads one bound, so a
/// hundred a second cost nothing measurable.
pub const CHECK_INTERVAL: Duration = Duration::from_millis(10);
/// Most revokes proposed per check, so a mass expiry cannot flood the log
/// queue; the rest wait for the next check.
pub const REVOKES_PER_CHECK_MAX: usize = 256;
/// Most leases one check looks at while a pass over the deadlines is under
/// way (see [`LeaseClock`]): a few tenths of a millisecond of the loop's
/// time, so a pass over a million leases spans about fifteen checks.
pub const SCAN_LEASES_PER_CHECK: usize = 65_536;
/// A revoke proposed but not yet applied is not proposed again before this
/// much time has passed.
pub const REVOKE_RETRY: Duration = Duration::from_secs(1);
/// A deadline too far away for the clock (billions of years of
/// [`CHECK_INTERVAL`]s): it never fires, so such a lease lives until it is
/// revoked, which is longer than its TTL, never shorter.
const NEVER: Tick = Tick::MAX;

/// A point on the lessor's clock: whole [`CHECK_INTERVAL`]s since its
/// state began. Eight bytes where an `Instant` takes sixteen: the primary
/// keeps one deadline for every lease, and there can be a million. (Beside
/// its 8-byte id a smaller tick would be padded to the same 16 bytes.)
type Tick = u64;

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
pub struct LeaseClock {
    /// The term this member leads and has rebuilt the deadlines for; `None`
    /// when not primary.
    primary_term: Option<u64>,
    /// When tick 0 began, on the caller's clock.
    epoch: Duration,
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
    /// Leases released on disconnect (see [`LeaseClock::shorten`]) and the
    /// exact instant each expires; a renewal takes a lease out. Timers
    /// revoke them at that instant, without waiting for a tick.
    released: BTreeMap<i64, Duration>,
    /// Revokes proposed and not yet applied, and when they were proposed.
    revoking: BTreeMap<i64, Duration>,
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

impl Default for LeaseClock {
    fn default() -> Self {
        LeaseClock {
            primary_term: None,
            epoch: Duration::ZERO,
            deadlines: IdMap::new(),
            earliest: NEVER,
            pass: None,
            expired: BTreeSet::new(),
            revoking: BTreeMap::new(),
            released: BTreeMap::new(),
        }
    }
}

impl LeaseClock {
    /// The tick under way at `at`, short of [`NEVER`].
    fn tick_at(&self, at: Duration) -> Tick {
        let ticks = at.saturating_sub(self.epoch).as_nanos() / CHECK_INTERVAL.as_nanos();
        ticks.min(u128::from(NEVER - 1)) as Tick
    }

    /// The first tick that begins at or after `now + ttl_seconds`: a
    /// deadline rounded up, so that rounding never shortens a lease.
    fn deadline_after(&self, now: Duration, ttl_seconds: i64) -> Tick {
        let end = now.saturating_sub(self.epoch) + seconds(ttl_seconds);
        let ticks = end.as_nanos().div_ceil(CHECK_INTERVAL.as_nanos());
        ticks.min(u128::from(NEVER)) as Tick
    }

    /// When tick `tick` begins.
    fn instant_of(&self, tick: Tick) -> Duration {
        let nanos = u128::from(tick) * CHECK_INTERVAL.as_nanos();
        let since_epoch = Duration::new(
            u64::try_from(nanos / 1_000_000_000).expect("a tick's seconds fit"),
            (nanos % 1_000_000_000) as u32,
        );
        self.epoch.saturating_add(since_epoch)
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
    fn take_expired(&mut self, now: Tick, at: Duration, most: usize) -> Vec<i64> {
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

/// What the member's status says, for a [`LeaseClock::check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leadership {
    /// The member does not lead.
    None,
    /// The member leads this term but has not yet committed an entry of
    /// it, or not yet applied everything committed.
    CatchingUp(u64),
    /// The member leads this term, has committed an entry of it and has
    /// applied everything committed: its store holds every lease.
    Ready(u64),
}

impl Leadership {
    /// From a member's status: the term it leads (if it does), and whether
    /// it has committed an entry of that term and applied all it committed.
    pub fn of(leading_term: Option<u64>, caught_up: bool) -> Leadership {
        match leading_term {
            None => Leadership::None,
            Some(term) if caught_up => Leadership::Ready(term),
            Some(term) => Leadership::CatchingUp(term),
        }
    }
}

/// What one [`LeaseClock::check`] decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Checked {
    /// Leases to revoke now.
    pub due: Vec<i64>,
    /// The clock became primary, with this many leases from the store.
    pub took_over: Option<usize>,
    /// The deadlines were found inconsistent (a bug) and dropped; the next
    /// check rebuilds them from the store.
    pub rebuilt: bool,
}

impl LeaseClock {
    /// What the state machine applied at `now` of the leases: the one
    /// entry point for the server's lessor and the simulator's alike.
    pub fn applied(&mut self, now: Duration, applied: LeaseApplied) {
        match applied {
            LeaseApplied::Granted { id, ttl_seconds } => self.applied_grant(now, id, ttl_seconds),
            // Told even when the lease was gone already: no deadline may
            // stay behind for it.
            LeaseApplied::Revoked { id, .. } => self.applied_revoke(id),
            LeaseApplied::Restored => self.restored(),
        }
    }

    /// A grant was applied at `now`: if primary the lease starts its
    /// countdown now.
    pub fn applied_grant(&mut self, now: Duration, id: i64, ttl_seconds: i64) {
        if self.primary_term.is_some() && !self.deadlines.contains_key(id) {
            let deadline = self.deadline_after(now, ttl_seconds);
            self.set_deadline(id, deadline);
        }
    }

    /// A revoke (by a client or by expiry) was applied.
    pub fn applied_revoke(&mut self, id: i64) {
        self.forget(id);
    }

    /// The store was replaced by a snapshot: forget everything; the next
    /// check rebuilds from the store if this member is (still) primary.
    pub fn restored(&mut self) {
        *self = LeaseClock::default();
    }

    /// A keep-alive at `now`, on a member that leads `term`, for lease
    /// `id`, whose granted TTL is `ttl_seconds` if the store still holds
    /// it. Only a clock primary for that very term renews: one still
    /// holding an earlier term's deadlines (the member lost and regained
    /// leadership between two checks) would judge by deadlines another
    /// leader has moved since.
    pub fn renew(
        &mut self,
        now: Duration,
        term: u64,
        id: i64,
        ttl_seconds: Option<i64>,
    ) -> Renewal {
        if self.primary_term != Some(term) {
            return Renewal::NotPrimary;
        }
        let Some(ttl) = ttl_seconds else {
            return Renewal::NotFound;
        };
        // A primary clock knows every lease the store holds (rebuilt on
        // taking over, told of every grant since): one it does not know was
        // revoked after the caller looked it up. Past its deadline a lease
        // is as good as revoked: renewing it would resurrect a lease whose
        // keys are being deleted.
        let today = self.tick_at(now);
        let live = self.deadlines.get(id).is_some_and(|d| *d > today);
        if !live || self.revoking.contains_key(&id) {
            return Renewal::NotFound;
        }
        let deadline = self.deadline_after(now, ttl);
        self.set_deadline(id, deadline);
        self.released.remove(&id);
        Renewal::Renewed(ttl)
    }

    /// Moves lease `id`'s deadline to `within` from `now` if that is
    /// sooner: the keep-alive stream of a session that asked to be released
    /// on disconnect has ended. Returns when it now expires, for a timer to
    /// call [`LeaseClock::expire_released`] at; `None` where not primary,
    /// for a lease that is unknown, expired or being revoked, or whose
    /// deadline is sooner already.
    pub fn shorten(&mut self, now: Duration, id: i64, within: Duration) -> Option<Duration> {
        if self.primary_term.is_none() || self.revoking.contains_key(&id) {
            return None;
        }
        let today = self.tick_at(now);
        let current = self.deadlines.get(id).copied().filter(|d| *d > today)?;
        let at = now + within;
        if at >= self.instant_of(current) {
            return None;
        }
        // The tick deadline, rounded up like every deadline, is the
        // fallback should the timer not run; the timer revokes at `at`.
        let end = now.saturating_sub(self.epoch) + within;
        let ticks = end.as_nanos().div_ceil(CHECK_INTERVAL.as_nanos());
        let tick = (ticks.min(u128::from(NEVER)) as Tick).max(today + 1);
        self.set_deadline(id, tick.min(current));
        self.released.insert(id, at);
        assert!(
            self.deadlines.get(id).is_some_and(|d| *d <= current),
            "a shortened deadline moved later"
        );
        Some(at)
    }

    /// Marks lease `id` revoking if it was released on disconnect to expire
    /// at `at`, that time has come by `now`, and no keep-alive renewed it
    /// since. Returns whether the caller must now propose its revoke.
    pub fn expire_released(&mut self, now: Duration, id: i64, at: Duration) -> bool {
        let due = self.primary_term.is_some()
            && self.released.get(&id) == Some(&at)
            && now >= at
            && self.deadlines.contains_key(id)
            && !self.revoking.contains_key(&id);
        if due {
            self.released.remove(&id);
            self.revoking.insert(id, now);
        }
        due
    }

    /// Seconds lease `id` has left at `now`, if primary and known.
    pub fn remaining_seconds(&self, now: Duration, id: i64) -> Option<i64> {
        self.primary_term?;
        let deadline = *self.deadlines.get(id)?;
        let left = self.instant_of(deadline).saturating_sub(now);
        Some(left.as_secs_f64().round() as i64)
    }

    /// The term this clock is primary for, if any.
    pub fn primary_term(&self) -> Option<u64> {
        self.primary_term
    }

    /// One check at `now`: follow `leadership`, rebuild from the store
    /// (`leases`: id and granted TTL of each) on taking over, each lease
    /// living `extension` longer than its TTL from then, and return the
    /// leases to revoke now: expired ones, and revokes proposed at least
    /// [`REVOKE_RETRY`] ago that have not been applied.
    ///
    /// A leader that is only catching up (its latest entries committed
    /// but not yet applied) keeps its deadlines and decides nothing this
    /// time. Forgetting them would forget the revokes in flight too: the
    /// rebuild would give those leases a fresh TTL, a keep-alive would
    /// renew one, and then its revoke would apply.
    pub fn check(
        &mut self,
        now: Duration,
        leadership: Leadership,
        extension: Duration,
        leases: impl FnOnce() -> Vec<(i64, i64)>,
    ) -> Checked {
        let term = match leadership {
            Leadership::None => {
                *self = LeaseClock::default();
                return Checked::default();
            }
            Leadership::CatchingUp(term) => {
                if self.primary_term.is_some_and(|primary| primary != term) {
                    *self = LeaseClock::default();
                }
                return Checked::default();
            }
            Leadership::Ready(term) => term,
        };
        if self.primary_term != Some(term) {
            // Taking over: every lease gets its full TTL from now.
            let live = leases();
            *self = LeaseClock {
                primary_term: Some(term),
                epoch: now,
                ..LeaseClock::default()
            };
            for (id, ttl) in &live {
                let deadline = self.deadline_after(now + extension, *ttl);
                self.set_deadline(*id, deadline);
            }
            return Checked {
                took_over: Some(live.len()),
                ..Checked::default()
            };
        }
        let mut due: Vec<i64> = self
            .revoking
            .iter()
            .filter(|(_, at)| now.saturating_sub(**at) >= REVOKE_RETRY)
            .map(|(id, _)| *id)
            .take(REVOKES_PER_CHECK_MAX)
            .collect();
        let today = self.tick_at(now);
        for id in &due {
            self.revoking.insert(*id, now);
        }
        let expired = self.take_expired(today, now, REVOKES_PER_CHECK_MAX - due.len());
        due.extend(expired);
        if !self.is_consistent() {
            // A bug, not an input: but a panic here would stop lease expiry
            // for good. Start over from the store at the next check instead.
            debug_assert!(false, "every lease is known exactly once");
            *self = LeaseClock::default();
            return Checked {
                due,
                took_over: None,
                rebuilt: true,
            };
        }
        Checked {
            due,
            ..Checked::default()
        }
    }
}

fn seconds(ttl: i64) -> Duration {
    Duration::from_secs(ttl.max(0) as u64)
}

/// Every lease `store` holds with its granted TTL: what a check rebuilds
/// the deadlines from when its clock takes over.
pub fn store_leases(store: &KvStore) -> Vec<(i64, i64)> {
    store
        .leases()
        .into_iter()
        .filter_map(|id| store.lease(id).map(|lease| (id, lease.ttl_seconds)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::Leadership::{CatchingUp, Ready};
    use super::*;
    use bellwether_kv::LEASE_TTL_SECONDS_MAX;

    /// `secs` seconds on the caller's clock.
    fn at(secs: f64) -> Duration {
        Duration::from_secs_f64(secs)
    }

    #[test]
    fn a_deposed_leaders_clock_forgets_and_a_new_term_restarts_every_lease() {
        let mut clock = LeaseClock::default();
        let no_extension = Duration::ZERO;
        let took = clock.check(at(10.0), Ready(3), no_extension, || vec![(1, 5)]);
        assert_eq!(took.took_over, Some(1));
        assert_eq!(clock.renew(at(12.0), 3, 1, Some(5)), Renewal::Renewed(5));
        assert!(clock
            .check(at(16.9), Ready(3), no_extension, Vec::new)
            .due
            .is_empty());
        assert_eq!(
            clock.check(at(17.1), Ready(3), no_extension, Vec::new).due,
            vec![1]
        );
        // Deposed: nothing is decided, and a keep-alive is not served.
        assert!(clock
            .check(at(17.2), Leadership::None, no_extension, Vec::new)
            .due
            .is_empty());
        assert_eq!(clock.renew(at(17.3), 3, 1, Some(5)), Renewal::NotPrimary);
        // Leading again, later: the lease has its full TTL from the takeover.
        clock.check(at(20.0), Ready(5), at(0.3), || vec![(1, 5)]);
        assert_eq!(clock.remaining_seconds(at(20.0), 1), Some(5));
        assert!(clock
            .check(at(25.2), Ready(5), at(0.3), Vec::new)
            .due
            .is_empty());
        assert_eq!(
            clock.check(at(25.4), Ready(5), at(0.3), Vec::new).due,
            vec![1]
        );
    }

    #[test]
    fn catching_up_keeps_the_revokes_in_flight_and_a_new_term_renews_nothing_old() {
        assert_eq!(Leadership::of(None, true), Leadership::None);
        assert_eq!(Leadership::of(Some(2), false), CatchingUp(2));
        assert_eq!(Leadership::of(Some(2), true), Ready(2));
        let mut clock = LeaseClock::default();
        let none = Duration::ZERO;
        clock.check(at(0.0), Ready(2), none, || vec![(1, 2), (2, 60)]);
        assert_eq!(clock.check(at(2.1), Ready(2), none, Vec::new).due, vec![1]);
        // Committed but not yet applied: nothing decided, nothing forgotten.
        assert_eq!(
            clock.check(at(2.2), CatchingUp(2), none, Vec::new),
            Checked::default()
        );
        assert_eq!(
            clock.renew(at(2.25), 2, 1, Some(2)),
            Renewal::NotFound,
            "its revoke is in flight: not renewed"
        );
        assert_eq!(clock.renew(at(2.25), 2, 2, Some(60)), Renewal::Renewed(60));
        // The revoke is proposed again after REVOKE_RETRY, not rebuilt away.
        assert_eq!(clock.check(at(3.2), Ready(2), none, Vec::new).due, vec![1]);
        // Leading a later term without a check in between: the earlier
        // term's deadlines answer nothing until the takeover rebuilds them.
        assert_eq!(clock.renew(at(3.3), 4, 2, Some(60)), Renewal::NotPrimary);
        assert_eq!(
            clock.check(at(3.4), CatchingUp(4), none, Vec::new),
            Checked::default()
        );
        assert!(
            clock.primary_term().is_none(),
            "another term: the old deadlines are dropped"
        );
        let took = clock.check(at(3.5), Ready(4), none, || vec![(2, 60)]);
        assert_eq!(took.took_over, Some(1));
        assert_eq!(clock.renew(at(3.6), 4, 2, Some(60)), Renewal::Renewed(60));
    }

    #[test]
    fn a_renewed_lease_is_not_expired_at_its_old_deadline() {
        let mut state = LeaseClock::default();
        state.set_deadline(1, 5);
        state.set_deadline(1, 9); // a keep-alive: the deadline moves later
        assert!(state.take_expired(5, Duration::ZERO, 10).is_empty());
        assert_eq!(state.earliest, 9, "the scan found the next deadline");
        assert!(state.take_expired(8, Duration::ZERO, 10).is_empty());
        assert_eq!(state.take_expired(9, Duration::ZERO, 10), vec![1]);
        assert!(state.is_consistent());
    }

    #[test]
    fn a_deadline_moved_earlier_fires_once_at_the_earlier_tick() {
        let mut state = LeaseClock::default();
        state.set_deadline(1, 9);
        state.set_deadline(1, 4);
        assert_eq!(state.take_expired(4, Duration::ZERO, 10), vec![1]);
        assert!(
            state.take_expired(9, Duration::ZERO, 10).is_empty(),
            "being revoked"
        );
    }

    #[test]
    fn nothing_is_scanned_before_the_earliest_deadline() {
        let mut state = LeaseClock::default();
        state.set_deadline(1, 20);
        state.set_deadline(2, 10);
        assert_eq!(state.earliest, 10);
        assert!(state.take_expired(9, Duration::ZERO, 10).is_empty());
        assert_eq!(state.earliest, 10, "no scan: the bound stands");
        assert_eq!(state.take_expired(10, Duration::ZERO, 10), vec![2]);
        assert_eq!(state.earliest, 20);
        assert!(state.is_consistent());
    }

    #[test]
    fn a_pass_over_many_leases_spans_checks_and_misses_none() {
        let mut state = LeaseClock::default();
        let leases = 2 * SCAN_LEASES_PER_CHECK as i64 + 10;
        for id in 1..=leases {
            state.set_deadline(id, if id % 2 == 0 { 5 } else { 50 });
        }
        let mut revoked = Vec::new();
        for _ in 0..3 {
            revoked.extend(state.take_expired(5, Duration::ZERO, usize::MAX));
            assert!(state.is_consistent());
        }
        assert!(state.pass.is_none(), "three checks finish the pass");
        assert_eq!(state.earliest, 50);
        assert_eq!(revoked.len() as i64, leases / 2);
        assert!(revoked.iter().all(|id| id % 2 == 0));
        // A lease granted mid-pass, below where the pass had got to, is
        // still covered by the bound.
        state.take_expired(49, Duration::ZERO, usize::MAX);
        assert!(state.pass.is_none(), "no pass before the bound");
        state.set_deadline(leases + 1, 60);
        assert!(state.take_expired(50, Duration::ZERO, 0).is_empty());
        assert!(state.pass.is_some(), "a pass begun, not finished");
        state.set_deadline(-5, 51); // behind the pass's cursor
        for _ in 0..3 {
            state.take_expired(50, Duration::ZERO, usize::MAX);
        }
        assert!(state.pass.is_none());
        assert_eq!(state.earliest, 51, "the mid-pass grant lowered the bound");
        assert!(state.is_consistent());
    }

    #[test]
    fn forgotten_leases_are_not_revoked() {
        let mut state = LeaseClock::default();
        for id in 1..=1_000 {
            state.set_deadline(id, 50);
        }
        for id in 101..=1_000 {
            state.forget(id);
        }
        assert!(state.is_consistent());
        let mut expired = state.take_expired(50, Duration::ZERO, 1_000);
        expired.sort_unstable();
        assert_eq!(expired, (1..=100).collect::<Vec<_>>());
    }

    #[test]
    fn a_lease_forgotten_while_waiting_its_turn_is_skipped() {
        let mut state = LeaseClock::default();
        for id in 1..=5 {
            state.set_deadline(id, 3);
        }
        assert_eq!(state.take_expired(3, Duration::ZERO, 2), vec![1, 2]);
        state.forget(3); // revoked by its client meanwhile
        assert_eq!(state.take_expired(3, Duration::ZERO, 10), vec![4, 5]);
    }

    #[test]
    fn a_lease_granted_again_after_its_revoke_expires_once() {
        let mut state = LeaseClock::default();
        state.set_deadline(7, 3);
        state.forget(7);
        state.set_deadline(7, 3);
        assert_eq!(state.take_expired(3, Duration::ZERO, 10), vec![7]);
        assert!(state.take_expired(3, Duration::ZERO, 10).is_empty());
    }

    #[test]
    fn deadlines_round_up_and_one_past_the_clock_never_fires() {
        let state = LeaseClock::default();
        let now = state.epoch + Duration::from_millis(1_234);
        for ttl in [0, 1, 2, 59, 3_600] {
            let deadline = state.deadline_after(now, ttl);
            assert!(
                state.instant_of(deadline) >= now + seconds(ttl),
                "ttl {ttl}"
            );
            assert!(state.instant_of(deadline) < now + seconds(ttl) + CHECK_INTERVAL);
        }
        let longest = state.deadline_after(now, LEASE_TTL_SECONDS_MAX);
        assert!(longest < NEVER, "the longest TTL etcd grants fires");
        assert!(state.instant_of(longest) >= now + seconds(LEASE_TTL_SECONDS_MAX));
        let far = state.epoch + Duration::from_secs(u64::MAX / 2);
        assert_eq!(
            state.tick_at(far),
            NEVER - 1,
            "the clock stops short of NEVER"
        );
        let mut state = state;
        state.set_deadline(1, NEVER);
        assert!(state
            .take_expired(state.tick_at(far), Duration::ZERO, 10)
            .is_empty());
    }
}
