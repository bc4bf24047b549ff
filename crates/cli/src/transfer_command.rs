//! `bellwether transfer [--to ID]`: hands the cluster's leadership to
//! another member through etcd's Maintenance.MoveLeader, as `etcdctl
//! move-leader` does. It asks every endpoint for its status, sends the
//! call to the member that says it leads, and prints how long the
//! hand-over took. Without `--to`, the member with the highest applied
//! index other than the leader is chosen (lowest id on ties).

use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb as pb;
use clap::Args;
use pb::maintenance_client::MaintenanceClient;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tonic::transport::{Channel, Endpoint};

/// How long one status call may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// Flags of `bellwether transfer`.
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// The member that should lead (its id); default: the most caught-up
    /// other member.
    #[arg(long)]
    to: Option<u64>,
    /// Client endpoints (host:port), comma-separated; default from
    /// BELLWETHER_ENDPOINTS, ETCDCTL_ENDPOINTS or `bellwether up`'s cluster.
    #[arg(long)]
    endpoints: Option<String>,
}

/// One endpoint's answer to Status.
struct Seen {
    channel: Channel,
    member: u64,
    leader: u64,
    applied: u64,
}

/// Runs `bellwether transfer`.
pub fn execute(args: TransferArgs) -> Result<ExitCode> {
    let endpoints = crate::endpoints::resolve(args.endpoints.as_deref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(transfer(&endpoints, args.to))
}

async fn transfer(endpoints: &[String], to: Option<u64>) -> Result<ExitCode> {
    let mut seen = Vec::new();
    for endpoint in endpoints {
        let channel = Endpoint::from_shared(format!("http://{endpoint}"))
            .with_context(|| format!("bad endpoint {endpoint:?}"))?
            .connect_timeout(STATUS_TIMEOUT)
            .connect_lazy();
        let mut maintenance = MaintenanceClient::new(channel.clone());
        let call = maintenance.status(pb::StatusRequest {});
        if let Ok(Ok(answer)) = tokio::time::timeout(STATUS_TIMEOUT, call).await {
            let answer = answer.into_inner();
            let member = answer.header.map_or(0, |h| h.member_id);
            seen.push(Seen {
                channel,
                member,
                leader: answer.leader,
                applied: answer.raft_applied_index,
            });
        }
    }
    let Some(leader) = seen.iter().find(|s| s.member != 0 && s.member == s.leader) else {
        bail!(
            "no endpoint of {} says it leads; is the cluster up and does it have a leader?",
            endpoints.join(",")
        );
    };
    let target = match to {
        Some(target) => target,
        None => seen
            .iter()
            .filter(|s| s.member != leader.member)
            .max_by_key(|s| (s.applied, std::cmp::Reverse(s.member)))
            .map(|s| s.member)
            .context("no other member answered; name one with --to")?,
    };
    if target == leader.member {
        println!("n{target} already leads");
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    MaintenanceClient::new(leader.channel.clone())
        .move_leader(pb::MoveLeaderRequest { target_id: target })
        .await
        .map_err(|status| anyhow::anyhow!("{}", status.message()))
        .with_context(|| format!("moving leadership from n{} to n{target}", leader.member))?;
    println!(
        "leadership moved from n{} to n{target} in {:.1} ms",
        leader.member,
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
