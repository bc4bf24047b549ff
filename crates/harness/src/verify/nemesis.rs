//! The nemesis of `bellwether verify`: while the clients run, it hurts the
//! cluster, one fault (or one pair of overlapping faults) at a time, chosen
//! by a seeded generator, the leader more often than not:
//!
//! - SIGKILL one member, then restart it from its data dir;
//! - SIGSTOP one member, then SIGCONT (a pause: it wakes with a stale view);
//! - an nftables partition of one member's peer address, then healing;
//! - a power cut: SIGKILL every member at once, then restart them all;
//! - a full disk: fill the small tmpfs under one member's data dir, then
//!   free it (see [`DiskFull`]);
//! - a bridge: the link between one member and another cut both ways,
//!   each still reaching the others, which hear both sides;
//! - a disk that loses data: one member stopped, its log damaged (deleted,
//!   cut short, a corrupt byte, or its newest write lost; see
//!   [`disk_loss`](super::disk_loss)) and started again, while no other
//!   member is repairing, so a majority always holds every acknowledged
//!   write;
//! - the same behind laggards: a minority paused while the rest go on
//!   writing, then every member but the paused ones killed, one of them
//!   started on a damaged log together with the paused ones. That
//!   majority must not elect until the others are back: only the damaged
//!   member's promise record knows what the laggards lack;
//! - two faults at once: one member cut off or paused and, while it is
//!   away, another SIGKILLed and restarted (it must catch up from the
//!   others while the first still cannot be reached) or paused (it wakes
//!   with a stale view while the first is still away).
//!
//! Members run with `--hold-unsynced-writes`, so each SIGKILL loses what
//! was written but not fsynced, as a power cut would. A single fault keeps
//! a majority alive, so the cluster must keep serving; a power cut, or two
//! faults at once on three members, stops it for a moment, and afterwards
//! it must hold everything it acknowledged.
//! Each fault lasts 0.3 to 2 s and the next comes 0.2 to 1 s after the
//! previous one healed. When the time is up everything is healed.
//!
//! Before each fault the nemesis checks that every member still runs: one
//! that exited on its own (a failed assertion, a crash) is an anomaly,
//! reported with the end of its log, and restarted. A member that stopped
//! because its disk was full is expected, if its log says so.

use super::disk_full::DiskFull;
use super::disk_loss::{self, Loss};
use crate::contender::Contender;
use crate::partition::{bridge_script, delete_table, partition_script, Partition};
use crate::process_cluster::ProcessCluster;
use anyhow::Result;
use bellwether_cli_common::signals::{send_signal, SIGCONT, SIGSTOP};
use bellwether_core::Rng;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Lines of a member's log quoted when it exited on its own.
const LOG_LINES_QUOTED: usize = 4;

/// A member stopped with SIGSTOP, sent SIGCONT when dropped: no error
/// return leaves a member stopped.
pub(super) struct Stopped(u32);

impl Stopped {
    /// Stops the process `pid`.
    pub(super) fn new(pid: u32) -> Result<Stopped> {
        send_signal(pid, SIGSTOP)?;
        Ok(Stopped(pid))
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = send_signal(self.0, SIGCONT);
    }
}

/// A duration drawn from `[low, high)` ms.
pub(super) fn millis(rng: &mut Rng, low: u64, high: u64) -> Duration {
    Duration::from_millis(rng.range(low, high))
}

/// What the nemesis did, by action.
pub type Actions = BTreeMap<String, u32>;

/// What the nemesis did and saw.
#[derive(Default)]
pub struct Outcome {
    pub actions: Actions,
    /// Members that exited on their own, with the end of their log.
    pub exits: Vec<String>,
}

/// The faults `verify` may inject.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// nftables partitions (needs root and nftables).
    pub partitions: bool,
    /// Damaged logs ([`disk_loss`]).
    pub disk_loss: bool,
    /// Only this fault, every time (`verify --only-fault`).
    pub only: Option<Fault>,
    /// Only this way of damaging a log (`verify --disk-loss`).
    pub loss: Option<Loss>,
}

