//! `etcdserverpb.Maintenance` (Status, Alarm, Defragment, Hash, HashKV,
//! Snapshot, MoveLeader) and `etcdserverpb.Cluster` (MemberList): what
//! `etcdctl endpoint status`, `alarm`, `endpoint hashkv`, `snapshot save`,
//! `move-leader` and `member list` ask; membership changes are in
//! `member_service.rs`.

use super::auth_gate::maintenance_auth_status;
use super::backend::EtcdBackend;
use super::channel_stream::ChannelStream;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::cluster_server::Cluster;
use bellwether_api::etcdserverpb::maintenance_server::Maintenance;
use bellwether_etcd::command::Command;
use tonic::{Request, Response, Status};

/// Maintenance and Cluster for one node.
#[derive(Clone)]
pub struct ClusterService {
    /// What the node's services share.
    pub backend: EtcdBackend,
}

impl ClusterService {
    fn header(&self) -> pb::ResponseHeader {
        self.backend.header()
    }
}

/// Bytes of a snapshot per streamed message (etcd sends 32 KiB).
const SNAPSHOT_CHUNK_BYTES: usize = 64 * 1024;
/// Chunks queued ahead of a slow reader.
const SNAPSHOT_CHUNKS_QUEUED: usize = 8;

/// How long MoveLeader waits to see the target lead.
pub const MOVE_LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// An alarm as etcd's Status lists it among its errors.
fn alarm_text(alarm: bellwether_kv::Alarm) -> String {
    let kind = match alarm.kind {
        bellwether_kv::AlarmKind::NoSpace => "NOSPACE",
        bellwether_kv::AlarmKind::Corrupt => "CORRUPT",
    };
    format!("memberID:{} alarm:{kind} ", alarm.member_id)
}

impl ClusterService {
    /// Refuses an administrative Maintenance call (defragment, hashes,
    /// snapshot, move-leader) from a caller without `root`, as etcd 3.4
    /// answers it there.
    async fn admin<T>(&self, request: &Request<T>) -> Result<(), Status> {
        let caller = self.backend.caller(request)?;
        // Not the published summary: this member may not have applied an
        // enable acknowledged elsewhere yet. After a barrier it has.
        let _ = self.backend.read_barrier().await;
        caller
            .check_admin(&self.backend.store())
            .map_err(maintenance_auth_status)
    }
}

#[tonic::async_trait]
impl Maintenance for ClusterService {
    /// Alarms are replicated state, so every action goes through the log
    /// (as in etcd), forwarded to the leader from a follower.
    async fn alarm(
        &self,
        request: Request<pb::AlarmRequest>,
    ) -> Result<Response<pb::AlarmResponse>, Status> {
        let command = Command::Alarm(request.into_inner());
        let response = self.backend.write::<pb::AlarmResponse>(&command).await?;
        // etcd 3.4's Alarm answer carries no header.
        Ok(Response::new(pb::AlarmResponse {
            header: None,
            ..response
        }))
    }

    async fn status(
        &self,
        _: Request<pb::StatusRequest>,
    ) -> Result<Response<pb::StatusResponse>, Status> {
        let status = self.backend.status.borrow().clone();
        // etcd: "the size of the backend database physically allocated",
        // and of it the part in use. This member's database is its
        // write-ahead log and snapshots (db_size); the part in use is the
        // store's own count of its retained history (db_size_in_use), which
        // the storage quota is checked against. etcd lists raised alarms
        // as the status's errors.
        let backend = self.backend.clone();
        let db_size = tokio::task::spawn_blocking(move || backend.data_dir_bytes())
            .await
            .unwrap_or(0);
        let db_size = i64::try_from(db_size).unwrap_or(i64::MAX);
        let (in_use, errors) = {
            let store = self.backend.store();
            let errors = store.alarms().map(alarm_text).collect();
            (store.size_bytes(), errors)
        };
        Ok(Response::new(pb::StatusResponse {
            header: Some(self.header()),
            version: crate::status::ETCD_VERSION.to_owned(),
            db_size,
            db_size_in_use: i64::try_from(in_use).unwrap_or(i64::MAX),
            errors,
            leader: status.leader.map_or(0, |leader| leader.0),
            raft_index: status.commit,
            raft_term: status.term,
            raft_applied_index: status.applied,
            ..Default::default()
        }))
    }

