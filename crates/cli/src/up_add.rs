//! `bellwether up add`: one more member for the cluster a running
//! `bellwether up` looks after.
//!
//! Member k (the next free number in the directory) gets the ports `up`
//! would have given it: peers on base+k, HTTP on base+100+k, the etcd API
//! on base+200+k. The cluster adds it through etcd's MemberAdd, exactly as
//! `bellwether node --join` does (the join record lands in `DIR/n<k>/`).
//! Only then is `DIR/n<k>.toml` written, so the running `up`, which starts
//! any new config it finds, never starts a member the cluster refused. A
//! crash in between leaves a join record without a config; the next
//! `up add` finishes that add instead of making another.

use anyhow::{bail, Context, Result};
use bellwether_cli_common::up_layout::{
    client_address, existing_members, http_address, peer_address, MEMBERS_MAX, PID_FILE,
};
use bellwether_core::NodeId;
use bellwether_server::config::ConfigLayer;
use bellwether_server::NodeStatus;
use clap::Args;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Flags of `bellwether up add`.
#[derive(Args, Debug)]
pub struct UpAddArgs {
    /// The directory of the running `bellwether up`.
    #[arg(long, default_value = "bellwether-data")]
    dir: PathBuf,
    /// Keep the new member a learner (no vote) until `etcdctl member
    /// promote`.
    #[arg(long)]
    learner: bool,
    /// How long to wait, in seconds, for the new member to catch up and
    /// take its role (0: do not wait).
    #[arg(long, default_value_t = 60)]
    wait_seconds: u64,
}

/// Adds member k and waits until it has its role.
pub fn execute(args: UpAddArgs) -> Result<ExitCode> {
    let existing = existing_members(&args.dir);
    if existing == 0 {
        bail!(
            "{} holds no cluster; start one with `bellwether up --dir {}`",
            args.dir.display(),
            args.dir.display()
        );
    }
    check_up_runs(&args.dir)?;
    let k = existing + 1;
    if k > MEMBERS_MAX {
        bail!("`up` runs at most {MEMBERS_MAX} members");
    }
    let first = ConfigLayer::from_file(&args.dir.join("n1.toml"))?;
    let base = bellwether_cli_common::up_layout::recorded_base_port(&args.dir)?;
    let dir = args
        .dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", args.dir.display()))?;
    let mut layer = ConfigLayer {
        cluster: first.cluster.clone(),
        // Named after its files and ports, whatever id the cluster gives
        // it (one taken outside `up` makes them differ).
        name: Some(format!("n{k}")),
        peer_listen: Some(peer_address(base, k)),
        http_listen: Some(http_address(base, k)),
        client_listen: Some(client_address(base, k)),
        zookeeper_listen: Some(bellwether_cli_common::up_layout::zookeeper_address(base, k)),
        data_dir: Some(dir.join(format!("n{k}"))),
        heartbeat_ms: first.heartbeat_ms,
        election_ms: first.election_ms,
        ..ConfigLayer::default()
    };
    if first.cert_file.is_some() || first.peer_cert_file.is_some() {
        secure(&dir, k, &first, &mut layer)?;
    }
    let endpoints: Vec<String> = (1..k).map(|i| client_address(base, i)).collect();
    let joined = crate::join::joined(&layer, &endpoints, args.learner)?;
    write_config(&dir.join(format!("n{k}.toml")), &layer)?;
    let role = if args.learner { "learner" } else { "voter" };
    println!(
        "member n{k} (id {}) added as a {role}; `bellwether up` starts it now",
        joined.id.0
    );
    println!(
        "  n{k}: peers {}  etcd API {}  http http://{}/",
        peer_address(base, k),
        client_address(base, k),
        http_address(base, k)
    );
    if args.wait_seconds == 0 {
        return Ok(ExitCode::SUCCESS);
    }
    let http: SocketAddr = http_address(base, k).parse()?;
    let mut every_member = endpoints;
    every_member.push(client_address(base, k));
    let timeout = Duration::from_secs(args.wait_seconds);
    let tls = crate::join::member_client_tls(&layer)?;
    wait_for_role(http, args.learner, timeout)
        .and_then(|()| wait_until_started(&every_member, joined.id, tls, timeout))
        .with_context(|| format!("see {}", dir.join(format!("n{k}.log")).display()))?;
    println!("member n{k} caught up and is a {role}");
    Ok(ExitCode::SUCCESS)
}

/// Fails unless a `bellwether up` runs in `dir`: it is the one that
/// starts and looks after the new member.
fn check_up_runs(dir: &Path) -> Result<()> {
    if running_up(dir).is_none() {
        bail!(
            "no `bellwether up` runs in {}; start it first (it runs the new member)",
            dir.display()
        );
    }
    Ok(())
}

/// The pid of the `bellwether up` that runs in `dir`, if one does: the
/// process `DIR/up.pid` names, alive and started as `… up …`.
pub fn running_up(dir: &Path) -> Option<u32> {
    let pid: u32 = std::fs::read_to_string(dir.join(PID_FILE))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let command_line = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mut arguments = command_line.split(|b| *b == 0);
    arguments.any(|a| a == b"up").then_some(pid)
}

