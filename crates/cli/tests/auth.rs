//! etcd's Auth API, against real member processes: the etcdctl `user`,
//! `role` and `auth` transcript of a real etcd 3.4 reproduced, every RPC
//! checked against the caller's permissions, a revoke that takes effect
//! at once on every member, tokens that expire or are forged, and client
//! certificates naming the user under `--client-cert-auth` (on etcd too).

mod common;

use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::auth_client::AuthClient;
use bellwether_api::etcdserverpb::cluster_client::ClusterClient;
use bellwether_api::etcdserverpb::kv_client::KvClient;
use bellwether_api::etcdserverpb::lease_client::LeaseClient;
use bellwether_api::etcdserverpb::maintenance_client::MaintenanceClient;
use bellwether_api::etcdserverpb::watch_client::WatchClient;
use bellwether_api::v3electionpb as epb;
use bellwether_api::v3electionpb::election_client::ElectionClient;
use bellwether_api::v3lockpb as lpb;
use bellwether_api::v3lockpb::lock_client::LockClient;
use common::etcd_server::EtcdServer;
use common::{bellwether_binary, etcdctl, Cluster};
use std::path::Path;
use std::time::Duration;
use tonic::transport::Channel;
use tonic::{Code, Request};

/// The etcdctl commands of the transcript, each with its stdin.
const TRANSCRIPT: &[(&str, Option<&str>)] = &[
    ("user add root:rootpw", None),
    // etcdctl adds the role root and grants it when the server says root
    // lacks it, then enables again.
    ("auth enable", None),
    ("role add root", None),
    ("auth enable", None),
    ("--user root:rootpw user add alice:pw", None),
    ("--user root:rootpw user add alice:pw", None),
    ("--user root:rootpw role add r1", None),
    ("--user root:rootpw role add r1", None),
    ("--user root:rootpw role grant-permission r1 read /a", None),
    (
        "--user root:rootpw role grant-permission --prefix r1 readwrite /p/",
        None,
    ),
    (
        "--user root:rootpw role grant-permission r1 write /w /x",
        None,
    ),
    ("--user root:rootpw role get r1", None),
    ("--user root:rootpw role list", None),
    ("--user root:rootpw user grant-role alice r1", None),
    ("--user root:rootpw user grant-role alice r1", None),
    ("--user root:rootpw user grant-role alice nobody", None),
    ("--user root:rootpw user get alice", None),
    ("--user root:rootpw user get alice --detail", None),
    ("--user root:rootpw user get nobody", None),
    ("--user root:rootpw role get nobody", None),
    ("--user root:rootpw user list", None),
    ("put /a 1", None),
    ("get /a", None),
    ("--user alice:pw put /a 1", None),
    ("--user root:rootpw put /a 1", None),
    ("--user alice:pw get /a", None),
    ("--user alice:pw put /p/x 2", None),
    ("--user alice:pw get /p/x", None),
    ("--user alice:pw get --prefix /p/", None),
    ("--user alice:pw get --prefix /", None),
    ("--user alice:pw del /p/x", None),
    ("--user alice:pw del --prefix /", None),
    ("--user alice:pw put /w1 3", None),
    (
        "--user alice:pw txn --interactive=false",
        Some("value(\"/a\") = \"1\"\n\nput /p/t ok\n\nput /b no\n\n"),
    ),
    (
        "--user alice:pw txn --interactive=false",
        Some("value(\"/b\") = \"1\"\n\nput /p/t ok\n\n\n"),
    ),
    (
        "--user alice:pw txn --interactive=false",
        Some("value(\"/a\") = \"1\"\n\nput /p/t ok\n\nget /p/t\n\n"),
    ),
    ("--user alice:pw endpoint hashkv", None),
    (
        "--user alice:pw member add x --peer-urls=http://127.0.0.1:29999",
        None,
    ),
    ("--user alice:wrong get /a", None),
    ("--user bob:pw get /a", None),
    ("--user alice:pw user list", None),
    ("--user alice:pw role revoke-permission r1 /a", None),
    ("--user root:rootpw role revoke-permission r1 /a", None),
    ("--user alice:pw get /a", None),
    ("--user root:rootpw role revoke-permission r1 /zz", None),
    ("--user root:rootpw user revoke-role alice r9", None),
    ("--user root:rootpw user delete root", None),
    ("--user root:rootpw user revoke-role root root", None),
    ("--user root:rootpw role delete root", None),
    (
        "--user root:rootpw user passwd alice --interactive=false",
        Some("pw2\n"),
    ),
    ("--user alice:pw get /p/x", None),
    ("--user alice:pw2 get /p/t", None),
    ("--user root:rootpw role delete r1", None),
    ("--user alice:pw2 get /p/t", None),
    ("--user root:rootpw user delete alice", None),
    ("--user root:rootpw user delete alice", None),
    ("--user root:rootpw auth disable", None),
    ("get /a", None),
    ("auth disable", None),
    ("--user root:rootpw get /a", None),
];