    async fn defragment(
        &self,
        request: Request<pb::DefragmentRequest>,
    ) -> Result<Response<pb::DefragmentResponse>, Status> {
        self.admin(&request).await?;
        // etcd 3.4's Defragment answer carries no header.
        Ok(Response::new(pb::DefragmentResponse { header: None }))
    }

    /// A CRC-32C of this member's whole store as its snapshot encodes it
    /// (keys with their history, leases, the event log, alarms). Like
    /// etcd's, it is for tests: it encodes the store under its lock.
    async fn hash(
        &self,
        request: Request<pb::HashRequest>,
    ) -> Result<Response<pb::HashResponse>, Status> {
        self.admin(&request).await?;
        let backend = self.backend.clone();
        let (hash, header) = tokio::task::spawn_blocking(move || {
            let (data, header) = {
                let store = backend.store();
                (store.snapshot(), backend.header())
            };
            (crc32c::crc32c(&data), header)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        Ok(Response::new(pb::HashResponse {
            header: Some(header),
            hash,
        }))
    }

    /// etcd's consistency check between members: a CRC-32C of every
    /// retained write at or below the revision asked (0: the latest), with
    /// the compact revision it was taken under. Members that applied the
    /// same log that far and compacted at the same point answer the same
    /// hash. Served from this member's store, as etcd does.
    async fn hash_kv(
        &self,
        request: Request<pb::HashKvRequest>,
    ) -> Result<Response<pb::HashKvResponse>, Status> {
        self.admin(&request).await?;
        let revision = request.into_inner().revision;
        Ok(Response::new(hash_kv_at(&self.backend, revision).await?))
    }

    type SnapshotStream = ChannelStream<Result<pb::SnapshotResponse, Status>>;

    /// A consistent snapshot of this member's store (what its image is
    /// built from taken under the store's lock, so at one applied
    /// revision), as etcd's
    /// backend file followed by its SHA-256 (`crate::snapshot_file`),
    /// streamed in chunks as etcd streams its database. `etcdctl snapshot
    /// save` writes it to a file that etcd's tools and servers take;
    /// `bellwether snapshot restore` starts a new cluster from it.
    async fn snapshot(
        &self,
        request: Request<pb::SnapshotRequest>,
    ) -> Result<Response<Self::SnapshotStream>, Status> {
        self.admin(&request).await?;
        let backend = self.backend.clone();
        let (file, header) = tokio::task::spawn_blocking(move || {
            // The lock (and with it the member's applies) is held only to
            // clone what the image is built from, in constant time; the
            // image is sorted, laid out and hashed after.
            let (pending, header) = {
                let store = backend.store();
                (store.image_pending(), backend.header())
            };
            let file = crate::snapshot_file::encode_image(
                &backend.cluster_name,
                &pending.image(),
                header.revision as u64,
            );
            (file, header)
        })
        .await
        .map_err(|e| Status::internal(e.to_string()))?;
        let (sender, receiver) = tokio::sync::mpsc::channel(SNAPSHOT_CHUNKS_QUEUED);
        tokio::spawn(async move {
            let total = file.len();
            for (i, chunk) in file.chunks(SNAPSHOT_CHUNK_BYTES).enumerate() {
                let sent = (i * SNAPSHOT_CHUNK_BYTES + chunk.len()) as u64;
                assert!(sent <= total as u64, "a chunk ends within the file");
                let response = pb::SnapshotResponse {
                    header: Some(header),
                    remaining_bytes: total as u64 - sent,
                    blob: chunk.to_vec(),
                    ..Default::default()
                };
                if sender.send(Ok(response)).await.is_err() {
                    return; // The client went away.
                }
            }
        });
        Ok(Response::new(ChannelStream::new(receiver)))
    }

    /// Raft's leadership transfer, as etcd answers it: only the leader
    /// takes the call, the target must be another member, and the answer
    /// comes once this member sees the target lead (or, after
    /// [`MOVE_LEADER_WAIT`], etcd's timeout error).
    async fn move_leader(
        &self,
        request: Request<pb::MoveLeaderRequest>,
    ) -> Result<Response<pb::MoveLeaderResponse>, Status> {
        self.admin(&request).await?;
        let target = bellwether_core::NodeId(request.into_inner().target_id);
        let voter = {
            let status = self.backend.status.borrow();
            (target == status.id && !status.learner && !status.outside)
                || status.members.iter().any(|m| m.id == target && !m.learner)
        };
        if !voter {
            return Err(Status::failed_precondition(
                "etcdserver: bad leader transferee",
            ));
        }
        self.backend
            .client
            .move_leader(target)
            .await
            .map_err(Status::failed_precondition)?;
        let mut status = self.backend.status.clone();
        let moved = tokio::time::timeout(
            MOVE_LEADER_WAIT,
            status.wait_for(|s| {
                s.leader == Some(target)
                    && (target != s.id || s.role == bellwether_core::Role::Leader)
            }),
        )
        .await;
        match moved {
            Ok(Ok(_)) => Ok(Response::new(pb::MoveLeaderResponse {
                header: Some(self.header()),
            })),
            _ => Err(Status::unavailable(
                "etcdserver: request timed out, leader transfer took too long",
            )),
        }
    }
}

#[tonic::async_trait]
impl Cluster for ClusterService {
    async fn member_add(
        &self,
        request: Request<pb::MemberAddRequest>,
    ) -> Result<Response<pb::MemberAddResponse>, Status> {
        let caller = self.backend.authorize_admin(&request).await?;
        super::member_service::member_add(&self.backend, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn member_remove(
        &self,
        request: Request<pb::MemberRemoveRequest>,
    ) -> Result<Response<pb::MemberRemoveResponse>, Status> {
        let caller = self.backend.authorize_admin(&request).await?;
        super::member_service::member_remove(&self.backend, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn member_update(
        &self,
        request: Request<pb::MemberUpdateRequest>,
    ) -> Result<Response<pb::MemberUpdateResponse>, Status> {
        let caller = self.backend.authorize_admin(&request).await?;
        super::member_service::member_update(&self.backend, &caller, request.into_inner())
            .await
            .map(Response::new)
    }

    async fn member_list(
        &self,
        _: Request<pb::MemberListRequest>,
    ) -> Result<Response<pb::MemberListResponse>, Status> {
        Ok(Response::new(pb::MemberListResponse {
            header: Some(super::member_service::header(&self.backend)),
            members: super::member_service::members(&self.backend),
        }))
    }

    async fn member_promote(
        &self,
        request: Request<pb::MemberPromoteRequest>,
    ) -> Result<Response<pb::MemberPromoteResponse>, Status> {
        let caller = self.backend.authorize_admin(&request).await?;
        super::member_service::member_promote(&self.backend, &caller, request.into_inner())
            .await
            .map(Response::new)
    }
}

/// This member's HashKV at `revision` (0: the latest), hashed on a
/// blocking thread: for a client's call, or another member's (the
/// consistency check).
pub async fn hash_kv_at(
    backend: &EtcdBackend,
    revision: i64,
) -> Result<pb::HashKvResponse, Status> {
    let backend = backend.clone();
    tokio::task::spawn_blocking(move || {
        let store = backend.store();
        let hash = super::corruption_check::hash_kv(&store, revision)
            .map_err(|e| super::backend::status_of_kv(&e))?;
        let compact_revision = store.compact_revision();
        let hash_revision = if revision <= 0 {
            store.revision()
        } else {
            revision
        };
        // The store hashes only a retained revision it has reached.
        assert!(
            compact_revision <= hash_revision && hash_revision <= store.revision(),
            "HashKV answers for a retained, reached revision"
        );
        Ok::<_, Status>(pb::HashKvResponse {
            header: Some(backend.header()),
            hash,
            compact_revision,
            hash_revision,
        })
    })
    .await
    .map_err(|e| Status::internal(e.to_string()))?
}
