//! The Watch service without the network: first the session (pure, over a
//! store), then a stream's task fed through channels.

use super::*;
use bellwether_api::mvccpb;
use bellwether_kv::{DeleteRangeRequest, KeyRange, PutRequest, RequestOp, TxnRequest};
use pb::watch_request::RequestUnion;

const HEADER: pb::ResponseHeader = pb::ResponseHeader {
    cluster_id: 7,
    member_id: 3,
    revision: 0,
    raft_term: 2,
};

fn create(request: pb::WatchCreateRequest) -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(RequestUnion::CreateRequest(request)),
    }
}

fn watch_prefix(prefix: &str, start_revision: i64) -> pb::WatchRequest {
    let range = KeyRange::prefix(prefix);
    create(pb::WatchCreateRequest {
        key: range.key,
        range_end: range.range_end,
        start_revision,
        ..Default::default()
    })
}

fn cancel(watch_id: i64) -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(RequestUnion::CancelRequest(pb::WatchCancelRequest {
            watch_id,
        })),
    }
}

fn progress() -> pb::WatchRequest {
    pb::WatchRequest {
        request_union: Some(RequestUnion::ProgressRequest(pb::WatchProgressRequest {})),
    }
}

fn put(store: &mut KvStore, key: &str, value: &str) {
    store.put(&PutRequest::new(key, value)).unwrap();
}

/// Every response the session has now, in order.
fn drain(session: &mut WatchSession, store: &KvStore) -> Vec<pb::WatchResponse> {
    let mut responses = Vec::new();
    while session.has_work(store.revision()) {
        if let Some(response) = session.next_response(store) {
            responses.push(response);
        }
        assert!(responses.len() < 10_000, "the session never runs dry");
    }
    responses
}

/// An event as (type, key, value, prev value) for short assertions.
fn summary(event: &mvccpb::Event) -> (i32, String, String, Option<String>) {
    let kv = event.kv.as_ref().unwrap();
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).to_string();
    (
        event.r#type,
        text(&kv.key),
        text(&kv.value),
        event.prev_kv.as_ref().map(|prev| text(&prev.value)),
    )
}

const PUT: i32 = mvccpb::event::EventType::Put as i32;
const DELETE: i32 = mvccpb::event::EventType::Delete as i32;

fn created(response: &pb::WatchResponse) -> i64 {
    assert!(response.created && !response.canceled, "{response:?}");
    response.watch_id
}

#[test]
fn watch_ids_count_from_zero_skip_ids_in_use_and_reject_duplicates() {
    let store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    let with_id = |watch_id| {
        create(pb::WatchCreateRequest {
            key: b"a".to_vec(),
            watch_id,
            ..Default::default()
        })
    };
    session.receive(with_id(0), &store);
    session.receive(with_id(1), &store);
    session.receive(with_id(1), &store);
    session.receive(with_id(0), &store);
    let responses = drain(&mut session, &store);
    assert_eq!(created(&responses[0]), 0);
    assert_eq!(created(&responses[1]), 1);
    assert!(responses[2].created && responses[2].canceled);
    assert_eq!(responses[2].watch_id, WATCH_ID_NONE);
    assert_eq!(responses[2].cancel_reason, REASON_DUPLICATE_ID);
    assert_eq!(created(&responses[3]), 2, "1 is taken by the client's id");
    assert_eq!(responses[3].header.unwrap().revision, store.revision());
    assert_eq!(responses[3].header.unwrap().member_id, HEADER.member_id);
}

