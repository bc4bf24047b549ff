//! The leader's decisions, without a store: assignment, reassignment,
//! dead letters and group aggregation.

use super::*;
use crate::tasks::record::{GroupMeta, TaskRecord, TaskState, WorkerMeta};

/// A view of queue `q` and a clock of revisions.
struct Fixture {
    layout: Layout,
    view: QueueView,
    revision: i64,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            layout: Layout::new("q").unwrap(),
            view: QueueView::default(),
            revision: 1,
        }
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>, created: Option<i64>) -> i64 {
        self.revision += 1;
        let kv = mvccpb::KeyValue {
            key,
            value,
            create_revision: created.unwrap_or(self.revision),
            mod_revision: self.revision,
            ..mvccpb::KeyValue::default()
        };
        self.view.apply_put(&self.layout, &kv);
        self.revision
    }

    fn submit(&mut self, id: &str, max_attempts: u32, group: Option<&str>) {
        let record = TaskRecord::pending(max_attempts, group.map(str::to_string));
        self.put(self.layout.task(id), record.encode(), None);
    }

    fn worker(&mut self, name: &str, concurrency: u32) {
        let meta = serde_json::to_vec(&WorkerMeta { concurrency }).unwrap();
        self.put(self.layout.worker(name), meta, None);
    }

    fn kill(&mut self, name: &str) {
        self.delete(self.layout.worker(name));
    }

    /// A key's delete, as the watch brings it.
    fn delete(&mut self, key: Vec<u8>) {
        self.revision += 1;
        let event = mvccpb::Event {
            r#type: mvccpb::event::EventType::Delete as i32,
            kv: Some(mvccpb::KeyValue {
                key,
                mod_revision: self.revision,
                ..mvccpb::KeyValue::default()
            }),
            prev_kv: None,
        };
        self.view.apply_event(&self.layout, &event);
    }

    /// Plans and applies everything, as a leader whose txns all succeed.
    fn step(&mut self) -> Vec<Action> {
        let actions = self.view.plan(1000);
        self.revision += 1;
        let latencies = self.view.applied(&actions, self.revision);
        let timed = actions
            .iter()
            .filter(|a| !matches!(a, Action::Remove { .. }))
            .count();
        assert_eq!(
            latencies.len(),
            timed,
            "one latency per action but removals"
        );
        actions
    }

    /// A step whose removals the watch then brings back as deletes (of
    /// the task, and of an aggregator's group): the removals.
    fn step_removing(&mut self) -> Vec<(String, Option<String>)> {
        let gone = removed(&self.step());
        for (id, group) in &gone {
            self.delete(self.layout.task(id));
            if let Some(group) = group {
                self.delete(self.layout.group(group));
            }
        }
        gone
    }

    /// A worker's accepted result for `id`.
    fn finish(&mut self, id: &str, state: TaskState) {
        let tracked = self.view.tasks[id].clone();
        let mut record = tracked.record.ended(tracked.mod_revision, "done", state);
        record.result = format!("result of {id}").into_bytes();
        self.put(
            self.layout.task(id),
            record.encode(),
            Some(tracked.create_revision),
        );
    }
}

