//! The scenario both tests run, on whichever DCS they give it: bootstrap,
//! write, kill the primary, start it again to rejoin, switch over to it,
//! kill the DCS's Raft leader once it is the member the primary's Patroni
//! talks to.
//!
//! Each step asserts what Patroni promises: one primary at a time (the
//! role poller, throughout), no acknowledged row lost across a failover
//! or a switchover, failover within [`FAILOVER_MAX`], and a primary that
//! stays put while the DCS elects a new leader. Times are printed, not
//! asserted: performance is measured, not tested.

use super::dcs_leader_loss::lose_dcs_leader;
use super::nodes::{PatroniNodes, NODES};
use super::role_poller::RolePoller;
use super::sql;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Bootstrap (initdb, two base backups, streaming) must finish in this.
const BOOTSTRAP_MAX: Duration = Duration::from_secs(120);
/// A generous bound on a failover: Patroni's ttl is 20 s.
const FAILOVER_MAX: Duration = Duration::from_secs(90);
/// A switchover, or a survivor rejoining, must finish in this.
pub const SETTLE_MAX: Duration = Duration::from_secs(60);
/// Rows written in the first transaction, before the single-row writes.
const BULK_ROWS: u32 = 1_000;
/// Rows written one transaction each.
const SINGLE_ROWS: u32 = 20;

/// The DCS under Patroni: bellwether or a real etcd, 3 members.
pub trait Dcs {
    /// Its name in messages.
    fn label(&self) -> &'static str;
    /// Its members' client endpoints, `host:port`, member 1 first; each
    /// member's port differs, so a connection names its member.
    fn hosts(&self) -> Vec<String>;
    /// Member `member`'s id as etcdctl writes it (hexadecimal).
    fn member_id_hex(&self, member: usize) -> String;
    /// The member the running members agree leads, once they do.
    fn leader(&mut self) -> usize;
    /// SIGKILLs member `member` and waits until the others agree on a
    /// leader; says who leads and how soon.
    fn kill_and_reelect(&mut self, member: usize) -> String;
}

/// What the scenario measured.
pub struct Measured {
    /// Primary killed → a survivor accepted a write.
    pub failover: Duration,
    /// `patronictl switchover` started → the candidate accepted a write.
    pub switchover: Duration,
}

/// Runs the whole scenario for the test `name` on `dcs`, the Patroni
/// nodes' ports from `ports_base`.
pub fn run(name: &str, ports_base: u16, dcs: &mut dyn Dcs) -> Measured {
    let mut nodes = PatroniNodes::start(name, ports_base, &dcs.hosts());
    let poller = RolePoller::start(&nodes.venv_bin.join("python"), &nodes.pg_ports());
    let first = wait_settled(&nodes, &nodes.running(), BOOTSTRAP_MAX);
    let watched_from = poller.wait_sole_primary(first, Duration::from_secs(30));

    let mut written = write_rows(&nodes, first);
    let (second, failover) = kill_primary(&mut nodes, &poller, first, &mut written);
    let survivors = nodes.running();
    let settled = wait_settled(&nodes, &survivors, SETTLE_MAX);
    assert_eq!(
        settled, second,
        "the node that took writes leads in the DCS"
    );
    poller.assert_safe(watched_from);

    rejoin(&mut nodes, first, second, &written);
    let all = nodes.running();
    poller.assert_safe(watched_from);

    // The switchover goes to the node that rejoined: it must hold every
    // row, the failover's included, to take over.
    let candidate = first;
    let switchover = switch_over(&nodes, &poller, second, candidate, &mut written);
    let settled = wait_settled(&nodes, &all, SETTLE_MAX);
    assert_eq!(settled, candidate, "the candidate leads in the DCS");
    poller.assert_safe(watched_from);

    lose_dcs_leader(&nodes, &poller, dcs, candidate, &mut written);
    let rounds = poller.assert_safe(watched_from);
    eprintln!(
        "patroni on {}: {rounds} rounds of the role poller, never two primaries",
        dcs.label()
    );
    Measured {
        failover,
        switchover,
    }
}

