//! [`QueueView`]: the leader's picture of a queue, and what it decides.
//!
//! The view is rebuilt from one read of `Q/s/` and kept current by the
//! watch that follows it. It does no IO: [`QueueView::plan`] says what to
//! write, the leader writes it in one guarded txn, and
//! [`QueueView::applied`] records the outcome. Every write compares the
//! revisions the plan was made from, so a plan made from a view that is
//! behind the store fails as a whole and changes nothing; the watch then
//! brings the view up to date and the leader plans again.
//!
//! The view holds the tasks that are not finished, and finished members of
//! groups not yet aggregated; a finished task is dropped once nothing
//! depends on it, so memory follows the work in flight, not the history.

use super::layout::DATA_BYTES_MAX;
use super::layout::{Layout, StateKey};
use super::record::{
    unix_ms_now, GroupInput, GroupMeta, MemberResult, Retention, TaskRecord, TaskState, WorkerMeta,
};
use bellwether_api::mvccpb;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// A task the view follows, with the revisions its writes compare.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    /// The record.
    pub record: TaskRecord,
    /// The record's create revision (submit order).
    pub create_revision: i64,
    /// The record's mod revision; for an assigned task, the assignment
    /// token.
    pub mod_revision: i64,
    /// When the view learned of this version (the start of a wait for
    /// assignment, for the assignment latency).
    pub since: Instant,
}

/// A live worker.
#[derive(Debug, Clone)]
pub(crate) struct LiveWorker {
    /// Its key's create revision: an assignment compares it, so that no
    /// task goes to a worker whose session ended.
    pub create_revision: i64,
    /// Tasks it runs at once, at most.
    pub concurrency: u32,
}

/// A group and whether its aggregator exists.
#[derive(Debug, Clone)]
pub(crate) struct GroupEntry {
    /// The group as submitted.
    pub meta: GroupMeta,
    /// Whether the aggregator task was created.
    pub aggregated: bool,
    /// When the view last saw a member finish (or the group arrive).
    pub last_change: Instant,
}

/// How long the leader took to act, by kind: measured from when the view
/// learned what called for the action to when its write was acknowledged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Latency {
    /// A waiting task seen → assigned.
    Assignment(Duration),
    /// A worker seen gone → its task moved (or dead-lettered).
    Reassignment(Duration),
    /// A group's last member seen finished → its aggregator created.
    GroupCompletion(Duration),
}

/// A write the leader makes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// Assign task `id` to `worker` (taking it from `from`, a worker that
    /// is gone, if set).
    Assign {
        /// The task.
        id: String,
        /// The new record.
        record: TaskRecord,
        /// The record's mod revision the plan saw.
        expected: i64,
        /// The worker.
        worker: String,
        /// The worker key's create revision.
        worker_created: i64,
        /// The worker the task leaves, whose inbox entry goes.
        from: Option<String>,
    },
    /// Move task `id`, out of attempts, to the dead letters.
    DeadLetter {
        /// The task.
        id: String,
        /// The new record.
        record: TaskRecord,
        /// The record's mod revision the plan saw.
        expected: i64,
        /// The worker the task leaves.
        from: Option<String>,
    },
    /// Remove finished task `id` (record, payload, dead letter), past the
    /// queue's retention; for a group's aggregator, the group's record too.
    Remove {
        /// The task.
        id: String,
        /// The record's mod revision the view saw it finish at.
        expected: i64,
        /// Whether it has a dead letter to remove.
        dead: bool,
        /// The group whose aggregator this is.
        group: Option<String>,
        /// When it finished (see [`Finished::finished_ms`]), to put it back
        /// in line if the removal is not written.
        finished_ms: u64,
    },
    /// Create group `group`'s aggregator (only if it does not exist).
    Aggregate {
        /// The group.
        group: String,
        /// The aggregator's id.
        id: String,
        /// Its record.
        record: TaskRecord,
        /// Its payload: the members' outcomes.
        payload: Vec<u8>,
    },
}

