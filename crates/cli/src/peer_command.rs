//! `bellwether peer`: one embedded elector (Raft, Paxos, Bully or Ring from
//! `bellwether-elector`) as a process, and `bellwether peer up`: a local
//! group of them.
//!
//! A peer prints one JSON line on stdout each time its view of the
//! leadership changes, so scripts and tests can follow it, and with
//! `--http` serves `/status` (the same view, as JSON), `/metrics`, and a
//! page of the whole group at `/` (from `/group`, which asks every peer
//! named in `--group-http` for its `/status`).

use crate::peer_supervisor::SupervisedPeers;
use anyhow::{bail, Context, Result};
use bellwether_core::NodeId;
use bellwether_elector::{Algorithm, Elector, ElectorMetrics, Leadership, PeerTls};
use clap::{Args, Subcommand};
use serde_json::json;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::process::Command;
use tokio::sync::watch;

/// `bellwether peer`: run one elector, or `up` to start a local group.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PeerArgs {
    #[command(subcommand)]
    command: Option<PeerCommand>,
    #[command(flatten)]
    run: RunArgs,
}

/// `bellwether peer` subcommands.
#[derive(Subcommand, Debug)]
enum PeerCommand {
    /// Start a local group of peer processes on loopback and print every
    /// node's leadership changes, until Ctrl-C.
    Up(UpArgs),
}

/// The settings every node of a group shares.
#[derive(Args, Debug, Clone)]
struct GroupArgs {
    /// raft, bully, ring or paxos.
    #[arg(long, default_value = "raft")]
    algorithm: String,
    /// Bully and Ring: which id wins, highest or lowest.
    #[arg(long)]
    winner: Option<String>,
    /// The group's name; peers of other groups are refused.
    #[arg(long, default_value = "bellwether")]
    group: String,
    /// How often a leader tells the others it is alive, in ms.
    #[arg(long, default_value_t = 50)]
    heartbeat_ms: u64,
    /// Shortest election timeout, in ms (the timeout is drawn from [t, 2t)).
    #[arg(long, default_value_t = 150)]
    election_ms: u64,
    /// Raft and Paxos: give the leader a validity deadline before which nobody
    /// else can be elected (failover then takes an election timeout).
    #[arg(long)]
    leases: bool,
    /// Raft only: after leading this long (ms), hand leadership to the next
    /// node in id order, so leader time spreads evenly. 0: never.
    #[arg(long, default_value_t = 0)]
    rotate_after_ms: u64,
    /// The adaptive detector's floor in heartbeats: suspect a silent leader
    /// after at least this many missed heartbeats (learned from their
    /// arrivals, at most the election timeout). 0: off. Default: 3 for
    /// Raft, off for the others (no pre-vote, so a node waking from a
    /// pause disturbs its leader more often).
    #[arg(long)]
    detector_heartbeats: Option<u64>,
}

/// Flags of `bellwether peer`.
#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    group: GroupArgs,
    /// This node's id (unique, not 0).
    #[arg(long)]
    id: Option<u64>,
    /// Every node as ID=IP:PORT, comma-separated, this one included; the
    /// same list on every node.
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Where the term or epoch is kept across restarts.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Serve /status, /metrics, /group and the group page on this address.
    #[arg(long)]
    http: Option<SocketAddr>,
    /// Every peer's HTTP address as ID=IP:PORT, comma-separated, for the
    /// group page.
    #[arg(long, value_delimiter = ',')]
    group_http: Vec<String>,
    /// Mutual TLS between the peers (with the two flags below; all three
    /// or none): this node's certificate (PEM).
    #[arg(long, value_name = "FILE")]
    peer_cert_file: Option<PathBuf>,
    /// The certificate's key (PEM).
    #[arg(long, value_name = "FILE")]
    peer_key_file: Option<PathBuf>,
    /// The CA the other peers' certificates must come from; a peer without
    /// one is refused before it can say anything.
    #[arg(long, value_name = "FILE")]
    peer_trusted_ca_file: Option<PathBuf>,
}

/// Flags of `bellwether peer up`.
#[derive(Args, Debug)]
struct UpArgs {
    #[command(flatten)]
    group: GroupArgs,
    /// Number of peers.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Node i listens on 127.0.0.1:BASE+i and serves HTTP on BASE+100+i.
    #[arg(long, default_value_t = 7300)]
    base_port: u16,
    /// Directory for the peers' data.
    #[arg(long, default_value = "bellwether-peers")]
    dir: PathBuf,
    /// Mutual TLS between the peers, with a throwaway CA and certificates
    /// made in DIR/tls.
    #[arg(long)]
    tls: bool,
}

