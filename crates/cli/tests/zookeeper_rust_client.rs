//! ZooKeeper's client protocol through a third-party Rust client (the
//! `zookeeper-client` crate), compared answer by answer with a real
//! Apache ZooKeeper 3.8 (Debian's `zookeeper` package): the same scenarios
//! (tests in zookeeper_rust_client/: every create mode, Stat fields,
//! versions, children, multi and multiRead, ACLs, one-shot and persistent
//! watches, session close and expiry, watches across a reconnect after the
//! session's server is killed) run against a follower of a real 3-server
//! ensemble and against a follower of a 3-member bellwether cluster, and
//! their canonical transcripts (zookeeper_rust_client/transcript.rs says
//! what is normalized) must be equal line by line, but for the
//! differences [`KNOWN_DIFFERENCES`] lists.
//!
//! Not covered here: a client reconnecting to a member that is behind it
//! (zookeeper_behind.rs shows it on bellwether with nftables).
//!
//! Needs java and /usr/share/java/zookeeper.jar (scripts/test.sh installs
//! the package).

mod common;

#[path = "zookeeper_rust_client/acls.rs"]
mod acls;
#[path = "zookeeper_rust_client/multi.rs"]
mod multi;
#[path = "zookeeper_rust_client/nodes.rs"]
mod nodes;
#[path = "zookeeper_rust_client/run.rs"]
mod run;
#[path = "zookeeper_rust_client/sessions.rs"]
mod sessions;
#[path = "zookeeper_rust_client/transcript.rs"]
mod transcript;
#[path = "zookeeper_rust_client/watches.rs"]
mod watches;

use common::zookeeper::{
    spawn_with_zookeeper, unified_diff, wait_accepting, zookeeper_address, RealZooKeeper,
};
use common::Cluster;
use run::{Run, Scenario, Servers};
use std::hash::{BuildHasher, Hasher};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A line bellwether answers differently from ZooKeeper 3.8, found by this
/// test. The test fails when the answers differ otherwise, and when they
/// no longer differ (then the entry goes).
struct KnownDifference {
    /// The scenario.
    scenario: &'static str,
    /// ZooKeeper's line.
    zookeeper: &'static str,
    /// bellwether's line.
    bellwether: &'static str,
}

/// Where bellwether's answers differ from ZooKeeper 3.8's (reported; each
/// is for crates/zookeeper or crates/server to fix).
const KNOWN_DIFFERENCES: &[KnownDifference] = &[];

/// Lines the reference transcript must hold, so that a run that went
/// wrong (no server, scenarios that lost their steps, a canonical form
/// that ate them) cannot pass: (scenario, line).
const ZOOKEEPER_ANSWERS: &[(&str, &str)] = &[];

/// Fewest scenarios a run has (issue 44 asks for 40).
const SCENARIOS_MIN: usize = 40;

/// Every scenario, in the order they run; the one that kills a server
/// last.
fn scenarios() -> Vec<Scenario> {
    [
        nodes::SCENARIOS,
        multi::SCENARIOS,
        acls::SCENARIOS,
        watches::SCENARIOS,
        sessions::SCENARIOS,
        sessions::LAST,
    ]
    .concat()
}