/// The new member's config: its addresses and timing, no id and no peers
/// (those come from its join record).
fn write_config(path: &Path, layer: &ConfigLayer) -> Result<()> {
    let text = layer.to_toml()?;
    let temporary = path.with_extension("toml.tmp");
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// Waits until the member at `http` is in the configuration with the
/// role asked for and has applied what it knows to be committed.
fn wait_for_role(http: SocketAddr, learner: bool, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let status: Option<NodeStatus> = bellwether_cli_common::up_layout::poll(&[http])
            .pop()
            .flatten();
        if let Some(status) = &status {
            if !status.outside && status.learner == learner && status.is_ready() {
                return Ok(());
            }
        }
        if Instant::now() >= deadline {
            bail!(
                "the new member did not become a {} within {timeout:?} (last status: {})",
                if learner { "learner" } else { "voter" },
                status.map_or("no answer".to_string(), |s| format!(
                    "{}, learner {}, outside {}",
                    s.role.as_str(),
                    s.learner,
                    s.outside
                ))
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Gives member `k` of a `--tls` cluster what member 1 has: client TLS
/// with a certificate from the CA in `DIR/tls`, and peer TLS with one from
/// `DIR/tls/peer`. Its HTTP port stays plain, as `up` makes them (`up add`
/// polls it).
fn secure(dir: &Path, k: usize, first: &ConfigLayer, layer: &mut ConfigLayer) -> Result<()> {
    let name = format!("n{k}");
    let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
    let issue = |ca_dir: &Path| -> Result<(PathBuf, PathBuf)> {
        if !ca_dir.join(bellwether_cli_common::certs::CA_FILE).exists() {
            bail!(
                "{} has no CA to sign {name}'s certificate: `up add` grows clusters made by `up --tls`",
                ca_dir.display()
            );
        }
        bellwether_cli_common::certs::issue(ca_dir, std::slice::from_ref(&name), &hosts)?;
        Ok((
            ca_dir.join(format!("{name}.pem")),
            ca_dir.join(format!("{name}-key.pem")),
        ))
    };
    if first.cert_file.is_some() {
        let (cert, key) = issue(&dir.join("tls"))?;
        layer.cert_file = Some(cert);
        layer.key_file = Some(key);
        layer.trusted_ca_file = first.trusted_ca_file.clone();
        layer.client_cert_auth = first.client_cert_auth;
    }
    if first.peer_cert_file.is_some() {
        let (cert, key) = issue(&dir.join("tls").join("peer"))?;
        layer.peer_cert_file = Some(cert);
        layer.peer_key_file = Some(key);
        layer.peer_trusted_ca_file = first.peer_trusted_ca_file.clone();
    }
    Ok(())
}

/// Waits until member `id` shows as started (with a name and client URLs,
/// which it publishes once it runs) in its own member list, the last of
/// `clients`, and in that of every other member that answers. Each member
/// answers from what it applied, as etcd 3.4 does, so a list read next
/// from any running member shows it. A member that does not answer
/// (stopped, or removed) is not waited for.
fn wait_until_started(
    clients: &[String],
    id: NodeId,
    tls: Option<tonic::transport::ClientTlsConfig>,
    timeout: Duration,
) -> Result<()> {
    let (own, others) = clients.split_last().context("no member to ask")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut lagging = None;
            if lists_started(own, id, tls.as_ref()).await != Some(true) {
                lagging = Some(own);
            }
            for other in others {
                if lagging.is_none() && lists_started(other, id, tls.as_ref()).await == Some(false)
                {
                    lagging = Some(other);
                }
            }
            let Some(lagging) = lagging else {
                return Ok(());
            };
            if tokio::time::Instant::now() >= deadline {
                bail!(
                    "member {} is not listed as started at {lagging} within {timeout:?}",
                    id.0
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
}

/// Whether the member list at `client` shows member `id` started; `None`
/// when that member does not answer within 2 s, or is not in its own list
/// (it was removed and runs on alone).
async fn lists_started(
    client: &str,
    id: NodeId,
    tls: Option<&tonic::transport::ClientTlsConfig>,
) -> Option<bool> {
    use bellwether_api::etcdserverpb::{cluster_client::ClusterClient, MemberListRequest};
    let listed = async {
        let channel = crate::join::member_channel(client, tls).await?;
        let list = ClusterClient::new(channel)
            .member_list(MemberListRequest::default())
            .await?;
        let list = list.into_inner();
        let answering = list.header.map(|h| h.member_id);
        if !list.members.iter().any(|m| Some(m.id) == answering) {
            return anyhow::Ok(None);
        }
        let started = list
            .members
            .iter()
            .any(|m| m.id == id.0 && !m.name.is_empty() && !m.client_urls.is_empty());
        anyhow::Ok(Some(started))
    };
    tokio::time::timeout(Duration::from_secs(2), listed)
        .await
        .ok()?
        .ok()?
}
