//! `bellwether up`: a local cluster of N member processes on loopback.
//!
//! Node i listens for peers on `base_port + i`, serves HTTP on
//! `base_port + 100 + i`, the etcd API on `base_port + 200 + i` and
//! ZooKeeper's protocol on `base_port + 300 + i`. Each member gets `DIR/n<i>.toml`, its data in
//! `DIR/n<i>/`, its log in `DIR/n<i>.log` and its pid in `DIR/n<i>.pid`.
//! Running `up` again on the same directory restarts the same cluster with
//! its data and its ports (read back from `n1.toml`). Every port is tried
//! before any member starts, so a taken one is named at once; a member
//! that exits is started again with a growing delay, and one that keeps
//! failing to start stops `up` with its log's last lines
//! ([`crate::restart_backoff`]). Member logs are appended to, never
//! truncated. Ctrl-C stops every member cleanly (SIGTERM, so a leader hands
//! over first).
//!
//! `bellwether up add` grows the running cluster (see [`crate::up_add`]):
//! it has the cluster add member k, then writes `DIR/n<k>.toml`. The
//! running `up` notices the new config, starts the member and looks after
//! it like the others. `DIR/up.pid` names the running `up`.

use crate::port_check::{refuse_busy, PlannedPort};
use crate::restart_backoff::{AfterExit, RestartBackoff};
use anyhow::{bail, Context, Result};
use bellwether_cli_common::signals::{send_signal, SIGTERM};
use bellwether_cli_common::up_layout::{
    client_address, existing_members, http_address, http_addresses, peer_address, poll,
    recorded_base_port, zookeeper_address, MEMBERS_MAX, PID_FILE,
};
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
    /// Node i uses peer port base+i, HTTP base+100+i, the etcd API
    /// base+200+i and ZooKeeper base+300+i [default: 7000; a directory
    /// that holds a cluster keeps the ports it was created with].
    #[arg(long)]
    base_port: Option<u16>,
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

impl UpArgs {
    /// The cluster's base port, once [`write_configs`] has settled it.
    fn base(&self) -> u16 {
        self.base_port.expect("the base port is settled first")
    }
}

/// What `bellwether up` can do besides starting a cluster.
#[derive(clap::Subcommand, Debug)]
enum UpAction {
    /// Add a member to the cluster a running `bellwether up` looks after:
    /// the cluster adds it, and `up` starts it. It catches up as a learner
    /// and becomes a voter (unless --learner).
    Add(crate::up_add::UpAddArgs),
}

/// The base port new configs get when `--base-port` is not given.
const BASE_PORT_DEFAULT: u16 = 7000;

/// Writes the configs of a new cluster; returns how many members it has
/// and its base port.
fn write_configs(args: &mut UpArgs) -> Result<(usize, u16)> {
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
        // Restart with the configs (and data) already there.
        let recorded = recorded_base_port(&args.dir)?;
        if let Some(asked) = args.base_port.filter(|asked| *asked != recorded) {
            bail!(
                "{} holds a cluster on base port {recorded}, not {asked}; run without --base-port to restart it, or pick another --dir",
                args.dir.display()
            );
        }
        args.base_port = Some(recorded);
        refuse_busy(
            &planned_ports(args, nodes),
            "Another process holds it (is this cluster's `up` or a member of it still running?): stop that first.",
        )?;
        return Ok((nodes, recorded));
    }
    let base_port = *args.base_port.get_or_insert(BASE_PORT_DEFAULT);
    if base_port as usize + 300 + nodes > u16::MAX as usize {
        bail!("--base-port {base_port} leaves no room for {nodes} members' ports (base+300+i must be a port)");
    }
    check_priorities(&args.priority, nodes)?;
    refuse_busy(
        &planned_ports(args, nodes),
        &format!("Another process (a cluster started before?) holds it: stop that, or pick other ports with --base-port (now {base_port})."),
    )?;
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
    Ok((nodes, base_port))
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
    bellwether_cli_common::certs::issue(tls_dir, &names, &hosts)?;
    // Peers get a CA of their own: a certificate that CA signs can act
    // as any member, so no client certificate may pass as one.
    bellwether_cli_common::certs::issue(&tls_dir.join("peer"), &members, &hosts)?;
    Ok(())
}

