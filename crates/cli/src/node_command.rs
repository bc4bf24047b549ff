//! `bellwether node`: runs one member until SIGTERM or Ctrl-C.

use anyhow::{Context, Result};
use bellwether_server::config::{ConfigLayer, NodeConfig};
use bellwether_server::node::{Node, NodeHandles};
use clap::Args;
use std::path::PathBuf;
use std::process::ExitCode;

/// Flags of `bellwether node`: the settings (each overrides the file and
/// is overridden by its `BELLWETHER_*` variable), and how to start.
#[derive(Args, Clone, Debug, Default)]
#[command(
    after_help = "Every setting may also come from the --config file, under its name \
(peer_listen = \"127.0.0.1:7001\"), and from the environment, as BELLWETHER_ and its name in \
upper case (BELLWETHER_PEER_LISTEN=127.0.0.1:7001; lists comma-separated). The environment \
overrides the flags, which override the file."
)]
pub struct NodeArgs {
    /// TOML configuration file (lowest precedence).
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: ConfigLayer,
    /// Join the running cluster whose etcd API is at these endpoints
    /// (host:port, comma-separated) instead of naming --id and --peers: the
    /// cluster adds this member, which catches up as a learner and is then
    /// made a voter. The answer is kept in DATA_DIR/joined.toml, so later
    /// starts take the same flags and do not join again.
    #[arg(long, value_delimiter = ',')]
    join: Option<Vec<String>>,
    /// With --join: stay a learner (no vote) until `etcdctl member promote`.
    #[arg(long, requires = "join")]
    learner: bool,
}

impl NodeArgs {
    /// Merges file, flags and environment, then validates.
    pub fn resolve(&self) -> Result<NodeConfig> {
        let file = match &self.config {
            Some(path) => ConfigLayer::from_file(path)?,
            None => ConfigLayer::default(),
        };
        let env = ConfigLayer::from_env(|name| std::env::var(name).ok())?;
        let mut layer = file.merge(self.settings.clone())?.merge(env)?;
        // A member that joined once keeps its join record, and starts from
        // it with or without --join.
        let joined_before = layer
            .data_dir
            .as_ref()
            .is_some_and(|d| d.join(crate::join::JOINED_FILE).exists());
        let endpoints = match &self.join {
            Some(endpoints) => endpoints.clone(),
            None if joined_before => Vec::new(),
            None => return Ok(NodeConfig::from_layer(layer)?),
        };
        let joined = crate::join::joined(&layer, &endpoints, self.learner)?;
        joined.apply(&mut layer);
        let mut config = NodeConfig::from_layer(layer)?;
        config.join_voters = joined.voters;
        Ok(config)
    }
}

/// Resolves when SIGTERM or SIGINT arrives.
pub async fn termination() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).expect("signal handlers can be installed");
    let mut interrupt = signal(SignalKind::interrupt()).expect("signal handlers can be installed");
    tokio::select! {
        _ = term.recv() => {}
        _ = interrupt.recv() => {}
    }
}

/// How long a stopping member waits for open gRPC calls to finish.
const GRPC_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Runs one member.
pub fn execute(args: NodeArgs) -> Result<ExitCode> {
    let config = args.resolve()?;
    if config.runtime != bellwether_member::Runtime::Faithful {
        eprintln!(
            "bellwether: UNSAFE: this member runs the {} runtime, broken on purpose for \
`bellwether verify`; it loses acknowledged writes",
            config.runtime.name()
        );
    }
    stop_the_process_on_any_panic();
    raise_open_files_limit(config.client_connections_max);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?;
    runtime.block_on(run(config))
}

/// Makes a panic anywhere in the member stop the whole process at once
/// (fail-stop), after the panic's message is printed.
///
/// Why: the member's invariants are asserted in release builds, and a
/// failed one means its state can no longer be trusted. But a panic in a
/// spawned task (the lease clock, a watch stream, a gRPC call) only ends
/// that task: the member would run on without its lease expiry or with a
/// poisoned lock, and answer clients from a state it has stopped checking.
/// Stopping it instead is safe by construction: Raft treats it as a crash,
/// the others carry on, and its data directory is what it last fsynced.
fn stop_the_process_on_any_panic() {
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        print(info);
        eprintln!("bellwether: an invariant failed (above); the member stops now");
        std::process::abort();
    }));
}

/// Starts the member with its etcd API and HTTP port, runs it until
/// SIGTERM or Ctrl-C, then stops the servers.
/// The exit code of a member that stopped because it was removed from
/// the cluster: `up` does not start it again.
pub const REMOVED_EXIT_CODE: u8 = 3;

