//! The scenarios of the conformance suite. Each takes a fresh client and a
//! tag unique to it (use it in every name), and panics on failure.

use bellwether_client::pb;
use bellwether_client::{
    Client, Election, Error, LeaderInfo, LeadershipState, Mutex, Session, SessionOptions,
    SessionState,
};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{timeout, Instant};

/// A scenario: a client and a tag to a test run.
pub type Scenario = fn(Client, String) -> Pin<Box<dyn Future<Output = ()> + Send>>;

/// How long a call that must stay blocked is watched.
const STAYS_BLOCKED: Duration = Duration::from_millis(700);

/// Wait bound for things that should happen.
const WAIT: Duration = super::WAIT;

macro_rules! scenarios {
    ($($name:ident),* $(,)?) => {
        /// Every scenario, by name.
        pub fn all() -> Vec<(&'static str, Scenario)> {
            vec![$((stringify!($name), |client, tag| Box::pin($name(client, tag)))),*]
        }
    };
}

scenarios!(
    campaign_makes_the_campaigner_leader,
    leader_is_none_without_campaigners,
    second_campaigner_waits_then_leads_after_resign,
    second_campaigner_leads_after_session_close,
    second_campaigner_leads_after_lease_expiry,
    tokens_strictly_increase_across_leaders,
    a_deposed_leaders_guarded_write_is_refused,
    a_guarded_write_succeeds_while_leading,
    proclaim_changes_the_value_observers_see,
    proclaim_after_losing_fails,
    observe_reports_each_leader_change_in_order,
    observe_starts_with_the_current_leader,
    one_resignation_wakes_exactly_one_of_fifty_waiters,
    follower_state_names_the_leader_and_its_own_token,
    lost_fires_before_the_server_expires_the_lease,
    session_keeps_the_lease_alive_past_its_ttl,
    session_close_deletes_the_leader_key,
    campaign_again_in_the_same_session_keeps_the_token,
    a_cancelled_campaign_withdraws_its_key,
    campaign_on_a_lost_session_fails,
    leadership_is_lost_when_its_key_is_deleted,
    try_lock_fails_while_held_and_leaves_no_key,
    lock_excludes_a_second_holder_until_unlock,
    lock_tokens_fence_like_election_tokens,
    empty_or_oversized_names_and_values_are_refused,
    ttl_of_zero_or_too_short_for_the_margin_is_refused,
    resign_of_a_waiting_campaigner_leaves_the_line,
    a_release_on_disconnect_session_stays_alive,
    observe_reports_the_latest_leader_across_a_compaction,
    a_lock_holder_is_lost_when_its_lease_is_revoked,
    try_lock_takes_a_free_lock,
    a_waiting_lock_is_taken_when_the_holder_closes_its_session,
    leader_of_reads_the_oldest_campaigner,
    a_killed_holder_process_is_replaced_after_its_lease,
);

/// A session with `ttl_seconds`.
async fn session(client: &Client, ttl_seconds: u64) -> Session {
    let options = SessionOptions::with_ttl(Duration::from_secs(ttl_seconds));
    Session::new(client, options).await.expect("session")
}

/// Two sessions in line for one name: the first leads (value "1"), the
/// second waits behind it (value "2").
struct Line {
    s1: Session,
    first: bellwether_client::Leadership,
    s2: Session,
    second: bellwether_client::Leadership,
}

/// Sets up a [`Line`] under `tag`.
async fn line_of_two(client: &Client, tag: &str) -> Line {
    let (s1, s2) = (session(client, 5).await, session(client, 5).await);
    let first = Election::new(&s1, tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let second = Election::new(&s2, tag)
        .unwrap()
        .start_campaign("2")
        .await
        .unwrap();
    Line {
        s1,
        first,
        s2,
        second,
    }
}

/// Waits (bounded) for `leadership` to lead.
async fn leads(leadership: &bellwether_client::Leadership) -> i64 {
    timeout(WAIT, leadership.wait_leader())
        .await
        .expect("leads within the bound")
        .expect("leads")
}

/// Whether `leadership` stays without leading for a while.
async fn stays_waiting(leadership: &bellwether_client::Leadership) -> bool {
    timeout(STAYS_BLOCKED, leadership.wait_leader())
        .await
        .is_err()
}

/// Whether `key` exists.
async fn exists(client: &Client, key: &[u8]) -> bool {
    client.get(key.to_vec()).await.expect("get").is_some()
}

/// A put operation.
fn put(key: &str, value: &str) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(pb::request_op::Request::RequestPut(pb::PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            ..pb::PutRequest::default()
        })),
    }
}

