//! The scenario's last step: the DCS loses its Raft leader under a
//! healthy Patroni cluster, in the worst place. Leadership is first moved
//! (`etcdctl move-leader`) to the member the primary's Patroni talks to,
//! then that member is SIGKILLed: Patroni must find another member while
//! the rest elect. The primary must not change, nor be demoted for a
//! moment, for longer than Patroni's ttl, so its leader key was renewed
//! through the new Raft leader.

use super::nodes::PatroniNodes;
use super::role_poller::{now_ms, RolePoller};
use super::scenario::{wait_settled, Dcs, SETTLE_MAX};
use super::sql;
use crate::common::has_connection_to;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How long the primary is watched after the DCS leader is killed: longer
/// than Patroni's ttl (20 s) plus a loop, so the leader key must have been
/// renewed through the DCS's new leader for the primary to keep it.
const DCS_LEADER_LOSS_WATCH: Duration = Duration::from_secs(25);
/// Lines of the primary's warnings printed after the DCS leader's death.
const COMPLAINTS_SHOWN_MAX: usize = 12;

/// Kills the DCS's Raft leader, made the member the primary's Patroni is
/// connected to, and checks that `primary` stays the only primary in
/// every poller round for longer than Patroni's ttl, still holds the
/// leader key (so it was renewed), still reaches the DCS, and accepts a
/// write with every earlier row kept; `patronictl list` must still work.
pub fn lose_dcs_leader(
    nodes: &PatroniNodes,
    poller: &RolePoller,
    dcs: &mut dyn Dcs,
    primary: usize,
    written: &mut BTreeSet<u32>,
) {
    let timeline_before = nodes
        .node_status(primary)
        .expect("the primary's REST API answers")["timeline"]
        .clone();
    let member = dcs_member_in_use(nodes, primary, &dcs.hosts());
    make_leader(dcs, member);
    let log_before = nodes.log(primary).len();
    let since_ms = now_ms();
    let reelected = dcs.kill_and_reelect(member);
    eprintln!(
        "patroni on {}: SIGKILLed member {member}, the Raft leader and the member the \
         primary's Patroni was connected to; {reelected}",
        dcs.label()
    );
    std::thread::sleep(DCS_LEADER_LOSS_WATCH);
    let log = nodes.log(primary);
    print_complaints(dcs.label(), log.get(log_before..).unwrap_or_default());
    poller.assert_primary_throughout(primary, since_ms);

    let survivors = nodes.running();
    let leader = wait_settled(nodes, &survivors, SETTLE_MAX);
    assert_eq!(
        leader, primary,
        "the leader key moved while the DCS changed leader"
    );
    let status = nodes
        .node_status(primary)
        .expect("the primary's REST API answers");
    assert_eq!(status["role"], "primary", "{status}");
    assert_eq!(
        status["timeline"], timeline_before,
        "the timeline changed: there was a promotion"
    );
    let last_seen_s = status["dcs_last_seen"].as_u64().unwrap_or(0);
    let age_s = (now_ms() / 1000).saturating_sub(last_seen_s);
    assert!(
        age_s <= 10,
        "the primary last reached the DCS {age_s} s ago: {status}"
    );
    assert_listed_leader(nodes, primary);
    let probe = written.last().unwrap() + 1;
    sql::insert(&nodes.bin_dir, nodes.pg_port(primary), probe).unwrap_or_else(|error| {
        panic!("the primary refused a write after the DCS leader died: {error}")
    });
    written.insert(probe);
    sql::assert_has_rows(
        &nodes.bin_dir,
        nodes.pg_port(primary),
        written,
        "after the DCS leader's death",
    );
}

/// The DCS member (1-based, in `hosts` order) the Patroni of node `node`
/// talks to: the last server its log says it selected (Patroni logs every
/// change), confirmed by an open connection from its process to that
/// member (its watch stream never closes for long).
fn dcs_member_in_use(nodes: &PatroniNodes, node: usize, hosts: &[String]) -> usize {
    const SELECTED: &str = "Selected new etcd server http://";
    let log = nodes.log(node);
    let server = log
        .lines()
        .filter_map(|line| Some(line.split_once(SELECTED)?.1.trim()))
        .next_back()
        .unwrap_or_else(|| panic!("pg{node}'s log names no etcd server it selected"));
    let member = hosts
        .iter()
        .position(|host| host == server)
        .unwrap_or_else(|| panic!("pg{node} selected {server}, not one of {hosts:?}"))
        + 1;
    let (_, port) = server.rsplit_once(':').expect("host:port");
    let port: u16 = port.parse().expect("a port number");
    let pid = nodes.pid(node);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !has_connection_to(pid, port) {
        assert!(
            Instant::now() < deadline,
            "pg{node}'s Patroni (pid {pid}) has no connection to {server}, the server its \
             log says it selected"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    member
}

/// Makes `member` the DCS's Raft leader with `etcdctl move-leader`,
/// unless it leads already, and waits until it does.
fn make_leader(dcs: &mut dyn Dcs, member: usize) {
    if dcs.leader() == member {
        return;
    }
    crate::common::etcdctl::require();
    let endpoints = dcs.hosts().join(",");
    let (ok, out) = crate::common::etcdctl::run(
        &endpoints,
        &["move-leader", &dcs.member_id_hex(member)],
        None,
    );
    assert!(ok, "etcdctl move-leader to member {member} failed: {out}");
    let deadline = Instant::now() + SETTLE_MAX;
    while dcs.leader() != member {
        assert!(
            Instant::now() < deadline,
            "member {member} does not lead after etcdctl move-leader: {out}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Panics unless `patronictl list -f json`, which reads the DCS itself,
/// works and names `primary` the leader.
fn assert_listed_leader(nodes: &PatroniNodes, primary: usize) {
    let listed = nodes.patronictl(&["list", "-f", "json"]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&listed.stdout),
        String::from_utf8_lossy(&listed.stderr)
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&listed.stdout)
        .unwrap_or_else(|error| panic!("patronictl list -f json ({error}): {said}"));
    let leaders: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|row| row["Role"] == "Leader")
        .map(|row| &row["Member"])
        .collect();
    assert!(
        listed.status.success() && leaders == [&serde_json::json!(nodes.name(primary))],
        "patronictl list does not name {} the only leader: {said}",
        nodes.name(primary)
    );
}

/// Prints the warnings and errors in `log`, the primary's Patroni's
/// output while the DCS changed leader: what the loss cost it.
fn print_complaints(label: &str, log: &str) {
    let complaints: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("WARNING") || line.contains("ERROR"))
        .collect();
    eprintln!(
        "patroni on {label}: the primary's Patroni logged {} warnings and errors while the \
         DCS changed leader{}",
        complaints.len(),
        complaints
            .iter()
            .take(COMPLAINTS_SHOWN_MAX)
            .map(|line| format!("\n  {line}"))
            .collect::<String>()
    );
}
