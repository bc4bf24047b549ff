//! `bellwether up`: a local cluster of N member processes on loopback.
//!
//! Node i listens for peers on `base_port + i`, serves HTTP on
//! `base_port + 100 + i`, the etcd API on `base_port + 200 + i` and
//! ZooKeeper's protocol on `base_port + 300 + i`. Each member gets `DIR/n<i>.toml`, its data in
//! `DIR/n<i>/`, its log in `DIR/n<i>.log` and its pid in `DIR/n<i>.pid`.
//! Running `up` again on the same directory restarts the same cluster with
//! its data. Ctrl-C stops every member cleanly (SIGTERM, so a leader hands
//! over first).
//!
//! `bellwether up add` grows the running cluster (see [`crate::up_add`]):
//! it has the cluster add member k, then writes `DIR/n<k>.toml`. The
//! running `up` notices the new config, starts the member and looks after
//! it like the others. `DIR/up.pid` names the running `up`.

use crate::signals::{send_signal, SIGTERM};
use crate::up_layout::{
    client_address, existing_members, http_address, http_addresses, peer_address, poll,
    zookeeper_address, MEMBERS_MAX, PID_FILE,
};
use anyhow::{bail, Context, Result};
use bellwether_core::{NodeId, Role};
use bellwether_server::config::ConfigLayer;
use bellwether_server::NodeStatus;
use clap::Args;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

/// Flags of `bellwether up`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct UpArgs {
    #[command(subcommand)]
    action: Option<UpAction>,
    /// Number of members (default 3; a directory that holds a cluster
    /// restarts all of its members).
    #[arg(long)]
    nodes: Option<usize>,
    /// Directory for configs, data, logs and pid files.
    #[arg(long, default_value = "bellwether-data")]
    dir: PathBuf,
    /// Node i uses peer port base+i and HTTP port base+100+i.
    #[arg(long, default_value_t = 7000)]
    base_port: u16,
    /// Heartbeat interval in ms.
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Minimum election timeout in ms.
    #[arg(long, default_value_t = 1000)]
    election_ms: u64,
    /// Members' leadership priorities as ID=PRIORITY, comma-separated
    /// (unlisted: 0): the leader hands over to the highest caught-up one.
    #[arg(long, value_delimiter = ',')]
    priority: Vec<String>,
    /// Secure the cluster: throwaway CAs and certificates in DIR/tls
    /// (`bellwether certs`), TLS on every client port, mutual TLS between
    /// members (with a CA of their own, DIR/tls/peer), and a client
    /// certificate for etcdctl (DIR/tls/client.pem).
    #[arg(long)]
    tls: bool,
}

/// What `bellwether up` can do besides starting a cluster.
#[derive(clap::Subcommand, Debug)]
enum UpAction {
    /// Add a member to the cluster a running `bellwether up` looks after:
    /// the cluster adds it, and `up` starts it. It catches up as a learner
    /// and becomes a voter (unless --learner).
    Add(crate::up_add::UpAddArgs),
}

/// Writes the configs of a new cluster; returns how many members it has.
fn write_configs(args: &UpArgs) -> Result<usize> {
    let existing = existing_members(&args.dir);
    let nodes = args
        .nodes
        .unwrap_or(if existing > 0 { existing } else { 3 });
    if nodes == 0 || nodes > MEMBERS_MAX {
        bail!("--nodes must be between 1 and {MEMBERS_MAX}");
    }
    if existing > 0 && existing != nodes {
        bail!(
            "{} holds a {existing}-node cluster; run without --nodes to restart it, or pick another --dir",
            args.dir.display()
        );
    }
    if existing == nodes {
        refuse_creation_flags(args)?;
        return Ok(nodes); // Restart with the configs (and data) already there.
    }
    check_priorities(&args.priority, nodes)?;
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("cannot create {}", args.dir.display()))?;
    let tls_dir = args.dir.join("tls");
    if args.tls {
        issue_certificates(&tls_dir, nodes)?;
    }
    for i in 1..=nodes {
        let text = member_config(args, nodes, i, &tls_dir)?.to_toml()?;
        std::fs::write(args.dir.join(format!("n{i}.toml")), text)?;
    }
    Ok(nodes)
}

/// Refuses, on a restart, the flags that only shape a new cluster's
/// configs (they would be silently ignored otherwise).
fn refuse_creation_flags(args: &UpArgs) -> Result<()> {
    if args.tls {
        bail!(
            "--tls is set when a cluster is created; {} already holds one",
            args.dir.display()
        );
    }
    if !args.priority.is_empty() {
        bail!(
            "--priority is written into the configs when a cluster is created; edit peer_priority in {}/n*.toml instead",
            args.dir.display()
        );
    }
    Ok(())
}

