//! A ZooKeeper client never goes back in time by changing members: a
//! member whose store is behind the last zxid a client has seen does not
//! take the client's connection until it has caught up (ZooKeeper refuses
//! such a client the same way, and the client tries another server).
//!
//! One member is cut off from its peers with nftables (its peer address
//! only; clients still reach it on 127.0.0.1), a write lands through
//! another member, and a connect request carrying that write's zxid goes to
//! the member that is behind: it must close the connection without a
//! session. Once the partition heals, the same request gets a session, and
//! a read there shows the write. Needs root and nftables.

mod common;

use common::nft::NftTable;
use common::zookeeper::{spawn_with_zookeeper, wait_accepting, zookeeper_address};
use common::Cluster;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};
use zookeeper_client as zk;

/// A connect request as a client sends it: protocol 0, the last zxid it
/// saw, a 6 s timeout, no session yet, an empty password, not read-only.
fn connect_request(last_zxid_seen: i64) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend_from_slice(&0i32.to_be_bytes());
    body.extend_from_slice(&last_zxid_seen.to_be_bytes());
    body.extend_from_slice(&6000i32.to_be_bytes());
    body.extend_from_slice(&0i64.to_be_bytes());
    body.extend_from_slice(&16i32.to_be_bytes());
    body.extend_from_slice(&[0; 16]);
    body.push(0);
    let mut packet = (body.len() as i32).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    packet
}

/// What a member answers a connect request with `last_zxid_seen`: the
/// session id it grants, or `None` when it closes the connection first.
fn try_connect(address: &str, last_zxid_seen: i64) -> Option<i64> {
    let mut stream = TcpStream::connect(address).expect("the member accepts TCP");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(&connect_request(last_zxid_seen)).unwrap();
    // length, protocol version, timeout, then the session id
    let mut head = [0u8; 20];
    match stream.read_exact(&mut head) {
        Ok(()) => Some(i64::from_be_bytes(head[12..20].try_into().unwrap())),
        Err(error) => {
            assert_ne!(
                error.kind(),
                std::io::ErrorKind::WouldBlock,
                "the member neither answered nor closed within 10 s"
            );
            None
        }
    }
}

#[test]
fn a_member_behind_the_clients_last_zxid_takes_it_only_once_caught_up() {
    let mut cluster = Cluster::stopped("zookeeper-behind", 3, 50, 300);
    for i in cluster.all() {
        spawn_with_zookeeper(&mut cluster, i);
    }
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let behind = cluster.all().into_iter().find(|i| *i != leader).unwrap();
    let writer = cluster
        .all()
        .into_iter()
        .find(|i| *i != leader && *i != behind)
        .unwrap();
    for i in cluster.all() {
        wait_accepting(&zookeeper_address(&cluster, i), Duration::from_secs(15));
    }
    let table = NftTable::new("ip", &format!("bwtest{}", cluster.net));
    let ip = cluster.ip(behind);
    table.rule(&format!("ip saddr {ip} drop"));
    table.rule(&format!("ip daddr {ip} drop"));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let writer_address = zookeeper_address(&cluster, writer);
    let zxid = runtime.block_on(async {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(6))
            .connect(&writer_address)
            .await
            .expect("a session on a member of the majority");
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        client.create("/behind", b"v1", &open).await.unwrap();
        let stat = client.set_data("/behind", b"v2", None).await.unwrap();
        stat.mzxid
    });
    println!("n{behind} cut off; /behind = v2 at zxid {zxid:#x} through n{writer}");

    let behind_address = zookeeper_address(&cluster, behind);
    let refused_at = Instant::now();
    assert_eq!(
        try_connect(&behind_address, zxid),
        None,
        "n{behind}, cut off before zxid {zxid:#x}, took a client that had seen it"
    );
    println!(
        "n{behind} closed the connection after {:?}",
        refused_at.elapsed()
    );
    // A client that has seen nothing yet is not refused for being ahead.
    // (It gets no session either while the member reaches no leader.)

    table.flush();
    let deadline = Instant::now() + Duration::from_secs(20);
    let session = loop {
        if let Some(session) = try_connect(&behind_address, zxid) {
            break session;
        }
        assert!(
            Instant::now() < deadline,
            "n{behind} never took the client after the partition healed"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_ne!(session, 0, "a session, not an expiry");
    let data = runtime.block_on(async {
        let client = zk::Client::connector()
            .with_session_timeout(Duration::from_secs(6))
            .connect(&behind_address)
            .await
            .expect("a session on the member that caught up");
        client.get_data("/behind").await.unwrap().0
    });
    assert_eq!(data, b"v2", "the caught-up member shows the write");
    drop(table);
}