/// Revokes a lease from outside, as an operator or a server would.
async fn revoke(client: &Client, lease: i64) {
    let request = pb::LeaseRevokeRequest { id: lease };
    let endpoint = client.endpoints()[0].clone();
    let mut lease_client = pb::lease_client::LeaseClient::connect(format!("http://{endpoint}"))
        .await
        .expect("lease client");
    lease_client.lease_revoke(request).await.expect("revoke");
}

async fn campaign_makes_the_campaigner_leader(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let election = Election::new(&s, &tag).unwrap();
    let leadership = election.campaign("a").await.expect("campaign");
    assert!(leadership.is_leader());
    let leader = election.leader().await.unwrap().expect("a leader");
    assert_eq!(leader.value, b"a");
    assert_eq!(leader.token, leadership.token());
    assert_eq!(leader.key, leadership.key());
    assert_eq!(leader.lease, s.lease_id());
    assert_eq!(
        leadership.key(),
        format!("{tag}/{:x}", s.lease_id()).as_bytes(),
        "etcd's key layout"
    );
}

async fn leader_is_none_without_campaigners(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let election = Election::new(&s, &tag).unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
}

async fn second_campaigner_waits_then_leads_after_resign(client: Client, tag: String) {
    let Line {
        s1: _s1,
        first,
        s2: _s2,
        second,
    } = line_of_two(&client, &tag).await;
    assert!(stays_waiting(&second).await, "the second must wait");
    first.resign().await.unwrap();
    let token = leads(&second).await;
    assert_eq!(token, second.token());
}

async fn second_campaigner_leads_after_session_close(client: Client, tag: String) {
    let Line {
        s1,
        first: _first,
        s2: _s2,
        second,
    } = line_of_two(&client, &tag).await;
    assert!(stays_waiting(&second).await);
    s1.close().await.unwrap();
    leads(&second).await;
}

async fn second_campaigner_leads_after_lease_expiry(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 2).await, session(&client, 5).await);
    let first = Election::new(&s1, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let second = Election::new(&s2, &tag)
        .unwrap()
        .start_campaign("2")
        .await
        .unwrap();
    assert!(stays_waiting(&second).await);
    // The holder stops renewing, as a hung process would.
    s1.stop_keep_alive();
    leads(&second).await;
    assert_eq!(*first.state().borrow(), LeadershipState::Lost);
}

async fn tokens_strictly_increase_across_leaders(client: Client, tag: String) {
    let mut tokens = Vec::new();
    for i in 0..5 {
        let s = session(&client, 5).await;
        let leadership = Election::new(&s, &tag)
            .unwrap()
            .campaign(format!("{i}"))
            .await
            .unwrap();
        // Unrelated writes in between must not matter.
        client.put(format!("{tag}-noise"), "x").await.unwrap();
        tokens.push(leadership.token());
        leadership.resign().await.unwrap();
    }
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "tokens {tokens:?}");
}

async fn a_deposed_leaders_guarded_write_is_refused(client: Client, tag: String) {
    let Line {
        s1,
        first,
        s2: _s2,
        second,
    } = line_of_two(&client, &tag).await;
    // The first leader's lease is revoked behind its back: it is deposed
    // but, until it hears of it, may still try to write.
    revoke(&client, s1.lease_id()).await;
    leads(&second).await;
    let data = format!("{tag}/../data");
    let ran = first.guarded(vec![put(&data, "stale")]).await.unwrap();
    assert!(!ran, "a deposed leader's fenced write must be refused");
    assert_eq!(client.get(data.clone()).await.unwrap(), None);
    assert!(second.guarded(vec![put(&data, "fresh")]).await.unwrap());
}

async fn a_guarded_write_succeeds_while_leading(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let data = format!("{tag}-data");
    assert!(leadership.guarded(vec![put(&data, "v")]).await.unwrap());
    assert_eq!(client.get(data).await.unwrap(), Some(b"v".to_vec()));
}