/// The config file of member `i` of a new `nodes`-member cluster.
fn member_config(args: &UpArgs, nodes: usize, i: usize, tls_dir: &Path) -> Result<ConfigLayer> {
    let base_port = args.base_port.expect("resolved before configs are written");
    let list = |f: fn(u16, usize) -> String| {
        Some(
            (1..=nodes)
                .map(|i| format!("{i}={}", f(base_port, i)))
                .collect(),
        )
    };
    let data = args.dir.join(format!("n{i}"));
    let mut layer = ConfigLayer {
        id: Some(i as u64),
        cluster: Some("local".into()),
        peer_listen: Some(peer_address(base_port, i)),
        http_listen: Some(http_address(base_port, i)),
        client_listen: Some(client_address(base_port, i)),
        zookeeper_listen: Some(zookeeper_address(base_port, i)),
        data_dir: Some(data.canonicalize().unwrap_or(data)),
        heartbeat_ms: Some(args.heartbeat_ms),
        election_ms: Some(args.election_ms),
        peers: list(peer_address),
        peer_http: list(http_address),
        peer_client: list(client_address),
        peer_zookeeper: list(zookeeper_address),
        peer_priority: Some(args.priority.iter().map(|p| p.trim().to_string()).collect()),
        ..ConfigLayer::default()
    };
    if args.tls {
        let tls = tls_dir.canonicalize()?;
        let peer = tls.join("peer");
        layer.cert_file = Some(tls.join(format!("n{i}.pem")));
        layer.key_file = Some(tls.join(format!("n{i}-key.pem")));
        layer.trusted_ca_file = Some(tls.join(bellwether_cli_common::certs::CA_FILE));
        layer.client_cert_auth = Some(true);
        layer.peer_cert_file = Some(peer.join(format!("n{i}.pem")));
        layer.peer_key_file = Some(peer.join(format!("n{i}-key.pem")));
        layer.peer_trusted_ca_file = Some(peer.join(bellwether_cli_common::certs::CA_FILE));
    }
    Ok(layer)
}

