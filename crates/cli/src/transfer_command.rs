//! `bellwether transfer [--to ID]`: hands the cluster's leadership to
//! another member through etcd's Maintenance.MoveLeader, as `etcdctl
//! move-leader` does. It asks every endpoint for its status, sends the
//! call to the member that says it leads, and prints how long the
//! hand-over took. Without `--to`, the member with the highest applied
//! index other than the leader is chosen (lowest id on ties).

use crate::endpoints::ClientArgs;
use anyhow::{bail, Context, Result};
use bellwether_client::Client;
use bellwether_core::NodeId;
use clap::Args;
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// How long one status call may take.
const STATUS_TIMEOUT: Duration = Duration::from_secs(2);

/// Flags of `bellwether transfer`.
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// The member that should lead (its id); default: the most caught-up
    /// other member.
    #[arg(long)]
    to: Option<u64>,
    /// The endpoints, TLS files and user, as every client command takes
    /// them (MoveLeader needs the root user when auth is on).
    #[command(flatten)]
    cluster: ClientArgs,
}

/// One endpoint's answer to Status.
struct Seen {
    client: Client,
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
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    // The clients' channels need the runtime to exist when made.
    let _inside = runtime.enter();
    let clients = args.cluster.connect_each()?;
    runtime.block_on(transfer(clients, args.to.map(NodeId)))
}

async fn transfer(clients: Vec<(String, Client)>, to: Option<NodeId>) -> Result<ExitCode> {
    let mut seen = Vec::new();
    let mut failures = Vec::new();
    let endpoints: Vec<String> = clients.iter().map(|(e, _)| e.clone()).collect();
    for (endpoint, client) in clients {
        match tokio::time::timeout(STATUS_TIMEOUT, client.member_status()).await {
            Ok(Ok(answer)) => seen.push(Seen {
                member: answer.header.and_then(|h| member(h.member_id)),
                leader: member(answer.leader),
                applied: answer.raft_applied_index,
                client,
            }),
            Ok(Err(error)) => failures.push(format!("{endpoint}: {error}")),
            Err(_) => failures.push(format!("{endpoint}: no answer in {STATUS_TIMEOUT:?}")),
        }
    }
    let Some((leader, client)) = seen.iter().find_map(|s| match s.member {
        Some(member) if s.leader == Some(member) => Some((member, &s.client)),
        _ => None,
    }) else {
        if seen.is_empty() {
            // Say what the members said: a TLS port, a missing user or a
            // wrong password is the caller's to fix, not the cluster's.
            bail!(
                "no member answered its status ({}); for a cluster served over TLS pass \
                 --cacert (and --cert/--key), with auth on pass --user",
                failures.join("; ")
            );
        }
        bail!(
            "no endpoint of {} says it leads; does the cluster have a leader?",
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
    client
        .move_leader(target.0)
        .await
        .map_err(|error| match error {
            bellwether_client::Error::Status(status)
                if status.code() == tonic::Code::PermissionDenied
                    || status.message().contains("user name is empty") =>
            {
                anyhow::anyhow!(
                    "{}; with auth on, MoveLeader needs the root user: pass --user root[:PASSWORD]",
                    status.message()
                )
            }
            bellwether_client::Error::Status(status) => anyhow::anyhow!("{}", status.message()),
            error => error.into(),
        })
        .with_context(|| format!("moving leadership from n{} to n{}", leader.0, target.0))?;
    println!(
        "leadership moved from n{} to n{} in {:.1} ms",
        leader.0,
        target.0,
        started.elapsed().as_secs_f64() * 1000.0
    );
    Ok(ExitCode::SUCCESS)
}