#[test]
fn the_member_wide_watcher_budget_refuses_past_its_bound_and_refills() {
    let store = KvStore::new();
    let budget = WatcherBudget::new(3);
    let mut first = WatchSession::new(HEADER).with_budget(budget.clone());
    let mut second = WatchSession::new(HEADER).with_budget(budget.clone());
    for _ in 0..2 {
        first.receive(watch_prefix("a", 0), &store);
        second.receive(watch_prefix("b", 0), &store);
    }
    drain(&mut first, &store).iter().for_each(|r| {
        created(r);
    });
    let answers = drain(&mut second, &store);
    created(&answers[0]);
    assert!(answers[1].canceled && answers[1].watch_id == WATCH_ID_NONE);
    assert!(
        answers[1]
            .cancel_reason
            .contains("too many watchers on this member (at most 3)"),
        "{:?}",
        answers[1]
    );
    assert_eq!(budget.in_use(), 3);
    // A cancel and a closed stream give their places back.
    first.receive(cancel(0), &store);
    assert_eq!(budget.in_use(), 2);
    drop(first);
    assert_eq!(budget.in_use(), 1);
    second.receive(watch_prefix("b", 0), &store);
    assert!(!drain(&mut second, &store)[0].canceled);
    assert_eq!(budget.in_use(), 2);
}

#[test]
fn a_stream_refuses_watchers_past_its_bound_and_takes_one_after_a_cancel() {
    let store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    for i in 0..WATCHERS_PER_STREAM_MAX {
        session.receive(watch_prefix(&format!("k{i}"), 0), &store);
        if !session.accepts_requests() {
            drain(&mut session, &store).iter().for_each(|r| {
                created(r);
            });
        }
    }
    drain(&mut session, &store).iter().for_each(|r| {
        created(r);
    });
    assert_eq!(session.watchers_count(), WATCHERS_PER_STREAM_MAX);
    session.receive(watch_prefix("one-more", 0), &store);
    let refused = &drain(&mut session, &store)[0];
    assert!(refused.created && refused.canceled && refused.watch_id == WATCH_ID_NONE);
    assert_eq!(
        refused.cancel_reason,
        format!(
            "bellwether: too many watchers on one stream (at most \
             {WATCHERS_PER_STREAM_MAX}); open another stream"
        )
    );
    session.receive(cancel(7), &store);
    session.receive(watch_prefix("one-more", 0), &store);
    let answers = drain(&mut session, &store);
    assert!(answers[0].canceled && answers[0].watch_id == 7);
    created(&answers[1]);
    assert_eq!(session.watchers_count(), WATCHERS_PER_STREAM_MAX);
}

#[test]
fn an_empty_range_is_rejected_and_an_empty_key_watches_the_zero_key() {
    let mut store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    session.receive(
        create(pb::WatchCreateRequest {
            key: b"b".to_vec(),
            range_end: b"a".to_vec(),
            ..Default::default()
        }),
        &store,
    );
    session.receive(create(pb::WatchCreateRequest::default()), &store);
    let responses = drain(&mut session, &store);
    assert_eq!(responses[0].cancel_reason, REASON_EMPTY_RANGE);
    assert!(responses[0].canceled && responses[0].watch_id == WATCH_ID_NONE);
    assert_eq!(created(&responses[1]), 0);
    put(&mut store, "a", "1");
    store.put(&PutRequest::new(vec![0], "zero")).unwrap();
    let events = drain(&mut session, &store);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].events[0].kv.as_ref().unwrap().key, [0]);
}

#[test]
fn a_prefix_watch_replays_from_its_start_revision_with_filters_and_prev_kv() {
    let mut store = KvStore::new();
    put(&mut store, "app/a", "1"); // revision 2
    put(&mut store, "other", "x"); // 3
    put(&mut store, "app/a", "2"); // 4
    store
        .delete_range(&DeleteRangeRequest::new("app/a", ""))
        .unwrap(); // 5
    let mut session = WatchSession::new(HEADER);
    let range = KeyRange::prefix("app/");
    let with = |filters: Vec<i32>, prev_kv| {
        create(pb::WatchCreateRequest {
            key: range.key.clone(),
            range_end: range.range_end.clone(),
            start_revision: 2,
            filters,
            prev_kv,
            ..Default::default()
        })
    };
    session.receive(with(vec![], true), &store);
    session.receive(with(vec![0], false), &store); // NOPUT
    session.receive(with(vec![1], false), &store); // NODELETE
    let responses = drain(&mut session, &store);
    let events = |id: i64| -> Vec<_> {
        let response = responses
            .iter()
            .find(|r| r.watch_id == id && !r.created)
            .unwrap();
        assert_eq!(response.header.unwrap().revision, 5);
        response.events.iter().map(summary).collect()
    };
    let prev = |value: &str| Some(value.to_string());
    assert_eq!(
        events(0),
        [
            (PUT, "app/a".into(), "1".into(), None),
            (PUT, "app/a".into(), "2".into(), prev("1")),
            (DELETE, "app/a".into(), "".into(), prev("2")),
        ]
    );
    assert_eq!(events(1), [(DELETE, "app/a".into(), "".into(), None)]);
    assert_eq!(events(2).len(), 2);
    assert!(events(2).iter().all(|event| event.0 == PUT));
}