/// Starts member `i` of the cluster described in `dir`, its output
/// appended to `DIR/n<i>.log` after a line that marks the start.
pub fn spawn_member(dir: &Path, i: usize) -> Result<Child> {
    use std::io::Write;
    let path = dir.join(format!("n{i}.log"));
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    writeln!(
        log,
        "==== [{}] bellwether up starts n{i} ====",
        chrono_like_now()
    )?;
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

/// A member `up` looks after: its process while it runs, and when to
/// start it again after it exited.
pub struct Member {
    /// Its number (n1, n2, …).
    pub i: usize,
    child: Option<Child>,
    backoff: RestartBackoff,
    restart_at: Option<Instant>,
}

impl Member {
    /// Starts member `i` of the cluster in `dir`.
    pub fn start(dir: &Path, i: usize) -> Result<Member> {
        Ok(Member {
            i,
            child: Some(spawn_member(dir, i)?),
            backoff: RestartBackoff::started(Instant::now()),
            restart_at: None,
        })
    }
}

/// Sends SIGTERM, then SIGKILL after `grace`.
pub fn stop_members(members: &mut [Member], grace: Duration) {
    for child in members.iter().filter_map(|m| m.child.as_ref()) {
        let _ = send_signal(child.id(), SIGTERM);
    }
    let deadline = Instant::now() + grace;
    for child in members.iter_mut().filter_map(|m| m.child.as_mut()) {
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

/// Member i's address of one kind, from the base port.
type AddressOf = fn(u16, usize) -> String;

/// Every port the members of the cluster in `args` listen on.
fn planned_ports(args: &UpArgs, nodes: usize) -> Vec<PlannedPort> {
    let base = args.base();
    let mut ports = Vec::new();
    for i in 1..=nodes {
        let roles: [(&str, AddressOf); 4] = [
            ("peer port", peer_address),
            ("HTTP port", http_address),
            ("etcd API", client_address),
            ("ZooKeeper port", zookeeper_address),
        ];
        for (role, address) in roles {
            ports.push(PlannedPort {
                role: format!("n{i}'s {role}"),
                address: address(base, i),
            });
        }
    }
    ports
}

/// Runs the local cluster until Ctrl-C.
pub fn execute(mut args: UpArgs) -> Result<ExitCode> {
    if let Some(UpAction::Add(add)) = args.action {
        return crate::up_add::execute(add);
    }
    if let Some(pid) = crate::up_add::running_up(&args.dir) {
        bail!(
            "`bellwether up` (pid {pid}) already runs the cluster in {}",
            args.dir.display()
        );
    }
    let (nodes, base) = write_configs(&mut args)?;
    let mut members = Vec::new();
    for i in 1..=nodes {
        match Member::start(&args.dir, i) {
            Ok(member) => members.push(member),
            Err(error) => {
                stop_members(&mut members, Duration::from_secs(5));
                return Err(error);
            }
        }
    }
    std::fs::write(args.dir.join(PID_FILE), std::process::id().to_string())?;
    let interrupted = termination_flag();
    let mut addresses = http_addresses(base, nodes);
    print_cluster(&args, nodes, &addresses);
    let looked_after = look_after(&args, &mut members, &mut addresses, &interrupted);
    println!("stopping members…");
    stop_members(&mut members, Duration::from_secs(5));
    let _ = std::fs::remove_file(args.dir.join(PID_FILE));
    looked_after?;
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
            peer_address(args.base(), i + 1),
            client_address(args.base(), i + 1),
            zookeeper_address(args.base(), i + 1)
        );
    }
    let clients: Vec<String> = (1..=nodes)
        .map(|i| client_address(args.base(), i))
        .collect();
    let tls_dir = args.dir.join("tls");
    if tls_dir.join(bellwether_cli_common::certs::CA_FILE).exists() {
        let https: Vec<String> = clients.iter().map(|c| format!("https://{c}")).collect();
        let file = |name: &str| tls_dir.join(name).display().to_string();
        println!(
            "  etcdctl (TLS): etcdctl --endpoints={} --cacert={} --cert={} --key={} put greeting hello",
            https.join(","),
            file(bellwether_cli_common::certs::CA_FILE),
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
        .map(|i| zookeeper_address(args.base(), i))
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
/// `up add` configures, and prints each change of leader. Fails when a
/// member keeps failing to start.
fn look_after(
    args: &UpArgs,
    members: &mut Vec<Member>,
    addresses: &mut Vec<SocketAddr>,
    interrupted: &std::sync::atomic::AtomicBool,
) -> Result<()> {
    let mut shown: Option<(Option<NodeId>, u64)> = None;
    while !interrupted.load(std::sync::atomic::Ordering::SeqCst) {
        restart_exited(args, members)?;
        start_added(args, members, addresses)?;
        show_leader(&poll(addresses), &mut shown);
        std::thread::sleep(Duration::from_millis(200));
    }
    Ok(())
}

/// Notices members that exited, and starts them again when their
/// backoff has passed.
fn restart_exited(args: &UpArgs, members: &mut [Member]) -> Result<()> {
    let now = Instant::now();
    for member in members.iter_mut() {
        let log = args.dir.join(format!("n{}.log", member.i));
        if let Some(child) = &mut member.child {
            let Ok(Some(status)) = child.try_wait() else {
                continue;
            };
            member.child = None;
            if status.code() == Some(i32::from(crate::node_command::REMOVED_EXIT_CODE)) {
                println!(
                    "member n{} was removed from the cluster and stopped; `up` does not start it again (see {})",
                    member.i,
                    log.display()
                );
                member.restart_at = None;
                continue;
            }
            match member.backoff.exited(now) {
                AfterExit::RestartAt(at) => {
                    println!(
                        "member n{} exited ({status}); starting it again in {} ms; see {}",
                        member.i,
                        at.saturating_duration_since(now).as_millis(),
                        log.display()
                    );
                    member.restart_at = Some(at);
                }
                AfterExit::GiveUp(times) => bail!(
                    "member n{} exited {times} times in a row soon after starting ({status}); the end of {}:\n{}",
                    member.i,
                    log.display(),
                    last_lines(&log, 12)
                ),
            }
        }
        if member.restart_at.is_some_and(|at| at <= now) {
            member.child = Some(spawn_member(&args.dir, member.i)?);
            member.backoff.restarted(now);
            member.restart_at = None;
        }
    }
    Ok(())
}

/// The last `count` lines of the file at `path`, indented (or why it
/// cannot be read).
fn last_lines(path: &Path, count: usize) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(count)..]
                .iter()
                .map(|line| format!("    {line}"))
                .collect::<Vec<_>>()
                .join("\n")
        }
        Err(error) => format!("    (cannot read it: {error})"),
    }
}

/// Starts the next member once `up add` wrote its config.
fn start_added(
    args: &UpArgs,
    members: &mut Vec<Member>,
    addresses: &mut Vec<SocketAddr>,
) -> Result<()> {
    let next = members.len() + 1;
    if next <= MEMBERS_MAX && args.dir.join(format!("n{next}.toml")).exists() {
        members.push(Member::start(&args.dir, next)?);
        addresses.push(http_address(args.base(), next).parse()?);
        println!(
            "member n{next} started: peers {}  etcd API {}  zookeeper {}  http http://{}/",
            peer_address(args.base(), next),
            client_address(args.base(), next),
            zookeeper_address(args.base(), next),
            http_address(args.base(), next)
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
