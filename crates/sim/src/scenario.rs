//! The fault profiles: scripts over a [`World`] that inject faults, time
//! elections and failovers, and demand a leader after healing.
//!
//! Every run has the same shape: boot and elect (timed), a fault phase whose
//! content depends on the profile, then healing (links restored, paused nodes
//! resumed, crashed nodes restarted) followed by a liveness phase that must
//! end with every node agreeing on one leader within the stated bound.

use crate::checkers::Violation;
use crate::host::Host;
use crate::network::NetworkFaults;
use crate::partition::Partition;
use crate::report::RunReport;
use crate::spec::{lease_skew_ppm_bound, FaultProfile, ReadMode, RunSpec};
use crate::world::{Application, NoApp, World, WorldConfig};
use bellwether_core::raft::RaftConfig;
use bellwether_core::{Message, Protocol, Rng};

/// Leader crashes per crash-profile run.
pub const CRASH_CYCLES: usize = 3;
/// Partitions per partition-profile run.
pub const PARTITION_CYCLES: usize = 2;
/// Default clock skew under chaos: 5%.
pub const CHAOS_SKEW_PPM: u64 = 50_000;

/// Runs `spec` with protocol `P` configured by `protocol_config`.
pub fn run_with<P: Protocol>(spec: &RunSpec, protocol_config: P::Config) -> RunReport {
    run_with_app::<P, NoApp>(spec, protocol_config, NoApp, |_| {}).0
}

/// The pauses profile's latency jitter: one-way latency up to this.
pub const PAUSES_LATENCY_US_MAX: u64 = 10_000;

/// Runs `spec` with an application on top; `start` is called once the
/// cluster is built. Returns the report and the world (application
/// included) as the run left it.
pub fn run_with_app<P: Protocol, A: Application<P>>(
    spec: &RunSpec,
    protocol_config: P::Config,
    app: A,
    start: impl FnOnce(&mut World<P, A>),
) -> (RunReport, World<P, A>) {
    let skew_default = match spec.faults {
        // Chaos's 5% lets two clocks drift apart by 10.5%, beyond the 10%
        // that leases tolerate by default: lease runs stay within the bound
        // unless a skew is asked for explicitly.
        FaultProfile::Chaos | FaultProfile::Storage if spec.reads == ReadMode::Lease => {
            CHAOS_SKEW_PPM.min(lease_skew_ppm_bound(&RaftConfig::default()))
        }
        FaultProfile::Chaos | FaultProfile::Storage => CHAOS_SKEW_PPM,
        _ => 0,
    };
    let world_config = WorldConfig {
        tick_us: spec.tick_us,
        latency_us_min: spec.latency_us_min,
        latency_us_max: if spec.faults == FaultProfile::Pauses {
            spec.latency_us_max.max(PAUSES_LATENCY_US_MAX)
        } else {
            spec.latency_us_max
        },
        hint: spec.hint,
        skew_ppm_max: spec.skew_ppm_max.unwrap_or(skew_default),
        strict_election_safety: matches!(P::NAME, "raft" | "paxos" | "member"),
        // A member (`crate::member`) takes no input while its disk works,
        // as the server's loop does: a leader whose disk stalls keeps
        // believing it leads, unable to act, until the fsync ends and it
        // steps the newer term. Overlaps are measured, not forbidden;
        // safety is one leader per term and the linearizable history.
        split_brain_forbidden: if P::NAME == "raft" {
            Some("raft-leaders-never-overlap")
        } else if P::NAME == "paxos" {
            Some("paxos-leaders-never-overlap")
        } else if spec.faults == FaultProfile::None {
            Some("single-leader-when-fault-free")
        } else {
            None
        },
        trace: spec.trace,
        fsync_us: spec.fsync_us,
        ..WorldConfig::new(spec.nodes, spec.seed)
    };
    let mut world = World::with_app(world_config, protocol_config, app);
    start(&mut world);
    let mut run = Run {
        world,
        plan: Rng::derive(spec.seed, u64::MAX),
        report: RunReport::new(spec.clone()),
        spec,
    };
    let outcome = run.script();
    run.finish(outcome.err())
}

