//! Patroni 4 (PostgreSQL high availability) on bellwether, and the same
//! scenario on a real etcd 3.4 as the yardstick: three Patroni nodes, each
//! with its PostgreSQL 15, use a 3-member cluster through Patroni's `etcd3`
//! DCS, which speaks etcd's gRPC-JSON gateway (leases for the leader key,
//! transactions for the leader race, watches for the cluster view).
//!
//! The scenario (patroni/scenario.rs) bootstraps a primary and two
//! streaming replicas, writes rows, SIGKILLs the primary's Patroni and
//! PostgreSQL, runs `patronictl switchover`, then moves the DCS's Raft
//! leadership to the member the primary's Patroni talks to (`etcdctl
//! move-leader`) and SIGKILLs it: the primary must stay put. A poller asks
//! every PostgreSQL for its role every 100 ms throughout, and two
//! primaries at once fail the test. Failover and switchover times are
//! printed for both systems.
//!
//! Needs Debian's postgresql (any version under /usr/lib/postgresql),
//! etcd-server and etcd-client, and /usr/bin/python3 with venv and pip: the test makes
//! target/patroni-venv with pinned Patroni and psycopg2 from PyPI when
//! scripts/test.sh has not. Anything missing fails the test with what to
//! install. Run as root, Patroni runs as the `postgres` user.

mod common;

#[path = "patroni/dcs_leader_loss.rs"]
mod dcs_leader_loss;
#[path = "patroni/mistakes.rs"]
mod mistakes;
#[path = "patroni/nodes.rs"]
mod nodes;
#[path = "patroni/role_poller.rs"]
mod role_poller;
#[path = "patroni/scenario.rs"]
mod scenario;
#[path = "patroni/setup.rs"]
mod setup;
#[path = "patroni/sql.rs"]
mod sql;
#[path = "patroni/venv.rs"]
mod venv;

use common::etcd_cluster::EtcdCluster;
use common::Cluster;
use scenario::{Dcs, Measured};
use std::time::{Duration, Instant};

/// Raft heartbeat for both DCSs, ms (etcd's default).
const HEARTBEAT_MS: u64 = 100;
/// Raft election timeout for both DCSs, ms (etcd's default).
const ELECTION_MS: u64 = 1_000;
/// How long a DCS gets to elect a leader.
const ELECTION_WAIT: Duration = Duration::from_secs(20);

#[test]
fn patroni_on_bellwether() {
    let name = "patroni-bellwether";
    let mut cluster = Cluster::start(name, 3, HEARTBEAT_MS, ELECTION_MS);
    cluster.wait_leader(&cluster.all(), ELECTION_WAIT);
    let ports_base = cluster.http_base;
    let measured = scenario::run(name, ports_base, &mut cluster);
    cluster.assert_one_leader_per_term();
    report("bellwether", &measured);
}

#[test]
fn patroni_on_real_etcd() {
    let name = "patroni-etcd";
    let mut etcd = EtcdCluster::start(name, 3, HEARTBEAT_MS, ELECTION_MS);
    let ports_base = 10_000 + etcd.net as u16 * 100;
    let measured = scenario::run(name, ports_base, &mut etcd);
    report("etcd 3.4", &measured);
}

