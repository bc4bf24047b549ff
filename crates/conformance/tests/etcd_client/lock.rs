//! Lock: mutual exclusion between clients on different members, release by
//! Unlock and by the holder's lease ending.

use super::{within, Members, STAYS_BLOCKED};
use etcd_client::{Client, LockOptions};
use std::time::Duration;

/// Rounds of the read-modify-write each client does under the lock.
const ROUNDS: usize = 5;

/// One client's rounds: lock, read the counter, pause, write counter + 1,
/// unlock. Without mutual exclusion the two clients' rounds interleave and
/// increments are lost.
async fn increment_under_lock(mut client: Client, lease: i64) {
    for _ in 0..ROUNDS {
        let held = within(client.lock("counter-lock", Some(LockOptions::new().with_lease(lease))))
            .await
            .expect("lock");
        let read = within(client.get("counter", None)).await.expect("get");
        let value: usize = read
            .kvs()
            .first()
            .map(|kv| kv.value_str().unwrap().parse().unwrap())
            .unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(50)).await;
        within(client.put("counter", (value + 1).to_string(), None))
            .await
            .expect("put");
        within(client.unlock(held.key().to_vec()))
            .await
            .expect("unlock");
    }
}

/// A second locker blocks until the holder unlocks; two clients
/// incrementing a counter under the lock never lose an increment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_is_mutually_exclusive_between_clients() {
    let members = Members::start("conformance-lock");
    let mut first = members.client(1).await;
    let mut second = members.client(2).await;
    let first_lease = within(first.lease_grant(30, None)).await.unwrap().id();
    let second_lease = within(second.lease_grant(30, None)).await.unwrap().id();

    let held = within(first.lock("door", Some(LockOptions::new().with_lease(first_lease))))
        .await
        .expect("lock");
    assert!(held.key().starts_with(b"door/"), "{:?}", held.key());
    let mut locker = second.clone();
    let waiting = tokio::spawn(async move {
        locker
            .lock("door", Some(LockOptions::new().with_lease(second_lease)))
            .await
    });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(
        !waiting.is_finished(),
        "second lock acquired while the first holds it"
    );
    within(first.unlock(held.key().to_vec()))
        .await
        .expect("unlock");
    let second_held = within(waiting).await.unwrap().expect("second lock");
    assert_ne!(second_held.key(), held.key());

    // The holder's lease ends: the lock passes on.
    let mut locker = first.clone();
    let waiting = tokio::spawn(async move {
        locker
            .lock("door", Some(LockOptions::new().with_lease(first_lease)))
            .await
    });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(
        !waiting.is_finished(),
        "lock acquired while the second holds it"
    );
    within(second.lease_revoke(second_lease))
        .await
        .expect("revoke");
    within(waiting)
        .await
        .unwrap()
        .expect("lock after the holder's lease ended");
    within(first.lease_revoke(first_lease))
        .await
        .expect("revoke");

    // Two clients, read-modify-write under the lock: no lost update.
    let first_lease = within(first.lease_grant(30, None)).await.unwrap().id();
    let second_lease = within(second.lease_grant(30, None)).await.unwrap().id();
    let a = tokio::spawn(increment_under_lock(first.clone(), first_lease));
    let b = tokio::spawn(increment_under_lock(second.clone(), second_lease));
    within(a).await.unwrap();
    within(b).await.unwrap();
    let read = within(first.get("counter", None)).await.expect("get");
    assert_eq!(read.kvs()[0].value_str().unwrap(), (2 * ROUNDS).to_string());
}