impl Action {
    /// The fewest writes an action makes.
    pub(crate) const WRITES_MIN: usize = 2;

    /// The writes of an aggregation: its payload and its record.
    const AGGREGATE_WRITES: usize = 2;

    /// The operations this action puts in its txn's success branch, which
    /// etcd bounds (128 by default). Its compares (one for the task, one
    /// for a worker no other action of the txn assigns to) are counted
    /// where a plan is split into txns.
    pub(crate) fn writes(&self) -> usize {
        match self {
            // The record and the inbox entry (or the dead letter), and the
            // delete of the entry in the inbox the task leaves.
            Action::Assign { from, .. } | Action::DeadLetter { from, .. } => {
                Self::WRITES_MIN + usize::from(from.is_some())
            }
            Action::Aggregate { .. } => Self::AGGREGATE_WRITES,
            // The record and the payload, the dead letter, the group.
            Action::Remove { dead, group, .. } => {
                2 + usize::from(*dead) + usize::from(group.is_some())
            }
        }
    }
}

/// A finished task the view no longer follows, kept in the store until
/// the queue's retention removes it.
#[derive(Debug, Clone)]
pub(crate) struct Finished {
    /// The task.
    pub id: String,
    /// Its record's mod revision (a removal compares it).
    pub mod_revision: i64,
    /// Whether it was dead-lettered (so a dead letter is stored too).
    pub dead: bool,
    /// When it finished, in milliseconds since the Unix epoch: the
    /// record's own time, or when this leader first saw it finished for a
    /// record that carries none.
    pub finished_ms: u64,
}

/// The leader's picture of one queue.
#[derive(Debug, Default)]
pub(crate) struct QueueView {
    /// Followed tasks by id.
    tasks: BTreeMap<String, Tracked>,
    /// Tasks to assign (pending or failed), by submit order.
    waiting: BTreeSet<(i64, String)>,
    /// Assigned tasks by worker name (live or gone).
    assigned: BTreeMap<String, BTreeSet<String>>,
    /// Live workers by name.
    workers: BTreeMap<String, LiveWorker>,
    /// Groups by name.
    groups: BTreeMap<String, GroupEntry>,
    /// Groups whose completion must be checked.
    dirty_groups: BTreeSet<String>,
    /// Finished tasks no longer followed, with the revision they finished
    /// at, so that an older event replayed by a watch does not bring them
    /// back; the oldest are forgotten past [`TOMBSTONES_MAX`].
    tombstones: BTreeMap<String, i64>,
    /// The order tombstones were made in.
    tombstone_order: VecDeque<String>,
    /// Workers seen gone while they had tasks, and when.
    gone_since: BTreeMap<String, Instant>,
    /// Finished tasks still stored, oldest first: what retention removes.
    finished: VecDeque<Finished>,
    /// The queue's retention settings.
    retention: Retention,
}

/// Aggregator payload bytes planned into one txn, at most (a single
/// aggregator may carry more, up to the payload bound).
pub const AGGREGATE_BYTES_PER_PLAN: usize = 512 * 1024;

/// Finished tasks remembered after they are dropped, at most.
pub const TOMBSTONES_MAX: usize = 100_000;

