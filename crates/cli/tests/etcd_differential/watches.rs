//! Watches in the differential test: the same watches are opened on both
//! servers while the calls run, every event each delivers is written down
//! (type, key-value, previous key-value), and once the calls are done the
//! two servers' lines must be the same, watch by watch. A watch is only as
//! good as the order, completeness and content of what it delivers, and
//! Kubernetes and every etcd recipe rely on all three.

use bellwether_api::etcdserverpb as pb;
use pb::watch_client::WatchClient;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// How long the streams may take to deliver what the calls wrote, at
/// most, once the calls are done.
const DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// The streams count as drained once nothing new came for this long.
const QUIET: Duration = Duration::from_millis(500);

/// The watches the test opens, by what they ask for.
pub fn every_key(start_revision: i64) -> pb::WatchCreateRequest {
    pb::WatchCreateRequest {
        key: vec![0],
        range_end: vec![0],
        start_revision,
        prev_kv: true,
        ..Default::default()
    }
}

/// The keys under `a/`, deletes filtered out.
pub fn prefix_without_deletes() -> pb::WatchCreateRequest {
    pb::WatchCreateRequest {
        key: b"a/".to_vec(),
        range_end: b"a0".to_vec(),
        filters: vec![pb::watch_create_request::FilterType::Nodelete as i32],
        ..Default::default()
    }
}

/// One key, puts filtered out.
pub fn one_key_without_puts() -> pb::WatchCreateRequest {
    pb::WatchCreateRequest {
        key: b"b".to_vec(),
        filters: vec![pb::watch_create_request::FilterType::Noput as i32],
        prev_kv: true,
        ..Default::default()
    }
}

/// One open watch and the lines it delivered so far.
pub struct Watch {
    /// Dropping it ends the request stream, and so the watch.
    _requests: mpsc::Sender<pb::WatchRequest>,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Watch {
    /// Opens `create` on `address`; returns once the server confirmed it.
    pub async fn open(address: &str, create: pb::WatchCreateRequest) -> Watch {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{address}"))
            .expect("an address")
            .connect()
            .await
            .unwrap_or_else(|e| panic!("cannot reach {address}: {e}"));
        let mut client: WatchClient<Channel> = WatchClient::new(channel);
        let (requests, receiver) = mpsc::channel(1);
        let request = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
        };
        requests.send(request).await.expect("the stream is open");
        let mut stream = client
            .watch(tokio_stream::wrappers::ReceiverStream::new(receiver))
            .await
            .expect("a watch")
            .into_inner();
        let created = stream
            .message()
            .await
            .expect("the watch stays up")
            .expect("an answer");
        assert!(created.created, "the first answer confirms: {created:?}");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        tokio::spawn(async move {
            while let Ok(Some(message)) = stream.message().await {
                let mut sink = sink.lock().unwrap();
                if message.canceled || message.compact_revision != 0 {
                    sink.push(format!(
                        "canceled {} compact_revision {} {}",
                        message.canceled, message.compact_revision, message.cancel_reason
                    ));
                }
                for event in &message.events {
                    sink.push(format!(
                        "{} {:?} {:?}",
                        event.r#type, event.kv, event.prev_kv
                    ));
                }
            }
        });
        Watch {
            _requests: requests,
            lines,
        }
    }

    fn count(&self) -> usize {
        self.lines.lock().unwrap().len()
    }

    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

/// Waits until each pair has delivered as many lines on both sides and
/// nothing more came for [`QUIET`], or [`DRAIN_LIMIT`] passed.
pub async fn wait_until_even(pairs: &[(&str, Watch, Watch)]) {
    let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
    let mut last = Vec::new();
    loop {
        let counts: Vec<(usize, usize)> = pairs
            .iter()
            .map(|(_, theirs, ours)| (theirs.count(), ours.count()))
            .collect();
        let even = counts.iter().all(|(a, b)| a == b);
        if (even && counts == last) || tokio::time::Instant::now() > deadline {
            return;
        }
        last = counts;
        tokio::time::sleep(QUIET).await;
    }
}

/// Once the pairs are even ([`wait_until_even`]), asserts that each
/// pair's lines are the same. Returns the lines seen per pair.
pub async fn assert_alike(pairs: &[(&str, Watch, Watch)], seed: u64) -> Vec<usize> {
    wait_until_even(pairs).await;
    let mut seen = Vec::new();
    for (name, theirs, ours) in pairs {
        let (expected, got) = (theirs.lines(), ours.lines());
        let first_difference = expected
            .iter()
            .zip(&got)
            .position(|(a, b)| a != b)
            .unwrap_or(expected.len().min(got.len()));
        assert!(
            expected == got,
            "watch {name} (seed {seed}) delivered differently: etcd {} lines, bellwether {}; line {first_difference}:\n  etcd: {:?}\n  bellwether: {:?}",
            expected.len(),
            got.len(),
            expected.get(first_difference),
            got.get(first_difference)
        );
        seen.push(expected.len());
    }
    seen
}