/// Checks that every `--priority` entry is ID=PRIORITY with a member's id.
fn check_priorities(priority: &[String], nodes: usize) -> Result<()> {
    for entry in priority {
        let valid = entry.split_once('=').is_some_and(|(id, priority)| {
            id.trim()
                .parse::<usize>()
                .is_ok_and(|id| (1..=nodes).contains(&id))
                && priority.trim().parse::<u32>().is_ok()
        });
        if !valid {
            bail!("--priority {entry:?}: write ID=PRIORITY with ID from 1 to {nodes} (e.g. 3=5)");
        }
    }
    Ok(())
}

/// Issues the throwaway certificates of `--tls` into `tls_dir`: one CA for
/// the members' and etcdctl's client certificates, another for peers.
fn issue_certificates(tls_dir: &Path, nodes: usize) -> Result<()> {
    let members: Vec<String> = (1..=nodes).map(|i| format!("n{i}")).collect();
    let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
    let mut names = members.clone();
    names.push("client".into());
    crate::certs::issue(tls_dir, &names, &hosts)?;
    // Peers get a CA of their own: a certificate that CA signs can act
    // as any member, so no client certificate may pass as one.
    crate::certs::issue(&tls_dir.join("peer"), &members, &hosts)?;
    Ok(())
}

/// The config file of member `i` of a new `nodes`-member cluster.
fn member_config(args: &UpArgs, nodes: usize, i: usize, tls_dir: &Path) -> Result<ConfigLayer> {
    let list = |f: fn(u16, usize) -> String| {
        Some(
            (1..=nodes)
                .map(|i| format!("{i}={}", f(args.base_port, i)))
                .collect(),
        )
    };
    let data = args.dir.join(format!("n{i}"));
    let mut layer = ConfigLayer {
        id: Some(i as u64),
        cluster: Some("local".into()),
        peer_listen: Some(peer_address(args.base_port, i)),
        http_listen: Some(http_address(args.base_port, i)),
        client_listen: Some(client_address(args.base_port, i)),
        zookeeper_listen: Some(zookeeper_address(args.base_port, i)),
        data_dir: Some(data.canonicalize().unwrap_or(data)),
        heartbeat_ms: Some(args.heartbeat_ms),
        election_ms: Some(args.election_ms),
        peers: list(peer_address),
        peer_http: list(http_address),
        peer_client: list(client_address),
        peer_priority: Some(args.priority.iter().map(|p| p.trim().to_string()).collect()),
        ..ConfigLayer::default()
    };
    if args.tls {
        let tls = tls_dir.canonicalize()?;
        let peer = tls.join("peer");
        layer.cert_file = Some(tls.join(format!("n{i}.pem")));
        layer.key_file = Some(tls.join(format!("n{i}-key.pem")));
        layer.trusted_ca_file = Some(tls.join(crate::certs::CA_FILE));
        layer.client_cert_auth = Some(true);
        layer.peer_cert_file = Some(peer.join(format!("n{i}.pem")));
        layer.peer_key_file = Some(peer.join(format!("n{i}-key.pem")));
        layer.peer_trusted_ca_file = Some(peer.join(crate::certs::CA_FILE));
    }
    Ok(layer)
}

/// Starts member `i` of the cluster described in `dir`.
pub fn spawn_member(dir: &Path, i: usize) -> Result<Child> {
    let log = std::fs::File::create(dir.join(format!("n{i}.log")))?;
    let child = Command::new(std::env::current_exe()?)
        .args(["node", "--config"])
        .arg(dir.join(format!("n{i}.toml")))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()
        .with_context(|| format!("cannot start member {i}"))?;
    std::fs::write(dir.join(format!("n{i}.pid")), child.id().to_string())?;
    Ok(child)
}