/// The fault kinds, by their share of the draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    Kill,
    Pause,
    Partition,
    Bridge,
    PowerCut,
    DiskFull,
    DiskLoss,
    DiskLossBehindLaggards,
    Overlap,
}

impl Fault {
    /// Every fault with its name, as `--only-fault` spells it.
    pub const NAMES: [(Fault, &'static str); 9] = [
        (Fault::Kill, "kill"),
        (Fault::Pause, "pause"),
        (Fault::Partition, "partition"),
        (Fault::Bridge, "bridge"),
        (Fault::PowerCut, "power-cut"),
        (Fault::DiskFull, "disk-full"),
        (Fault::DiskLoss, "disk-loss"),
        (Fault::DiskLossBehindLaggards, "disk-loss-behind-laggards"),
        (Fault::Overlap, "overlap"),
    ];

    /// The fault named `name`, if there is one.
    pub fn named(name: &str) -> Option<Fault> {
        Fault::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(fault, _)| *fault)
    }

    /// True when `faults` (and a mounted tmpfs, `disk`) let it run.
    pub fn allowed(self, faults: Faults, disk: bool) -> bool {
        match self {
            Fault::Partition | Fault::Bridge => faults.partitions,
            Fault::DiskLoss | Fault::DiskLossBehindLaggards => faults.disk_loss,
            Fault::DiskFull => disk,
            _ => true,
        }
    }
}

/// Draws the next fault among those the run can inject.
fn draw(rng: &mut Rng, faults: Faults, disk: bool) -> Fault {
    if let Some(only) = faults.only {
        return only;
    }
    loop {
        let fault = match rng.range(0, 25) {
            0 | 1 => Fault::PowerCut,
            2 | 3 => Fault::DiskFull,
            4..=8 => Fault::Kill,
            9..=12 => Fault::Pause,
            13..=16 => Fault::Partition,
            17 | 18 => Fault::Bridge,
            19..=21 => Fault::Overlap,
            22 | 23 => Fault::DiskLoss,
            _ => Fault::DiskLossBehindLaggards,
        };
        if fault.allowed(faults, disk) {
            return fault;
        }
    }
}

/// How the first member of an overlap is away for all of it.
#[derive(Clone, Copy, Debug)]
enum Away {
    /// Cut off by nftables: it runs on, alone.
    Cut,
    /// SIGSTOPped: it wakes with a stale view.
    Paused,
}

/// What happens to a second member meanwhile.
#[derive(Clone, Copy, Debug)]
enum Meanwhile {
    /// SIGKILLed and restarted: it must catch up from the others.
    Killed,
    /// SIGSTOPped and woken before the first is back.
    Paused,
}

impl Away {
    fn draw(rng: &mut Rng, faults: Faults) -> Away {
        match faults.partitions && rng.range(0, 2) == 0 {
            true => Away::Cut,
            false => Away::Paused,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Away::Cut => "partition",
            Away::Paused => "pause",
        }
    }
}

impl Meanwhile {
    fn draw(rng: &mut Rng) -> Meanwhile {
        match rng.range(0, 2) {
            0 => Meanwhile::Killed,
            _ => Meanwhile::Paused,
        }
    }

    fn verb(self) -> &'static str {
        match self {
            Meanwhile::Killed => "kill and restart",
            Meanwhile::Paused => "pause",
        }
    }
}

/// The nftables table of the partitions of peer network `net`.
fn table(net: u8) -> String {
    format!("bwverify{net}")
}

/// Removes a partition an earlier `verify` left behind (one killed while a
/// member was cut off), so that a new cluster can form.
pub fn heal_leftovers(net: u8) {
    delete_table(&table(net));
}