/// Runs the transcript, command `i` at `endpoints[i % len]`, and returns
/// what etcdctl printed, with the endpoint and the client's retry warnings
/// left out (they carry times and ids).
fn transcript(endpoints: &[String]) -> String {
    let mut out = String::new();
    for (i, (command, input)) in TRANSCRIPT.iter().enumerate() {
        let endpoint = &endpoints[i % endpoints.len()];
        let args: Vec<&str> = command.split(' ').collect();
        let (ok, text) = etcdctl::run(endpoint, &args, *input);
        out.push_str(&format!("$ {command}\n"));
        for line in text.lines().filter(|l| !l.contains("\"level\":\"warn\"")) {
            out.push_str(&line.replace(endpoint.as_str(), "ENDPOINT"));
            out.push('\n');
        }
        out.push_str(&format!("[ok: {ok}]\n"));
    }
    out
}

#[test]
fn etcdctl_user_role_and_auth_commands_answer_as_on_a_real_etcd() {
    etcdctl::require();
    let name = "auth_transcript";
    let etcd = EtcdServer::start(name);
    let expected = transcript(&[etcd.url()]);
    drop(etcd);
    let mut cluster = Cluster::start(name, 3, 50, 300);
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    // Each command on the next member: a change made through one is in
    // force on the next at once.
    let endpoints: Vec<String> = cluster
        .all()
        .iter()
        .map(|&i| cluster.client(i).to_string())
        .collect();
    let got = transcript(&endpoints);
    // Sanity: the transcript exercises refusals and successes.
    assert!(expected.contains("etcdserver: permission denied"));
    assert!(expected.contains("Authentication Enabled"));
    if got != expected {
        let diff: Vec<String> = expected
            .lines()
            .zip(got.lines())
            .enumerate()
            .filter(|(_, (e, g))| e != g)
            .take(10)
            .map(|(i, (e, g))| format!("line {i}: etcd {e:?}, bellwether {g:?}"))
            .collect();
        panic!(
            "bellwether's transcript differs from etcd's:\n{}\n\nbellwether's:\n{got}",
            diff.join("\n")
        );
    }
}

/// A request with `token` in its metadata, as etcd's clients send it.
fn with_token<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request
        .metadata_mut()
        .insert("token", token.parse().expect("an ASCII token"));
    request
}