#[test]
fn a_watch_from_now_sees_only_later_writes_and_a_future_start_waits() {
    let mut store = KvStore::new();
    put(&mut store, "k", "old"); // 2
    let mut session = WatchSession::new(HEADER);
    session.receive(watch_prefix("k", 0), &store);
    session.receive(watch_prefix("k", 4), &store);
    assert_eq!(drain(&mut session, &store).len(), 2);
    put(&mut store, "k", "new"); // 3
    let responses = drain(&mut session, &store);
    assert_eq!(responses.len(), 1);
    assert_eq!(responses[0].watch_id, 0);
    assert_eq!(summary(&responses[0].events[0]).2, "new");
    put(&mut store, "k", "newer"); // 4
    let responses = drain(&mut session, &store);
    let ids: Vec<i64> = responses.iter().map(|r| r.watch_id).collect();
    assert_eq!(
        ids,
        [1, 0],
        "after watcher 0 was served, watcher 1 goes first"
    );
}

#[test]
fn a_compacted_start_revision_cancels_the_watcher_with_the_compact_revision() {
    let mut store = KvStore::new();
    for value in ["1", "2", "3"] {
        put(&mut store, "k", value);
    }
    store.compact(3).unwrap();
    let mut session = WatchSession::new(HEADER);
    session.receive(watch_prefix("k", 2), &store);
    session.receive(watch_prefix("k", -5), &store);
    session.receive(watch_prefix("k", 3), &store);
    let responses = drain(&mut session, &store);
    assert_eq!(responses.len(), 6, "{responses:?}");
    for id in [0, 1] {
        let canceled = responses
            .iter()
            .find(|r| r.watch_id == id && !r.created)
            .unwrap();
        assert!(canceled.canceled);
        assert_eq!(canceled.compact_revision, 3);
        assert_eq!(canceled.header.unwrap().revision, 0, "as etcd sends it");
    }
    assert_eq!(session.watchers_count(), 1);
    let events = responses.iter().find(|r| r.watch_id == 2 && !r.created);
    assert_eq!(events.unwrap().events.len(), 2);
}

#[test]
fn a_cancel_is_answered_once_and_unknown_ids_are_ignored() {
    let mut store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    session.receive(watch_prefix("k", 0), &store);
    session.receive(cancel(0), &store);
    session.receive(cancel(0), &store);
    session.receive(cancel(42), &store);
    let responses = drain(&mut session, &store);
    assert_eq!(responses.len(), 2);
    assert!(responses[1].canceled && responses[1].watch_id == 0);
    assert!(!responses[1].created);
    put(&mut store, "k", "v");
    assert!(drain(&mut session, &store).is_empty());
}

#[test]
fn a_progress_request_waits_until_every_watcher_is_caught_up() {
    let mut store = KvStore::new();
    for i in 0..5 {
        put(&mut store, "k", &i.to_string());
    }
    let mut session = WatchSession::new(HEADER);
    session.receive(watch_prefix("k", 2), &store);
    session.receive(progress(), &store);
    let responses = drain(&mut session, &store);
    assert_eq!(responses.len(), 3);
    assert_eq!(responses[1].events.len(), 5);
    let progress = &responses[2];
    assert_eq!(progress.watch_id, WATCH_ID_NONE);
    assert!(progress.events.is_empty() && !progress.created && !progress.canceled);
    assert_eq!(progress.header.unwrap().revision, store.revision());
}