/// Hurts the cluster until `span` has passed, then heals everything.
pub fn run(
    cluster: &mut ProcessCluster,
    net: u8,
    span: Duration,
    seed: u64,
    faults: Faults,
    disk: Option<&DiskFull>,
) -> Result<Outcome> {
    let mut rng = Rng::new(seed);
    let mut outcome = Outcome::default();
    let start = Instant::now();
    let nodes = cluster.members().len();
    let table = table(net);
    delete_table(&table);
    while start.elapsed() < span {
        std::thread::sleep(millis(&mut rng, 200, 1_000));
        restart_exited(cluster, disk, &mut outcome)?;
        let leader = cluster.claimed_leader();
        let member = match leader {
            Some(leader) if rng.range(0, 3) != 0 => leader,
            _ => rng.range(1, nodes as u64 + 1) as usize,
        };
        let hold = millis(&mut rng, 300, 2_000);
        let role = if Some(member) == leader {
            "leader"
        } else {
            "follower"
        };
        let action = match draw(&mut rng, faults, disk.is_some()) {
            Fault::Kill => {
                let process = &mut cluster.members_mut()[member - 1];
                process.kill()?;
                process.wait_exit(Duration::from_secs(10))?;
                std::thread::sleep(hold);
                cluster.restart(member)?;
                format!("kill and restart a {role}")
            }
            Fault::Pause => {
                let Some(pid) = cluster.members()[member - 1].pid() else {
                    continue;
                };
                let stopped = Stopped::new(pid)?;
                std::thread::sleep(hold);
                drop(stopped);
                format!("pause a {role}")
            }
            Fault::Partition => {
                let guard = Partition {
                    table: table.clone(),
                };
                guard.apply(&partition_script(&table, cluster.peer_ip(member), None))?;
                std::thread::sleep(hold);
                drop(guard);
                format!("partition a {role}")
            }
            Fault::PowerCut => {
                for process in cluster.members_mut() {
                    process.kill()?;
                }
                for process in cluster.members_mut() {
                    process.wait_exit(Duration::from_secs(10))?;
                }
                std::thread::sleep(hold);
                for i in 1..=nodes {
                    cluster.restart(i)?;
                }
                "power cut (every member killed at once)".to_string()
            }
            Fault::Bridge => {
                let other = other_member(&mut rng, member, nodes);
                let guard = Partition {
                    table: table.clone(),
                };
                let (a, b) = (cluster.peer_ip(member), cluster.peer_ip(other));
                guard.apply(&bridge_script(&table, a, b))?;
                std::thread::sleep(hold);
                drop(guard);
                format!("cut the link between a {role} and another member")
            }
            Fault::Overlap => {
                let other = other_member(&mut rng, member, nodes);
                let (away, meanwhile) = (Away::draw(&mut rng, faults), Meanwhile::draw(&mut rng));
                let to_pause = [
                    (matches!(away, Away::Paused), member),
                    (matches!(meanwhile, Meanwhile::Paused), other),
                ];
                let not_running = |m: usize| cluster.members()[m - 1].pid().is_none();
                if to_pause.iter().any(|&(paused, m)| paused && not_running(m)) {
                    continue; // nothing to pause
                }
                overlap(cluster, (member, other), &table, (away, meanwhile), hold)?;
                format!(
                    "{} a {role} and meanwhile {} another",
                    away.verb(),
                    meanwhile.verb()
                )
            }
            Fault::DiskLoss => {
                let others_whole = (1..=nodes)
                    .filter(|i| *i != member)
                    .all(|i| cluster.repairing(i) == Some(false));
                if !others_whole {
                    continue; // a second damaged member could hold the last copy
                }
                let loss = faults.loss.unwrap_or_else(|| Loss::draw(&mut rng));
                let process = &mut cluster.members_mut()[member - 1];
                process.kill()?;
                process.wait_exit(Duration::from_secs(10))?;
                disk_loss::damage(&cluster.data_dir(member), loss, &mut rng)?;
                std::thread::sleep(hold);
                cluster.restart(member)?;
                format!(
                    "kill a {role}, damage its disk ({}), restart it",
                    loss.noun()
                )
            }
            Fault::DiskLossBehindLaggards => {
                if (1..=nodes).any(|i| cluster.repairing(i) != Some(false)) {
                    continue; // every member must answer, none repairing
                }
                let loss = faults.loss.unwrap_or_else(|| Loss::draw(&mut rng));
                behind_laggards(cluster, member, loss, hold, &mut rng)?;
                format!(
                    "pause a minority, kill the rest, restart a {role} on a damaged disk ({}) with the paused",
                    loss.noun()
                )
            }
            Fault::DiskFull => {
                let disk = disk.expect("drawn only with a disk");
                let filler = disk.fill()?;
                std::thread::sleep(hold);
                drop(filler);
                format!("fill the disk of member {}", disk.member)
            }
        };
        *outcome.actions.entry(action).or_default() += 1;
    }
    restart_exited(cluster, disk, &mut outcome)?;
    Ok(outcome)
}