/// Sends SIGTERM, then SIGKILL after `grace`.
pub fn stop_members(children: &mut [Child], grace: Duration) {
    for child in children.iter() {
        let _ = send_signal(child.id(), SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for child in children.iter_mut() {
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Runs the local cluster until Ctrl-C.
pub fn execute(args: UpArgs) -> Result<ExitCode> {
    if let Some(UpAction::Add(add)) = args.action {
        return crate::up_add::execute(add);
    }
    if let Some(pid) = crate::up_add::running_up(&args.dir) {
        bail!(
            "`bellwether up` (pid {pid}) already runs the cluster in {}",
            args.dir.display()
        );
    }
    let nodes = write_configs(&args)?;
    let mut children = Vec::new();
    for i in 1..=nodes {
        children.push(spawn_member(&args.dir, i)?);
    }
    std::fs::write(args.dir.join(PID_FILE), std::process::id().to_string())?;
    let interrupted = termination_flag();
    let mut addresses = http_addresses(args.base_port, nodes);
    print_cluster(&args, nodes, &addresses);
    look_after(&args, &mut children, &mut addresses, &interrupted)?;
    println!("stopping members…");
    stop_members(&mut children, Duration::from_secs(5));
    let _ = std::fs::remove_file(args.dir.join(PID_FILE));
    Ok(ExitCode::SUCCESS)
}

/// A flag set once SIGTERM or SIGINT arrives (watched by a thread of its
/// own, as `up` runs no async runtime).
fn termination_flag() -> std::sync::Arc<std::sync::atomic::AtomicBool> {
    let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = interrupted.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(crate::node_command::termination());
        flag.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    interrupted
}

/// Prints the members' addresses and how to reach the cluster.
fn print_cluster(args: &UpArgs, nodes: usize, addresses: &[SocketAddr]) {
    println!("bellwether: {nodes}-node cluster in {}", args.dir.display());
    for (i, address) in addresses.iter().enumerate() {
        println!(
            "  n{}: peers {}  etcd API {}  zookeeper {}  http http://{address}/  (dashboard, /metrics, /status)",
            i + 1,
            peer_address(args.base_port, i + 1),
            client_address(args.base_port, i + 1),
            zookeeper_address(args.base_port, i + 1)
        );
    }
    let clients: Vec<String> = (1..=nodes)
        .map(|i| client_address(args.base_port, i))
        .collect();
    let tls_dir = args.dir.join("tls");
    if tls_dir.join(crate::certs::CA_FILE).exists() {
        let https: Vec<String> = clients.iter().map(|c| format!("https://{c}")).collect();
        let file = |name: &str| tls_dir.join(name).display().to_string();
        println!(
            "  etcdctl (TLS): etcdctl --endpoints={} --cacert={} --cert={} --key={} put greeting hello",
            https.join(","),
            file(crate::certs::CA_FILE),
            file("client.pem"),
            file("client-key.pem"),
        );
    } else {
        println!(
            "  etcdctl: etcdctl --endpoints={} put greeting hello",
            clients.join(",")
        );
    }
    let zookeepers: Vec<String> = (1..=nodes)
        .map(|i| zookeeper_address(args.base_port, i))
        .collect();
    println!(
        "  zookeeper clients (kazoo, Curator, zkCli.sh -server): {}",
        zookeepers.join(",")
    );
    println!(
        "  status: bellwether status --endpoints {}",
        addresses
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",")
    );
    println!(
        "  add a member: bellwether up add --dir {}",
        args.dir.display()
    );
    println!("  Ctrl-C stops every member");
}

/// Until `interrupted`: restarts members that exit, starts the members
/// `up add` configures, and prints each change of leader.
fn look_after(
    args: &UpArgs,
    children: &mut Vec<Child>,
    addresses: &mut Vec<SocketAddr>,
    interrupted: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let mut shown: Option<(Option<NodeId>, u64)> = None;
    while !interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        restart_exited(args, children)?;
        start_added(args, children, addresses)?;
        show_leader(&poll(addresses), &mut shown);
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Starts again every member whose process exited.
fn restart_exited(args: &UpArgs, children: &mut [Child]) -> Result<()> {
    for (i, child) in children.iter_mut().enumerate() {
        if let Ok(Some(status)) = child.try_wait() {
            println!(
                "member n{} exited ({status}); see {}",
                i + 1,
                args.dir.join(format!("n{}.log", i + 1)).display()
            );
            *child = spawn_member(&args.dir, i + 1)?;
        }
    }
    Ok(())
}

/// Starts the next member once `up add` wrote its config.
fn start_added(
    args: &UpArgs,
    children: &mut Vec<Child>,
    addresses: &mut Vec<SocketAddr>,
) -> Result<()> {
    let next = children.len() + 1;
    if next <= MEMBERS_MAX && args.dir.join(format!("n{next}.toml")).exists() {
        children.push(spawn_member(&args.dir, next)?);
        addresses.push(http_address(args.base_port, next).parse()?);
        println!(
            "member n{next} started: peers {}  etcd API {}  zookeeper {}  http http://{}/",
            peer_address(args.base_port, next),
            client_address(args.base_port, next),
            zookeeper_address(args.base_port, next),
            http_address(args.base_port, next)
        );
    }
    Ok(())
}

/// Prints the leader (the one of the highest term) and its term when they
/// differ from what `shown` last printed.
fn show_leader(statuses: &[Option<NodeStatus>], shown: &mut Option<(Option<NodeId>, u64)>) {
    let leader = statuses
        .iter()
        .flatten()
        .filter(|s| s.role == Role::Leader)
        .max_by_key(|s| s.term)
        .map(|s| (Some(s.id), s.term));
    let current = leader.unwrap_or((
        None,
        statuses.iter().flatten().map(|s| s.term).max().unwrap_or(0),
    ));
    if *shown != Some(current) {
        let clock = chrono_like_now();
        match current.0 {
            Some(id) => println!("[{clock}] leader n{} (term {})", id.0, current.1),
            None => println!("[{clock}] no leader (term {})", current.1),
        }
        *shown = Some(current);
    }
}

fn chrono_like_now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let seconds = (ms / 1000) % 86_400;
    format!(
        "{:02}:{:02}:{:02}.{:03} UTC",
        seconds / 3600,
        (seconds / 60) % 60,
        seconds % 60,
        ms % 1000
    )
}