async fn proclaim_changes_the_value_observers_see(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let election = Election::new(&s, &tag).unwrap();
    let leadership = election.campaign("before").await.unwrap();
    let mut observed = Election::observe(&client, &tag).unwrap();
    let first = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(first.unwrap().value, b"before");
    leadership.proclaim("after").await.unwrap();
    let next = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    let next = next.expect("still a leader");
    assert_eq!(
        (next.value.as_slice(), next.token),
        (b"after".as_slice(), leadership.token())
    );
}

async fn proclaim_after_losing_fails(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    revoke(&client, s.lease_id()).await;
    timeout(WAIT, leadership.lost()).await.expect("lost");
    assert!(matches!(
        leadership.proclaim("2").await,
        Err(Error::NotLeader)
    ));
}

async fn observe_reports_each_leader_change_in_order(client: Client, tag: String) {
    let mut observed = Election::observe(&client, &tag).unwrap();
    let none = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(none, None, "nobody leads at first");
    let Line {
        s1: _s1,
        first,
        s2: _s2,
        second,
    } = line_of_two(&client, &tag).await;
    let seen = |info: Option<LeaderInfo>| info.map(|i| (i.value, i.token));
    let a = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(seen(a), Some((b"1".to_vec(), first.token())));
    first.resign().await.unwrap();
    let b = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(seen(b), Some((b"2".to_vec(), second.token())));
    second.resign().await.unwrap();
    let c = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(c, None);
}

async fn observe_starts_with_the_current_leader(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("x")
        .await
        .unwrap();
    let mut observed = Election::observe(&client, &tag).unwrap();
    let first = timeout(WAIT, observed.recv()).await.unwrap().unwrap();
    assert_eq!(first.map(|i| i.token), Some(leadership.token()));
}

async fn one_resignation_wakes_exactly_one_of_fifty_waiters(client: Client, tag: String) {
    let s0 = session(&client, 10).await;
    let holder = Election::new(&s0, &tag)
        .unwrap()
        .campaign("0")
        .await
        .unwrap();
    let mut sessions = Vec::new();
    let mut waiters = Vec::new();
    for i in 1..=50 {
        let s = session(&client, 10).await;
        let waiter = Election::new(&s, &tag)
            .unwrap()
            .start_campaign(format!("{i}"))
            .await
            .unwrap();
        sessions.push(s);
        waiters.push(waiter);
    }
    holder.resign().await.unwrap();
    leads(&waiters[0]).await;
    tokio::time::sleep(STAYS_BLOCKED).await;
    let leading = waiters.iter().filter(|w| w.is_leader()).count();
    assert_eq!(leading, 1, "one resignation, one new leader");
    assert!(waiters[0].is_leader(), "the next in line leads");
}

async fn follower_state_names_the_leader_and_its_own_token(client: Client, tag: String) {
    let Line {
        s1: _s1,
        first,
        s2: _s2,
        second,
    } = line_of_two(&client, &tag).await;
    let mut state = second.state();
    let follower = timeout(
        WAIT,
        state.wait_for(|s| matches!(s, LeadershipState::Follower { .. })),
    )
    .await
    .unwrap()
    .unwrap()
    .clone();
    let LeadershipState::Follower { leader, token } = follower else {
        unreachable!()
    };
    assert_eq!(token, second.token());
    assert_eq!(leader.map(|l| l.token), Some(first.token()));
}