/// Waits until the DCS, as the nodes `among` see it, names one of them
/// leader (running) and every other one a streaming replica; the leader.
pub fn wait_settled(nodes: &PatroniNodes, among: &[usize], timeout: Duration) -> usize {
    let deadline = Instant::now() + timeout;
    let mut last = None;
    while Instant::now() < deadline {
        for &i in among {
            let Some(view) = nodes.cluster_view(i) else {
                continue;
            };
            if let Some(leader) = settled_leader(nodes, &view, among) {
                return leader;
            }
            last = Some(view);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let logs: Vec<String> = among
        .iter()
        .map(|&i| format!("--- pg{i}.log (tail) ---\n{}", tail(&nodes.log(i), 40)))
        .collect();
    panic!(
        "nodes {among:?} did not settle to one leader and streaming replicas in \
         {timeout:?}; last view: {last:?}\n{}",
        logs.join("\n")
    );
}

/// The leader, if `view` (GET /cluster) shows exactly `among` with one
/// running leader and streaming replicas.
fn settled_leader(
    nodes: &PatroniNodes,
    view: &serde_json::Value,
    among: &[usize],
) -> Option<usize> {
    let members = view["members"].as_array()?;
    let mut leaders = Vec::new();
    let mut streaming = Vec::new();
    for member in members {
        let number = nodes.number(member["name"].as_str()?);
        match (member["role"].as_str()?, member["state"].as_str()?) {
            ("leader", "running") => leaders.push(number),
            ("replica" | "sync_standby", "streaming") => streaming.push(number),
            _ if !among.contains(&number) => {}
            _ => return None,
        }
    }
    let mut seen: Vec<usize> = leaders.iter().chain(&streaming).copied().collect();
    seen.sort_unstable();
    (leaders.len() == 1 && seen == among).then(|| leaders[0])
}

/// Writes the rows through the primary `primary` and waits until every
/// replica has replayed them, so that any of them may take over without
/// loss (replication is asynchronous). The ids written.
fn write_rows(nodes: &PatroniNodes, primary: usize) -> BTreeSet<u32> {
    let port = nodes.pg_port(primary);
    sql::create_and_fill(&nodes.bin_dir, port, 1..=BULK_ROWS);
    let mut written: BTreeSet<u32> = (1..=BULK_ROWS).collect();
    for id in BULK_ROWS + 1..=BULK_ROWS + SINGLE_ROWS {
        sql::insert(&nodes.bin_dir, port, id)
            .unwrap_or_else(|error| panic!("writing row {id} on the primary: {error}"));
        written.insert(id);
    }
    for replica in nodes.running().into_iter().filter(|&i| i != primary) {
        let deadline = Instant::now() + SETTLE_MAX;
        while sql::ids(&nodes.bin_dir, nodes.pg_port(replica))
            .ok()
            .as_ref()
            != Some(&written)
        {
            assert!(
                Instant::now() < deadline,
                "replica pg{replica} did not replay the {} rows in {SETTLE_MAX:?}",
                written.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    written
}

/// SIGKILLs the primary's Patroni and PostgreSQL, then writes to the
/// survivors every 100 ms until one accepts, and checks that it holds
/// every row. Returns that node and the time from the kill to its first
/// accepted write.
fn kill_primary(
    nodes: &mut PatroniNodes,
    poller: &RolePoller,
    primary: usize,
    written: &mut BTreeSet<u32>,
) -> (usize, Duration) {
    let survivors: Vec<usize> = (1..=NODES).filter(|&i| i != primary).collect();
    let killed_at = Instant::now();
    nodes.kill(primary);
    let probe = written.last().unwrap() + 1;
    let taker = loop {
        assert!(
            killed_at.elapsed() < FAILOVER_MAX,
            "no survivor of {survivors:?} accepted a write within {FAILOVER_MAX:?} of \
             killing pg{primary}"
        );
        let accepted = survivors
            .iter()
            .find(|&&i| sql::insert(&nodes.bin_dir, nodes.pg_port(i), probe).is_ok());
        if let Some(&taker) = accepted {
            break taker;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let failover = killed_at.elapsed();
    written.insert(probe);
    sql::assert_has_rows(
        &nodes.bin_dir,
        nodes.pg_port(taker),
        written,
        "after failover",
    );
    poller.wait_sole_primary(taker, Duration::from_secs(10));
    (taker, failover)
}

/// Starts the killed node `killed` again on its data, as an operator
/// would: Patroni rewinds its PostgreSQL (`use_pg_rewind`) if its WAL went
/// past the point where `leader` was promoted, and it must come back as a
/// streaming replica of `leader` holding every row written.
fn rejoin(nodes: &mut PatroniNodes, killed: usize, leader: usize, written: &BTreeSet<u32>) {
    let started = Instant::now();
    nodes.spawn(killed);
    let settled = wait_settled(nodes, &nodes.running(), SETTLE_MAX);
    assert_eq!(settled, leader, "the leader stays while pg{killed} rejoins");
    let deadline = Instant::now() + SETTLE_MAX;
    while sql::ids(&nodes.bin_dir, nodes.pg_port(killed))
        .ok()
        .as_ref()
        != Some(written)
    {
        assert!(
            Instant::now() < deadline,
            "pg{killed} rejoined without the {} rows in {SETTLE_MAX:?}",
            written.len()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    eprintln!(
        "patroni: pg{killed} rejoined as a streaming replica with every row in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}

/// `patronictl switchover` from `leader` to `candidate`; checks the
/// candidate becomes the only primary with every row and accepts a write.
/// The time until it accepted that write.
fn switch_over(
    nodes: &PatroniNodes,
    poller: &RolePoller,
    leader: usize,
    candidate: usize,
    written: &mut BTreeSet<u32>,
) -> Duration {
    let started = Instant::now();
    let (leader_name, candidate_name) = (nodes.name(leader), nodes.name(candidate));
    let out = nodes.patronictl(&[
        "switchover",
        &nodes.scope,
        "--leader",
        &leader_name,
        "--candidate",
        &candidate_name,
        "--force",
    ]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "patronictl switchover failed: {said}");
    let probe = written.last().unwrap() + 1;
    while sql::insert(&nodes.bin_dir, nodes.pg_port(candidate), probe).is_err() {
        assert!(
            started.elapsed() < SETTLE_MAX,
            "{candidate_name} accepted no write within {SETTLE_MAX:?} of the switchover; \
             patronictl said: {said}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let switchover = started.elapsed();
    written.insert(probe);
    poller.wait_sole_primary(candidate, Duration::from_secs(10));
    sql::assert_has_rows(
        &nodes.bin_dir,
        nodes.pg_port(candidate),
        written,
        "after switchover",
    );
    switchover
}

/// The last `lines` lines of `text`.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