#[test]
fn rust_client_scenarios_match_real_zookeeper() {
    let name = "zookeeper-rust-client";
    let scenarios = scenarios();
    assert!(
        scenarios.len() >= SCENARIOS_MIN,
        "{} scenarios",
        scenarios.len()
    );
    // The cluster starts while the ensemble does.
    let mut cluster = Cluster::stopped(name, 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    let zookeeper = RealZooKeeper::start(name);
    let followers: Vec<_> = zookeeper.with_mode("follower").collect();
    let (first, second) = (followers[0].address.clone(), followers[1].address.clone());
    let java = followers[0].java;
    let servers = Servers {
        first: first.clone(),
        second,
        kill_first: Box::new(move || kill_pid(java)),
    };
    let expected = transcript(servers, &scenarios);
    zookeeper.stop();
    println!("real ZooKeeper 3.8's transcript (follower {first}):\n{expected}");
    check_reference(&expected, &scenarios);

    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let members: Vec<usize> = cluster.all().into_iter().filter(|i| *i != leader).collect();
    for i in cluster.all() {
        wait_accepting(&zookeeper_address(&cluster, i), Duration::from_secs(15));
    }
    let (first, second) = (members[0], members[1]);
    let mut member = MemberGuard(cluster.children[first - 1].take());
    let servers = Servers {
        first: zookeeper_address(&cluster, first),
        second: zookeeper_address(&cluster, second),
        kill_first: Box::new(move || member.kill()),
    };
    let actual = transcript(servers, &scenarios);
    println!("bellwether's transcript (n{first}):\n{actual}");
    assert_same_answers(
        &expected,
        &actual,
        &format!(
            "bellwether n{first} ({}); logs in {}",
            zookeeper_address(&cluster, first),
            cluster.dir.display()
        ),
    );
}

/// The scenarios run against `servers`, under a fresh random root: the
/// canonical transcript.
fn transcript(servers: Servers, scenarios: &[Scenario]) -> String {
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let root = format!("/bw-rust-client-{random:016x}");
    // Its own thread, so that the sessions keep pinging between steps.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut run = Run::new(servers, &root);
    runtime.block_on(run.scenarios(scenarios));
    let text = run.t.render();
    drop(run);
    runtime.shutdown_timeout(Duration::from_secs(5));
    text
}

/// The reference is a real run: every scenario's header, no step that
/// timed out, and the answers [`ZOOKEEPER_ANSWERS`] lists.
fn check_reference(expected: &str, scenarios: &[Scenario]) {
    let blocks = blocks(expected);
    let names: Vec<&str> = blocks.iter().map(|(name, _)| *name).collect();
    let wanted: Vec<&str> = scenarios.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, wanted, "the reference transcript's scenarios");
    assert!(
        !expected.contains("Timeout") && !expected.contains("SCENARIO TIMEOUT"),
        "a step timed out against real ZooKeeper:\n{expected}"
    );
    for (scenario, line) in ZOOKEEPER_ANSWERS {
        let block = blocks.iter().find(|(name, _)| name == scenario);
        assert!(
            block.is_some_and(|(_, lines)| lines.contains(line)),
            "real ZooKeeper's scenario {scenario} lacks {line:?}: the run went wrong"
        );
    }
}

/// The transcript's scenarios: (name, lines after the header).
fn blocks(text: &str) -> Vec<(&str, Vec<&str>)> {
    let mut blocks: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        match (line.strip_prefix("== "), blocks.last_mut()) {
            (Some(name), _) => blocks.push((name, Vec::new())),
            (None, Some((_, lines))) => lines.push(line),
            (None, None) => panic!("a transcript starts with {line:?}"),
        }
    }
    blocks
}

/// Every line the same, or different exactly as a known difference says;
/// every known difference still seen.
fn assert_same_answers(expected: &str, actual: &str, bellwether_name: &str) {
    let (zookeeper, bellwether) = (blocks(expected), blocks(actual));
    let mut unexpected = Vec::new();
    let mut seen = vec![false; KNOWN_DIFFERENCES.len()];
    let same_shape = zookeeper.len() == bellwether.len()
        && zookeeper
            .iter()
            .zip(&bellwether)
            .all(|(a, b)| a.0 == b.0 && a.1.len() == b.1.len());
    if same_shape {
        for ((scenario, a), (_, b)) in zookeeper.iter().zip(&bellwether) {
            for (a, b) in a.iter().zip(b) {
                if a == b {
                    continue;
                }
                let known = KNOWN_DIFFERENCES.iter().position(|known| {
                    known.scenario == *scenario && known.zookeeper == *a && known.bellwether == *b
                });
                match known {
                    Some(k) => seen[k] = true,
                    None => unexpected.push(*scenario),
                }
            }
        }
    }
    if !same_shape || !unexpected.is_empty() {
        unexpected.dedup();
        let a: Vec<&str> = expected.lines().collect();
        let b: Vec<&str> = actual.lines().collect();
        panic!(
            "bellwether answers unlike ZooKeeper 3.8 in scenarios {unexpected:?} \
             (or the transcripts' shapes differ)\n--- real ZooKeeper 3.8\n+++ {bellwether_name}\n{}",
            unified_diff(&a, &b, 3)
        );
    }
    let gone: Vec<&str> = KNOWN_DIFFERENCES
        .iter()
        .zip(&seen)
        .filter(|(_, seen)| !**seen)
        .map(|(known, _)| known.zookeeper)
        .collect();
    assert!(
        gone.is_empty(),
        "bellwether now answers {gone:?} as ZooKeeper does: remove them from KNOWN_DIFFERENCES"
    );
}

/// SIGKILL to a real ZooKeeper server's JVM (the test started it).
fn kill_pid(pid: u32) {
    let status = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .stdin(Stdio::null())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -KILL {pid} failed");
}

/// A bellwether member taken out of its cluster to be killed by a
/// scenario; killed on drop if the scenario never did.
struct MemberGuard(Option<Child>);

impl MemberGuard {
    fn kill(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for MemberGuard {
    fn drop(&mut self) {
        self.kill();
    }
}
