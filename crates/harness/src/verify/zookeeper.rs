//! The ZooKeeper workload of `bellwether verify` (issue 44): the members
//! also serve ZooKeeper's client protocol (`--zookeeper-listen`, on
//! `base_port + 300 + i` as `bellwether up` places it), and the clients are
//! contenders that take turns leading through ZooKeeper's own recipe,
//! ephemeral sequential nodes, and write one register only through fenced
//! writes (`zookeeper_contender`), while the nemesis kills, pauses and
//! partitions members, so that sessions move between members and some end.
//!
//! Why this shape: the register is a plain data node written with setData
//! expecting a version, inside a multi with a check of the holder's
//! election node. A version has one value, so each write is a
//! compare-and-set the simulator's linearizability checker can take, and
//! the acknowledged versions form a chain in which no acknowledged write
//! may be missing and whose fencing tokens must never go down
//! (`zookeeper_check` says why that is "no two holders at once"). Reads
//! are a sync then a getData: ZooKeeper answers a plain read from the
//! member's own state, which may be stale, and that is allowed; after a
//! sync it is not. A holder that hangs and wakes after its session ended
//! is what the fence is for; `--unfenced-writes` leaves the check out of
//! the multi, and the run must then fail.
//!
//! The run's nodes live under `/verify-<seed>`, made before the nemesis
//! starts; after it heals, one more linearizable read of the register
//! ends the history.

use super::zookeeper_check::{anomalies, FinalRead};
use super::zookeeper_contender::{decode, open_session, ZkSetup, REQUEST_TIMEOUT, SESSION_TIMEOUT};
use super::zookeeper_history::{Observation, ZkHistory};
use super::Verdict;
use anyhow::{bail, Result};
use std::collections::BTreeSet;
use std::time::Duration;
use tokio::time::Instant;
use zookeeper_client as zk;

/// Longest wait for the run's nodes to be made, or for the final read.
const SETUP_TIME_MAX: Duration = Duration::from_secs(30);
/// Pause between two attempts at the setup or the final read.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Anomalies spelled out in the verdict, at most (all are counted).
const ANOMALIES_SHOWN_MAX: usize = 3;

/// Member `i`'s ZooKeeper address, where `bellwether up` puts it.
pub fn zookeeper_address(base_port: u16, i: usize) -> String {
    bellwether_cli_common::up_layout::zookeeper_address(base_port, i)
}

/// Makes the run's nodes under `/verify-<seed>` (the register empty, at
/// version 0) through the members at `addresses`.
pub async fn prepare(addresses: &[String], seed: u64, origin: Instant) -> Result<ZkSetup> {
    let root = format!("/verify-{seed}");
    let setup = ZkSetup {
        connect: addresses.join(","),
        election: format!("{root}/election"),
        register: format!("{root}/register"),
        origin,
    };
    let deadline = Instant::now() + SETUP_TIME_MAX;
    let persistent = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
    for path in [&root, &setup.election, &setup.register] {
        loop {
            let made = match open_session(&setup.connect, SESSION_TIMEOUT).await {
                Some(zk) => {
                    let create = zk.create(path, &[], &persistent);
                    match tokio::time::timeout(REQUEST_TIMEOUT, create).await {
                        Ok(Ok(_) | Err(zk::Error::NodeExists)) => true,
                        Ok(Err(_)) | Err(_) => false,
                    }
                }
                None => false,
            };
            if made {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "cannot make {path} over ZooKeeper's protocol at {}",
                    setup.connect
                );
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }
    Ok(setup)
}

/// One linearizable read of the register on a new session, once the
/// cluster settled.
async fn final_read(setup: &ZkSetup) -> Result<FinalRead> {
    let deadline = Instant::now() + SETUP_TIME_MAX;
    loop {
        if let Some(zk) = open_session(&setup.connect, SESSION_TIMEOUT).await {
            let invoke_us = setup.now_us();
            let read = async {
                zk.sync(&setup.register).await?;
                zk.get_data(&setup.register).await
            };
            if let Ok(Ok((data, stat))) = tokio::time::timeout(REQUEST_TIMEOUT, read).await {
                let value = decode(&data)
                    .map_err(|garbage| anyhow::anyhow!("the register ends as {garbage}"))?;
                return Ok(FinalRead {
                    observation: Observation {
                        version: stat.version,
                        value,
                    },
                    invoke_us,
                    complete_us: setup.now_us(),
                });
            }
        }
        if Instant::now() >= deadline {
            bail!("the final read of {} failed", setup.register);
        }
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// Reads the register once more and checks the history.
pub async fn zookeeper_verdict(setup: &ZkSetup, history: ZkHistory) -> Result<Verdict> {
    let last = final_read(setup).await?;
    let found = anomalies(&history, &last);
    let c = history.counts;
    let tokens: BTreeSet<i64> = history.writes.iter().map(|w| w.token).collect();
    let holders: BTreeSet<u64> = history.writes.iter().map(|w| w.client).collect();
    let summary = format!(
        "{} leaderships on {} sessions (reconnected {} times), {} fenced writes acknowledged under {} tokens by {} contenders ({} refused by the fence, {} by the version, {} unanswered), {} linearizable reads, {} hung holders woke to write ({} refused, {} accepted; hung {:.1} s in all), the register ends at version {}",
        c.leaderships,
        c.sessions,
        c.reconnections,
        c.acked,
        tokens.len(),
        holders.len(),
        c.fenced_out,
        c.version_refused,
        c.unanswered,
        c.reads,
        c.hangs,
        c.stale_refused,
        c.stale_accepted,
        c.hung_ms as f64 / 1_000.0,
        last.observation.version
    );
    let anomaly = (!found.is_empty()).then(|| {
        let shown: Vec<&str> = found
            .iter()
            .take(ANOMALIES_SHOWN_MAX)
            .map(String::as_str)
            .collect();
        format!("{} anomalies: {}", found.len(), shown.join("; "))
    });
    let history_json = serde_json::json!({
        "operations": history.operations,
        "acknowledged_writes": history.writes,
        "observations": history.observations,
        "garbage": history.garbage,
        "counts": c,
        "final": { "version": last.observation.version, "value": last.observation.value },
        "anomalies": found,
    })
    .to_string();
    Ok(Verdict {
        summary,
        anomaly,
        history_json,
    })
}
