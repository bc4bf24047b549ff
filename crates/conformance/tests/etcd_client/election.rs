//! Election: campaign, leader, observe, proclaim and resign, with two
//! campaigners on different members.

use super::{within, Members, STAYS_BLOCKED};
use etcd_client::{LeaderKey, ProclaimOptions, ResignOptions};

/// The leader's value as `Leader` reports it.
async fn leader_value(client: &mut etcd_client::Client, name: &str) -> String {
    let response = within(client.leader(name)).await.expect("leader");
    let kv = response.kv().expect("a leader");
    kv.value_str().expect("utf-8").to_string()
}

/// The next value `Observe` reports.
async fn next_observed(stream: &mut etcd_client::ObserveStream) -> String {
    let response = within(stream.message())
        .await
        .expect("observe stream")
        .expect("observe stream open");
    let kv = response.kv().expect("observe reports a leader");
    kv.value_str().expect("utf-8").to_string()
}

/// The first campaigner leads; a second one blocks until the first
/// resigns; proclaim changes the value; observe reports every change in
/// order; a resigned leader can no longer proclaim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_campaign_proclaim_observe_and_resign() {
    let members = Members::start("conformance-elect");
    let mut first = members.client(1).await;
    let mut second = members.client(2).await;
    let mut observer = members.client(0).await;
    let first_lease = within(first.lease_grant(30, None)).await.unwrap().id();
    let second_lease = within(second.lease_grant(30, None)).await.unwrap().id();

    let mut observed = within(observer.observe("jobs")).await.expect("observe");
    let won = within(first.campaign("jobs", "one", first_lease))
        .await
        .expect("campaign");
    let first_key: LeaderKey = won.leader().expect("leader key").clone();
    assert_eq!(first_key.name(), b"jobs");
    assert!(first_key.key().starts_with(b"jobs/"), "{first_key:?}");
    assert_eq!(first_key.lease(), first_lease);
    assert_eq!(leader_value(&mut observer, "jobs").await, "one");
    assert_eq!(next_observed(&mut observed).await, "one");

    // The second campaigner waits while the first leads.
    let mut campaigner = second.clone();
    let waiting =
        tokio::spawn(async move { campaigner.campaign("jobs", "two", second_lease).await });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(
        !waiting.is_finished(),
        "second campaign returned while the first leads"
    );

    within(first.proclaim(
        "uno",
        Some(ProclaimOptions::new().with_leader(first_key.clone())),
    ))
    .await
    .expect("proclaim");
    assert_eq!(leader_value(&mut second, "jobs").await, "uno");
    assert_eq!(next_observed(&mut observed).await, "uno");
    assert!(!waiting.is_finished(), "proclaim handed over leadership");

    within(first.resign(Some(ResignOptions::new().with_leader(first_key.clone()))))
        .await
        .expect("resign");
    let won = within(waiting).await.unwrap().expect("second campaign");
    let second_key = won.leader().expect("leader key").clone();
    assert_eq!(second_key.lease(), second_lease);
    assert_ne!(second_key.key(), first_key.key());
    assert_eq!(leader_value(&mut first, "jobs").await, "two");
    assert_eq!(next_observed(&mut observed).await, "two");

    // The resigned leader's key no longer leads.
    let stale =
        within(first.proclaim("again", Some(ProclaimOptions::new().with_leader(first_key)))).await;
    assert!(stale.is_err(), "a resigned leader proclaimed: {stale:?}");
    assert_eq!(leader_value(&mut observer, "jobs").await, "two");

    // The second leader resigns: no leader is left.
    within(second.resign(Some(ResignOptions::new().with_leader(second_key))))
        .await
        .expect("resign");
    let none = within(observer.leader("jobs")).await;
    assert!(none.is_err(), "a leader after everyone resigned: {none:?}");
}

/// Revoking the leader's lease ends its leadership: the waiting
/// campaigner takes over and observe reports it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_leader_lease_revoked_hands_over() {
    let members = Members::start("conformance-election-lease");
    let mut first = members.client(1).await;
    let mut second = members.client(2).await;
    let first_lease = within(first.lease_grant(30, None)).await.unwrap().id();
    let second_lease = within(second.lease_grant(30, None)).await.unwrap().id();
    let mut observed = within(second.observe("svc")).await.expect("observe");

    within(first.campaign("svc", "a", first_lease))
        .await
        .expect("campaign");
    assert_eq!(next_observed(&mut observed).await, "a");
    let mut campaigner = second.clone();
    let waiting = tokio::spawn(async move { campaigner.campaign("svc", "b", second_lease).await });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(
        !waiting.is_finished(),
        "second campaign returned while the first leads"
    );

    within(first.lease_revoke(first_lease))
        .await
        .expect("revoke");
    within(waiting).await.unwrap().expect("second campaign");
    assert_eq!(next_observed(&mut observed).await, "b");
    assert_eq!(leader_value(&mut first, "svc").await, "b");
}
