//! Lease: grant (with and without an id), the keep-alive stream,
//! time-to-live with keys, the lease list and revoke.

use super::{within, Members};
use etcd_client::{LeaseGrantOptions, LeaseTimeToLiveOptions, PutOptions};
use std::time::{Duration, Instant};

/// Opens a keep-alive stream for `lease`, retrying while the cluster
/// answers "no leader".
///
/// A new leader's lessor takes over leases a moment after the leader is
/// elected, and bellwether refuses keep-alives in that window where etcd
/// waits: `lease_keep_alive_at_the_start_of_a_term` pins that down. This
/// test is about the lease's life, so it waits the window out.
async fn open_keep_alive(
    client: &mut etcd_client::Client,
    lease: i64,
) -> (etcd_client::LeaseKeeper, etcd_client::LeaseKeepAliveStream) {
    let deadline = Instant::now() + super::WAIT;
    loop {
        match within(client.lease_keep_alive(lease)).await {
            Ok(opened) => return opened,
            Err(error) if Instant::now() < deadline && error.to_string().contains("no leader") => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("keep-alive of lease {lease}: {error}"),
        }
    }
}

/// Grant, attach keys, keep alive over the stream for longer than the TTL
/// (the keys survive), time-to-live with keys, list, then revoke: keys
/// gone, time-to-live -1, keep-alive answers TTL 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_grant_keep_alive_time_to_live_list_and_revoke() {
    let members = Members::start("conformance-lease");
    let mut client = members.client(1).await;
    let mut reader = members.client(2).await;
    let ttl_seconds = 3;
    let granted = within(client.lease_grant(ttl_seconds, None))
        .await
        .expect("grant");
    assert_eq!(granted.ttl(), ttl_seconds);
    assert!(granted.id() > 0);
    let lease = granted.id();
    let chosen = within(reader.lease_grant(60, Some(LeaseGrantOptions::new().with_id(0x1234))))
        .await
        .expect("grant with an id");
    assert_eq!(chosen.id(), 0x1234);
    for key in ["lease/a", "lease/b"] {
        within(client.put(key, "v", Some(PutOptions::new().with_lease(lease))))
            .await
            .expect("put with lease");
    }

    let (mut keeper, mut stream) = open_keep_alive(&mut client, lease).await;
    let started = Instant::now();
    let mut answers = 0;
    while started.elapsed() < Duration::from_secs(3 * ttl_seconds as u64) {
        within(keeper.keep_alive()).await.expect("send keep-alive");
        let answer = within(stream.message())
            .await
            .expect("stream")
            .expect("answer");
        assert_eq!((answer.id(), answer.ttl()), (lease, ttl_seconds));
        answers += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(answers >= 3, "{answers} keep-alive answers");
    let kept = within(reader.get("lease/", Some(etcd_client::GetOptions::new().with_prefix())))
        .await
        .expect("get");
    assert_eq!(kept.count(), 2, "keys kept alive past the TTL");

    let live =
        within(reader.lease_time_to_live(lease, Some(LeaseTimeToLiveOptions::new().with_keys())))
            .await
            .expect("time to live");
    assert_eq!(live.id(), lease);
    assert_eq!(live.granted_ttl(), ttl_seconds);
    assert!(
        (1..=ttl_seconds).contains(&live.ttl()),
        "ttl {}",
        live.ttl()
    );
    assert_eq!(live.keys(), [b"lease/a".to_vec(), b"lease/b".to_vec()]);

    let listed = within(reader.leases()).await.expect("leases");
    let mut ids: Vec<i64> = listed.leases().iter().map(|l| l.id()).collect();
    ids.sort();
    let mut expected = vec![lease, 0x1234];
    expected.sort();
    assert_eq!(ids, expected);

    within(reader.lease_revoke(lease)).await.expect("revoke");
    let gone = within(client.get("lease/", Some(etcd_client::GetOptions::new().with_prefix())))
        .await
        .expect("get");
    assert_eq!(gone.count(), 0, "revoke deleted the attached keys");
    let dead = within(client.lease_time_to_live(lease, None))
        .await
        .expect("time to live");
    assert_eq!(dead.ttl(), -1);
    within(keeper.keep_alive()).await.expect("send keep-alive");
    let answer = within(stream.message())
        .await
        .expect("stream")
        .expect("answer");
    assert_eq!(answer.ttl(), 0, "keep-alive of a revoked lease");
    let listed = within(client.leases()).await.expect("leases");
    let ids: Vec<i64> = listed.leases().iter().map(|l| l.id()).collect();
    assert_eq!(ids, [0x1234]);
    let again = within(client.lease_revoke(lease)).await;
    assert!(again.is_err(), "revoking twice: {again:?}");
}