async fn run(config: NodeConfig) -> Result<ExitCode> {
    let (machine, signals) = bellwether_server::etcd::machine_with_signals();
    let store = machine.store.clone();
    let bellwether_server::etcd::MachineSignals {
        revisions,
        lessor,
        auth: auth_summary,
    } = signals;
    lessor.set_takeover_extension(std::time::Duration::from_millis(2 * config.election_ms));
    let (client_tls, http_tls) = load_tls(&config)?;
    let mut node = Node::with_machine(config.clone(), Box::new(machine)).await?;
    let handles = node.handles();
    let client_listener = listen_for_clients(&config).await?;
    let zookeeper_listener = listen_for_zookeeper(&config).await?;
    let (stop_grpc, grpc_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut zookeeper = None;
    let grpc = client_listener.map(|listener| {
        let backend = bellwether_server::etcd::EtcdBackend::new(
            node.client(),
            store,
            handles.status.clone(),
            revisions,
            bellwether_server::etcd::cluster_id(&config.cluster),
            config.id,
            config.peers.clone(),
            config.peer_client.clone(),
        );
        let backend = configure_backend(
            backend,
            &config,
            &handles,
            auth_summary,
            client_tls.as_ref(),
        );
        if let Some(listener) = zookeeper_listener {
            let lease = bellwether_server::etcd::LeaseService::new(backend.clone(), lessor.clone());
            let mut known: bellwether_server::zookeeper::KnownAddresses = config
                .peer_zookeeper
                .iter()
                .map(|(id, address)| (*id, address.to_string()))
                .collect();
            if let Ok(own) = listener.local_addr() {
                known.insert(config.id, own.to_string());
            }
            zookeeper = Some(tokio::spawn(bellwether_server::zookeeper::serve(
                listener,
                backend.clone(),
                lease,
                config.client_connections_max,
                handles.metrics.zookeeper.clone(),
                known,
                std::future::pending(),
            )));
        }
        let calls = node
            .take_calls()
            .expect("a fresh node's calls are not taken");
        spawn_grpc(
            &config,
            listener,
            (backend, lessor, calls),
            client_tls,
            grpc_stopped,
        )
    });
    let http_listener = node.http_listener.take().expect("fresh node");
    let (stop_http, http) = spawn_http(http_listener, &handles, http_tls);
    tracing::info!(
        id = config.id.0,
        cluster = %config.cluster,
        peers = %config.peer_listen,
        http = %node.http_address,
        zookeeper = ?config.zookeeper_listen,
        data_dir = %config.data_dir.display(),
        "node started"
    );
    // The loop runs as a task of its own, not as this `block_on`
    // future: a spawned task woken from this thread (by a peer's
    // connection or a gRPC call) is queued directly, where waking the
    // `block_on` future writes the runtime's eventfd and takes another
    // trip through epoll, several times per replicated write.
    let result = match tokio::spawn(node.run(termination())).await {
        Ok(result) => result,
        Err(join_error) => match join_error.try_into_panic() {
            Ok(panic) => std::panic::resume_unwind(panic),
            Err(join_error) => {
                return Err(anyhow::anyhow!(
                    "the node's loop was cancelled: {join_error}"
                ))
            }
        },
    };
    if let Some(zookeeper) = zookeeper {
        // Its connections end with it.
        zookeeper.abort();
    }
    stop_servers(stop_http, http, stop_grpc, grpc).await;
    if let Err(error @ bellwether_server::node::NodeError::Removed { .. }) = &result {
        tracing::error!("{error}");
        eprintln!("{error}");
        return Ok(ExitCode::from(REMOVED_EXIT_CODE));
    }
    result?;
    tracing::info!(id = config.id.0, "node stopped");
    Ok(ExitCode::SUCCESS)
}

/// The client port's TLS and the HTTP port's, when the config asks for
/// them.
fn load_tls(
    config: &NodeConfig,
) -> Result<(
    Option<bellwether_server::tls::ClientTls>,
    Option<std::sync::Arc<rustls::ServerConfig>>,
)> {
    let client_tls = match &config.client_tls {
        Some(files) => Some(
            bellwether_server::tls::ClientTls::load(files)
                .map_err(|e| anyhow::anyhow!("client TLS: {e}"))?,
        ),
        None => None,
    };
    let http_tls = match &config.client_tls {
        Some(files) if files.http => Some(
            bellwether_server::tls::http_server_config(files)
                .map_err(|e| anyhow::anyhow!("HTTP TLS: {e}"))?,
        ),
        _ => None,
    };
    Ok((client_tls, http_tls))
}

/// Binds the etcd API's listener, when the config gives it an address.
async fn listen_for_clients(config: &NodeConfig) -> Result<Option<tokio::net::TcpListener>> {
    Ok(match config.client_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| {
                    format!("cannot listen for clients on {address}; is another process using it?")
                })?,
        ),
        None => None,
    })
}

/// Binds ZooKeeper's listener, when the config gives it an address.
async fn listen_for_zookeeper(config: &NodeConfig) -> Result<Option<tokio::net::TcpListener>> {
    Ok(match config.zookeeper_listen {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen for ZooKeeper clients on {address}; is another process using it?"
                    )
                })?,
        ),
        None => None,
    })
}

