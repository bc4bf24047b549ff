//! What `bench zookeeper --compare-zookeeper`'s load rounds
//! ([`super::compare`]) and failover runs ([`super::failover`]) share: the
//! bellwether cluster they start, which system a run measured, and how
//! runs are summed up.

use crate::process_cluster::{ClusterLayout, ProcessCluster};
use anyhow::Result;
use serde::Serialize;
use std::path::Path;

/// Members of each cluster.
pub const NODES: usize = 3;
/// bellwether's heartbeat interval, ms (the member's default).
const HEARTBEAT_MS: u64 = 100;
/// bellwether's election timeout, ms (the member's default).
const ELECTION_MS: u64 = 1000;

/// Which system a run loaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    /// The bellwether cluster.
    Bellwether,
    /// The ZooKeeper ensemble.
    Zookeeper,
}

/// The median; the mean of the middle two for an even count.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    })
}

/// Starts a fresh bellwether cluster in `dir` whose member i also serves
/// ZooKeeper's protocol on `127.0.0.1:base_port+300+i`; waits for nothing.
pub fn start_bellwether(dir: &Path, net: u8, base_port: u16) -> Result<ProcessCluster> {
    ProcessCluster::start_with_member_args(
        ClusterLayout {
            dir: dir.to_path_buf(),
            net,
            base_port,
            nodes: NODES,
            heartbeat_ms: HEARTBEAT_MS,
            election_ms: ELECTION_MS,
        },
        Vec::new(),
        |i| {
            vec![
                "--zookeeper-listen".to_string(),
                bellwether_cli_common::up_layout::zookeeper_address(base_port, i),
                "--peer-zookeeper".to_string(),
                bellwether_cli_common::up_layout::peer_zookeeper(base_port, NODES),
            ]
        },
    )
}
