//! The data a snapshot must carry, written through etcd's API: objects
//! under a prefix in txns, updates, range and single deletes, a txn that
//! mixes puts and deletes, keys on leases, a revoked lease, a compaction
//! in the middle of it all, and users and roles.

use super::view::Server;
use bellwether_api::etcdserverpb as pb;

/// Puts per txn.
const BATCH: usize = 100;

fn put(key: String, value: Vec<u8>, lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
            key: key.into_bytes(),
            value,
            lease,
            ..Default::default()
        })),
    }
}

fn delete(key: &str, range_end: &str) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestDeleteRange(
            pb::DeleteRangeRequest {
                key: key.as_bytes().to_vec(),
                range_end: range_end.as_bytes().to_vec(),
                prev_kv: false,
            },
        )),
    }
}

async fn txn(server: &mut Server, ops: Vec<pb::RequestOp>) -> i64 {
    server
        .kv
        .txn(pb::TxnRequest {
            success: ops,
            ..Default::default()
        })
        .await
        .expect("a txn")
        .into_inner()
        .header
        .expect("a header")
        .revision
}

fn object(i: usize) -> String {
    format!("obj/{i:06}")
}

/// A value of 10 to 300 bytes that differs with `i` and `round`.
fn value(i: usize, round: usize) -> Vec<u8> {
    let len = 10 + (i * 37 + round * 11) % 290;
    (0..len)
        .map(|j| b'a' + ((i + j + round) % 26) as u8)
        .collect()
}

/// Writes `objects` objects and the rest (see the module docs); returns
/// the revision it compacted at.
pub async fn load(server: &mut Server, objects: usize) -> i64 {
    let mut leases = Vec::new();
    for ttl in [600, 1200, 3600] {
        let granted = server
            .lease
            .lease_grant(pb::LeaseGrantRequest { ttl, id: 0 })
            .await
            .expect("a lease")
            .into_inner();
        leases.push(granted.id);
    }
    let lease_of = |i: usize| {
        if i.is_multiple_of(7) {
            leases[i / 7 % 3]
        } else {
            0
        }
    };
    for start in (0..objects).step_by(BATCH) {
        let ops = (start..objects.min(start + BATCH))
            .map(|i| put(object(i), value(i, 0), lease_of(i)))
            .collect();
        txn(server, ops).await;
    }
    for start in (0..objects).step_by(3 * BATCH) {
        let ops = (start..objects.min(start + 3 * BATCH))
            .step_by(3)
            .map(|i| put(object(i), value(i, 1), lease_of(i)))
            .collect();
        txn(server, ops).await;
    }
    txn(server, vec![delete(&object(10), &object(20))]).await;
    let compacted = txn(server, vec![delete(&object(25), "")]).await;
    server
        .kv
        .compact(pb::CompactionRequest {
            revision: compacted,
            physical: true,
        })
        .await
        .expect("a compaction");
    // After the compaction: a txn that writes keys out of key order and
    // deletes one, more updates, and a lease revoked with its keys.
    txn(
        server,
        vec![
            put(object(objects + 2), b"late".to_vec(), 0),
            put(object(objects + 1), b"later".to_vec(), leases[0]),
            delete(&object(30), ""),
        ],
    )
    .await;
    for i in (0..objects).step_by(5) {
        txn(server, vec![put(object(i), value(i, 2), lease_of(i))]).await;
        if i > 500 {
            break;
        }
    }
    server
        .lease
        .lease_revoke(pb::LeaseRevokeRequest { id: leases[1] })
        .await
        .expect("a revoke");
    auth(server).await;
    compacted
}

/// Users and roles: root, a reader and a writer.
async fn auth(server: &mut Server) {
    let mut auth = server.auth.clone();
    for role in ["root", "reader", "writer"] {
        auth.role_add(pb::AuthRoleAddRequest { name: role.into() })
            .await
            .expect("role add");
    }
    let grant = |role: &str, kind: i32, key: &str, end: &str| pb::AuthRoleGrantPermissionRequest {
        name: role.into(),
        perm: Some(bellwether_api::authpb::Permission {
            perm_type: kind,
            key: key.into(),
            range_end: end.into(),
        }),
    };
    auth.role_grant_permission(grant("reader", 0, "obj/", "obj0"))
        .await
        .expect("grant");
    auth.role_grant_permission(grant("writer", 2, "obj/0001", "obj/0002"))
        .await
        .expect("grant");
    auth.role_grant_permission(grant("writer", 1, "tmp", ""))
        .await
        .expect("grant");
    for (user, roles) in [
        ("root", &["root"][..]),
        ("alice", &["reader"]),
        ("bob", &["reader", "writer"]),
    ] {
        auth.user_add(pb::AuthUserAddRequest {
            name: user.into(),
            password: format!("{user}-pw"),
            options: None,
        })
        .await
        .expect("user add");
        for role in roles {
            auth.user_grant_role(pb::AuthUserGrantRoleRequest {
                user: user.into(),
                role: (*role).into(),
            })
            .await
            .expect("grant role");
        }
    }
}
