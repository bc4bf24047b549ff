//! The nemesis of `bellwether verify`: while the clients run, it hurts one
//! member at a time, chosen by a seeded generator, the leader more often
//! than not:
//!
//! - SIGKILL, then a restart from the member's data dir;
//! - SIGSTOP, then SIGCONT (a pause: the member wakes with a stale view);
//! - an nftables partition of the member's peer address, then healing.
//!
//! One fault at a time keeps a majority alive, so the cluster must keep
//! serving; each fault lasts 0.3 to 2 s and the next comes 0.2 to 1 s after
//! the previous one healed. When the time is up everything is healed.

use crate::contender::Contender;
use crate::partition::{delete_table, partition_script, Partition};
use crate::process_cluster::ProcessCluster;
use crate::signals::send_signal;
use anyhow::Result;
use bellwether_core::Rng;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// SIGSTOP's and SIGCONT's numbers on Linux.
const SIGSTOP: i32 = 19;
const SIGCONT: i32 = 18;

/// A duration drawn from `[low, high)` ms.
fn millis(rng: &mut Rng, low: u64, high: u64) -> Duration {
    Duration::from_millis(rng.range(low, high))
}

/// What the nemesis did, by action.
pub type Actions = BTreeMap<String, u32>;

/// The faults `verify` may inject.
#[derive(Clone, Copy, Debug)]
pub struct Faults {
    /// nftables partitions (needs root and nftables).
    pub partitions: bool,
}

/// Hurts members until `span` has passed, then heals everything.
pub fn run(
    cluster: &mut ProcessCluster,
    net: u8,
    span: Duration,
    seed: u64,
    faults: Faults,
) -> Result<Actions> {
    let mut rng = Rng::new(seed);
    let mut actions = Actions::new();
    let start = Instant::now();
    let nodes = cluster.members().len();
    let table = format!("bwverify{net}");
    delete_table(&table);
    while start.elapsed() < span {
        std::thread::sleep(millis(&mut rng, 200, 1_000));
        let leader = cluster.claimed_leader();
        let member = match leader {
            Some(leader) if rng.range(0, 3) != 0 => leader,
            _ => rng.range(1, nodes as u64 + 1) as usize,
        };
        let hold = millis(&mut rng, 300, 2_000);
        let kinds = if faults.partitions { 3 } else { 2 };
        let role = if Some(member) == leader {
            "leader"
        } else {
            "follower"
        };
        match rng.range(0, kinds) {
            0 => {
                let process = &mut cluster.members_mut()[member - 1];
                process.kill()?;
                process.wait_exit(Duration::from_secs(10))?;
                std::thread::sleep(hold);
                cluster.restart(member)?;
                *actions
                    .entry(format!("kill and restart a {role}"))
                    .or_default() += 1;
            }
            1 => {
                let pid = cluster.members()[member - 1].pid();
                if let Some(pid) = pid {
                    send_signal(pid, SIGSTOP)?;
                    std::thread::sleep(hold);
                    send_signal(pid, SIGCONT)?;
                    *actions.entry(format!("pause a {role}")).or_default() += 1;
                }
            }
            _ => {
                let guard = Partition {
                    table: table.clone(),
                };
                guard.apply(&partition_script(&table, cluster.peer_ip(member), None))?;
                std::thread::sleep(hold);
                drop(guard);
                *actions.entry(format!("partition a {role}")).or_default() += 1;
            }
        }
    }
    Ok(actions)
}
