//! Watch: a prefix watch from a past start revision with prev_kv, live
//! events, and cancel.

use super::{within, Members};
use etcd_client::{EventType, WatchOptions, WatchResponse, WatchStream};

/// The next response on `stream`.
async fn next(stream: &mut WatchStream) -> WatchResponse {
    within(stream.message())
        .await
        .expect("watch stream")
        .expect("watch stream open")
}

/// (type, key, value, previous value) of every event in `response`.
fn events(response: &WatchResponse) -> Vec<(EventType, String, String, Option<String>)> {
    response
        .events()
        .iter()
        .map(|event| {
            let kv = event.kv().expect("kv");
            (
                event.event_type(),
                kv.key_str().unwrap().to_string(),
                kv.value_str().unwrap().to_string(),
                event.prev_kv().map(|p| p.value_str().unwrap().to_string()),
            )
        })
        .collect()
}

/// A prefix watch from a past revision replays the history after it (only
/// the prefix's keys, with previous values), then reports live events; a
/// canceled watch reports nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_prefix_start_revision_prev_kv_and_cancel() {
    let members = Members::start("conformance-watch");
    let mut writer = members.client(1).await;
    let mut watcher = members.client(2).await;
    within(writer.put("other", "0", None)).await.unwrap();
    let start = within(writer.put("w/x", "1", None)).await.unwrap();
    let start_revision = start.header().unwrap().revision();
    within(writer.put("w/y", "2", None)).await.unwrap();
    within(writer.put("other", "1", None)).await.unwrap();
    within(writer.put("w/x", "3", None)).await.unwrap();
    within(writer.delete("w/y", None)).await.unwrap();

    let options = WatchOptions::new()
        .with_prefix()
        .with_start_revision(start_revision)
        .with_prev_key();
    let mut stream = within(watcher.watch("w/", Some(options)))
        .await
        .expect("watch");
    let created = next(&mut stream).await;
    assert!(created.created(), "{created:?}");
    let watch_id = created.watch_id();
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let response = next(&mut stream).await;
        assert_eq!(response.watch_id(), watch_id);
        seen.extend(events(&response));
    }
    let s = |text: &str| text.to_string();
    assert_eq!(
        seen,
        [
            (EventType::Put, s("w/x"), s("1"), None),
            (EventType::Put, s("w/y"), s("2"), None),
            (EventType::Put, s("w/x"), s("3"), Some(s("1"))),
            (EventType::Delete, s("w/y"), s(""), Some(s("2"))),
        ]
    );

    // Live: a key under the prefix is reported, one outside it is not.
    within(writer.put("outside", "x", None)).await.unwrap();
    within(writer.put("w/z", "4", None)).await.unwrap();
    let live = next(&mut stream).await;
    assert_eq!(events(&live), [(EventType::Put, s("w/z"), s("4"), None)]);

    // Cancel, then a sentinel watch on the same stream: the canceled
    // watch's key changes before the sentinel's, so any event it still
    // delivered would arrive before the sentinel's.
    within(stream.cancel(watch_id)).await.expect("cancel");
    let canceled = next(&mut stream).await;
    assert!(
        canceled.canceled() && canceled.watch_id() == watch_id,
        "{canceled:?}"
    );
    within(stream.watch("sentinel", None))
        .await
        .expect("watch sentinel");
    let sentinel = next(&mut stream).await;
    assert!(
        sentinel.created() && sentinel.watch_id() != watch_id,
        "{sentinel:?}"
    );
    within(writer.put("w/after-cancel", "5", None))
        .await
        .unwrap();
    within(writer.put("sentinel", "6", None)).await.unwrap();
    let after = next(&mut stream).await;
    assert_eq!(after.watch_id(), sentinel.watch_id(), "{after:?}");
    assert_eq!(
        events(&after),
        [(EventType::Put, s("sentinel"), s("6"), None)]
    );
}