async fn lost_fires_before_the_server_expires_the_lease(client: Client, tag: String) {
    let s = session(&client, 3).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    s.stop_keep_alive();
    let mut state = leadership.state();
    timeout(WAIT, state.wait_for(|s| *s == LeadershipState::Lost))
        .await
        .unwrap()
        .unwrap();
    let lost_at = Instant::now();
    // At the moment the holder counts itself lost, the server still holds
    // its key: nobody else can have been granted the leadership yet.
    assert!(
        exists(&client, leadership.key()).await,
        "the lease expired on the server before the holder went Lost"
    );
    // And the server does expire it afterwards.
    let deadline = lost_at + WAIT;
    while exists(&client, leadership.key()).await {
        assert!(Instant::now() < deadline, "the lease never expired");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn session_keeps_the_lease_alive_past_its_ttl(client: Client, tag: String) {
    let s = session(&client, 2).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(*s.state().borrow(), SessionState::Alive);
    assert!(leadership.is_leader());
    assert!(exists(&client, leadership.key()).await);
}

async fn session_close_deletes_the_leader_key(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let key = leadership.key().to_vec();
    s.close().await.unwrap();
    assert!(!exists(&client, &key).await);
    timeout(WAIT, leadership.lost())
        .await
        .expect("lost after close");
}

async fn campaign_again_in_the_same_session_keeps_the_token(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let election = Election::new(&s, &tag).unwrap();
    let first = election.campaign("a").await.unwrap();
    let token = first.token();
    let again = election.campaign("b").await.unwrap();
    assert_eq!(again.token(), token);
    assert_eq!(election.leader().await.unwrap().unwrap().value, b"b");
}

async fn campaign_on_a_lost_session_fails(client: Client, tag: String) {
    let s = session(&client, 5).await;
    revoke(&client, s.lease_id()).await;
    let mut state = s.state();
    timeout(WAIT, state.wait_for(|st| *st == SessionState::Lost))
        .await
        .expect("the session hears the lease is gone")
        .unwrap();
    let election = Election::new(&s, &tag).unwrap();
    let result = election.campaign("x").await;
    assert!(result.is_err(), "campaign on a lost session");
    assert_eq!(election.leader().await.unwrap(), None, "no key left behind");
}

async fn leadership_is_lost_when_its_key_is_deleted(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let endpoint = client.endpoints()[0].clone();
    let mut kv = pb::kv_client::KvClient::connect(format!("http://{endpoint}"))
        .await
        .unwrap();
    kv.delete_range(pb::DeleteRangeRequest {
        key: leadership.key().to_vec(),
        ..pb::DeleteRangeRequest::default()
    })
    .await
    .unwrap();
    timeout(WAIT, leadership.lost()).await.expect("lost");
    assert_eq!(
        *s.state().borrow(),
        SessionState::Alive,
        "the session stays"
    );
}

async fn try_lock_fails_while_held_and_leaves_no_key(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let held = Mutex::new(&s1, &tag).unwrap().lock().await.unwrap();
    let second = Mutex::new(&s2, &tag).unwrap();
    assert!(matches!(second.try_lock().await, Err(Error::Locked)));
    let key = format!("{tag}/{:x}", s2.lease_id());
    assert!(
        !exists(&client, key.as_bytes()).await,
        "try_lock left its key"
    );
    Mutex::unlock(held).await.unwrap();
    let taken = second.try_lock().await.expect("free now");
    assert!(taken.is_leader());
}

async fn lock_excludes_a_second_holder_until_unlock(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let held = Mutex::new(&s1, &tag).unwrap().lock().await.unwrap();
    let second = Mutex::new(&s2, &tag).unwrap();
    let waiting = tokio::spawn(async move { second.lock().await.map(|l| l.token()) });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(!waiting.is_finished(), "the lock was taken twice");
    Mutex::unlock(held).await.unwrap();
    let token = timeout(WAIT, waiting).await.unwrap().unwrap().unwrap();
    assert!(token > 0);
}

async fn lock_tokens_fence_like_election_tokens(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let held = Mutex::new(&s1, &tag).unwrap().lock().await.unwrap();
    let old_guard = held.guard();
    let old_token = held.token();
    Mutex::unlock(held).await.unwrap();
    let next = Mutex::new(&s2, &tag).unwrap().lock().await.unwrap();
    assert!(next.token() > old_token);
    let txn = pb::TxnRequest {
        compare: vec![old_guard],
        success: vec![put(&format!("{tag}-x"), "stale")],
        failure: Vec::new(),
    };
    assert!(!client.txn(txn).await.unwrap().succeeded);
}

async fn empty_or_oversized_names_and_values_are_refused(client: Client, tag: String) {
    let s = session(&client, 5).await;
    assert!(matches!(
        Election::new(&s, ""),
        Err(Error::InvalidArgument(_))
    ));
    let long = "n".repeat(bellwether_client::keys::NAME_BYTES_MAX + 1);
    assert!(matches!(
        Election::new(&s, &long),
        Err(Error::InvalidArgument(_))
    ));
    let election = Election::new(&s, &tag).unwrap();
    let value = vec![b'v'; bellwether_client::keys::VALUE_BYTES_MAX + 1];
    assert!(matches!(
        election.campaign(value).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(election.leader().await.unwrap(), None, "nothing written");
}

async fn ttl_of_zero_or_too_short_for_the_margin_is_refused(client: Client, _tag: String) {
    let zero = SessionOptions::with_ttl(Duration::ZERO);
    assert!(matches!(
        Session::new(&client, zero).await,
        Err(Error::InvalidArgument(_))
    ));
    let squeezed = SessionOptions {
        ttl: Duration::from_secs(3),
        keep_alive_interval: None,
        extra_margin: Duration::from_millis(2500),
        release_on_disconnect: None,
    };
    assert!(matches!(
        Session::new(&client, squeezed).await,
        Err(Error::InvalidArgument(_))
    ));
}

async fn resign_of_a_waiting_campaigner_leaves_the_line(client: Client, tag: String) {
    let (s1, s2, s3) = (
        session(&client, 5).await,
        session(&client, 5).await,
        session(&client, 5).await,
    );
    let first = Election::new(&s1, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let second = Election::new(&s2, &tag)
        .unwrap()
        .start_campaign("2")
        .await
        .unwrap();
    let third = Election::new(&s3, &tag)
        .unwrap()
        .start_campaign("3")
        .await
        .unwrap();
    assert!(stays_waiting(&third).await);
    second.resign().await.unwrap();
    assert!(stays_waiting(&third).await, "the leader is still there");
    first.resign().await.unwrap();
    leads(&third).await;
}

async fn a_release_on_disconnect_session_stays_alive(client: Client, tag: String) {
    let options = SessionOptions {
        release_on_disconnect: Some(Duration::from_millis(300)),
        ..SessionOptions::with_ttl(Duration::from_secs(5))
    };
    let s = Session::new(&client, options).await.expect("session");
    let leadership = Election::new(&s, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    // Many release graces long: keep-alives every 100 ms hold it.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!s.is_lost(), "a released session lost while connected");
    assert!(leadership.is_leader());
    assert!(exists(&client, leadership.key()).await);
}

/// Compacts the store at its current revision.
async fn compact_now(client: &Client, tag: &str) {
    let revision = client.put(format!("{tag}-compact"), "x").await.unwrap();
    let endpoint = client.endpoints()[0].clone();
    let mut kv = pb::kv_client::KvClient::connect(format!("http://{endpoint}"))
        .await
        .unwrap();
    kv.compact(pb::CompactionRequest {
        revision,
        physical: true,
    })
    .await
    .unwrap();
}

/// etcd #18163: an observer that falls behind a compaction must not lose
/// the latest leader. The observer's reader waits while leaders change
/// and the history is compacted; it then still ends on the last leader.
async fn observe_reports_the_latest_leader_across_a_compaction(client: Client, tag: String) {
    let mut observed = Election::observe(&client, &tag).unwrap();
    assert_eq!(timeout(WAIT, observed.recv()).await.unwrap().unwrap(), None);
    let mut last_token = 0;
    let mut kept = Vec::new();
    for i in 0..3 {
        let s = session(&client, 5).await;
        let leadership = Election::new(&s, &tag)
            .unwrap()
            .campaign(format!("{i}"))
            .await
            .unwrap();
        last_token = leadership.token();
        if i < 2 {
            leadership.resign().await.unwrap();
        } else {
            kept.push((s, leadership));
        }
        compact_now(&client, &tag).await;
    }
    let mut latest = None;
    let deadline = Instant::now() + WAIT;
    while latest
        .as_ref()
        .is_none_or(|l: &LeaderInfo| l.token != last_token)
    {
        let left = deadline.saturating_duration_since(Instant::now());
        latest = timeout(left, observed.recv())
            .await
            .expect("the observer reached the latest leader")
            .unwrap();
    }
    assert_eq!(latest.unwrap().value, b"2");
}

async fn a_lock_holder_is_lost_when_its_lease_is_revoked(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let held = Mutex::new(&s, &tag).unwrap().lock().await.unwrap();
    revoke(&client, s.lease_id()).await;
    timeout(WAIT, held.lost()).await.expect("lost");
    assert!(!held
        .guarded(vec![put(&format!("{tag}-x"), "v")])
        .await
        .unwrap());
}

async fn try_lock_takes_a_free_lock(client: Client, tag: String) {
    let s = session(&client, 5).await;
    let held = Mutex::new(&s, &tag).unwrap().try_lock().await.unwrap();
    assert!(held.is_leader());
    assert!(exists(&client, held.key()).await);
}

async fn a_waiting_lock_is_taken_when_the_holder_closes_its_session(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let _held = Mutex::new(&s1, &tag).unwrap().lock().await.unwrap();
    let second = Mutex::new(&s2, &tag).unwrap();
    let waiting = tokio::spawn(async move { second.lock().await.map(|l| l.token()) });
    tokio::time::sleep(STAYS_BLOCKED).await;
    assert!(!waiting.is_finished());
    s1.close().await.unwrap();
    timeout(WAIT, waiting).await.unwrap().unwrap().unwrap();
}

async fn leader_of_reads_the_oldest_campaigner(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let first = Election::new(&s1, &tag)
        .unwrap()
        .campaign("old")
        .await
        .unwrap();
    let _second = Election::new(&s2, &tag)
        .unwrap()
        .start_campaign("young")
        .await
        .unwrap();
    let leader = bellwether_client::leader_of(&client, &tag)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (leader.value.as_slice(), leader.token),
        (b"old".as_slice(), first.token())
    );
}

/// The holder is another process (`bellwether elect`, TTL 2 s) that is
/// SIGKILLed: the waiting campaigner leads once the server expires the
/// dead holder's lease.
async fn a_killed_holder_process_is_replaced_after_its_lease(client: Client, tag: String) {
    let dir = std::env::temp_dir().join(format!("bw-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("child");
    let script = format!(
        "echo $$ > {0}.tmp && mv {0}.tmp {0} && exec sleep 600",
        marker.display()
    );
    let mut holder = std::process::Command::new(super::common::bellwether_binary())
        .args(["elect", &tag, "--ttl", "2", "--grace", "50", "--endpoints"])
        .arg(client.endpoints().join(","))
        .args(["--", "sh", "-c", &script])
        .env("BELLWETHER_LOG", "warn")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("bellwether elect runs");
    let deadline = Instant::now() + WAIT;
    while !marker.exists() {
        assert!(Instant::now() < deadline, "the holder never led");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let child = std::fs::read_to_string(&marker).unwrap().trim().to_string();
    let s = session(&client, 5).await;
    let waiter = Election::new(&s, &tag)
        .unwrap()
        .start_campaign("next")
        .await
        .unwrap();
    assert!(stays_waiting(&waiter).await, "led while the holder lived");
    holder.kill().unwrap();
    holder.wait().unwrap();
    let led = timeout(WAIT, waiter.wait_leader()).await;
    // The holder's program outlives its SIGKILLed wrapper: stop it.
    let _ = std::process::Command::new("kill")
        .args(["-9", &child])
        .status();
    let _ = std::fs::remove_dir_all(&dir);
    led.expect("the next campaigner led after the lease expired")
        .unwrap();
}

/// A campaign abandoned while it waits (its future dropped by a timeout)
/// leaves no key in line, as etcd's cancelled Campaign does.
async fn a_cancelled_campaign_withdraws_its_key(client: Client, tag: String) {
    let (s1, s2) = (session(&client, 5).await, session(&client, 5).await);
    let _first = Election::new(&s1, &tag)
        .unwrap()
        .campaign("1")
        .await
        .unwrap();
    let second = Election::new(&s2, &tag).unwrap();
    let waited = timeout(STAYS_BLOCKED, second.campaign("2")).await;
    assert!(waited.is_err(), "the second must still be waiting");
    let key = format!("{tag}/{:x}", s2.lease_id());
    let deadline = Instant::now() + WAIT;
    while exists(&client, key.as_bytes()).await {
        assert!(
            Instant::now() < deadline,
            "the cancelled campaign's key stayed"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!s2.is_lost(), "the session stays");
}
