//! The kubernetes workload's watchers (see `kubernetes.rs`), each what
//! kube-apiserver's reflector does with etcd: list the whole prefix page by
//! page at the first page's revision, watch from the revision after it
//! (`prev_kv`, progress notifications), ask for progress now and then,
//! and when the stream breaks resume on another member from the revision
//! after the last one seen (an event's, or a progress notification's);
//! when that revision is compacted, list again. It also closes each
//! stream after a few seconds and resumes, now and then after a pause
//! long enough for compaction to pass it, so that resumptions happen
//! everywhere in the history, not only where the nemesis struck. Now and
//! then, after a progress notification or an event, it lists at that
//! revision, which the check compares with the watch replayed on its list. Everything goes in the
//! watcher's log, in the order it happened (`kubernetes_check::Entry`).

use super::kubernetes_check::{Entry, Event};
use super::kubernetes_history::{items, KubeHistory, REGISTRY_PREFIX};
use super::session::{PAUSE_AFTER_FAILURE, REQUEST_TIMEOUT};
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use bellwether_core::Rng;
use pb::kv_client::KvClient;
use pb::watch_request::RequestUnion;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::Sender;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// Watchers per run.
const WATCHERS: usize = 3;
/// Keys per page of a list, as kube-apiserver's default page is 500 for
/// thousands of objects: several pages for the workload's hundred.
const PAGE_LIMIT: i64 = 25;
/// Pages of one list, at most.
const PAGES_MAX: u64 = 1_000;
/// A watcher asks for progress every so often.
const PROGRESS_EVERY: Duration = Duration::from_millis(400);
/// A progress request unanswered this long means the stream is stuck (its
/// member paused or cut off): the watcher resumes elsewhere.
const PROGRESS_WAIT_MAX: Duration = Duration::from_secs(2);
/// One in this many progress notifications is followed by a list at its
/// revision, compared with the replay.
const CHECK_ONE_IN: u64 = 8;
/// One in this many responses with events is too (they come far more
/// often than progress notifications).
const CHECK_AFTER_EVENTS_ONE_IN: u64 = 64;
/// How long the watchers may take to reach the final revision.
const CATCH_UP_MAX: Duration = Duration::from_secs(30);
/// A watch stream lasts this long at most, in ms, before the watcher
/// closes it and resumes, as a reflector restarts its watch after the
/// watch's timeout: resumptions from anywhere, not only after faults.
const STREAM_MS_MIN: u64 = 2_000;
const STREAM_MS_MAX: u64 = 8_000;
/// One in this many of those restarts waits [`AWAY`] first, as a watcher
/// that was away long enough for its revision to be compacted, so that
/// resumptions meet compaction and list again.
const AWAY_ONE_IN: u64 = 3;
const AWAY: Duration = Duration::from_secs(4);

/// A paginated list's result.
pub struct Listed {
    pub revision: i64,
    pub items: Vec<super::kubernetes_check::Item>,
    pub pages: u64,
}

/// Lists `prefix` page by page, all at `revision` (0: at the first page's
/// revision): the next page starts after the last key returned.
pub async fn list_at(
    kv: &mut KvClient<Channel>,
    prefix: &str,
    revision: i64,
) -> Result<Listed, String> {
    let end = bellwether_client::keys::prefix_end(prefix.as_bytes());
    let mut listed = Listed {
        revision,
        items: Vec::new(),
        pages: 0,
    };
    let mut key = prefix.as_bytes().to_vec();
    while listed.pages < PAGES_MAX {
        let request = pb::RangeRequest {
            key: key.clone(),
            range_end: end.clone(),
            limit: PAGE_LIMIT,
            revision: listed.revision,
            ..pb::RangeRequest::default()
        };
        let answer = match tokio::time::timeout(REQUEST_TIMEOUT, kv.range(request)).await {
            Ok(Ok(answer)) => answer.into_inner(),
            Ok(Err(status)) => return Err(status.message().to_string()),
            Err(_) => return Err("a page got no answer in time".to_string()),
        };
        if listed.revision == 0 {
            listed.revision = answer.header.as_ref().map_or(0, |h| h.revision);
        }
        listed.pages += 1;
        listed.items.extend(items(&answer.kvs));
        match (answer.more, answer.kvs.last()) {
            (true, Some(last)) => {
                key = last.key.clone();
                key.push(0);
            }
            _ => return Ok(listed),
        }
    }
    Err(format!("more than {PAGES_MAX} pages"))
}

/// How a watch stream ended.
enum Ended {
    /// The watcher reached the final revision.
    Reached,
    /// It broke; the watcher resumes elsewhere.
    Broken,
    /// Its start revision is compacted; the watcher lists again.
    Compacted,
    /// The watcher closed it after its time; it resumes.
    Restarted,
}