fn assigned_to(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Assign { id, worker, .. } => Some((id.clone(), worker.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn tasks_go_to_the_least_loaded_worker_within_its_concurrency() {
    let mut f = Fixture::new();
    f.worker("a", 2);
    f.worker("b", 1);
    for id in ["t1", "t2", "t3", "t4"] {
        f.submit(id, 5, None);
    }
    let first = assigned_to(&f.step());
    assert_eq!(first.len(), 3, "a has room for 2, b for 1: {first:?}");
    assert_eq!(first.iter().filter(|(_, w)| w == "a").count(), 2);
    assert_eq!(first[0].0, "t1", "submit order");
    assert!(f.step().is_empty(), "no room left: t4 waits");
    f.finish("t1", TaskState::Done);
    let second = assigned_to(&f.step());
    assert_eq!(second, vec![("t4".to_string(), "a".to_string())]);
}

#[test]
fn a_dead_workers_tasks_move_with_one_more_attempt_and_a_history() {
    let mut f = Fixture::new();
    f.worker("a", 1);
    f.submit("t", 5, None);
    f.step();
    let token = f.view.tasks["t"].mod_revision;
    f.worker("b", 1);
    f.kill("a");
    let actions = f.step();
    let Action::Assign {
        record,
        worker,
        from,
        ..
    } = &actions[0]
    else {
        panic!("expected a reassignment: {actions:?}");
    };
    assert_eq!((worker.as_str(), from.as_deref()), ("b", Some("a")));
    assert_eq!(record.meta.attempt, 2);
    assert_eq!(record.meta.history[0].token, token);
    assert_eq!(record.meta.history[0].outcome, "worker lost");
}

#[test]
fn a_task_out_of_attempts_is_dead_lettered_even_with_no_worker_left() {
    let mut f = Fixture::new();
    f.worker("a", 1);
    f.submit("poison", 1, None);
    f.step();
    f.kill("a");
    let actions = f.step();
    assert!(
        matches!(&actions[..], [Action::DeadLetter { record, from: Some(w), .. }]
            if record.meta.state == TaskState::Dead && w == "a"),
        "{actions:?}"
    );
    assert_eq!(f.view.sizes().0, 0, "a dead task is no longer followed");
}

#[test]
fn a_group_is_aggregated_once_when_all_results_are_in() {
    let mut f = Fixture::new();
    f.worker("a", 10);
    let meta = GroupMeta {
        tasks: vec!["g.0".into(), "g.1".into()],
        failures_allowed: 0,
        aggregator: "sum".into(),
        max_attempts: 5,
    };
    f.put(
        f.layout.group("g"),
        serde_json::to_vec(&meta).unwrap(),
        None,
    );
    f.submit("g.0", 5, Some("g"));
    f.submit("g.1", 5, Some("g"));
    f.step();
    f.finish("g.0", TaskState::Done);
    assert!(assigned_to(&f.step()).is_empty());
    assert!(!f
        .step()
        .iter()
        .any(|a| matches!(a, Action::Aggregate { .. })));
    f.finish("g.1", TaskState::Done);
    let last_result = mvccpb::KeyValue {
        key: f.layout.task("g.1"),
        value: f.view.tasks["g.1"].record.encode(),
        create_revision: f.view.tasks["g.1"].create_revision,
        mod_revision: f.view.tasks["g.1"].mod_revision,
        ..mvccpb::KeyValue::default()
    };
    let actions = f.step();
    let aggregations: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Aggregate { id, payload, .. } => Some((id.clone(), payload.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(aggregations.len(), 1, "{actions:?}");
    let input: GroupInput = serde_json::from_slice(&aggregations[0].1).unwrap();
    assert_eq!(input.results.len(), 2);
    assert_eq!(input.results[1].result.as_deref(), Some("result of g.1"));
    assert_eq!(aggregations[0].0, "~group/g");
    // The same event seen again (a watch replay) aggregates nothing more,
    // and the aggregator is assigned at once, before its own watch event.
    f.view.apply_put(&f.layout, &last_result);
    let next = f.step();
    assert!(!next.iter().any(|a| matches!(a, Action::Aggregate { .. })));
    assert_eq!(
        assigned_to(&next),
        [("~group/g".to_string(), "a".to_string())]
    );
    assert_eq!(
        f.view.sizes().0,
        1,
        "the members are dropped once aggregated; the aggregator remains"
    );
}

#[test]
fn an_empty_group_is_aggregated_at_once() {
    let mut f = Fixture::new();
    let meta = GroupMeta {
        tasks: Vec::new(),
        failures_allowed: 0,
        aggregator: String::new(),
        max_attempts: 5,
    };
    f.put(
        f.layout.group("empty"),
        serde_json::to_vec(&meta).unwrap(),
        None,
    );
    let actions = f.step();
    assert!(
        matches!(&actions[..], [Action::Aggregate { .. }]),
        "{actions:?}"
    );
}

#[test]
fn an_older_version_of_a_record_does_not_overwrite_a_newer_one() {
    let mut f = Fixture::new();
    f.worker("a", 1);
    f.submit("t", 5, None);
    let stale = mvccpb::KeyValue {
        key: f.layout.task("t"),
        value: TaskRecord::pending(5, None).encode(),
        create_revision: 3,
        mod_revision: 3,
        ..mvccpb::KeyValue::default()
    };
    f.step();
    f.view.apply_put(&f.layout, &stale);
    assert!(
        f.step().is_empty(),
        "the stale pending version must not be assigned again"
    );
}

#[test]
fn a_replayed_event_does_not_bring_back_a_finished_task() {
    let mut f = Fixture::new();
    f.worker("a", 1);
    f.submit("t", 5, None);
    let pending = mvccpb::KeyValue {
        key: f.layout.task("t"),
        value: TaskRecord::pending(5, None).encode(),
        create_revision: f.revision,
        mod_revision: f.revision,
        ..mvccpb::KeyValue::default()
    };
    f.step();
    f.finish("t", TaskState::Done);
    assert_eq!(f.view.sizes().0, 0);
    // A watch opened before a read replays the submit.
    f.view.apply_put(&f.layout, &pending);
    assert_eq!(f.view.sizes().0, 0, "the finished task came back");
    assert!(f.step().is_empty());
}

#[test]
fn a_refused_write_is_put_right_by_reading_the_task() {
    let mut f = Fixture::new();
    f.worker("a", 1);
    f.submit("t", 5, None);
    let actions = f.view.plan(10);
    assert_eq!(actions.len(), 1);
    // The store says the task is done already (a view that was behind).
    let mut done = TaskRecord::pending(5, None);
    done.meta.state = TaskState::Done;
    let current = mvccpb::KeyValue {
        key: f.layout.task("t"),
        value: done.encode(),
        create_revision: 3,
        mod_revision: 50,
        ..mvccpb::KeyValue::default()
    };
    f.view.refresh_task("t", Some(&current));
    assert!(f.view.plan(10).is_empty(), "nothing left to assign");
}

#[test]
fn a_plan_fills_but_never_overfills_a_txn_of_writes() {
    let mut f = Fixture::new();
    f.worker("a", 1000);
    for i in 0..200 {
        f.submit(&format!("t{i:03}"), 5, None);
    }
    let fresh = f.view.plan(128);
    assert_eq!(fresh.len(), 64, "a fresh assignment is two writes");
    assert_eq!(fresh.iter().map(Action::writes).sum::<usize>(), 128);
    f.revision += 1;
    f.view.applied(&fresh, f.revision);
    // The worker dies with 64 tasks: moving one also deletes the entry in
    // its old inbox, three writes.
    f.worker("b", 1000);
    f.kill("a");
    let moved = f.view.plan(128);
    assert_eq!(moved.len(), 42, "{} actions", moved.len());
    assert!(moved
        .iter()
        .all(|a| matches!(a, Action::Assign { from: Some(_), .. })));
    assert_eq!(moved.iter().map(Action::writes).sum::<usize>(), 126);
}

fn removed(actions: &[Action]) -> Vec<(String, Option<String>)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove { id, group, .. } => Some((id.clone(), group.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn finished_tasks_past_the_retention_are_removed_oldest_first() {
    let mut f = Fixture::new();
    let retention = Retention {
        keep: 3,
        max_age_seconds: 0,
    };
    f.put(
        f.layout.retention(),
        serde_json::to_vec(&retention).unwrap(),
        None,
    );
    f.worker("w", 10);
    for i in 0..6 {
        f.submit(&format!("t{i}"), 5, None);
    }
    assert!(removed(&f.step()).is_empty(), "nothing finished yet");
    let mut finished_at = Vec::new();
    for i in 0..6 {
        let id = format!("t{i}");
        f.finish(
            &id,
            if i == 4 {
                TaskState::Dead
            } else {
                TaskState::Done
            },
        );
        finished_at.push(f.revision);
    }
    let actions = f.step();
    assert_eq!(
        removed(&actions),
        vec![
            ("t0".into(), None),
            ("t1".into(), None),
            ("t2".into(), None)
        ]
    );
    let expected: Vec<i64> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Remove { expected, .. } => Some(*expected),
            _ => None,
        })
        .collect();
    assert_eq!(
        expected,
        finished_at[..3],
        "each compares the finished record"
    );
    assert_eq!(f.view.finished_len(), 3);
    assert!(removed(&f.step()).is_empty(), "the newest 3 stay");
}

#[test]
fn removing_an_aggregator_removes_its_group_and_a_default_queue_keeps_its_history() {
    let mut f = Fixture::new();
    let aggregator = Layout::aggregator_id("g");
    let value = TaskRecord::pending(5, None)
        .ended(1, "done", TaskState::Done)
        .encode();
    f.put(f.layout.task(&aggregator), value.clone(), None);
    f.put(f.layout.task("later"), value, None);
    assert!(removed(&f.step()).is_empty(), "the default keeps 100,000");
    let retention = Retention {
        keep: 1,
        max_age_seconds: 0,
    };
    f.put(
        f.layout.retention(),
        serde_json::to_vec(&retention).unwrap(),
        None,
    );
    assert_eq!(removed(&f.step()), vec![(aggregator, Some("g".into()))]);
}

#[test]
fn a_read_lists_finished_tasks_in_finish_order_and_keeps_their_ages() {
    let layout = Layout::new("q").unwrap();
    // Records written before finish times existed carry none: their age
    // counts from when a leader first saw them.
    let finished = |id: &str, revision: i64| {
        let mut record = TaskRecord::pending(5, None).ended(1, "done", TaskState::Done);
        record.meta.finished_ms = 0;
        mvccpb::KeyValue {
            key: layout.task(id),
            value: record.encode(),
            create_revision: 1,
            mod_revision: revision,
            ..mvccpb::KeyValue::default()
        }
    };
    let mut first = QueueView::default();
    first.apply_put(&layout, &finished("b", 7));
    first.after_read(None);
    let seen_at = first.finished[0].finished_ms;
    std::thread::sleep(Duration::from_millis(5));
    // A read lists by id: "a" (finished later) before "b".
    let mut second = QueueView::default();
    for kv in [finished("a", 9), finished("b", 7)] {
        second.apply_put(&layout, &kv);
    }
    second.after_read(Some(&first));
    let order: Vec<&str> = second.finished.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(order, ["b", "a"], "oldest finished first");
    assert_eq!(second.finished[0].finished_ms, seen_at, "b keeps its age");
    assert!(
        second.finished[1].finished_ms > seen_at,
        "a is new to the leader"
    );
}

#[test]
fn a_new_leader_counts_ages_from_each_records_finish_time() {
    let layout = Layout::new("q").unwrap();
    let now = unix_ms_now();
    let finished = |id: &str, revision: i64, finished_ms: u64| {
        let mut record = TaskRecord::pending(5, None).ended(1, "done", TaskState::Done);
        assert!(
            record.meta.finished_ms >= now,
            "a finished record is stamped"
        );
        record.meta.finished_ms = finished_ms;
        mvccpb::KeyValue {
            key: layout.task(id),
            value: record.encode(),
            create_revision: 1,
            mod_revision: revision,
            ..mvccpb::KeyValue::default()
        }
    };
    let retention = Retention {
        keep: 100,
        max_age_seconds: 60,
    };
    // The first read of a leader that has just taken over: no view before.
    let mut view = QueueView::default();
    view.apply_put(
        &layout,
        &mvccpb::KeyValue {
            key: layout.retention(),
            value: serde_json::to_vec(&retention).unwrap(),
            ..mvccpb::KeyValue::default()
        },
    );
    view.apply_put(&layout, &finished("old", 5, now - 120_000));
    view.apply_put(&layout, &finished("recent", 6, now - 1_000));
    view.apply_put(&layout, &finished("unstamped", 7, 0));
    view.after_read(None);
    let removed = removed(&view.plan(1000));
    assert_eq!(
        removed,
        [("old".to_string(), None)],
        "only the task finished 120 s ago is past 60 s"
    );
}

#[test]
fn a_group_member_that_finishes_after_its_group_was_removed_is_removed_in_turn() {
    let mut f = Fixture::new();
    let retention = Retention {
        keep: 1,
        max_age_seconds: 0,
    };
    f.put(
        f.layout.retention(),
        serde_json::to_vec(&retention).unwrap(),
        None,
    );
    f.worker("a", 10);
    let meta = GroupMeta {
        tasks: vec!["g.0".into(), "g.1".into()],
        failures_allowed: 0,
        aggregator: "sum".into(),
        max_attempts: 5,
    };
    f.put(
        f.layout.group("g"),
        serde_json::to_vec(&meta).unwrap(),
        None,
    );
    f.submit("g.0", 5, Some("g"));
    f.submit("g.1", 5, Some("g"));
    f.step();
    // One member dead with none allowed: the group is aggregated while
    // g.1 still runs.
    f.finish("g.0", TaskState::Dead);
    let actions = f.step();
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Aggregate { .. })),
        "{actions:?}"
    );
    let aggregator = Layout::aggregator_id("g");
    f.step();
    f.finish(&aggregator, TaskState::Done);
    f.submit("x", 5, None);
    let mut gone = f.step_removing();
    f.finish("x", TaskState::Done);
    gone.extend(f.step_removing());
    // Keep 1: g.0 and then the aggregator (with its group) have gone.
    assert_eq!(
        gone,
        [
            ("g.0".to_string(), None),
            (aggregator, Some("g".to_string()))
        ]
    );
    // g.1 ends now: it is no longer needed by anything, so it is removed
    // like any finished task once a newer one finishes.
    f.finish("g.1", TaskState::Done);
    assert!(!f.view.tasks.contains_key("g.1"), "no longer followed");
    assert_eq!(f.step_removing(), [("x".to_string(), None)]);
    f.submit("y", 5, None);
    f.step();
    f.finish("y", TaskState::Done);
    assert_eq!(f.step_removing(), [("g.1".to_string(), None)]);
}

#[test]
fn removals_that_were_not_written_are_planned_again_first_in_order() {
    let mut f = Fixture::new();
    let retention = Retention {
        keep: 1,
        max_age_seconds: 0,
    };
    f.put(
        f.layout.retention(),
        serde_json::to_vec(&retention).unwrap(),
        None,
    );
    f.worker("w", 10);
    for i in 0..5 {
        f.submit(&format!("t{i}"), 5, None);
    }
    f.step();
    for i in 0..5 {
        f.finish(&format!("t{i}"), TaskState::Done);
    }
    let planned = f.view.plan(1000);
    let ids: Vec<String> = removed(&planned).into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["t0", "t1", "t2", "t3"]);
    assert_eq!(f.view.finished_len(), 1, "taken from the line");
    // None of them was written (a fifth txn, or a failed write).
    f.view.replan(&planned);
    assert_eq!(f.view.finished_len(), 5, "back in line");
    let again: Vec<String> = removed(&f.view.plan(1000))
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(again, ids, "the same removals, oldest first");
}
