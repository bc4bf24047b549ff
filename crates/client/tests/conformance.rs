//! The client crate's conformance suite: every scenario runs against a
//! 3-member bellwether cluster and against a real etcd 3.4 (Debian's
//! etcd-server, started here), with the same code. A scenario that passes
//! on one and fails on the other is a bellwether bug or a crate bug that
//! only etcd's semantics hide; either way the test fails.
//!
//! The scenarios of one backend run one after another on one cluster, each
//! under its own names; all failures are reported together.

#[path = "../../cli/tests/common/mod.rs"]
mod common;

mod scenarios;

use bellwether_client::Client;
use common::etcd_server::EtcdServer;
use common::Cluster;
use std::time::Duration;

/// A bound for anything that only waits (a loaded 2-core machine).
pub const WAIT: Duration = Duration::from_secs(30);

/// Runs every scenario against `endpoints`, labelled `backend`, and fails
/// with the list of the scenarios that failed. `BELLWETHER_SCENARIO=TEXT`
/// runs only the scenarios whose names contain TEXT.
async fn run_all(backend: &str, endpoints: Vec<String>) {
    let mut failures = Vec::new();
    let all = scenarios::all();
    assert!(all.len() >= 30, "the suite lost scenarios: {}", all.len());
    // BELLWETHER_SCENARIO=part runs only the scenarios whose names hold it.
    let only = std::env::var("BELLWETHER_SCENARIO").unwrap_or_default();
    for (name, scenario) in all {
        if !name.contains(&only) {
            continue;
        }
        let client = Client::connect(&endpoints).expect("client");
        let tag = format!("{backend}-{name}");
        let run = tokio::spawn(scenario(client, tag));
        match tokio::time::timeout(WAIT * 2, run).await {
            Ok(Ok(())) => eprintln!("{backend}: {name} passed"),
            Ok(Err(panic)) => failures.push(format!("{name}: {panic}")),
            Err(_) => failures.push(format!("{name}: timed out")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} scenario(s) failed on {backend}:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_on_bellwether() {
    let mut cluster = Cluster::start("client-conformance", 3, 50, 300);
    let all = cluster.all();
    cluster.wait_leader(&all, WAIT);
    let endpoints = all.iter().map(|i| cluster.client(*i).to_string()).collect();
    run_all("bellwether", endpoints).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scenarios_on_etcd() {
    let etcd = EtcdServer::start("client-conformance-etcd");
    run_all("etcd", vec![etcd.client.to_string()]).await;
}
