//! The etcd v3 API served by a node. The store is `bellwether_kv`; writes
//! (including lease grants and revokes) are replicated as etcd's own request
//! protobufs; reads are linearizable through ReadIndex unless the client
//! asks for a serializable read. Every service is a thin layer over one
//! [`EtcdBackend`]; lease expiry is the leader's [`Lessor`].

pub mod auth_gate;
pub mod auth_service;
pub mod backend;
pub mod call_server;
pub mod campaign;
pub mod channel_stream;
pub mod client_limits;
pub mod cluster_service;
pub mod compactor;
pub mod corruption_check;
pub mod credentials;
pub mod election_service;
pub mod json_gateway;
pub mod kv_service;
pub mod leader_observer;
pub mod lease_grant;
pub mod lease_ids;
pub mod lease_service;
pub mod lessor;
pub mod lock_service;
pub mod machine_signals;
pub mod member_call;
pub mod member_service;
pub mod refusal_status;
pub mod unary_fast_path;
pub mod url_authority;
pub mod watch_service;

pub use backend::EtcdBackend;
pub use bellwether_etcd::EtcdMachine;
pub use cluster_service::ClusterService;
pub use election_service::ElectionService;
pub use kv_service::KvService;
pub use lease_service::LeaseService;
pub use lessor::Lessor;
pub use lock_service::LockService;
pub use machine_signals::{machine_with_signals, MachineSignals};

/// A stable cluster id derived from the cluster name (FNV-1a), for response
/// headers.
pub fn cluster_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Largest gRPC message a member decodes: etcd's request bound plus the
/// same 512 KiB allowance etcd gives for the envelope. Bigger messages are
/// refused by gRPC before any work is done; requests between the two bounds
/// get etcd's "request is too large" before they reach the log.
pub const GRPC_MESSAGE_BYTES_MAX: usize = bellwether_kv::REQUEST_BYTES_MAX + 512 * 1024;

/// Serves the etcd API on `listener` until `shutdown` completes, over TLS
/// when `tls` is set, holding at most `connections_max` client connections
/// (see `client_limits.rs`). `lessor` is the lease clock the state machine
/// keeps informed ([`MachineSignals::lessor`]). Other members' calls
/// arrive on `calls` ([`crate::node::Node::take_calls`]).
pub async fn serve(
    listener: tokio::net::TcpListener,
    backend: EtcdBackend,
    lessor: Lessor,
    calls: tokio::sync::mpsc::Receiver<crate::member_calls::IncomingCall>,
    tls: Option<tonic::transport::ServerTlsConfig>,
    connections_max: usize,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let incoming = client_limits::LimitedIncoming::new(listener, connections_max);
    // Watch streams never end on their own; they end when shutdown begins,
    // or the graceful shutdown would wait for them forever.
    let (stop_watches, watches_stopped) = tokio::sync::watch::channel(false);
    let shutdown = async move {
        shutdown.await;
        stop_watches.send_replace(true);
    };
    let expiry = tokio::spawn(lessor.clone().run(backend.clone()));
    let compaction = tokio::spawn(compactor::run(backend.clone()));
    let consistency = backend
        .corruption_check()
        .map(|interval| tokio::spawn(corruption_check::run(backend.clone(), interval)));
    let kv = KvService {
        backend: backend.clone(),
    };
    let lease = LeaseService::new(backend.clone(), lessor);
    let calls = tokio::spawn(call_server::serve_calls(calls, lease.clone()));
    let mut builder = tonic::transport::Server::builder();
    if let Some(tls) = tls {
        builder = builder.tls_config(tls)?;
    }
    let routes = services(&backend, kv.clone(), lease.clone(), watches_stopped);
    let served = builder
        .max_concurrent_streams(client_limits::STREAMS_PER_CONNECTION_MAX)
        // HTTP/1.1 too, for the JSON gateway's clients (curl, HTTP libraries).
        .accept_http1(true)
        .layer(json_gateway::JsonGatewayLayer::new(backend.clone()))
        .layer(unary_fast_path::UnaryFastPathLayer::new(kv, lease))
        .add_routes(routes)
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await;
    expiry.abort();
    compaction.abort();
    calls.abort();
    if let Some(task) = consistency {
        task.abort();
    }
    served
}

/// Every gRPC service of the etcd API over `backend`, as one set of
/// routes: `kv` and `lease` are the services the unary fast path also
/// answers from, and watch streams end when `watches_stopped` turns true.
fn services(
    backend: &EtcdBackend,
    kv: KvService,
    lease: LeaseService,
    watches_stopped: tokio::sync::watch::Receiver<bool>,
) -> tonic::service::Routes {
    use bellwether_api::etcdserverpb::{
        auth_server::AuthServer, cluster_server::ClusterServer, kv_server::KvServer,
        lease_server::LeaseServer, maintenance_server::MaintenanceServer,
        watch_server::WatchServer,
    };
    use bellwether_api::v3electionpb::election_server::ElectionServer;
    use bellwether_api::v3lockpb::lock_server::LockServer;
    let cluster = ClusterService {
        backend: backend.clone(),
    };
    tonic::service::Routes::default()
        .add_service(KvServer::new(kv).max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX))
        .add_service(MaintenanceServer::new(cluster.clone()))
        .add_service(ClusterServer::new(cluster))
        .add_service(
            ElectionServer::new(ElectionService {
                backend: backend.clone(),
            })
            .max_decoding_message_size(GRPC_MESSAGE_BYTES_MAX),
        )
        .add_service(LockServer::new(LockService {
            backend: backend.clone(),
        }))
        .add_service(LeaseServer::new(lease))
        .add_service(AuthServer::new(auth_service::AuthService {
            backend: backend.clone(),
        }))
        .add_service(WatchServer::new(watch_service::WatchService::new(
            backend.clone(),
            watches_stopped,
        )))
}
#[cfg(test)]
mod reroute_tests;