impl QueueView {
    /// Applies a put or a delete read from the store or the watch.
    pub(crate) fn apply_event(&mut self, layout: &Layout, event: &mvccpb::Event) {
        let Some(kv) = &event.kv else { return };
        if event.r#type == mvccpb::event::EventType::Delete as i32 {
            self.apply_delete(layout, &kv.key);
        } else {
            self.apply_put(layout, kv);
        }
    }

    /// Applies a stored key (from a read, or a put event).
    pub(crate) fn apply_put(&mut self, layout: &Layout, kv: &mvccpb::KeyValue) {
        match layout.parse_state(&kv.key) {
            Some(StateKey::Task(id)) => match TaskRecord::decode(&kv.value) {
                Ok(record) => self.put_task(id, record, kv.create_revision, kv.mod_revision),
                Err(error) => tracing::warn!(%error, id, "tasks: an unreadable task record"),
            },
            Some(StateKey::Worker(name)) => {
                let concurrency = serde_json::from_slice::<WorkerMeta>(&kv.value)
                    .map(|meta| meta.concurrency)
                    .unwrap_or(0);
                self.workers.insert(
                    name,
                    LiveWorker {
                        create_revision: kv.create_revision,
                        concurrency,
                    },
                );
            }
            Some(StateKey::Group(name)) => match serde_json::from_slice::<GroupMeta>(&kv.value) {
                Ok(meta) => {
                    let aggregated = self.groups.get(&name).is_some_and(|g| g.aggregated);
                    let entry = GroupEntry {
                        meta,
                        aggregated,
                        last_change: Instant::now(),
                    };
                    self.groups.insert(name.clone(), entry);
                    self.dirty_groups.insert(name);
                }
                Err(error) => tracing::warn!(%error, name, "tasks: an unreadable group record"),
            },
            Some(StateKey::Retention) => {
                self.retention = serde_json::from_slice::<Retention>(&kv.value)
                    .ok()
                    .filter(|r| r.check().is_ok())
                    .unwrap_or_else(|| {
                        tracing::warn!("tasks: unreadable retention settings; keeping the default");
                        Retention::default()
                    });
            }
            Some(StateKey::Marker) | None => {}
        }
    }

    /// Applies a deleted key.
    fn apply_delete(&mut self, layout: &Layout, key: &[u8]) {
        match layout.parse_state(key) {
            Some(StateKey::Task(id)) => {
                self.forget(&id);
            }
            Some(StateKey::Worker(name)) => {
                self.workers.remove(&name);
                if self.assigned.contains_key(&name) {
                    self.gone_since.insert(name, Instant::now());
                }
            }
            Some(StateKey::Group(name)) => {
                self.groups.remove(&name);
            }
            Some(StateKey::Retention) => self.retention = Retention::default(),
            Some(StateKey::Marker) | None => {}
        }
    }

    /// Takes task `id` out of every index.
    fn forget(&mut self, id: &str) -> Option<Tracked> {
        let old = self.tasks.remove(id)?;
        self.waiting.remove(&(old.create_revision, id.to_string()));
        if let Some(worker) = &old.record.meta.worker {
            if let Some(set) = self.assigned.get_mut(worker) {
                set.remove(id);
                if set.is_empty() {
                    self.assigned.remove(worker);
                }
            }
        }
        Some(old)
    }

    /// Records task `id` as stored at `mod_revision`, unless the view
    /// already has a newer version.
    fn put_task(
        &mut self,
        id: String,
        record: TaskRecord,
        create_revision: i64,
        mod_revision: i64,
    ) {
        if self
            .tasks
            .get(&id)
            .is_some_and(|t| t.mod_revision > mod_revision)
            || self.tombstones.get(&id).is_some_and(|r| *r >= mod_revision)
        {
            return;
        }
        self.forget(&id);
        if let Some(group) = id
            .strip_prefix(super::layout::RESERVED_ID_START)
            .and_then(|rest| rest.strip_prefix("group/"))
        {
            self.mark_aggregated(group);
        }
        let state = record.meta.state;
        if let Some(group) = &record.meta.group {
            if state.is_final() {
                self.dirty_groups.insert(group.clone());
                if let Some(entry) = self.groups.get_mut(group) {
                    entry.last_change = Instant::now();
                }
            }
        }
        if state.is_final() && !self.kept_when_final(&record) {
            self.bury(id, mod_revision, &record);
            return;
        }
        if state.is_waiting() {
            self.waiting.insert((create_revision, id.clone()));
        }
        if state == TaskState::Assigned {
            if let Some(worker) = &record.meta.worker {
                self.assigned
                    .entry(worker.clone())
                    .or_default()
                    .insert(id.clone());
            }
        }
        self.tasks.insert(
            id,
            Tracked {
                record,
                create_revision,
                mod_revision,
                since: Instant::now(),
            },
        );
    }

    /// Whether a finished task must stay: it is a member of a group whose
    /// aggregator does not exist yet. A group whose record is gone was
    /// aggregated and removed by the retention (a group's record is written
    /// with its members, and a read lists groups before tasks), so its
    /// members that finish late go the way of every finished task.
    fn kept_when_final(&self, record: &TaskRecord) -> bool {
        match &record.meta.group {
            Some(group) => self.groups.get(group).is_some_and(|g| !g.aggregated),
            None => false,
        }
    }

    /// Notes that `group`'s aggregator exists, and drops its finished
    /// members.
    fn mark_aggregated(&mut self, group: &str) {
        let Some(entry) = self.groups.get_mut(group) else {
            return;
        };
        if entry.aggregated {
            return;
        }
        entry.aggregated = true;
        // The members are needed no more: keep only that the group is done.
        let members = std::mem::take(&mut entry.meta.tasks);
        for id in members {
            if self
                .tasks
                .get(&id)
                .is_some_and(|t| t.record.meta.state.is_final())
            {
                if let Some(dropped) = self.forget(&id) {
                    self.bury(id, dropped.mod_revision, &dropped.record);
                }
            }
        }
    }

    /// Remembers that finished task `id` was dropped at `mod_revision`.
    fn bury(&mut self, id: String, mod_revision: i64, record: &TaskRecord) {
        let previous = self.tombstones.insert(id.clone(), mod_revision);
        if previous != Some(mod_revision) {
            let finished_ms = match record.meta.finished_ms {
                0 => unix_ms_now(),
                ms => ms,
            };
            self.finished.push_back(Finished {
                id: id.clone(),
                mod_revision,
                dead: record.meta.state == TaskState::Dead,
                finished_ms,
            });
        }
        if previous.is_none() {
            self.tombstone_order.push_back(id);
        }
        while self.tombstone_order.len() > TOMBSTONES_MAX {
            if let Some(oldest) = self.tombstone_order.pop_front() {
                self.tombstones.remove(&oldest);
            }
        }
    }

    /// Tasks assigned to `worker` now.
    fn load(&self, worker: &str) -> usize {
        self.assigned.get(worker).map_or(0, BTreeSet::len)
    }

    /// The live worker with the fewest tasks and room for one more,
    /// counting the assignments already planned.
    fn least_loaded(&self, planned: &BTreeMap<String, usize>) -> Option<(&String, &LiveWorker)> {
        self.workers
            .iter()
            .map(|(name, worker)| {
                let load = self.load(name) + planned.get(name).copied().unwrap_or(0);
                (load, name, worker)
            })
            .filter(|(load, _, worker)| *load < worker.concurrency as usize)
            .min_by_key(|(load, name, _)| (*load, (*name).clone()))
            .map(|(_, name, worker)| (name, worker))
    }

    /// What to write next, in at most `writes_max` writes (see
    /// [`Action::writes`]): tasks of workers that are gone first, then
    /// waiting tasks in submit order, then groups whose members are all in.
    pub(crate) fn plan(&mut self, writes_max: usize) -> Vec<Action> {
        // While finished tasks are past the retention, removals get half
        // the plan, so that under a steady load they keep pace with the
        // tasks that finish (a removal of a done task takes as many writes
        // as an assignment); whatever the work leaves goes to them too.
        let mut removals = Vec::new();
        self.plan_removals(&mut removals, writes_max / 2);
        let writes_max = writes_max - removals.iter().map(Action::writes).sum::<usize>();
        let mut actions = Vec::new();
        let mut writes = 0;
        let mut planned: BTreeMap<String, usize> = BTreeMap::new();
        for (from, id) in self.tasks_to_place(writes_max / Action::WRITES_MIN) {
            let waiting = from.is_none();
            match self.place_task(from, id, &mut planned) {
                Some(action) if writes + action.writes() > writes_max => return actions,
                Some(action) => {
                    writes += action.writes();
                    actions.push(action);
                }
                // No room anywhere: waiting tasks wait; orphans of dead
                // workers still get dead-lettered when out of tries.
                None if waiting => break,
                None => {}
            }
        }
        self.plan_aggregations(&mut actions, writes_max - writes);
        let writes: usize = actions.iter().map(Action::writes).sum();
        self.plan_removals(&mut removals, writes_max.saturating_sub(writes));
        actions.extend(removals);
        actions
    }

    /// Removals of the oldest finished tasks past the queue's retention
    /// (more than `keep` of them, or older than the age limit), in at most
    /// `writes_max` writes.
    fn plan_removals(&mut self, actions: &mut Vec<Action>, mut writes_max: usize) {
        let now_ms = unix_ms_now();
        let max_age = self.retention.max_age();
        while let Some(oldest) = self.finished.front() {
            let over_count = self.finished.len() as u64 > self.retention.keep;
            let too_old = max_age.is_some_and(|age| {
                u128::from(now_ms.saturating_sub(oldest.finished_ms)) > age.as_millis()
            });
            if !over_count && !too_old {
                break;
            }
            let group = oldest
                .id
                .strip_prefix(super::layout::RESERVED_ID_START)
                .and_then(|rest| rest.strip_prefix("group/"))
                .map(str::to_string);
            let action = Action::Remove {
                id: oldest.id.clone(),
                expected: oldest.mod_revision,
                dead: oldest.dead,
                group,
                finished_ms: oldest.finished_ms,
            };
            if action.writes() > writes_max {
                break;
            }
            writes_max -= action.writes();
            self.finished.pop_front();
            actions.push(action);
        }
    }

    /// Puts the finished tasks a read found in the order they finished
    /// (a read lists them by id), each with the finish time `previous`,
    /// the view before the read, had for it: so the age of a record that
    /// carries no finish time of its own counts across the leader's
    /// periodic reads.
    pub(crate) fn after_read(&mut self, previous: Option<&QueueView>) {
        let seen: std::collections::HashMap<(&str, i64), u64> = previous
            .map(|p| {
                p.finished
                    .iter()
                    .map(|f| ((f.id.as_str(), f.mod_revision), f.finished_ms))
                    .collect()
            })
            .unwrap_or_default();
        for entry in &mut self.finished {
            if let Some(finished_ms) = seen.get(&(entry.id.as_str(), entry.mod_revision)) {
                entry.finished_ms = entry.finished_ms.min(*finished_ms);
            }
        }
        self.finished
            .make_contiguous()
            .sort_by_key(|f| (f.mod_revision, f.id.clone()));
    }

    /// Finished tasks still stored, as far as this view knows.
    #[cfg(test)]
    pub(crate) fn finished_len(&self) -> usize {
        self.finished.len()
    }

    /// The tasks that need a worker, each with the gone worker it leaves
    /// (`None` for a waiting task): every task of a worker that is gone,
    /// then waiting tasks in submit order.
    fn tasks_to_place(&self, max_actions: usize) -> Vec<(Option<String>, String)> {
        // Tasks whose worker is gone: to another worker, or dead.
        let orphaned: Vec<(String, String)> = self
            .assigned
            .iter()
            .filter(|(worker, _)| !self.workers.contains_key(*worker))
            .flat_map(|(worker, ids)| ids.iter().map(move |id| (worker.clone(), id.clone())))
            .collect();
        orphaned
            .into_iter()
            .map(|(worker, id)| (Some(worker), id))
            // Only as many waiting tasks as one plan can take: the rest
            // wait for the next plan, so a deep queue costs nothing here.
            .chain(
                self.waiting
                    .iter()
                    .take(max_actions)
                    .map(|(_, id)| (None, id.clone())),
            )
            .collect()
    }

    /// The write for task `id`, which leaves worker `from` (gone) or waits
    /// (`None`): to the dead letters when it is out of attempts, else to
    /// the least loaded worker with room, counting the assignment in
    /// `planned`. `None` when it needs a worker and none has room.
    fn place_task(
        &self,
        from: Option<String>,
        id: String,
        planned: &mut BTreeMap<String, usize>,
    ) -> Option<Action> {
        let tracked = &self.tasks[&id];
        let ended = match &from {
            Some(_) => tracked.record.ended(
                tracked.mod_revision,
                "worker lost",
                tracked.record.after_failure(),
            ),
            None => tracked.record.clone(),
        };
        if ended.meta.state == TaskState::Dead || ended.meta.attempt >= ended.meta.max_attempts {
            let mut record = ended;
            record.meta.state = TaskState::Dead;
            record.stamp_if_finished();
            return Some(Action::DeadLetter {
                id,
                record,
                expected: tracked.mod_revision,
                from,
            });
        }
        let (name, worker) = self.least_loaded(planned)?;
        let mut record = ended;
        record.meta.state = TaskState::Assigned;
        record.meta.attempt += 1;
        record.meta.worker = Some(name.clone());
        *planned.entry(name.clone()).or_default() += 1;
        Some(Action::Assign {
            id,
            record,
            expected: tracked.mod_revision,
            worker: name.clone(),
            worker_created: worker.create_revision,
            from,
        })
    }

    /// Adds to `actions` the aggregators of the dirty groups whose members
    /// are all in, while the plan has room; the groups it does not reach
    /// stay dirty for the next plan.
    fn plan_aggregations(&mut self, actions: &mut Vec<Action>, mut writes_left: usize) {
        // Aggregators carry up to 1 MiB each: at most one per txn when it
        // is large, so that a txn stays under etcd's request bound.
        let mut aggregate_bytes = 0;
        let dirty = std::mem::take(&mut self.dirty_groups);
        for group in dirty {
            if writes_left < Action::AGGREGATE_WRITES || aggregate_bytes >= AGGREGATE_BYTES_PER_PLAN
            {
                self.dirty_groups.insert(group);
                continue;
            }
            if let Some(action) = self.aggregation(&group) {
                if let Action::Aggregate { payload, .. } = &action {
                    aggregate_bytes += payload.len();
                }
                writes_left -= action.writes();
                actions.push(action);
            }
        }
    }

    /// Plans `actions` again later: they were not written (their write
    /// failed before the store answered, or the plan had more txns than
    /// go out at once). Assignments are planned again from the tasks the
    /// view still follows; aggregations and removals are put back, the
    /// removals at the head of the line, oldest first, as they were taken
    /// from it (lost, they would stay in the store until the next full
    /// read, and the kept count crept up under load).
    pub(crate) fn replan(&mut self, actions: &[Action]) {
        for action in actions.iter().rev() {
            match action {
                Action::Aggregate { group, .. } => {
                    self.dirty_groups.insert(group.clone());
                }
                Action::Remove {
                    id,
                    expected,
                    dead,
                    finished_ms,
                    ..
                } => self.finished.push_front(Finished {
                    id: id.clone(),
                    mod_revision: *expected,
                    dead: *dead,
                    finished_ms: *finished_ms,
                }),
                Action::Assign { .. } | Action::DeadLetter { .. } => {}
            }
        }
    }

    /// The aggregator of `group`, if its members are all in (or too many
    /// failed) and it does not exist yet.
    fn aggregation(&self, group: &str) -> Option<Action> {
        let entry = self.groups.get(group)?;
        if entry.aggregated {
            return None;
        }
        let mut results = Vec::with_capacity(entry.meta.tasks.len());
        let mut unfinished = 0usize;
        let mut dead = 0usize;
        for id in &entry.meta.tasks {
            match self.tasks.get(id) {
                Some(t) if t.record.meta.state == TaskState::Done => {
                    results.push(MemberResult::new(id, "done", &t.record.result));
                }
                Some(t) if t.record.meta.state == TaskState::Dead => {
                    dead += 1;
                    results.push(MemberResult::new(id, "dead", b""));
                }
                _ => {
                    unfinished += 1;
                    results.push(MemberResult::new(id, "unfinished", b""));
                }
            }
        }
        if unfinished > 0 && dead <= entry.meta.failures_allowed as usize {
            return None;
        }
        let mut input = GroupInput {
            group: group.to_string(),
            aggregator: entry.meta.aggregator.clone(),
            results,
        };
        let mut payload = serde_json::to_vec(&input).expect("group input serialises");
        if payload.len() > DATA_BYTES_MAX {
            // Too large to hand over whole: the ids and states only; the
            // aggregator reads each result itself.
            for member in &mut input.results {
                member.result = None;
                member.result_hex = None;
            }
            payload = serde_json::to_vec(&input).expect("group input serialises");
        }
        if payload.len() > DATA_BYTES_MAX {
            // Even the ids are too many: the aggregator reads the group.
            input.results.clear();
            payload = serde_json::to_vec(&input).expect("group input serialises");
        }
        Some(Action::Aggregate {
            group: group.to_string(),
            id: Layout::aggregator_id(group),
            record: TaskRecord::pending(entry.meta.max_attempts, None),
            payload,
        })
    }

    /// Records that `actions` were written at `revision`.
    /// Returns how long each took.
    pub(crate) fn applied(&mut self, actions: &[Action], revision: i64) -> Vec<Latency> {
        let now = Instant::now();
        let mut latencies = Vec::with_capacity(actions.len());
        for action in actions {
            match action {
                Action::Assign {
                    id, record, from, ..
                }
                | Action::DeadLetter {
                    id, record, from, ..
                } => {
                    let tracked = self.tasks.get(id);
                    let created = tracked.map_or(revision, |t| t.create_revision);
                    let latency = match from {
                        Some(worker) => self
                            .gone_since
                            .get(worker)
                            .map(|since| Latency::Reassignment(now - *since)),
                        None => tracked.map(|t| Latency::Assignment(now - t.since)),
                    };
                    latencies.extend(latency);
                    self.put_task(id.clone(), record.clone(), created, revision);
                }
                Action::Aggregate {
                    group, id, record, ..
                } => {
                    if let Some(entry) = self.groups.get(group) {
                        latencies.push(Latency::GroupCompletion(now - entry.last_change));
                    }
                    self.mark_aggregated(group);
                    // The aggregator is a pending task now: the next plan
                    // assigns it without waiting for the watch to bring it.
                    self.put_task(id.clone(), record.clone(), revision, revision);
                }
                // Its delete comes back through the watch; the view
                // follows the task no more already.
                Action::Remove { .. } => {}
            }
        }
        let assigned = &self.assigned;
        self.gone_since
            .retain(|worker, _| assigned.contains_key(worker));
        latencies
    }

    /// Replaces what the view knows of task `id` with the store's current
    /// record (`None`: no record), after a write planned from the view was
    /// refused.
    pub(crate) fn refresh_task(&mut self, id: &str, current: Option<&mvccpb::KeyValue>) {
        match current {
            Some(kv) => {
                if let Ok(record) = TaskRecord::decode(&kv.value) {
                    self.forget(id);
                    self.tombstones.remove(id);
                    self.put_task(id.to_string(), record, kv.create_revision, kv.mod_revision);
                }
            }
            None => {
                self.forget(id);
            }
        }
    }

    /// Notes that worker `name` is gone (its key was not found).
    pub(crate) fn worker_gone(&mut self, name: &str) {
        if self.workers.remove(name).is_some() && self.assigned.contains_key(name) {
            self.gone_since.insert(name.to_string(), Instant::now());
        }
    }

    /// Notes that `group`'s aggregator already exists (its create was
    /// refused).
    pub(crate) fn aggregator_exists(&mut self, group: &str) {
        self.mark_aggregated(group);
    }

    /// Tasks followed, workers live, and tasks waiting: for logs and tests.
    #[cfg(test)]
    pub(crate) fn sizes(&self) -> (usize, usize, usize) {
        (self.tasks.len(), self.workers.len(), self.waiting.len())
    }
}

#[cfg(test)]
mod tests;