/// One watcher.
struct Watcher {
    index: usize,
    channels: Vec<Channel>,
    member: usize,
    rng: Rng,
    /// The revision to resume from; `None`: list first.
    next: Option<i64>,
    /// The final revision, once the run's clients stopped (0 before).
    target: Arc<AtomicI64>,
    history: Arc<Mutex<KubeHistory>>,
    /// Whether it asks for progress every [`PROGRESS_EVERY`].
    progress_requests: bool,
}

impl Watcher {
    fn record(&self, entry: Entry) {
        self.history.lock().expect("history lock").logs[self.index].push(entry);
    }

    fn reached(&self) -> bool {
        let target = self.target.load(Ordering::Acquire);
        target > 0 && self.next.is_some_and(|next| next > target)
    }

    fn kv(&self) -> KvClient<Channel> {
        KvClient::new(self.channels[self.member].clone())
    }

    async fn failed(&mut self) {
        self.member = (self.member + 1) % self.channels.len();
        tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
    }

    /// Lists, watches and resumes until the final revision is reached,
    /// then lists at it for the last comparison.
    async fn run(mut self) {
        loop {
            if self.reached() {
                break;
            }
            let Some(from) = self.next else {
                match list_at(&mut self.kv(), REGISTRY_PREFIX, 0).await {
                    Ok(listed) => {
                        self.next = Some(listed.revision + 1);
                        self.record(Entry::Listed {
                            revision: listed.revision,
                            items: listed.items,
                        });
                    }
                    Err(_) => self.failed().await,
                }
                continue;
            };
            match self.follow(from).await {
                Ended::Reached => break,
                Ended::Compacted => self.next = None,
                Ended::Broken => self.failed().await,
                Ended::Restarted => {
                    if self.rng.range(0, AWAY_ONE_IN) == 0 {
                        tokio::time::sleep(AWAY).await;
                    }
                    self.member = (self.member + 1) % self.channels.len();
                }
            }
        }
        let at = self.next.expect("reached after a list") - 1;
        for _ in 0..self.channels.len() * 3 {
            if self.check_at(at).await {
                return;
            }
            self.failed().await;
        }
    }

    /// Lists at `revision` and records it for the comparison with the
    /// replay; whether it could.
    async fn check_at(&mut self, revision: i64) -> bool {
        match list_at(&mut self.kv(), REGISTRY_PREFIX, revision).await {
            Ok(listed) => {
                self.record(Entry::Checked {
                    revision,
                    items: listed.items,
                });
                true
            }
            Err(_) => false,
        }
    }

    /// Opens a watch stream from `from` and follows it.
    async fn follow(&mut self, from: i64) -> Ended {
        let create = pb::WatchCreateRequest {
            key: REGISTRY_PREFIX.as_bytes().to_vec(),
            range_end: bellwether_client::keys::prefix_end(REGISTRY_PREFIX.as_bytes()),
            start_revision: from,
            prev_kv: true,
            progress_notify: true,
            ..pb::WatchCreateRequest::default()
        };
        let (sender, receiver) = tokio::sync::mpsc::channel(4);
        let request = pb::WatchRequest {
            request_union: Some(RequestUnion::CreateRequest(create)),
        };
        if sender.send(request).await.is_err() {
            return self.broken("closed");
        }
        let mut watches = pb::watch_client::WatchClient::new(self.channels[self.member].clone());
        let opened = tokio::time::timeout(
            REQUEST_TIMEOUT,
            watches.watch(ReceiverStream::new(receiver)),
        );
        let stream = match opened.await {
            Ok(Ok(stream)) => stream.into_inner(),
            Ok(Err(status)) => return self.broken(status.message()),
            Err(_) => return self.broken("the watch did not open in time"),
        };
        // Recorded once a member took the stream, so that a try on a
        // member that is down is not counted as a resumption.
        self.record(Entry::Opened { from });
        self.read(from, stream, &sender).await
    }

    fn broken(&self, why: &str) -> Ended {
        self.record(Entry::Broken {
            why: why.to_string(),
        });
        Ended::Broken
    }

