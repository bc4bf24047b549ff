//! What a server holds, read through etcd's API in a form two servers
//! holding the same data must agree on: every key with its revisions and
//! value at several revisions, the compaction point, a watch's replay of
//! the history, every lease with its TTL and keys, every user with its
//! roles and every role with its permissions. Cluster and member ids,
//! Raft terms and remaining TTLs are each server's own and left out.

use bellwether_api::etcdserverpb as pb;
use pb::auth_client::AuthClient;
use pb::kv_client::KvClient;
use pb::lease_client::LeaseClient;
use pb::watch_client::WatchClient;
use tonic::transport::Channel;

/// The largest answer read: every key of the largest run, with room.
const ANSWER_BYTES_MAX: usize = 256 << 20;

/// One server's clients.
pub struct Server {
    pub kv: KvClient<Channel>,
    pub lease: LeaseClient<Channel>,
    pub auth: AuthClient<Channel>,
    watch: WatchClient<Channel>,
}

impl Server {
    pub async fn connect(address: &str) -> Server {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .expect("an address")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("cannot reach {address}: {e}"));
        // A range of every key at 100,000 keys is about 20 MiB.
        Server {
            kv: KvClient::new(channel.clone()).max_decoding_message_size(ANSWER_BYTES_MAX),
            lease: LeaseClient::new(channel.clone()),
            auth: AuthClient::new(channel.clone()),
            watch: WatchClient::new(channel).max_decoding_message_size(ANSWER_BYTES_MAX),
        }
    }

    /// Every key at `revision` (0: the newest), or the error's message.
    pub async fn range_at(
        &mut self,
        revision: i64,
    ) -> Result<(i64, Vec<bellwether_api::mvccpb::KeyValue>), String> {
        let request = pb::RangeRequest {
            key: vec![0],
            range_end: vec![0],
            revision,
            ..Default::default()
        };
        match self.kv.range(request).await {
            Ok(answer) => {
                let answer = answer.into_inner();
                Ok((answer.header.expect("a header").revision, answer.kvs))
            }
            Err(status) => Err(status.message().to_string()),
        }
    }

    /// Every event from `start` through `end`, as a watch on all keys
    /// replays them, one line per event.
    async fn replay(&mut self, start: i64, end: i64) -> Vec<String> {
        let create = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
                pb::WatchCreateRequest {
                    key: vec![0],
                    range_end: vec![0],
                    start_revision: start,
                    prev_kv: true,
                    ..Default::default()
                },
            )),
        };
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        sender.send(create).await.unwrap();
        let mut stream = self
            .watch
            .watch(tokio_stream::wrappers::ReceiverStream::new(receiver))
            .await
            .expect("a watch")
            .into_inner();
        let mut lines = Vec::new();
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let message = tokio::time::timeout_at(deadline, stream.message())
                .await
                .expect("the watch replays the history within a minute")
                .expect("the watch stays up")
                .expect("the watch stays open");
            assert!(
                message.compact_revision == 0,
                "watch from {start}: compacted"
            );
            for event in &message.events {
                let kv = event.kv.as_ref().expect("an event's kv");
                lines.push(format!("{} {:?} {:?}", event.r#type, kv, event.prev_kv));
                if kv.mod_revision >= end {
                    drop(sender);
                    return lines;
                }
            }
        }
    }
}

/// A range's header revision and keys, or its error.
pub type RangeAnswer = Result<(i64, Vec<String>), String>;

/// A server's data, as compared.
#[derive(Debug, PartialEq, Eq)]
pub struct View {
    /// The newest revision.
    pub revision: i64,
    /// Each sampled revision and what a range there answered.
    pub ranges: Vec<(i64, RangeAnswer)>,
    /// A watch's replay from just after the compaction to the end.
    pub events: Vec<String>,
    /// Each lease: id, granted TTL, keys.
    pub leases: Vec<(i64, i64, Vec<Vec<u8>>)>,
    /// Each user and its roles.
    pub users: Vec<(String, Vec<String>)>,
    /// Each role and its permissions.
    pub roles: Vec<(String, Vec<String>)>,
}

/// Reads `server`'s view; `compacted` is the revision it was compacted
/// at, so the sample covers just below it (refused) and above.
pub async fn view(server: &mut Server, compacted: i64) -> View {
    let (revision, _) = server.range_at(0).await.expect("a range");
    let mut ranges = Vec::new();
    let mid = (compacted + revision) / 2;
    for at in [
        compacted - 1,
        compacted,
        compacted + 1,
        mid,
        revision - 1,
        revision,
    ] {
        let answer = server
            .range_at(at)
            .await
            .map(|(header, kvs)| (header, kvs.iter().map(|kv| format!("{kv:?}")).collect()));
        ranges.push((at, answer));
    }
    let events = server.replay(compacted + 1, revision).await;
    let mut leases = Vec::new();
    let ids = server
        .lease
        .lease_leases(pb::LeaseLeasesRequest {})
        .await
        .expect("lease list")
        .into_inner()
        .leases;
    for id in ids.iter().map(|l| l.id) {
        let answer = server
            .lease
            .lease_time_to_live(pb::LeaseTimeToLiveRequest { id, keys: true })
            .await
            .expect("lease time-to-live")
            .into_inner();
        let mut keys = answer.keys;
        keys.sort();
        leases.push((id, answer.granted_ttl, keys));
    }
    leases.sort();
    let mut users = Vec::new();
    let names = server
        .auth
        .user_list(pb::AuthUserListRequest {})
        .await
        .expect("user list")
        .into_inner()
        .users;
    for name in names {
        let mut roles = server
            .auth
            .user_get(pb::AuthUserGetRequest { name: name.clone() })
            .await
            .expect("user get")
            .into_inner()
            .roles;
        roles.sort();
        users.push((name, roles));
    }
    let mut roles = Vec::new();
    let names = server
        .auth
        .role_list(pb::AuthRoleListRequest {})
        .await
        .expect("role list")
        .into_inner()
        .roles;
    for name in names {
        let mut perms: Vec<String> = server
            .auth
            .role_get(pb::AuthRoleGetRequest { role: name.clone() })
            .await
            .expect("role get")
            .into_inner()
            .perm
            .iter()
            .map(|p| format!("{p:?}"))
            .collect();
        perms.sort();
        roles.push((name, perms));
    }
    View {
        revision,
        ranges,
        events,
        leases,
        users,
        roles,
    }
}
