//! Auth: etcd-client's user, role and permission calls set up a user; a
//! client connected with that user's name and password works inside its
//! permissions and is refused outside them, a wrong password fails the
//! connection, and a client that refreshes its token keeps working after
//! the token expires. The same scenario runs on a real etcd 3.4 first.

use super::common::etcd_server::EtcdServer;
use super::common::Cluster;
use super::{within, WAIT};
use etcd_client::{Client, ConnectOptions, Permission};
use std::time::Duration;

/// Seconds a token lives on both systems (`--auth-token-ttl`).
const TOKEN_TTL: &str = "1";

async fn scenario(system: &str, url: &str) {
    let mut admin = within(Client::connect([url], None)).await.unwrap();
    within(admin.user_add("root", "rootpw", None))
        .await
        .unwrap();
    // The role root need not exist to be granted (as in etcd).
    within(admin.user_grant_role("root", "root")).await.unwrap();
    within(admin.user_add("alice", "alicepw", None))
        .await
        .unwrap();
    within(admin.role_add("app")).await.unwrap();
    within(admin.role_grant_permission("app", Permission::read_write("/app/").with_prefix()))
        .await
        .unwrap();
    within(admin.user_grant_role("alice", "app")).await.unwrap();
    within(admin.auth_enable()).await.unwrap();
    let refused = within(admin.get("/app/x", None)).await.unwrap_err();
    assert!(
        refused.to_string().contains("user name is empty"),
        "{system}: anonymous after enable: {refused}"
    );

    let options = ConnectOptions::new()
        .with_user("alice", "alicepw")
        .with_auto_token_refresh(true);
    let mut alice = within(Client::connect([url], Some(options))).await.unwrap();
    within(alice.put("/app/x", "1", None)).await.unwrap();
    let read = within(alice.get("/app/x", None)).await.unwrap();
    assert_eq!(read.kvs()[0].value(), b"1", "{system}");
    let denied = within(alice.put("/other", "1", None)).await.unwrap_err();
    assert!(
        denied.to_string().contains("permission denied"),
        "{system}: outside alice's prefix: {denied}"
    );
    let denied = within(alice.user_list()).await.unwrap_err();
    assert!(
        denied.to_string().contains("permission denied"),
        "{system}: user list needs root: {denied}"
    );

    // Idle past the token's lifetime: the client authenticates again when
    // told its token is invalid, and carries on.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    within(alice.put("/app/x", "2", None))
        .await
        .unwrap_or_else(|e| panic!("{system}: after the token expired: {e}"));

    let wrong = ConnectOptions::new().with_user("alice", "nope");
    let Err(failed) = within(Client::connect([url], Some(wrong))).await else {
        panic!("{system}: a wrong password connects");
    };
    assert!(
        failed.to_string().contains("authentication failed"),
        "{system}: wrong password: {failed}"
    );

    let root = ConnectOptions::new().with_user("root", "rootpw");
    let mut root = within(Client::connect([url], Some(root))).await.unwrap();
    let users = within(root.user_list()).await.unwrap();
    assert_eq!(users.users(), ["alice", "root"], "{system}");
    within(root.auth_disable()).await.unwrap();
    within(admin.get("/app/x", None)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_clients_authenticate_and_are_held_to_their_permissions_as_on_etcd() {
    let etcd =
        EtcdServer::start_with_flags("conformance-auth-etcd", &["--auth-token-ttl", TOKEN_TTL]);
    scenario("etcd", &etcd.url()).await;
    drop(etcd);

    let mut cluster = Cluster::start_with_flags(
        "conformance-auth",
        3,
        50,
        300,
        &["--auth-token-ttl", TOKEN_TTL],
    );
    let all = cluster.all();
    let (leader, _) = cluster.wait_leader(&all, WAIT);
    let follower = all.into_iter().find(|i| *i != leader).unwrap();
    scenario(
        "bellwether",
        &format!("http://{}", cluster.client(follower)),
    )
    .await;
}