#[test]
fn progress_ticks_notify_idle_watchers_that_asked_only() {
    let mut store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    let notify = |key: &str, progress_notify| {
        create(pb::WatchCreateRequest {
            key: key.as_bytes().to_vec(),
            progress_notify,
            ..Default::default()
        })
    };
    session.receive(notify("busy", true), &store);
    session.receive(notify("idle", true), &store);
    session.receive(notify("quiet", false), &store);
    assert_eq!(drain(&mut session, &store).len(), 3);
    put(&mut store, "busy", "1");
    assert_eq!(drain(&mut session, &store).len(), 1);
    session.progress_tick(&store);
    let responses = drain(&mut session, &store);
    assert_eq!(
        responses.len(),
        1,
        "busy was sent events since the last tick"
    );
    assert_eq!(responses[0].watch_id, 1);
    assert!(responses[0].events.is_empty());
    assert_eq!(responses[0].header.unwrap().revision, 2);
    session.progress_tick(&store);
    let ids: Vec<i64> = drain(&mut session, &store)
        .iter()
        .map(|r| r.watch_id)
        .collect();
    assert_eq!(ids, [0, 1]);
}

#[test]
fn a_txn_is_never_split_across_responses() {
    let mut store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    session.receive(watch_prefix("t/", 0), &store);
    drain(&mut session, &store);
    // Large values so that the txn alone is over one read's bound.
    let value = vec![b'v'; READ_SCAN_BYTES_MAX / 5];
    let txn = TxnRequest {
        compare: Vec::new(),
        success: (0..6)
            .map(|i| RequestOp::Put(PutRequest::new(format!("t/{i}"), value.clone())))
            .collect(),
        failure: Vec::new(),
    };
    put(&mut store, "t/before", "x");
    store.txn(&txn).unwrap();
    put(&mut store, "t/after", "y");
    let responses = drain(&mut session, &store);
    let sizes: Vec<usize> = responses.iter().map(|r| r.events.len()).collect();
    assert_eq!(sizes, [1, 6, 1]);
}

#[test]
fn the_control_queue_is_bounded() {
    let store = KvStore::new();
    let mut session = WatchSession::new(HEADER);
    while session.accepts_requests() {
        session.receive(watch_prefix("k", 0), &store);
    }
    assert_eq!(drain(&mut session, &store).len(), CONTROL_RESPONSES_MAX);
    assert!(session.accepts_requests());
}

/// A stream's task over a bare store, with the test holding the client's
/// ends and the node's revision signal.
struct Harness {
    store: Arc<Mutex<KvStore>>,
    revisions: watch::Sender<i64>,
    stop: watch::Sender<bool>,
    /// The client's sending side; `None` once the client closed it.
    requests: Option<mpsc::Sender<Result<pb::WatchRequest, Status>>>,
    responses: mpsc::Receiver<Result<pb::WatchResponse, Status>>,
    task: tokio::task::JoinHandle<()>,
}

impl Harness {
    fn start(progress_interval: Duration) -> Harness {
        let store = Arc::new(Mutex::new(KvStore::new()));
        let (revisions, revisions_receiver) = watch::channel(1);
        let (stop, stop_receiver) = watch::channel(false);
        let (requests, requests_receiver) = mpsc::channel(4);
        let (responses_sender, responses) = mpsc::channel(RESPONSES_BUFFERED_MAX);
        let context = StreamContext {
            caller: Default::default(),
            budget: Default::default(),
            store: store.clone(),
            revisions: revisions_receiver,
            stop: stop_receiver,
            header: HEADER,
            raft_term: Arc::new(|| 2),
            progress_interval,
        };
        let task =
            tokio::spawn(context.run(ReceiverStream::new(requests_receiver), responses_sender));
        Harness {
            store,
            revisions,
            stop,
            requests: Some(requests),
            responses,
            task,
        }
    }

    /// A write as the node applies one: store first, then the signal.
    fn put(&self, key: &str, value: &str) {
        let mut store = self.store.lock().unwrap();
        put(&mut store, key, value);
        self.revisions.send_replace(store.revision());
    }