/// The laggards' trap: a minority other than `damaged` is paused while
/// the rest write on for half of `hold`; then every running member is
/// killed, `damaged`'s log is damaged, and it starts with the paused ones
/// woken, which together are a majority whose logs lack what the others
/// acknowledged. Only `damaged`'s promise record knows it, so no leader
/// may be elected before the killed members are back, half a `hold` on.
fn behind_laggards(
    cluster: &mut ProcessCluster,
    damaged: usize,
    loss: Loss,
    hold: Duration,
    rng: &mut Rng,
) -> Result<()> {
    let nodes = cluster.members().len();
    let mut others: Vec<usize> = (1..=nodes).filter(|i| *i != damaged).collect();
    let laggards: Vec<usize> = (0..(nodes - 1) / 2)
        .map(|_| others.remove(rng.range(0, others.len() as u64) as usize))
        .collect();
    let killed = others;
    let mut stopped = Vec::new();
    for &m in &laggards {
        let pid = cluster.members()[m - 1].pid().expect("checked: running");
        stopped.push(Stopped::new(pid)?);
    }
    std::thread::sleep(hold / 2);
    for &m in killed.iter().chain([&damaged]) {
        cluster.members_mut()[m - 1].kill()?;
    }
    for &m in killed.iter().chain([&damaged]) {
        cluster.members_mut()[m - 1].wait_exit(Duration::from_secs(10))?;
    }
    disk_loss::damage(&cluster.data_dir(damaged), loss, rng)?;
    drop(stopped);
    cluster.restart(damaged)?;
    std::thread::sleep(hold / 2);
    for &m in &killed {
        cluster.restart(m)?;
    }
    Ok(())
}

/// A member other than `member`, drawn among the `nodes`.
fn other_member(rng: &mut Rng, member: usize, nodes: usize) -> usize {
    (member + rng.range(0, nodes as u64 - 1) as usize) % nodes + 1
}

/// Two faults at once: `first` is away (cut off or paused) for `hold`;
/// halfway through, `second` is killed (or paused), and it is back while
/// `first` is still away.
fn overlap(
    cluster: &mut ProcessCluster,
    (first, second): (usize, usize),
    table: &str,
    (away, meanwhile): (Away, Meanwhile),
    hold: Duration,
) -> Result<()> {
    assert_ne!(first, second, "two faults on one member");
    let pid = |m: usize| cluster.members()[m - 1].pid().expect("checked: running");
    let mut partition = None;
    let mut stopped = None;
    match away {
        Away::Cut => {
            let guard = Partition {
                table: table.to_string(),
            };
            guard.apply(&partition_script(table, cluster.peer_ip(first), None))?;
            partition = Some(guard);
        }
        Away::Paused => stopped = Some(Stopped::new(pid(first))?),
    }
    std::thread::sleep(hold / 2);
    match meanwhile {
        Meanwhile::Killed => {
            let process = &mut cluster.members_mut()[second - 1];
            process.kill()?;
            process.wait_exit(Duration::from_secs(10))?;
            std::thread::sleep(hold / 4);
            cluster.restart(second)?;
        }
        Meanwhile::Paused => {
            let second_stopped = Stopped::new(pid(second))?;
            std::thread::sleep(hold / 4);
            drop(second_stopped);
        }
    }
    std::thread::sleep(hold / 4);
    drop(stopped);
    drop(partition);
    Ok(())
}