/// Runs `bellwether peer ...`.
pub fn execute(args: PeerArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    match args.command {
        Some(PeerCommand::Up(up)) => runtime.block_on(up_group(up)),
        None => runtime.block_on(run_peer(args.run)),
    }
}

fn algorithm(group: &GroupArgs) -> Result<Algorithm> {
    Algorithm::parse(&group.algorithm, group.winner.as_deref()).map_err(anyhow::Error::msg)
}

fn parse_peers(peers: &[String]) -> Result<Vec<(NodeId, SocketAddr)>> {
    if peers.is_empty() {
        bail!("--peers is required: every node as ID=IP:PORT, comma-separated");
    }
    peers
        .iter()
        .map(|peer| {
            let (id, address) = peer
                .split_once('=')
                .with_context(|| format!("peer {peer:?} is not ID=IP:PORT"))?;
            let id = id
                .trim()
                .parse()
                .map(NodeId)
                .with_context(|| format!("peer {peer:?}: {id:?} is not a numeric id"))?;
            let address = address
                .trim()
                .parse()
                .with_context(|| format!("peer {peer:?}: {address:?} is not IP:PORT"))?;
            Ok((id, address))
        })
        .collect()
}

async fn run_peer(args: RunArgs) -> Result<ExitCode> {
    let algorithm = algorithm(&args.group)?;
    let Some(id) = args.id.map(NodeId) else {
        bail!("--id is required (this node's id in --peers)");
    };
    let peers = parse_peers(&args.peers)?;
    let Some(data_dir) = args.data_dir else {
        bail!("--data-dir is required: the term or epoch must survive restarts");
    };
    let mut builder = Elector::builder()
        .algorithm(algorithm)
        .id(id.0)
        .peers(peers.into_iter().map(|(id, address)| (id.0, address)))
        .data_dir(data_dir)
        .group(args.group.group.clone())
        .heartbeat(Duration::from_millis(args.group.heartbeat_ms))
        .election_timeout(Duration::from_millis(args.group.election_ms))
        .leases(args.group.leases);
    if let Some(floor) = args.group.detector_heartbeats {
        builder = builder.detector_heartbeats(floor);
    }
    if args.group.rotate_after_ms != 0 {
        builder = builder.rotate_after(Duration::from_millis(args.group.rotate_after_ms));
    }
    match (
        &args.peer_cert_file,
        &args.peer_key_file,
        &args.peer_trusted_ca_file,
    ) {
        (None, None, None) => {}
        (Some(cert), Some(key), Some(ca)) => {
            builder = builder.tls(PeerTls::load(cert, key, ca).map_err(|e| anyhow::anyhow!(e.0))?);
        }
        _ => bail!(
            "peer TLS needs all three of --peer-cert-file, --peer-key-file and --peer-trusted-ca-file"
        ),
    }
    let mut elector = builder.start().await?;
    tracing::info!(id = id.0, %algorithm, group = %args.group.group, "peer started");
    if let Some(address) = args.http {
        let group = if args.group_http.is_empty() {
            Vec::new()
        } else {
            parse_peers(&args.group_http)?
        };
        let page = Page {
            leadership: elector.leadership(),
            metrics: elector.metrics(),
            algorithm,
            group,
        };
        serve_http(address, page).await?;
    }
    let mut leadership = elector.leadership();
    // Made once, before the loop: a `ctrl_c()` made anew each turn misses
    // a Ctrl-C that arrives while a view is printed.
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
    loop {
        let view = *leadership.borrow_and_update();
        print_view(&view, algorithm);
        tokio::select! {
            changed = leadership.changed() => if changed.is_err() { break },
            error = elector.failed() => return Err(error.into()),
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }
    elector.stop().await?;
    Ok(ExitCode::SUCCESS)
}

fn view_json(view: &Leadership, algorithm: Algorithm) -> serde_json::Value {
    let unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let valid_for_ms = view.valid_until.map(|end| {
        end.saturating_duration_since(std::time::Instant::now())
            .as_secs_f64()
            * 1e3
    });
    json!({
        "id": view.id,
        "algorithm": algorithm.name(),
        "leader": view.leader,
        "token": view.token,
        "role": view.role,
        "is_leader": view.is_leader(),
        "valid_for_ms": valid_for_ms,
        "unix_ms": unix_ms,
    })
}

fn print_view(view: &Leadership, algorithm: Algorithm) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", view_json(view, algorithm));
    let _ = out.flush();
}