    async fn send(&self, request: pb::WatchRequest) {
        let requests = self.requests.as_ref().expect("sending side open");
        requests.send(Ok(request)).await.unwrap();
    }

    async fn next(&mut self) -> pb::WatchResponse {
        let response = tokio::time::timeout(Duration::from_secs(5), self.responses.recv());
        response.await.expect("a response").expect("open").unwrap()
    }
}

#[tokio::test]
async fn a_stream_wakes_on_new_revisions_and_stops_with_the_server() {
    let mut harness = Harness::start(PROGRESS_INTERVAL_DEFAULT);
    harness.send(watch_prefix("k", 0)).await;
    assert_eq!(created(&harness.next().await), 0);
    harness.put("k1", "v1");
    let response = harness.next().await;
    assert_eq!(summary(&response.events[0]).1, "k1");
    assert_eq!(response.header.unwrap().revision, 2);
    // Closing the sending side does not end the watch, as with etcd.
    harness.requests = None;
    harness.put("k2", "v2");
    assert_eq!(summary(&harness.next().await.events[0]).1, "k2");
    harness.stop.send_replace(true);
    tokio::time::timeout(Duration::from_secs(5), harness.task)
        .await
        .expect("the task stops")
        .unwrap();
    let last = harness.responses.recv().await.expect("a last word");
    let status = last.expect_err("the stream ends with an error clients retry");
    assert_eq!(status.code(), tonic::Code::Unavailable);
    assert!(harness.responses.recv().await.is_none());
}

#[tokio::test]
async fn a_stream_ends_when_the_client_goes_away() {
    let harness = Harness::start(PROGRESS_INTERVAL_DEFAULT);
    harness.send(watch_prefix("k", 0)).await;
    drop(harness.responses);
    tokio::time::timeout(Duration::from_secs(5), harness.task)
        .await
        .expect("the task stops")
        .unwrap();
}

#[tokio::test]
async fn a_slow_client_is_not_buffered_for_and_is_canceled_once_its_history_is_compacted() {
    let mut harness = Harness::start(PROGRESS_INTERVAL_DEFAULT);
    harness.send(watch_prefix("k", 0)).await;
    assert_eq!(created(&harness.next().await), 0);
    // One write at a time, each given the chance to be sent, until the
    // client's buffer is full; then more writes that cannot be sent.
    for i in 0..RESPONSES_BUFFERED_MAX * 2 {
        harness.put("k", &i.to_string());
        for _ in 0..100 {
            if harness.responses.len() > i.min(RESPONSES_BUFFERED_MAX - 1) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    assert_eq!(harness.responses.len(), RESPONSES_BUFFERED_MAX);
    let compact_revision = {
        let mut store = harness.store.lock().unwrap();
        let revision = store.revision();
        store.compact(revision).unwrap();
        revision
    };
    let mut revisions_seen = Vec::new();
    loop {
        let response = harness.next().await;
        if response.canceled {
            assert_eq!(response.compact_revision, compact_revision);
            break;
        }
        revisions_seen.extend(
            response
                .events
                .iter()
                .map(|e| e.kv.as_ref().unwrap().mod_revision),
        );
    }
    // What was buffered is delivered, in order, without gaps; what was not
    // is replaced by the cancel.
    assert_eq!(revisions_seen.len(), RESPONSES_BUFFERED_MAX);
    assert!(revisions_seen.windows(2).all(|pair| pair[1] == pair[0] + 1));
}

#[tokio::test]
async fn progress_notifications_arrive_on_the_configured_interval() {
    let mut harness = Harness::start(Duration::from_millis(50));
    harness
        .send(create(pb::WatchCreateRequest {
            key: b"k".to_vec(),
            progress_notify: true,
            ..Default::default()
        }))
        .await;
    assert_eq!(created(&harness.next().await), 0);
    let notification = harness.next().await;
    assert_eq!(notification.watch_id, 0);
    assert!(notification.events.is_empty() && !notification.canceled);
    assert_eq!(notification.header.unwrap().revision, 1);
}