/// The etcd API's backend with the settings of `config`: metrics, data
/// dir, quota, TLS towards other members, auth and corruption checks.
fn configure_backend(
    backend: bellwether_server::etcd::EtcdBackend,
    config: &NodeConfig,
    handles: &NodeHandles,
    auth_summary: bellwether_server::etcd::auth_gate::AuthSummary,
    client_tls: Option<&bellwether_server::tls::ClientTls>,
) -> bellwether_server::etcd::EtcdBackend {
    backend
        .with_app_elections(handles.metrics.app_elections.clone())
        .with_app_tasks(&handles.metrics.app_tasks)
        .with_data_dir(config.data_dir.clone())
        .with_quota(config.quota_backend_bytes)
        .with_cluster_name(&config.cluster)
        .with_client_tls(client_tls.is_some())
        .with_peer_tls(config.peer_tls.is_some())
        .with_auth(bellwether_server::etcd::auth_gate::AuthGate {
            summary: auth_summary,
            token_ttl: config.auth_token_ttl,
            client_cert_auth: config
                .client_tls
                .as_ref()
                .is_some_and(|t| t.client_cert_auth),
        })
        .with_corruption_check(
            (config.corrupt_check_ms > 0)
                .then(|| std::time::Duration::from_millis(config.corrupt_check_ms)),
        )
}

/// Serves the etcd API on `listener` until `stopped` fires; a member that
/// joined, or has a name of its own, also publishes its client URL and
/// name to the cluster.
fn spawn_grpc(
    config: &NodeConfig,
    listener: tokio::net::TcpListener,
    (backend, lessor, calls): (
        bellwether_server::etcd::EtcdBackend,
        bellwether_server::etcd::Lessor,
        tokio::sync::mpsc::Receiver<bellwether_server::member_calls::IncomingCall>,
    ),
    client_tls: Option<bellwether_server::tls::ClientTls>,
    stopped: tokio::sync::oneshot::Receiver<()>,
) -> tokio::task::JoinHandle<Result<(), tonic::transport::Error>> {
    let own_name = config.name != format!("n{}", config.id.0);
    if !config.join_voters.is_empty() || own_name {
        if let Some(address) = config.client_listen {
            tokio::spawn(bellwether_server::etcd::member_service::publish_client_url(
                backend.clone(),
                format!("{}://{address}", backend.client_scheme()),
                config.name.clone(),
                config.zookeeper_listen.map(|a| a.to_string()),
            ));
        }
    }
    tokio::spawn(bellwether_server::etcd::serve(
        listener,
        backend,
        lessor,
        calls,
        client_tls.map(|t| t.server),
        config.client_connections_max,
        async move {
            let _ = stopped.await;
        },
    ))
}

/// Serves the HTTP port (metrics, status, dashboard); returns the sender
/// that stops it and its task.
fn spawn_http(
    listener: tokio::net::TcpListener,
    handles: &NodeHandles,
    tls: Option<std::sync::Arc<rustls::ServerConfig>>,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<std::io::Result<()>>,
) {
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http = tokio::spawn(bellwether_server::http::serve(
        listener,
        bellwether_server::http::HttpState {
            status: handles.status.clone(),
            metrics: handles.metrics.clone(),
        },
        tls,
        async move {
            let _ = http_stopped.await;
        },
    ));
    (stop_http, http)
}

/// Stops the HTTP port, then the etcd API, once the node's loop ended.
async fn stop_servers(
    stop_http: tokio::sync::oneshot::Sender<()>,
    http: tokio::task::JoinHandle<std::io::Result<()>>,
    stop_grpc: tokio::sync::oneshot::Sender<()>,
    grpc: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
) {
    let _ = stop_http.send(());
    let _ = http.await;
    let _ = stop_grpc.send(());
    if let Some(mut grpc) = grpc {
        // Streams (watch, keep-alive, observe) stay open as long as their
        // clients want; give them a moment to end, then stop anyway.
        if tokio::time::timeout(GRPC_DRAIN_TIMEOUT, &mut grpc)
            .await
            .is_err()
        {
            grpc.abort();
        }
    }
}

/// Raises the soft open-files limit to the hard one: a member holds up to
/// `client_connections_max` client connections besides its peers, WAL
/// and HTTP connections, and the usual soft limit (1,024) is the default
/// connection bound itself. Warns when even the hard limit is too low.
fn raise_open_files_limit(client_connections_max: usize) {
    use rustix::process::{getrlimit, Resource};
    if let Err(error) = bellwether_cli_common::open_files::raise_soft_open_files_limit() {
        tracing::warn!(%error, "cannot raise the open-files limit");
    }
    let now = getrlimit(Resource::Nofile).current;
    if now.is_some_and(|files| files < client_connections_max as u64 + 256) {
        tracing::warn!(
            open_files = now,
            client_connections_max,
            "the open-files limit leaves little room beyond client_connections_max; raise it (ulimit -n) or lower client_connections_max"
        );
    }
}
