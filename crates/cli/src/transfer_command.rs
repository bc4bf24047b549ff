//! `bellwether transfer [--to ID]`: hands the cluster's leadership to
//! another member through etcd's Maintenance.MoveLeader, as `etcdctl
//! move-leader` does. It asks every endpoint for its status, sends the
//! call to the member that says it leads, and prints how long the
//! hand-over took. Without `--to`, the member with the highest applied
//! index other than the leader is chosen (lowest id on ties).

use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_core::NodeId;
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
    /// The member that answered, if its answer says.
    member: Option<NodeId>,
    /// The leader it knows, if any.
    leader: Option<NodeId>,
    applied: u64,
}

/// A member id from etcd's API, where 0 means none.
fn member(id: u64) -> Option<NodeId> {
    (id != 0).then_some(NodeId(id))
}

/// Runs `bellwether transfer`.
pub fn execute(args: TransferArgs) -> Result<ExitCode> {
    let endpoints = crate::endpoints::resolve(args.endpoints.as_deref());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(transfer(&endpoints, args.to.map(NodeId)))
}

async fn transfer(endpoints: &[String], to: Option<NodeId>) -> Result<ExitCode> {
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
            seen.push(Seen {
                channel,
                member: answer.header.and_then(|h| member(h.member_id)),
                leader: member(answer.leader),
                applied: answer.raft_applied_index,
            });
        }
    }
    let Some((leader, channel)) = seen.iter().find_map(|s| match s.member {
        Some(member) if s.leader == Some(member) => Some((member, &s.channel)),
        _ => None,
    }) else {
        bail!(
            "no endpoint of {} says it leads; is the cluster up and does it have a leader?",
            endpoints.join(",")
        );
    };
    let target = match to {
        Some(target) => target,
        None => seen
            .iter()
            .filter_map(|s| s.member.map(|member| (s.applied, member)))
            .filter(|(_, member)| *member != leader)
            .max_by_key(|(applied, member)| (*applied, std::cmp::Reverse(*member)))
            .map(|(_, member)| member)
            .context("no other member answered; name one with --to")?,
    };
    if target == leader {
        println!("n{} already leads", target.0);
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    MaintenanceClient::new(channel.clone())
        .move_leader(pb::MoveLeaderRequest {
            target_id: target.0,
        })
        .await
        .map_err(|status| anyhow::anyhow!("{}", status.message()))
        .with_context(|| format!("moving leadership from n{} to n{}", leader.0, target.0))?;
    println!(
        "leadership moved from n{} to n{} in {:.1} ms",
        leader.0,
        target.0,
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