/// What the peer's HTTP server shows.
#[derive(Clone)]
struct Page {
    leadership: watch::Receiver<Leadership>,
    metrics: Arc<ElectorMetrics>,
    algorithm: Algorithm,
    /// Every peer's HTTP address, for `/group`.
    group: Vec<(NodeId, SocketAddr)>,
}

/// The group page: a table of every peer's view, refreshed twice a second.
const GROUP_PAGE: &str = include_str!("../assets/peer_group.html");

/// Every peer's `/status`, or an error entry for a peer that does not
/// answer; this peer's own view alone when no group was given.
async fn group_json(page: Page) -> serde_json::Value {
    if page.group.is_empty() {
        let own = *page.leadership.borrow();
        return json!([view_json(&own, page.algorithm)]);
    }
    let mut views = Vec::with_capacity(page.group.len());
    for (id, address) in page.group {
        let fetched = tokio::task::spawn_blocking(move || {
            bellwether_cli_common::http_get::get(address, "/status", Duration::from_millis(300))
        })
        .await;
        let view = match fetched {
            Ok(Ok(body)) => serde_json::from_str(&body)
                .unwrap_or_else(|_| json!({"id": id.0, "error": "bad answer"})),
            _ => json!({"id": id.0, "error": "unreachable"}),
        };
        views.push(view);
    }
    serde_json::Value::Array(views)
}

/// `/status` and `/group` may be read by any page: a member's dashboard
/// shows an elector group by polling one peer's `/group` from the browser.
const ANY_ORIGIN: [(axum::http::HeaderName, &str); 1] =
    [(axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN, "*")];

async fn serve_http(address: SocketAddr, page: Page) -> Result<()> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .with_context(|| format!("cannot serve HTTP on {address}"))?;
    let (status, metrics, group) = (page.clone(), page.metrics.clone(), page);
    let app = axum::Router::new()
        .route("/", get(|| async { axum::response::Html(GROUP_PAGE) }))
        .route(
            "/status",
            get(move || {
                let view = *status.leadership.borrow();
                async move { (ANY_ORIGIN, axum::Json(view_json(&view, status.algorithm))) }
            }),
        )
        .route(
            "/group",
            get(move || {
                let group = group.clone();
                async move { (ANY_ORIGIN, axum::Json(group_json(group).await)) }
            }),
        )
        .route(
            "/metrics",
            get(move |headers: axum::http::HeaderMap| {
                let text = metrics.render();
                let accept = headers
                    .get(axum::http::header::ACCEPT)
                    .and_then(|v| v.to_str().ok());
                let content_type = bellwether_client::openmetrics::content_type(accept);
                async move { ([(axum::http::header::CONTENT_TYPE, content_type)], text) }
            }),
        );
    tokio::spawn(async move {
        if let Err(error) = axum::serve(listener, app).await {
            tracing::error!(%error, "peer HTTP server stopped");
        }
    });
    Ok(())
}

/// Starts a local group of peer processes and prints their leadership
/// lines until Ctrl-C or SIGTERM, then stops them.
async fn up_group(args: UpArgs) -> Result<ExitCode> {
    let algorithm = algorithm(&args.group)?;
    if args.nodes == 0 || args.nodes > 99 {
        bail!("--nodes must be 1 to 99");
    }
    let peers: Vec<String> = (1..=args.nodes)
        .map(|i| format!("{i}=127.0.0.1:{}", args.base_port as usize + i))
        .collect();
    let https: Vec<String> = (1..=args.nodes)
        .map(|i| format!("{i}=127.0.0.1:{}", args.base_port as usize + 100 + i))
        .collect();
    let ports: Vec<crate::port_check::PlannedPort> = (1..=args.nodes)
        .flat_map(|i| {
            [("peer port", 0), ("HTTP port", 100)].map(|(role, offset)| {
                crate::port_check::PlannedPort {
                    role: format!("n{i}'s {role}"),
                    address: format!("127.0.0.1:{}", args.base_port as usize + offset + i),
                }
            })
        })
        .collect();
    crate::port_check::refuse_busy(
        &ports,
        &format!(
            "Another process holds it: stop that, or pick other ports with --base-port (now {}).",
            args.base_port
        ),
    )?;
    let binary = std::env::current_exe().context("cannot find the bellwether binary")?;
    if args.tls {
        let tls_dir = args.dir.join("tls");
        let names: Vec<String> = (1..=args.nodes).map(|i| format!("n{i}")).collect();
        let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
        bellwether_cli_common::certs::issue(&tls_dir, &names, &hosts)?;
    }
    let (lines_tx, lines) = tokio::sync::mpsc::channel::<String>(1024);
    let mut group = SupervisedPeers::start(
        args.nodes,
        |i| peer_process(&args, algorithm, &binary, i, &peers, &https),
        lines_tx,
    )?;
    print_group(&args, algorithm);
    let printed = print_lines_until_stopped(lines, &mut group).await;
    group.stop().await;
    printed?;
    Ok(ExitCode::SUCCESS)
}

