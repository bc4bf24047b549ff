//! The task queues (bellwether-client's Leader-Followers queues) kept in
//! this member's store: gauges for `/metrics` and a list for the dashboard
//! (`GET /tasks`).
//!
//! Queues leave their names under
//! [`bellwether_task_layout::QUEUE_REGISTRY_PREFIX`]; each is read from
//! the store when asked for, through the layout crate's
//! [`QueueStatus::from_keys`], which the client's `Queue::status` uses
//! too, so the dashboard, `/metrics` and `bellwether tasks status` count
//! the same way. Reads are bounded: at most
//! [`QUEUES_MAX`] queues and [`KEYS_PER_QUEUE_MAX`] keys each.

use crate::app_elections::escape_label;
use bellwether_kv::{KvStore, RangeRequest, SortOrder, SortTarget};
use bellwether_task_layout::{self as tasks, QueueStatus, QUEUE_REGISTRY_PREFIX};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Queues shown, at most.
pub const QUEUES_MAX: i64 = 64;

/// Keys read per queue, at most; a larger queue is shown as truncated.
pub const KEYS_PER_QUEUE_MAX: i64 = 200_000;

/// A per-queue gauge: its name, its help and how it is read.
type QueueGauge = (&'static str, &'static str, fn(&AppQueueView) -> u64);

/// One queue as the dashboard shows it.
#[derive(Debug, Clone, Serialize)]
pub struct AppQueueView {
    /// The queue's status.
    #[serde(flatten)]
    pub status: QueueStatus,
    /// Tasks done per second since the previous look, if there was one.
    pub done_per_second: Option<f64>,
    /// Whether the queue held more keys than were read.
    pub truncated: bool,
}

/// The registry: the store to read, and the last done counts for rates.
#[derive(Debug, Default)]
pub struct AppTasks {
    /// The member's store; set when the etcd API starts.
    store: Mutex<Option<Arc<Mutex<KvStore>>>>,
    /// Per queue: when it was last read and how many tasks were done.
    last_done: Mutex<BTreeMap<String, (Instant, u64)>>,
}

impl AppTasks {
    /// Gives the registry the store it reads.
    pub fn attach_store(&self, store: Arc<Mutex<KvStore>>) {
        *self.store.lock().expect("registry lock") = Some(store);
    }

    /// Every queue found in the store, with its status now.
    pub fn snapshot(&self) -> Vec<AppQueueView> {
        let Some(store) = self.store.lock().expect("registry lock").clone() else {
            return Vec::new();
        };
        let registry = QUEUE_REGISTRY_PREFIX.as_bytes().to_vec();
        let names: Vec<String> = range(&store, &registry, QUEUES_MAX, false)
            .0
            .into_iter()
            .filter_map(|kv| {
                let name = kv.key.strip_prefix(registry.as_slice())?;
                String::from_utf8(name.to_vec()).ok()
            })
            .collect();
        let mut views = Vec::new();
        for name in names {
            let (kvs, more, revision) = range(
                &store,
                &tasks::state_prefix(&name),
                KEYS_PER_QUEUE_MAX,
                false,
            );
            let leader = range(&store, &tasks::leader_prefix(&name), 1, true)
                .0
                .into_iter()
                .next()
                .map(|kv| {
                    (
                        String::from_utf8_lossy(&kv.value).into_owned(),
                        kv.create_revision,
                    )
                });
            let keys = kvs
                .iter()
                .map(|kv| (kv.key.as_slice(), kv.value.as_slice()));
            let Some(status) = QueueStatus::from_keys(&name, revision, keys, leader) else {
                continue;
            };
            let done = status.depth.get("done").copied().unwrap_or(0);
            let now = Instant::now();
            let previous = self
                .last_done
                .lock()
                .expect("registry lock")
                .insert(name.clone(), (now, done));
            let done_per_second = previous.and_then(|(then, before)| {
                let seconds = now.duration_since(then).as_secs_f64();
                (seconds > 0.0).then(|| done.saturating_sub(before) as f64 / seconds)
            });
            views.push(AppQueueView {
                status,
                done_per_second,
                truncated: more,
            });
        }
        assert!(
            views.len() <= QUEUES_MAX as usize,
            "at most QUEUES_MAX queues are shown"
        );
        views
    }
}

impl Collector for AppTasks {
    /// The queues' gauges, read from the store when `/metrics` is read.
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let views = self.snapshot();
        let mut depth = encoder.encode_descriptor(
            "bellwether_tasks_depth",
            "Tasks of each application task queue, by state.",
            None,
            MetricType::Gauge,
        )?;
        for view in &views {
            for (state, count) in &view.status.depth {
                let labels = [
                    ("queue", escape_label(&view.status.queue)),
                    ("state", state.to_string()),
                ];
                depth.encode_family(&labels)?.encode_gauge(count)?;
            }
        }
        let per_queue: [QueueGauge; 4] = [
            (
                "bellwether_tasks_in_flight",
                "Tasks assigned to live workers.",
                |v| v.status.workers.iter().map(|w| w.in_flight).sum(),
            ),
            ("bellwether_tasks_workers", "Live workers.", |v| {
                v.status.workers.len() as u64
            }),
            (
                "bellwether_tasks_orphaned",
                "Tasks of workers that are gone, not yet moved.",
                |v| v.status.orphaned,
            ),
            (
                "bellwether_tasks_dead_letters",
                "Dead-lettered tasks.",
                |v| v.status.depth.get("dead").copied().unwrap_or(0),
            ),
        ];
        for (name, help, value) in per_queue {
            let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for view in &views {
                let labels = [("queue", escape_label(&view.status.queue))];
                metric.encode_family(&labels)?.encode_gauge(&value(view))?;
            }
        }
        Ok(())
    }
}

/// Keys under `prefix`, at most `limit`, by key (or, with
/// `oldest_first`, by create revision); whether more were left, and the
/// store's revision.
fn range(
    store: &Mutex<KvStore>,
    prefix: &[u8],
    limit: i64,
    oldest_first: bool,
) -> (Vec<bellwether_kv::KeyValue>, bool, i64) {
    let mut end = prefix.to_vec();
    *end.last_mut().expect("a prefix ends with /") += 1;
    let mut request = RangeRequest {
        limit,
        ..RangeRequest::new(prefix.to_vec(), end)
    };
    if oldest_first {
        request.sort_order = SortOrder::Ascend;
        request.sort_target = SortTarget::Create;
    }
    match store.lock().expect("store lock").range(&request) {
        Ok(response) => {
            // What bounds the dashboard's and /metrics' reads.
            assert!(
                limit > 0 && response.kvs.len() as u64 <= limit as u64,
                "a read returns at most its limit of keys"
            );
            (response.kvs, response.more, response.revision)
        }
        Err(_) => (Vec::new(), false, 0),
    }
}