    /// Reads the stream's answers, asking for progress every
    /// [`PROGRESS_EVERY`] if it asks at all.
    async fn read(
        &mut self,
        from: i64,
        mut stream: tonic::Streaming<pb::WatchResponse>,
        sender: &Sender<pb::WatchRequest>,
    ) -> Ended {
        let mut asked: Option<Instant> = None;
        let mut last_ask = Instant::now();
        let lasts = Duration::from_millis(self.rng.range(STREAM_MS_MIN, STREAM_MS_MAX));
        let close_at = Instant::now() + lasts;
        loop {
            if self.reached() {
                return Ended::Reached;
            }
            if Instant::now() > close_at && self.target.load(Ordering::Acquire) == 0 {
                self.broken("closed after its time, to resume");
                return Ended::Restarted;
            }
            match asked {
                Some(at) if at.elapsed() > PROGRESS_WAIT_MAX => {
                    return self.broken("a progress request got no answer in time")
                }
                None if self.progress_requests && last_ask.elapsed() >= PROGRESS_EVERY => {
                    let request = pb::WatchRequest {
                        request_union: Some(RequestUnion::ProgressRequest(
                            pb::WatchProgressRequest {},
                        )),
                    };
                    if sender.try_send(request).is_err() {
                        return self.broken("the request stream is closed");
                    }
                    asked = Some(Instant::now());
                    last_ask = Instant::now();
                }
                _ => {}
            }
            let wait = tokio::time::timeout(Duration::from_millis(100), stream.message());
            let answer = match wait.await {
                Err(_) => continue,
                Ok(Ok(Some(answer))) => answer,
                Ok(Ok(None)) => return self.broken("the watch stream ended"),
                Ok(Err(status)) => return self.broken(status.message()),
            };
            if answer.compact_revision > 0 {
                self.record(Entry::Compacted {
                    from,
                    compact_revision: answer.compact_revision,
                });
                return Ended::Compacted;
            }
            if answer.canceled {
                return self.broken(&format!("canceled: {}", answer.cancel_reason));
            }
            if answer.created {
                continue;
            }
            if answer.events.is_empty() {
                asked = None;
                self.progress(answer.header.map_or(0, |h| h.revision)).await;
            } else {
                let last = self.events(answer.events);
                self.now_and_then_check_at(last, CHECK_AFTER_EVENTS_ONE_IN)
                    .await;
            }
        }
    }

    /// Records a response's events; returns the last one's revision.
    fn events(&mut self, events: Vec<mvccpb::Event>) -> i64 {
        let events: Vec<Event> = events
            .into_iter()
            .map(|event| {
                let kv = event.kv.unwrap_or_default();
                let put = event.r#type == mvccpb::event::EventType::Put as i32;
                Event {
                    revision: kv.mod_revision,
                    key: String::from_utf8_lossy(&kv.key).into_owned(),
                    value: put.then(|| String::from_utf8_lossy(&kv.value).into_owned()),
                    prev: event.prev_kv.map(|prev| {
                        (
                            String::from_utf8_lossy(&prev.value).into_owned(),
                            prev.mod_revision,
                        )
                    }),
                }
            })
            .collect();
        let last = events.iter().map(|e| e.revision).max().unwrap_or(0);
        self.next = self.next.map(|next| next.max(last + 1));
        self.record(Entry::Events(events));
        last
    }

    /// Now and then, once the stream has delivered everything up to
    /// `revision` (an event's or a progress notification's), a list at it
    /// for the check to compare with the replay. After an event too, not
    /// only after progress: the stream sends a revision's events in order
    /// and whole, and a watcher that asks for no progress (see
    /// `kubernetes_etcd::progress_requests_in_step`) still compares.
    async fn now_and_then_check_at(&mut self, revision: i64, one_in: u64) {
        if self.next == Some(revision + 1) && self.rng.range(0, one_in) == 0 {
            self.check_at(revision).await;
        }
    }

    /// A progress notification at `revision`; now and then a list at it.
    async fn progress(&mut self, revision: i64) {
        self.record(Entry::Progress { revision });
        let next = self.next.expect("watching after a list");
        self.next = Some(next.max(revision + 1));
        self.now_and_then_check_at(revision, CHECK_ONE_IN).await;
    }
}

/// The run's watchers, and how to tell them where the run ended.
pub struct Watchers {
    target: Arc<AtomicI64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts [`WATCHERS`] watchers, each on its own member first, asking for
/// progress now and then if `progress_requests`.
pub fn start(
    channels: &[Channel],
    seed: u64,
    history: Arc<Mutex<KubeHistory>>,
    progress_requests: bool,
) -> Watchers {
    let target = Arc::new(AtomicI64::new(0));
    history.lock().expect("history lock").logs = vec![Vec::new(); WATCHERS];
    let tasks = (0..WATCHERS)
        .map(|index| {
            let watcher = Watcher {
                index,
                channels: channels.to_vec(),
                member: index % channels.len(),
                rng: Rng::derive(seed, 1_000 + index as u64),
                next: None,
                target: target.clone(),
                history: history.clone(),
                progress_requests,
            };
            tokio::spawn(watcher.run())
        })
        .collect();
    Watchers { target, tasks }
}

impl Watchers {
    /// Tells the watchers the final revision and waits (up to
    /// [`CATCH_UP_MAX`]) for them to reach it; one that does not is noted.
    pub async fn finish(self, final_revision: i64, history: &Mutex<KubeHistory>) {
        assert!(final_revision > 0, "a final revision");
        self.target.store(final_revision, Ordering::Release);
        let deadline = Instant::now() + CATCH_UP_MAX;
        for (index, task) in self.tasks.into_iter().enumerate() {
            let abort = task.abort_handle();
            if tokio::time::timeout_at(deadline, task).await.is_err() {
                abort.abort();
                history.lock().expect("history lock").trouble.push(format!(
                    "watcher {index} did not reach revision {final_revision} in {CATCH_UP_MAX:?}"
                ));
            }
        }
    }
}
