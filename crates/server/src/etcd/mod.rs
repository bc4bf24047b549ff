//! The etcd v3 API served by a node (first slice: the KV service). The
//! store is `bellwether_kv`; writes are replicated as etcd's own request
//! protobufs; reads are linearizable through ReadIndex unless the client
//! asks for a serializable read.

pub mod cluster_service;
pub mod command;
pub mod convert;
pub mod kv_service;
pub mod machine;

pub use cluster_service::ClusterService;
pub use kv_service::KvService;
pub use machine::EtcdMachine;

/// A stable cluster id derived from the cluster name (FNV-1a), for response
/// headers.
pub fn cluster_id(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Serves the etcd API on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    kv: KvService,
    cluster: ClusterService,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), tonic::transport::Error> {
    let incoming = tonic::transport::server::TcpIncoming::from(listener);
    tonic::transport::Server::builder()
        .add_service(bellwether_api::etcdserverpb::kv_server::KvServer::new(kv))
        .add_service(
            bellwether_api::etcdserverpb::maintenance_server::MaintenanceServer::new(
                cluster.clone(),
            ),
        )
        .add_service(bellwether_api::etcdserverpb::cluster_server::ClusterServer::new(cluster))
        .serve_with_incoming_shutdown(incoming, shutdown)
        .await
}