async fn channel(address: std::net::SocketAddr) -> Channel {
    Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

async fn token(channel: &Channel, user: &str, password: &str) -> String {
    AuthClient::new(channel.clone())
        .authenticate(pb::AuthenticateRequest {
            name: user.into(),
            password: password.into(),
        })
        .await
        .unwrap()
        .into_inner()
        .token
}

/// As root (token or none while auth is off): users root and alice, role
/// `mine` with readwrite on the prefix /mine/ for alice, then auth on.
async fn set_up_auth(channel: &Channel) {
    let mut auth = AuthClient::new(channel.clone());
    for (user, password) in [("root", "rootpw"), ("alice", "alicepw")] {
        auth.user_add(pb::AuthUserAddRequest {
            name: user.into(),
            password: password.into(),
            options: None,
        })
        .await
        .unwrap();
    }
    auth.role_add(pb::AuthRoleAddRequest {
        name: "root".into(),
    })
    .await
    .unwrap();
    auth.role_add(pb::AuthRoleAddRequest {
        name: "mine".into(),
    })
    .await
    .unwrap();
    // etcd's prefix convention: the range ends at the prefix with its last
    // byte plus one.
    for (key, range_end) in [("/mine/", "/mine0"), ("mine/", "mine0")] {
        auth.role_grant_permission(pb::AuthRoleGrantPermissionRequest {
            name: "mine".into(),
            perm: Some(bellwether_api::authpb::Permission {
                perm_type: 2,
                key: key.into(),
                range_end: range_end.into(),
            }),
        })
        .await
        .unwrap();
    }
    for (user, role) in [("root", "root"), ("alice", "mine")] {
        auth.user_grant_role(pb::AuthUserGrantRoleRequest {
            user: user.into(),
            role: role.into(),
        })
        .await
        .unwrap();
    }
    auth.auth_enable(pb::AuthEnableRequest {}).await.unwrap();
}

fn assert_denied<T: std::fmt::Debug>(what: &str, result: Result<T, tonic::Status>) {
    match result {
        Err(status) => assert_eq!(
            (status.code(), status.message()),
            (Code::PermissionDenied, "etcdserver: permission denied"),
            "{what}"
        ),
        Ok(answer) => panic!("{what}: allowed: {answer:?}"),
    }
}

/// The first message of a server stream, or why there is none.
async fn first_of<T>(
    opened: Result<tonic::Response<tonic::Streaming<T>>, tonic::Status>,
) -> Result<T, tonic::Status> {
    let mut stream = opened?.into_inner();
    match stream.message().await? {
        Some(message) => Ok(message),
        None => Err(tonic::Status::unknown("the stream ended empty")),
    }
}

/// A watch on `key` as `token`: the first answer.
async fn first_watch_answer(channel: &Channel, token: &str, key: &str) -> pb::WatchResponse {
    use tonic::codegen::tokio_stream::{self as streams, StreamExt};
    let create = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
            pb::WatchCreateRequest {
                key: key.into(),
                ..Default::default()
            },
        )),
    };
    // The request stream stays open, as a watching client's does.
    let requests = streams::iter(vec![create]).chain(streams::pending());
    let mut answers = WatchClient::new(channel.clone())
        .watch(with_token(requests, token))
        .await
        .unwrap()
        .into_inner();
    tokio::time::timeout(Duration::from_secs(5), answers.message())
        .await
        .expect("a watch answer in time")
        .unwrap()
        .expect("an answer")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn every_rpc_checks_the_callers_permissions() {
    let name = "auth_every_rpc";
    let mut cluster = Cluster::start(name, 3, 50, 300);
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    // Through a follower: forwarded calls keep the caller's identity.
    let follower = if leader == 1 { 2 } else { 1 };
    runtime().block_on(async {
        let channel = channel(cluster.client(follower)).await;
        set_up_auth(&channel).await;
        let root = token(&channel, "root", "rootpw").await;
        let alice = token(&channel, "alice", "alicepw").await;
        let mut kv = KvClient::new(channel.clone());
        // Root puts a key alice may not touch, on a lease.
        let lease = LeaseClient::new(channel.clone())
            .lease_grant(with_token(pb::LeaseGrantRequest { ttl: 60, id: 0 }, &root))
            .await
            .unwrap()
            .into_inner()
            .id;
        let theirs = pb::PutRequest {
            key: "/theirs/k".into(),
            value: "v".into(),
            lease,
            ..Default::default()
        };
        kv.put(with_token(theirs.clone(), &root)).await.unwrap();

        // Without a token: etcd's "user name is empty".
        let anonymous = kv
            .range(Request::new(pb::RangeRequest {
                key: "/mine/k".into(),
                ..Default::default()
            }))
            .await
            .unwrap_err();
        assert_eq!(
            (anonymous.code(), anonymous.message()),
            (Code::InvalidArgument, "etcdserver: user name is empty")
        );

        // Alice may use her prefix.
        let mine = pb::PutRequest {
            key: "/mine/k".into(),
            value: "v".into(),
            ..Default::default()
        };
        kv.put(with_token(mine, &alice)).await.unwrap();
        let read = kv
            .range(with_token(
                pb::RangeRequest {
                    key: "/mine/k".into(),
                    ..Default::default()
                },
                &alice,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(read.kvs.len(), 1);

        // And nothing else: read, write, delete, txn, watch, lease revoke.
        let range = pb::RangeRequest {
            key: "/theirs/k".into(),
            ..Default::default()
        };
        assert_denied("range", kv.range(with_token(range.clone(), &alice)).await);
        let serializable = pb::RangeRequest {
            serializable: true,
            ..range.clone()
        };
        assert_denied(
            "serializable range",
            kv.range(with_token(serializable, &alice)).await,
        );
        assert_denied("put", kv.put(with_token(theirs.clone(), &alice)).await);
        let delete = pb::DeleteRangeRequest {
            key: "/theirs/".into(),
            range_end: "/theirs0".into(),
            ..Default::default()
        };
        assert_denied("delete", kv.delete_range(with_token(delete, &alice)).await);
        let op = |request| pb::RequestOp {
            request: Some(request),
        };
        let read_theirs = pb::TxnRequest {
            success: vec![op(pb::request_op::Request::RequestRange(range.clone()))],
            ..Default::default()
        };
        assert_denied(
            "read-only txn",
            kv.txn(with_token(read_theirs, &alice)).await,
        );
        let compare_theirs = pb::TxnRequest {
            compare: vec![pb::Compare {
                key: "/theirs/k".into(),
                target: pb::compare::CompareTarget::Version as i32,
                ..Default::default()
            }],
            success: vec![op(pb::request_op::Request::RequestPut(pb::PutRequest {
                key: "/mine/t".into(),
                ..Default::default()
            }))],
            ..Default::default()
        };
        assert_denied(
            "txn comparing another's key",
            kv.txn(with_token(compare_theirs, &alice)).await,
        );
        let nested = pb::TxnRequest {
            failure: vec![op(pb::request_op::Request::RequestTxn(pb::TxnRequest {
                success: vec![op(pb::request_op::Request::RequestPut(theirs.clone()))],
                ..Default::default()
            }))],
            ..Default::default()
        };
        assert_denied(
            "a put in a nested txn's branch",
            kv.txn(with_token(nested, &alice)).await,
        );
        let watch = first_watch_answer(&channel, &alice, "/theirs/k").await;
        assert!(
            watch.created
                && watch.canceled
                && watch.cancel_reason == "etcdserver: permission denied",
            "a watch on another's key is canceled at creation: {watch:?}"
        );
        let watch = first_watch_answer(&channel, &alice, "/mine/k").await;
        assert!(watch.created && !watch.canceled, "{watch:?}");
        assert_denied(
            "lease revoke (deletes another's key)",
            LeaseClient::new(channel.clone())
                .lease_revoke(with_token(pb::LeaseRevokeRequest { id: lease }, &alice))
                .await,
        );

        // The Election and Lock services' keys are keys too.
        let mut election = ElectionClient::new(channel.clone());
        let campaign = |name: &str| epb::CampaignRequest {
            name: name.into(),
            lease,
            value: "me".into(),
        };
        assert_denied(
            "campaign",
            election
                .campaign(with_token(campaign("theirs"), &alice))
                .await,
        );
        assert_denied(
            "leader",
            election
                .leader(with_token(
                    epb::LeaderRequest {
                        name: "theirs".into(),
                    },
                    &alice,
                ))
                .await,
        );
        // Proclaim and Resign name the key they write: another's key is
        // refused whatever election the call names.
        let forged = epb::LeaderKey {
            name: "mine".into(),
            key: "/theirs/k".into(),
            rev: 0,
            lease: 0,
        };
        assert_denied(
            "proclaim on another's key",
            election
                .proclaim(with_token(
                    epb::ProclaimRequest {
                        leader: Some(forged.clone()),
                        value: "overwritten".into(),
                    },
                    &alice,
                ))
                .await,
        );
        assert_denied(
            "resign of another's key",
            election
                .resign(with_token(
                    epb::ResignRequest {
                        leader: Some(forged),
                    },
                    &alice,
                ))
                .await,
        );
        // A lease's keys are another's: alice may neither list them nor
        // attach her key to that lease.
        let mut leases = LeaseClient::new(channel.clone());
        assert_denied(
            "lease time-to-live listing another's keys",
            leases
                .lease_time_to_live(with_token(
                    pb::LeaseTimeToLiveRequest {
                        id: lease,
                        keys: true,
                    },
                    &alice,
                ))
                .await,
        );
        leases
            .lease_time_to_live(with_token(
                pb::LeaseTimeToLiveRequest {
                    id: lease,
                    keys: false,
                },
                &alice,
            ))
            .await
            .expect("without the keys, a lease's TTL is anyone's to read");
        let onto_their_lease = pb::PutRequest {
            key: "/mine/leased".into(),
            value: "v".into(),
            lease,
            ..Default::default()
        };
        assert_denied(
            "a put onto a lease holding another's key",
            kv.put(with_token(onto_their_lease, &alice)).await,
        );
        let mut lock = LockClient::new(channel.clone());
        let lock_request = |name: &str| lpb::LockRequest {
            name: name.into(),
            lease,
        };
        assert_denied(
            "lock",
            lock.lock(with_token(lock_request("theirs"), &alice)).await,
        );
        let mine_lease = LeaseClient::new(channel.clone())
            .lease_grant(with_token(pb::LeaseGrantRequest { ttl: 60, id: 0 }, &alice))
            .await
            .unwrap()
            .into_inner()
            .id;
        let held = lock
            .lock(with_token(
                lpb::LockRequest {
                    name: "mine".into(),
                    lease: mine_lease,
                },
                &alice,
            ))
            .await
            .expect("alice locks under her prefix")
            .into_inner();
        // Another's lock key may not be unlocked (a delete of it), nor
        // another's election observed (a read of its prefix).
        assert_denied(
            "unlock of another's key",
            lock.unlock(with_token(
                lpb::UnlockRequest {
                    key: "/theirs/k".into(),
                },
                &alice,
            ))
            .await,
        );
        assert_denied(
            "observe another's election",
            first_of(
                election
                    .observe(with_token(
                        epb::LeaderRequest {
                            name: "theirs".into(),
                        },
                        &alice,
                    ))
                    .await,
            )
            .await,
        );
        lock.unlock(with_token(lpb::UnlockRequest { key: held.key }, &alice))
            .await
            .unwrap();

        // Administration needs root: members, hashes, users.
        let add = pb::MemberAddRequest {
            peer_urls: vec!["http://127.0.0.1:29999".into()],
            is_learner: true,
        };
        assert_denied(
            "member add",
            ClusterClient::new(channel.clone())
                .member_add(with_token(add, &alice))
                .await,
        );
        let hash = MaintenanceClient::new(channel.clone())
            .hash_kv(with_token(pb::HashKvRequest { revision: 0 }, &alice))
            .await
            .unwrap_err();
        assert_eq!(
            (hash.code(), hash.message()),
            (Code::Unknown, "auth: permission denied"),
            "etcd 3.4's answer to a Maintenance call without root"
        );
        let mut cluster_service = ClusterClient::new(channel.clone());
        assert_denied(
            "member remove",
            cluster_service
                .member_remove(with_token(pb::MemberRemoveRequest { id: 7 }, &alice))
                .await,
        );
        assert_denied(
            "member update",
            cluster_service
                .member_update(with_token(
                    pb::MemberUpdateRequest {
                        id: 7,
                        peer_urls: vec!["http://127.0.0.1:29998".into()],
                    },
                    &alice,
                ))
                .await,
        );
        assert_denied(
            "member promote",
            cluster_service
                .member_promote(with_token(pb::MemberPromoteRequest { id: 7 }, &alice))
                .await,
        );
        let mut maintenance = MaintenanceClient::new(channel.clone());
        let etcd_34_denial = |what: &str, status: tonic::Status| {
            assert_eq!(
                (status.code(), status.message()),
                (Code::Unknown, "auth: permission denied"),
                "{what}: etcd 3.4's answer to a Maintenance call without root"
            );
        };
        etcd_34_denial(
            "hash",
            maintenance
                .hash(with_token(pb::HashRequest {}, &alice))
                .await
                .unwrap_err(),
        );
        etcd_34_denial(
            "defragment",
            maintenance
                .defragment(with_token(pb::DefragmentRequest {}, &alice))
                .await
                .unwrap_err(),
        );
        etcd_34_denial(
            "move leader",
            maintenance
                .move_leader(with_token(pb::MoveLeaderRequest { target_id: 1 }, &alice))
                .await
                .unwrap_err(),
        );
        etcd_34_denial(
            "snapshot",
            first_of(
                maintenance
                    .snapshot(with_token(pb::SnapshotRequest {}, &alice))
                    .await,
            )
            .await
            .unwrap_err(),
        );
        // What etcd 3.4 does not check, neither do we: a member's status,
        // the alarm list and the member list.
        maintenance
            .status(with_token(pb::StatusRequest {}, &alice))
            .await
            .expect("status is anyone's");
        maintenance
            .alarm(with_token(pb::AlarmRequest::default(), &alice))
            .await
            .expect("the alarm list is anyone's");
        cluster_service
            .member_list(with_token(pb::MemberListRequest::default(), &alice))
            .await
            .expect("the member list is anyone's");
        assert_denied(
            "user list",
            AuthClient::new(channel.clone())
                .user_list(with_token(pb::AuthUserListRequest {}, &alice))
                .await,
        );
        MaintenanceClient::new(channel.clone())
            .hash_kv(with_token(pb::HashKvRequest { revision: 0 }, &root))
            .await
            .expect("root may");
        // Root's key is intact.
        let read = kv
            .range(with_token(range, &root))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(read.kvs.len(), 1);
        assert_eq!(read.kvs[0].value, b"v");
    });
}

#[test]
fn a_revoked_permission_takes_effect_at_once_on_every_member() {
    let name = "auth_revoke_at_once";
    let mut cluster = Cluster::start(name, 3, 50, 300);
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    runtime().block_on(async {
        let mut channels = Vec::new();
        for i in cluster.all() {
            channels.push(channel(cluster.client(i)).await);
        }
        set_up_auth(&channels[0]).await;
        let root = token(&channels[0], "root", "rootpw").await;
        let alice = token(&channels[1], "alice", "alicepw").await;
        let grant = |round: usize| pb::AuthUserGrantRoleRequest {
            user: "alice".into(),
            role: format!("extra{round}"),
        };
        for round in 0..12 {
            let (admin, writer, reader) = (round % 3, (round + 1) % 3, (round + 2) % 3);
            let mut auth = AuthClient::new(channels[admin].clone());
            let role = format!("extra{round}");
            auth.role_add(with_token(
                pb::AuthRoleAddRequest { name: role.clone() },
                &root,
            ))
            .await
            .unwrap();
            auth.role_grant_permission(with_token(
                pb::AuthRoleGrantPermissionRequest {
                    name: role.clone(),
                    perm: Some(bellwether_api::authpb::Permission {
                        perm_type: 2,
                        key: "/extra".into(),
                        range_end: vec![],
                    }),
                },
                &root,
            ))
            .await
            .unwrap();
            auth.user_grant_role(with_token(grant(round), &root))
                .await
                .unwrap();
            let put = pb::PutRequest {
                key: "/extra".into(),
                value: format!("{round}").into(),
                ..Default::default()
            };
            KvClient::new(channels[writer].clone())
                .put(with_token(put.clone(), &alice))
                .await
                .unwrap_or_else(|e| panic!("round {round}: granted, alice writes: {e}"));
            // Revoke on one member; the very next calls, on the other two,
            // are refused.
            auth.user_revoke_role(with_token(
                pb::AuthUserRevokeRoleRequest {
                    name: "alice".into(),
                    role,
                },
                &root,
            ))
            .await
            .unwrap();
            assert_denied(
                &format!(
                    "round {round}: a write on n{} right after the revoke",
                    writer + 1
                ),
                KvClient::new(channels[writer].clone())
                    .put(with_token(put, &alice))
                    .await,
            );
            let read = pb::RangeRequest {
                key: "/extra".into(),
                ..Default::default()
            };
            assert_denied(
                &format!(
                    "round {round}: a read on n{} right after the revoke",
                    reader + 1
                ),
                KvClient::new(channels[reader].clone())
                    .range(with_token(read, &alice))
                    .await,
            );
        }
    });
}

#[test]
fn an_expired_forged_or_superseded_token_is_refused() {
    let name = "auth_tokens";
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, &["--auth-token-ttl", "2"]);
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    runtime().block_on(async {
        let channel = channel(cluster.client(1)).await;
        set_up_auth(&channel).await;
        let root = token(&channel, "root", "rootpw").await;
        let alice = token(&channel, "alice", "alicepw").await;
        let mut kv = KvClient::new(channel.clone());
        let read = pb::RangeRequest {
            key: "/mine/k".into(),
            ..Default::default()
        };
        kv.range(with_token(read.clone(), &alice)).await.unwrap();
        let invalid =
            |what: &str, result: Result<tonic::Response<pb::RangeResponse>, tonic::Status>| {
                let status = result.expect_err(what);
                assert_eq!(
                    (status.code(), status.message()),
                    (Code::Unauthenticated, "etcdserver: invalid auth token"),
                    "{what}"
                );
            };
        // A token with another user's name, or a changed expiry.
        let mut parts: Vec<String> = alice.split('.').map(String::from).collect();
        parts[0] = "726f6f74".into(); // "root"
        invalid(
            "forged user",
            kv.range(with_token(read.clone(), &parts.join("."))).await,
        );
        let mut parts: Vec<String> = alice.split('.').map(String::from).collect();
        parts[2] = "99999999999999".into();
        invalid(
            "forged expiry",
            kv.range(with_token(read.clone(), &parts.join("."))).await,
        );
        invalid(
            "garbage",
            kv.range(with_token(read.clone(), "not-a-token")).await,
        );
        // A password change ends the user's tokens.
        let old = token(&channel, "alice", "alicepw").await;
        AuthClient::new(channel.clone())
            .user_change_password(with_token(
                pb::AuthUserChangePasswordRequest {
                    name: "alice".into(),
                    password: "newpw".into(),
                },
                &root,
            ))
            .await
            .unwrap();
        invalid(
            "after a password change",
            kv.range(with_token(read.clone(), &old)).await,
        );
        let fresh = token(&channel, "alice", "newpw").await;
        kv.range(with_token(read.clone(), &fresh)).await.unwrap();
        // And a token expires after --auth-token-ttl (2 s here).
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        invalid("expired", kv.range(with_token(read, &fresh)).await);
    });
}

/// Issues certificates for `names` (each its own common name) into `dir`.
fn certs(dir: &Path, names: &str, hosts: &str) {
    let output = std::process::Command::new(bellwether_binary())
        .args(["certs", "--names", names, "--hosts", hosts, "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "bellwether certs: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// etcdctl at `endpoint` presenting the certificate `name` from `dir`.
fn etcdctl_as(endpoint: &str, dir: &Path, name: &str, args: &str) -> (bool, String) {
    let file = |f: String| dir.join(f).display().to_string();
    let mut all = vec![
        format!("--cacert={}", file("ca.pem".into())),
        format!("--cert={}", file(format!("{name}.pem"))),
        format!("--key={}", file(format!("{name}-key.pem"))),
    ];
    all.extend(args.split(' ').map(String::from));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    etcdctl::run(endpoint, &all, None)
}

/// With auth on, the certificate's common name is the user: root sets up
/// alice, alice writes her prefix, mallory (no such user) is refused.
fn certificate_users(system: &str, endpoint: &str, dir: &Path) {
    for command in [
        "user add root:rootpw",
        "role add root",
        "user grant-role root root",
        "user add alice:pw",
        "role add mine",
        "role grant-permission --prefix mine readwrite /mine/",
        "user grant-role alice mine",
        "auth enable",
    ] {
        let (ok, out) = etcdctl_as(endpoint, dir, "root", command);
        assert!(ok, "{system}: {command}: {out}");
    }
    let (ok, out) = etcdctl_as(endpoint, dir, "alice", "put /mine/k v");
    assert!(ok, "{system}: alice by her certificate: {out}");
    let (ok, out) = etcdctl_as(endpoint, dir, "alice", "put /other v");
    assert!(
        !ok && out.contains("etcdserver: permission denied"),
        "{system}: alice outside her prefix: {out}"
    );
    let (ok, out) = etcdctl_as(endpoint, dir, "mallory", "get /mine/k");
    assert!(
        !ok && out.contains("etcdserver: permission denied"),
        "{system}: a certificate naming no user: {out}"
    );
    let (ok, out) = etcdctl_as(endpoint, dir, "root", "get /mine/k --print-value-only");
    assert!(ok && out.trim() == "v", "{system}: root reads it: {out}");
}

#[test]
fn a_client_certificate_names_the_user_under_client_cert_auth_on_etcd_and_here() {
    etcdctl::require();
    let name = "auth_cert_users";
    let dir = std::env::temp_dir().join(format!("bw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let net = common::net_for(name);
    let hosts: Vec<String> = std::iter::once("127.0.0.1".to_string())
        .chain((1..=3).map(|i| format!("127.0.{net}.{i}")))
        .collect();
    certs(&dir, "member,root,alice,mallory", &hosts.join(","));
    let file = |name: &str| dir.join(name).display().to_string();
    let (cert, key, ca) = (file("member.pem"), file("member-key.pem"), file("ca.pem"));

    let etcd = EtcdServer::start_tls(name, &cert, &key, &ca);
    certificate_users("etcd", &etcd.url(), &dir);
    drop(etcd);

    let flags = [
        "--cert-file",
        &cert,
        "--key-file",
        &key,
        "--trusted-ca-file",
        &ca,
        "--client-cert-auth",
    ];
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, &flags);
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let follower = if leader == 1 { 2 } else { 1 };
    certificate_users(
        "bellwether",
        &format!("https://{}", cluster.client(follower)),
        &dir,
    );
    drop(cluster);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bellwether elect` and `bellwether tasks` as alice (`--user`), with a
/// 2 s token TTL that the run outlives: the client must ask for a new
/// token when the cluster refuses the old one. Without a user, or with a
/// wrong password, they fail with the cluster's reason.
fn elect_and_tasks_as_a_user(system: &str, endpoints: &str) {
    // With auth off, a client given a user calls without a token, as
    // etcd's clients do.
    let off = common::bellwether(
        endpoints,
        &["elect", "mine", "--user", "nobody:pw", "--", "true"],
    )
    .stdin(std::process::Stdio::null())
    .output()
    .unwrap();
    assert!(off.status.success(), "{system}: {off:?}");
    runtime().block_on(async {
        let address = endpoints.split(',').next().unwrap().parse().unwrap();
        let channel = channel(address).await;
        set_up_auth(&channel).await;
        // Only the queue's own prefix is granted (by set_up_auth): the
        // queue's listing for the dashboard, outside it, is best effort.
    });
    let run = |args: &[&str]| {
        let out = common::bellwether(endpoints, args)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_string();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    let alice = "alice:alicepw";

    let (code, _, stderr) = run(&["elect", "mine", "--", "true"]);
    assert_ne!(code, Some(0), "{system}: elect without a user");
    assert!(stderr.contains("user name is empty"), "{system}: {stderr}");
    let (code, _, stderr) = run(&["elect", "mine", "--user", "alice:wrong", "--", "true"]);
    assert_ne!(code, Some(0), "{system}: elect with a wrong password");
    assert!(
        stderr.contains("authentication failed"),
        "{system}: {stderr}"
    );

    // The program runs past the token's TTL; resigning afterwards needs a
    // new token, and must happen at once (the lease's TTL is 10 s).
    let started = std::time::Instant::now();
    let (code, stdout, stderr) = run(&[
        "elect",
        "mine",
        "--user",
        alice,
        "--",
        "sh",
        "-c",
        "sleep 3; echo led",
    ]);
    assert_eq!(code, Some(0), "{system}: {stderr}");
    assert_eq!(stdout.trim(), "led", "{system}");
    runtime().block_on(async {
        let address = endpoints.split(',').next().unwrap().parse().unwrap();
        let channel = channel(address).await;
        let root = token(&channel, "root", "rootpw").await;
        let left = KvClient::new(channel)
            .range(with_token(
                pb::RangeRequest {
                    key: "mine/".into(),
                    range_end: "mine0".into(),
                    count_only: true,
                    ..Default::default()
                },
                &root,
            ))
            .await
            .unwrap()
            .into_inner()
            .count;
        assert_eq!(
            left, 0,
            "{system}: the leader's key is gone when elect ends"
        );
    });
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "{system}: resigned, not expired"
    );

    let (code, stdout, stderr) = run(&[
        "tasks", "submit", "mine", "--id", "t1", "--user", alice, "hello",
    ]);
    assert_eq!(code, Some(0), "{system}: {stderr}");
    assert_eq!(stdout.trim(), "t1", "{system}");
    let mut worker = common::bellwether(
        endpoints,
        &[
            "tasks", "worker", "mine", "--user", alice, "--", "tr", "a-z", "A-Z",
        ],
    )
    .stdin(std::process::Stdio::null())
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null())
    .spawn()
    .unwrap();
    let (code, stdout, stderr) = run(&["tasks", "result", "mine", "t1", "--user", alice]);
    // Past the token's TTL, the worker still takes and reports tasks.
    std::thread::sleep(Duration::from_millis(2_500));
    let (code2, _, stderr2) = run(&[
        "tasks", "submit", "mine", "--id", "t2", "--user", alice, "late",
    ]);
    let (code3, stdout3, stderr3) = run(&["tasks", "result", "mine", "t2", "--user", alice]);
    let _ = worker.kill();
    let _ = worker.wait();
    assert_eq!(code, Some(0), "{system}: {stderr}");
    assert!(stdout.contains("HELLO"), "{system}: {stdout}");
    assert_eq!(code2, Some(0), "{system}: {stderr2}");
    assert_eq!(code3, Some(0), "{system}: {stderr3}");
    assert!(stdout3.contains("LATE"), "{system}: {stdout3}");
    // A queue outside the user's grants: one sentence saying what to grant.
    let (code, _, stderr) = run(&["tasks", "submit", "other", "--user", alice, "x"]);
    assert_ne!(code, Some(0), "{system}");
    assert!(
        stderr.contains("permission denied on queue \"other\"")
            && stderr.contains("readwrite \"other/\" --prefix"),
        "{system}: {stderr}"
    );
    assert_eq!(
        stderr.matches("permission denied").count(),
        1,
        "{system}: said once: {stderr}"
    );
    if system == "bellwether" {
        // `transfer` calls as a user as every client command does:
        // MoveLeader is root's.
        let (code, _, stderr) = run(&["transfer"]);
        assert_ne!(code, Some(0), "{system}: transfer without a user");
        assert!(stderr.contains("--user"), "{system}: {stderr}");
        let (code, stdout, stderr) = run(&["transfer", "--user", "root:rootpw"]);
        assert_eq!(code, Some(0), "{system}: {stderr}");
        assert!(stdout.contains("leadership moved"), "{system}: {stdout}");
    }
}

#[test]
fn elect_and_tasks_run_as_a_user_past_the_token_ttl_on_etcd_and_here() {
    let name = "auth_cli_user";
    let etcd = EtcdServer::start_with_flags(name, &["--auth-token-ttl", "2"]);
    elect_and_tasks_as_a_user("etcd", &etcd.client.to_string());
    drop(etcd);
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, &["--auth-token-ttl", "2"]);
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    elect_and_tasks_as_a_user("bellwether", &cluster.client_endpoints());
}