/// The command that runs peer `i` of the group `up` starts.
fn peer_process(
    args: &UpArgs,
    algorithm: Algorithm,
    binary: &std::path::Path,
    i: usize,
    peers: &[String],
    https: &[String],
) -> Command {
    let group = &args.group;
    let mut command = Command::new(binary);
    command
        .arg("peer")
        .args(["--algorithm", algorithm.name()])
        .args(["--group", &group.group])
        .args(["--id", &i.to_string()])
        .args(["--peers", &peers.join(",")])
        .arg("--data-dir")
        .arg(args.dir.join(format!("n{i}")))
        .args([
            "--http",
            &format!("127.0.0.1:{}", args.base_port as usize + 100 + i),
        ])
        .args(["--group-http", &https.join(",")])
        .args(["--heartbeat-ms", &group.heartbeat_ms.to_string()])
        .args(["--election-ms", &group.election_ms.to_string()])
        .args(["--rotate-after-ms", &group.rotate_after_ms.to_string()])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(winner) = &group.winner {
        command.args(["--winner", winner]);
    }
    if group.leases {
        command.arg("--leases");
    }
    if let Some(floor) = group.detector_heartbeats {
        command.args(["--detector-heartbeats", &floor.to_string()]);
    }
    if args.tls {
        let tls_dir = args.dir.join("tls");
        command
            .arg("--peer-cert-file")
            .arg(tls_dir.join(format!("n{i}.pem")))
            .arg("--peer-key-file")
            .arg(tls_dir.join(format!("n{i}-key.pem")))
            .arg("--peer-trusted-ca-file")
            .arg(tls_dir.join(bellwether_cli_common::certs::CA_FILE));
    }
    command
}

/// Prints where the group's peers listen and where to see them.
fn print_group(args: &UpArgs, algorithm: Algorithm) {
    println!(
        "{} group of {} peers on 127.0.0.1:{}..{}; the group page, /status and /metrics on http://127.0.0.1:{}/ to {}; Ctrl-C stops them",
        algorithm,
        args.nodes,
        args.base_port as usize + 1,
        args.base_port as usize + args.nodes,
        args.base_port as usize + 101,
        args.base_port as usize + 100 + args.nodes,
    );
    println!(
        "a member's dashboard shows this group too: http://MEMBER-HTTP/?elector=127.0.0.1:{}",
        args.base_port as usize + 101,
    );
}

/// Prints the peers' lines, and looks after the peers, until Ctrl-C or
/// SIGTERM, or until a peer keeps failing to start.
async fn print_lines_until_stopped<F: FnMut(usize) -> Command>(
    mut lines: tokio::sync::mpsc::Receiver<String>,
    group: &mut SupervisedPeers<F>,
) -> Result<()> {
    // Both listeners are made once, before the loop: a signal stream keeps
    // what arrives while another branch runs, where a `ctrl_c()` made anew
    // each turn missed a Ctrl-C that came between two turns.
    use tokio::signal::unix::{signal, SignalKind};
    let mut interrupt = signal(SignalKind::interrupt())?;
    let mut terminate = signal(SignalKind::terminate())?;
    let mut check = tokio::time::interval(Duration::from_millis(200));
    loop {
        tokio::select! {
            Some(line) = lines.recv() => println!("{line}"),
            _ = check.tick() => group.check()?,
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
        }
    }
    Ok(())
}