struct Run<'a, P: Protocol, A: Application<P>> {
    world: World<P, A>,
    /// Randomness of the fault schedule, separate from the network's.
    plan: Rng,
    report: RunReport,
    spec: &'a RunSpec,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl<P: Protocol, A: Application<P>> Run<'_, P, A> {
    fn bound_us(&self) -> u64 {
        self.spec.liveness_bound_ms * 1000
    }

    fn script(&mut self) -> Result<(), Violation> {
        let (leader_at, messages) = self.await_leader("boot")?;
        self.report.election_ms = Some(ms(leader_at));
        self.report.election_messages = Some(messages);
        let elections_before = self.world.stats.leader_elections;
        match self.spec.faults {
            FaultProfile::None => self.world.run_for(self.spec.fault_phase_ms * 1000)?,
            FaultProfile::Crash => self.crash_cycles()?,
            FaultProfile::Partition => self.partition_cycles()?,
            FaultProfile::Chaos | FaultProfile::Storage => self.chaos()?,
            FaultProfile::Pauses => self.follower_pauses()?,
        }
        self.report.fault_phase_elections = self.world.stats.leader_elections - elections_before;
        self.heal_everything();
        let healed_at = self.world.now_us();
        let (agreed_at, _) = self.await_leader("healing")?;
        self.report.recoveries_ms.push(ms(agreed_at - healed_at));
        // A short calm tail: a leader that only flickered into agreement
        // and is immediately unseated still shows up in the counters.
        self.world.run_for(200_000)
    }

    /// Runs until every running node agrees on a leader; failing to within
    /// the bound is a liveness violation. Returns the time and the number of
    /// messages sent while waiting.
    fn await_leader(&mut self, after: &str) -> Result<(u64, u64), Violation> {
        let start_messages = self.world.stats.sent_total();
        let deadline = self.world.now_us() + self.bound_us();
        match self.world.run_until_agreement(deadline)? {
            Some((_, at)) => Ok((at, self.world.stats.sent_total() - start_messages)),
            None => Err(Violation {
                property: "liveness",
                time_us: self.world.now_us(),
                detail: format!(
                    "no leader agreed by all running nodes within {} ms after {after}",
                    self.spec.liveness_bound_ms
                ),
            }),
        }
    }

    fn random_ms(&mut self, low: u64, high: u64) -> u64 {
        self.plan.range(low * 1000, high * 1000)
    }

    fn crash_cycles(&mut self) -> Result<(), Violation> {
        for _ in 0..CRASH_CYCLES {
            let calm = self.random_ms(200, 600);
            self.world.run_for(calm)?;
            self.await_leader("calm")?;
            let leader = self.world.agreed_leader().expect("agreed above");
            let index = Host::<P>::index_of(leader);
            let crashed_at = self.world.now_us();
            let before = self.world.stats.sent_by_kind.clone();
            self.world.crash(index);
            let (agreed_at, messages) = self.await_leader("the leader crashed")?;
            self.report.failovers_ms.push(ms(agreed_at - crashed_at));
            self.report.failover_messages.push(messages);
            for (kind, (after, before)) in P::Message::all_kinds()
                .iter()
                .zip(self.world.stats.sent_by_kind.iter().zip(before))
            {
                *self
                    .report
                    .failover_messages_by_kind
                    .entry(kind.to_string())
                    .or_default() += after - before;
            }
            let down = self.random_ms(300, 1000);
            self.world.run_for(down)?;
            self.world.restart(index);
        }
        Ok(())
    }

    fn partition_cycles(&mut self) -> Result<(), Violation> {
        for _ in 0..PARTITION_CYCLES {
            let calm = self.random_ms(200, 600);
            self.world.run_for(calm)?;
            self.await_leader("calm")?;
            let partition = self.random_partition();
            self.world.partition(&partition);
            let hold = self.random_ms(500, 2000);
            self.world.run_for(hold)?;
            self.world.heal_links();
            let healed_at = self.world.now_us();
            let (agreed_at, _) = self.await_leader("the partition healed")?;
            self.report.recoveries_ms.push(ms(agreed_at - healed_at));
        }
        Ok(())
    }

    /// One of the four shapes, drawn from the plan.
    fn random_partition(&mut self) -> Partition {
        let nodes = self.spec.nodes;
        let leader = self
            .world
            .acting_leaders()
            .first()
            .map(|(id, _)| Host::<P>::index_of(*id));
        let some_node = |plan: &mut Rng| {
            leader
                .filter(|_| plan.chance(0.5))
                .unwrap_or(plan.range(0, nodes as u64) as usize)
        };
        match self.plan.range(0, 4) {
            0 => {
                let size = self.plan.range(1, (nodes as u64 / 2).max(1) + 1) as usize;
                Partition::Symmetric {
                    side: self.random_subset(size, None),
                }
            }
            1 => Partition::OneWay {
                node: some_node(&mut self.plan),
                inbound: self.plan.chance(0.5),
            },
            2 if nodes >= 3 => {
                let bridge = some_node(&mut self.plan);
                let size = self.plan.range(1, (nodes as u64 - 1) / 2 + 1) as usize;
                Partition::Bridge {
                    bridge,
                    side: self.random_subset(size, Some(bridge)),
                }
            }
            _ => Partition::Isolated {
                node: some_node(&mut self.plan),
            },
        }
    }

    fn random_subset(&mut self, size: usize, without: Option<usize>) -> Vec<usize> {
        let mut pool: Vec<usize> = (0..self.spec.nodes)
            .filter(|n| Some(*n) != without)
            .collect();
        let mut chosen = Vec::with_capacity(size);
        while chosen.len() < size && !pool.is_empty() {
            let pick = self.plan.range(0, pool.len() as u64) as usize;
            chosen.push(pool.swap_remove(pick));
        }
        chosen.sort_unstable();
        chosen
    }

    fn chaos(&mut self) -> Result<(), Violation> {
        self.redraw_network_faults();
        let end = self.world.now_us() + self.spec.fault_phase_ms * 1000;
        while self.world.now_us() < end {
            let pause = self.random_ms(10, 300);
            self.world.run_for(pause)?;
            self.chaos_action();
            if self.spec.faults == FaultProfile::Storage && self.plan.chance(0.2) {
                self.disk_failure();
            }
        }
        Ok(())
    }

    /// The pauses profile: a follower that is not already paused stops for
    /// 100 to 300 ms every 0.5 to 1.5 s; the leader is never touched.
    fn follower_pauses(&mut self) -> Result<(), Violation> {
        let end = self.world.now_us() + self.spec.fault_phase_ms * 1000;
        while self.world.now_us() < end {
            let gap = self.random_ms(500, 1_500);
            self.world.run_for(gap)?;
            let leaders = self.acting_leader_indexes();
            let followers: Vec<usize> = (0..self.spec.nodes)
                .filter(|i| !leaders.contains(i) && self.world.hosts[*i].node.is_some())
                .collect();
            if followers.is_empty() {
                continue;
            }
            let victim = self.pick(&followers);
            self.world.pause(victim);
            let pause = self.random_ms(100, 300);
            self.world.run_for(pause)?;
            self.world.resume(victim);
        }
        Ok(())
    }

    fn chaos_action(&mut self) {
        let nodes = self.spec.nodes;
        let up: Vec<usize> = (0..nodes)
            .filter(|i| self.world.hosts[*i].node.is_some())
            .collect();
        let down: Vec<usize> = (0..nodes)
            .filter(|i| self.world.hosts[*i].node.is_none())
            .collect();
        let paused: Vec<usize> = (0..nodes).filter(|i| self.world.hosts[*i].paused).collect();
        if self.spec.fsync_us > 0 && self.plan.chance(0.1) {
            let victim = self.plan.range(0, nodes as u64) as usize;
            let until = self.world.now_us() + self.random_ms(50, 1_000);
            self.world.stall_disk(victim, until);
        }
        match self.plan.range(0, 8) {
            0 if up.len() > 1 => {
                let victim = self.pick(&up);
                self.world.crash(victim);
            }
            1 if !down.is_empty() => {
                let lucky = self.pick(&down);
                if self.spec.faults == FaultProfile::Storage {
                    self.maybe_damage_disk(lucky);
                }
                self.world.restart(lucky);
            }
            2 if !up.is_empty() => {
                let victim = self.pick(&up);
                self.world.pause(victim);
            }
            3 if !paused.is_empty() => {
                let lucky = self.pick(&paused);
                self.world.resume(lucky);
            }
            4 => {
                if self.plan.chance(0.5) {
                    self.world.heal_links();
                }
                let partition = self.random_partition();
                self.world.partition(&partition);
            }
            5 => self.world.heal_links(),
            6 => self.redraw_network_faults(),
            7 => {
                let leaders = self.acting_leader_indexes();
                if !leaders.is_empty() && up.len() > 1 {
                    let victim = self.pick(&leaders);
                    self.world.crash(victim);
                }
            }
            _ => {}
        }
    }

    /// The hosts of every node acting as leader now.
    fn acting_leader_indexes(&self) -> Vec<usize> {
        self.world
            .acting_leaders()
            .iter()
            .map(|(id, _)| Host::<P>::index_of(*id))
            .collect()
    }

    /// A member (the leader half the time) whose disk fails: it crashes
    /// and comes back at once on the damaged disk, while its peers still
    /// count on what it had acknowledged.
    fn disk_failure(&mut self) {
        let up: Vec<usize> = (0..self.spec.nodes)
            .filter(|i| self.world.hosts[*i].node.is_some())
            .collect();
        if up.len() < 2 {
            return;
        }
        let leaders = self.acting_leader_indexes();
        let victim = if !leaders.is_empty() && self.plan.chance(0.5) {
            self.pick(&leaders)
        } else {
            self.pick(&up)
        };
        self.world.crash(victim);
        self.maybe_damage_disk(victim);
        self.world.restart(victim);
    }

    /// Under the storage profile, half the restarts find their disk
    /// damaged, one fault drawn at random. A minority at most is damaged at
    /// a time (until each has repaired), so a majority that holds every
    /// acknowledged write can always elect: with more, the cluster rightly
    /// refuses to elect, which the liveness check would count as a failure.
    fn maybe_damage_disk(&mut self, index: usize) {
        use crate::world::DiskFault;
        if !self.world.has_disk_guard() || !self.plan.chance(0.5) {
            return;
        }
        let tolerated = (self.spec.nodes - 1) / 2;
        let damaged = (0..self.spec.nodes)
            .filter(|j| *j != index && self.world.is_repairing(*j))
            .count();
        if damaged + 1 > tolerated {
            return;
        }
        let fault = DiskFault::ALL[self.plan.range(0, DiskFault::ALL.len() as u64) as usize];
        self.world.damage_disk(index, fault);
    }

    fn pick(&mut self, from: &[usize]) -> usize {
        from[self.plan.range(0, from.len() as u64) as usize]
    }

    fn redraw_network_faults(&mut self) {
        self.world.network.faults = NetworkFaults {
            loss: self.plan.unit() * 0.2,
            duplicate: self.plan.unit() * 0.05,
            delay_spike: self.plan.unit() * 0.1,
        };
    }

    fn heal_everything(&mut self) {
        self.world.heal_links();
        self.world.network.faults = NetworkFaults::NONE;
        for index in 0..self.spec.nodes {
            self.world.resume(index);
            self.world.restart(index);
        }
    }

    fn finish(mut self, violation: Option<Violation>) -> (RunReport, World<P, A>) {
        self.world.finish();
        let world = &self.world;
        let report = &mut self.report;
        report.violation = violation.or_else(|| world.violation().cloned());
        report.first_leader_ms = world.first_leader_us.map(ms);
        report.leader_elections = world.stats.leader_elections;
        report.catch_up_entries = world.stats.catch_up_entries.clone();
        report.split_brain = world.split_brain.incidents.clone();
        report.split_brain_ms = ms(world.split_brain.total_us());
        report.events = world.stats.events;
        report.disk_faults = world.stats.disk_faults;
        report.disk_audits_failed = world.stats.disk_audits_failed;
        report.simulated_ms = ms(world.now_us());
        report.messages_by_kind = P::Message::all_kinds()
            .iter()
            .zip(&world.stats.sent_by_kind)
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        if self.spec.timeline {
            report.timeline = world.timeline.clone();
            report
                .timeline
                .sort_by_key(|span| (span.start_us, span.node));
        }
        report.trace = std::mem::take(&mut self.world.trace);
        (self.report, self.world)
    }
}
