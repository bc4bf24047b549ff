//! Maintenance.Hash and HashKV through etcd-client: every member of a
//! bellwether cluster answers the same hashes once it has applied the same
//! writes, and a write moves both. The same calls answer on a real etcd
//! 3.4, with the hash at a revision unmoved by later writes on both.

use super::common::etcd_server::EtcdServer;
use super::{within, Members, WAIT};
use etcd_client::Client;
use std::time::Instant;

/// (Hash, HashKV at 0, HashKV's compact revision) of every client.
async fn hashes(clients: &mut [Client]) -> Vec<(u32, u32, i64)> {
    let mut out = Vec::new();
    for client in clients.iter_mut() {
        let whole = within(client.hash()).await.expect("Hash").hash();
        let history = within(client.hash_kv(0)).await.expect("HashKV");
        out.push((whole, history.hash(), history.compact_version()));
    }
    out
}

/// Waits until every client answers the same hashes; returns them.
async fn agreed(clients: &mut [Client]) -> (u32, u32, i64) {
    let deadline = Instant::now() + WAIT;
    loop {
        let answers = hashes(clients).await;
        if answers.iter().all(|a| *a == answers[0]) {
            return answers[0];
        }
        assert!(
            Instant::now() < deadline,
            "members never agreed: {answers:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// On one endpoint: a put moves Hash and HashKV(0); HashKV at the
/// revision before the put stays where it was.
async fn a_write_moves_the_hashes(system: &str, client: &mut Client) {
    let at = within(client.put("h", "1", None))
        .await
        .unwrap()
        .header()
        .unwrap()
        .revision();
    let old = within(client.hash_kv(at)).await.unwrap().hash();
    let before = hashes(std::slice::from_mut(client)).await[0];
    within(client.put("h", "2", None)).await.unwrap();
    let after = hashes(std::slice::from_mut(client)).await[0];
    assert_ne!(before.0, after.0, "{system}: Hash moved");
    assert_ne!(before.1, after.1, "{system}: HashKV moved");
    let still = within(client.hash_kv(at)).await.unwrap();
    assert_eq!(still.hash(), old, "{system}: HashKV at an old revision");
    assert_eq!(
        still.hash_revision(),
        if system == "etcd" { 0 } else { at },
        "{system}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_agree_on_hashes_and_a_write_moves_them_as_on_etcd() {
    let etcd = EtcdServer::start("etcd-client-hash-etcd");
    let mut client = within(Client::connect([etcd.url()], None)).await.unwrap();
    a_write_moves_the_hashes("etcd", &mut client).await;
    drop(etcd);

    let members = Members::start("etcd-client-hash");
    let mut clients = Vec::new();
    for index in 0..3 {
        clients.push(members.client(index).await);
    }
    a_write_moves_the_hashes("bellwether", &mut clients[1]).await;
    let first = agreed(&mut clients).await;
    within(clients[2].put("k", "v", None)).await.unwrap();
    let second = agreed(&mut clients).await;
    assert_ne!(first.0, second.0);
    assert_ne!(first.1, second.1);
}