/// Patroni configured with a mistake (etcd's v2 section, a wrong
/// password, a user granted nothing) says the same on bellwether as on a
/// real etcd 3.4, line for line.
#[test]
fn patroni_configuration_mistakes_read_as_on_etcd() {
    let mut bellwether = Cluster::start("patroni-mistakes-bw", 1, HEARTBEAT_MS, ELECTION_MS);
    bellwether.wait_leader(&bellwether.all(), ELECTION_WAIT);
    let etcd = EtcdCluster::start("patroni-mistakes-etcd", 1, HEARTBEAT_MS, ELECTION_MS);
    let sides = [
        (
            "bellwether",
            bellwether.client(1).to_string(),
            bellwether.http_base,
        ),
        (
            "etcd",
            etcd.client(1).to_string(),
            10_000 + etcd.net as u16 * 100,
        ),
    ];
    for (_, host, _) in &sides {
        mistakes::enable_auth(host);
    }
    let dir = setup::test_dir("mistakes");
    // Every mistake on both sides at once: each Patroni has its own ports.
    let said: Vec<Vec<_>> = std::thread::scope(|scope| {
        let runs: Vec<Vec<_>> = sides
            .iter()
            .map(|(side, host, ports_base)| {
                mistakes::MISTAKES
                    .iter()
                    .enumerate()
                    .map(|(k, mistake)| {
                        let dir = &dir;
                        scope.spawn(move || {
                            let (slot, name) = (k as u16 + 1, format!("{side}-{mistake:?}"));
                            mistakes::what_patroni_says(
                                dir,
                                &name,
                                *ports_base,
                                slot,
                                host,
                                *mistake,
                            )
                        })
                    })
                    .collect()
            })
            .collect();
        runs.into_iter()
            .map(|side| side.into_iter().map(|run| run.join().unwrap()).collect())
            .collect()
    });
    for (k, mistake) in mistakes::MISTAKES.iter().enumerate() {
        let (ours, theirs) = (&said[0][k], &said[1][k]);
        eprintln!("{mistake:?}: Patroni on etcd said {theirs:#?}");
        assert!(
            theirs.iter().any(|line| line.contains(mistake.telltale())),
            "{mistake:?}: on etcd Patroni did not say {:?}: {theirs:#?}",
            mistake.telltale()
        );
        assert_eq!(
            ours, theirs,
            "{mistake:?}: Patroni on bellwether, then on etcd"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The safety check on the poller's rounds fails on two primaries in one
/// round, and on a blind poller (a gap between rounds, or a round too
/// long to be one moment), so a passing scenario means something.
#[test]
fn role_check_sees_two_primaries_and_blind_spots() {
    let rounds = |lines: &[&str]| -> Vec<role_poller::Round> {
        lines
            .iter()
            .map(|line| role_poller::parse(line).expect("a poller line"))
            .collect()
    };
    let check = role_poller::safety_violation;
    let healthy = rounds(&["1000 1003 P R R", "1100 1102 - R R", "1200 1201 - P R"]);
    assert_eq!(check(&healthy, 1000, 1250), Ok(3));
    let split = rounds(&["1000 1003 P R R", "1100 1102 P P R"]);
    assert!(check(&split, 1000, 1150)
        .unwrap_err()
        .contains("two primaries"));
    let gap = rounds(&["1000 1003 P R R", "4000 4002 P R R"]);
    assert!(check(&gap, 1000, 4050)
        .unwrap_err()
        .contains("without a round"));
    let silent = rounds(&["1000 1003 P R R"]);
    assert!(check(&silent, 1000, 9000)
        .unwrap_err()
        .contains("without a round"));
    let slow = rounds(&["1000 2500 P - R"]);
    assert!(check(&slow, 1000, 2600).unwrap_err().contains("took over"));
    assert!(role_poller::parse("1000 1003 P X R").is_none());
}

/// Prints what the scenario measured.
fn report(label: &str, measured: &Measured) {
    eprintln!(
        "patroni on {label}: failover {:.1} s (primary SIGKILLed → a replica accepted a \
         write), switchover {:.1} s (patronictl switchover → the candidate accepted a write)",
        measured.failover.as_secs_f64(),
        measured.switchover.as_secs_f64()
    );
}

/// The bellwether cluster as Patroni's DCS.
impl Dcs for Cluster {
    fn label(&self) -> &'static str {
        "bellwether"
    }

    fn hosts(&self) -> Vec<String> {
        (1..=self.nodes)
            .map(|i| self.client(i).to_string())
            .collect()
    }

    fn member_id_hex(&self, member: usize) -> String {
        format!("{member:x}")
    }

    fn leader(&mut self) -> usize {
        self.wait_leader(&running(self), ELECTION_WAIT).0
    }

    fn kill_and_reelect(&mut self, member: usize) -> String {
        let killed_at = Instant::now();
        self.kill(member);
        let (next, term) = self.wait_leader(&running(self), ELECTION_WAIT);
        format!(
            "n{next} leads (term {term}) {} ms later",
            killed_at.elapsed().as_millis()
        )
    }
}

/// The members of `cluster` not killed.
fn running(cluster: &Cluster) -> Vec<usize> {
    cluster
        .all()
        .into_iter()
        .filter(|i| cluster.children[i - 1].is_some())
        .collect()
}

/// The real etcd cluster as Patroni's DCS.
impl Dcs for EtcdCluster {
    fn label(&self) -> &'static str {
        "etcd 3.4"
    }

    fn hosts(&self) -> Vec<String> {
        self.client_addresses()
    }

    fn member_id_hex(&self, member: usize) -> String {
        format!("{:x}", self.member_id(member))
    }

    fn leader(&mut self) -> usize {
        self.wait_leader(&self.running(), ELECTION_WAIT)
    }

    fn kill_and_reelect(&mut self, member: usize) -> String {
        let killed_at = Instant::now();
        self.kill(member);
        let next = self.wait_leader(&self.running(), ELECTION_WAIT);
        format!("m{next} leads {} ms later", killed_at.elapsed().as_millis())
    }
}