/// Restarts every member that exited on its own since the last look,
/// noting it as an anomaly unless its disk was full and what this start of
/// it logged says so (the log file spans its restarts).
pub fn restart_exited(
    cluster: &mut ProcessCluster,
    disk: Option<&DiskFull>,
    outcome: &mut Outcome,
) -> Result<()> {
    for i in 1..=cluster.members().len() {
        let process = &mut cluster.members_mut()[i - 1];
        let Err(exited) = process.check_running() else {
            continue;
        };
        let log = process.log_of_this_start();
        let last = quoted_end(&log);
        let full = log.contains("No space left on device") && !log.contains("panicked at");
        if disk.is_some_and(|d| d.member == i) && full {
            let action = "member stopped on a full disk, as designed, and restarted";
            *outcome.actions.entry(action.to_string()).or_default() += 1;
        } else {
            outcome
                .exits
                .push(format!("member {i}: {exited:#}; its log ends: {last}"));
        }
        cluster.restart(i)?;
    }
    Ok(())
}

/// What a member's log says of why it stopped: a failed assertion's
/// message (rather than its backtrace), else its last lines.
fn quoted_end(log: &str) -> String {
    let lines: Vec<&str> = match log.rfind("panicked at") {
        Some(at) => log[at..].lines().take(2).collect(),
        None => {
            let mut last: Vec<&str> = log.lines().rev().take(LOG_LINES_QUOTED).collect();
            last.reverse();
            last
        }
    };
    lines.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fault_is_drawn_and_partitions_only_where_nft_runs() {
        let draws = |partitions: bool, disk: bool| {
            let mut rng = Rng::new(7);
            let faults = Faults {
                partitions,
                disk_loss: partitions,
                only: None,
                loss: None,
            };
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..2_000 {
                seen.insert(format!("{:?}", draw(&mut rng, faults, disk)));
            }
            seen.into_iter().collect::<Vec<_>>().join(" ")
        };
        assert_eq!(
            draws(true, true),
            "Bridge DiskFull DiskLoss DiskLossBehindLaggards Kill Overlap Partition Pause PowerCut"
        );
        assert_eq!(draws(false, false), "Kill Overlap Pause PowerCut");
        let mut rng = Rng::new(7);
        let no_nft = Faults {
            partitions: false,
            disk_loss: true,
            only: None,
            loss: None,
        };
        assert!((0..200).all(|_| matches!(Away::draw(&mut rng, no_nft), Away::Paused)));
        for member in 1..=5 {
            for _ in 0..50 {
                let other = other_member(&mut rng, member, 5);
                assert!((1..=5).contains(&other) && other != member);
            }
        }
    }

    #[test]
    fn a_panic_is_quoted_by_its_message_not_its_backtrace() {
        let log = "INFO started\nthread 'main' panicked at crates/member/src/apply.rs:70:9:\n\
entry i1 applied before it committed (commit i0)\nstack backtrace:\n   0: std\n   1: core\n";
        assert_eq!(
            quoted_end(log),
            "panicked at crates/member/src/apply.rs:70:9: | \
entry i1 applied before it committed (commit i0)"
        );
        let log = "a\nb\nc\nd\nerror: No space left on device (os error 28)\n";
        assert_eq!(
            quoted_end(log),
            "b | c | d | error: No space left on device (os error 28)"
        );
    }
}
