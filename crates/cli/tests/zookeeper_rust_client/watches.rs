//! Scenarios on watches: one-shot data, exists and child watches with the
//! events each change fires (and does not fire), persistent and
//! persistent-recursive watches (addWatch).

use super::run::{open, Run, Scenario, Steps};
use zookeeper_client as zk;

pub const SCENARIOS: &[Scenario] = &[
    ("watch_data_on_set", watch_data_on_set),
    ("watch_data_on_delete", watch_data_on_delete),
    ("watch_exists_on_create", watch_exists_on_create),
    (
        "watch_exists_on_set_and_delete",
        watch_exists_on_set_and_delete,
    ),
    (
        "watch_children_on_create_delete",
        watch_children_on_create_delete,
    ),
    (
        "watch_children_on_parent_delete",
        watch_children_on_parent_delete,
    ),
    ("watch_data_ignores_children", watch_data_ignores_children),
    ("watch_children_ignore_data", watch_children_ignore_data),
    ("watch_own_change", watch_own_change),
    ("watch_multi_fires_each", watch_multi_fires_each),
    ("watch_persistent", watch_persistent),
    ("watch_persistent_recursive", watch_persistent_recursive),
];

fn watch_data_on_set(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let n = run.path("n");
        run.op("create n", s1.create(&n, b"a", &persistent)).await;
        let Some((_, _, watcher)) = run
            .op("s1 getData n watch", s1.get_and_watch_data(&n))
            .await
        else {
            return;
        };
        run.op("s2 setData n", s2.set_data(&n, b"b", None)).await;
        run.event("s1 event", watcher.changed()).await;
        let Some((_, _, watcher)) = run
            .op("s1 getData n watch again", s1.get_and_watch_data(&n))
            .await
        else {
            return;
        };
        run.op("s2 setData n version 1", s2.set_data(&n, b"c", Some(1)))
            .await;
        run.event("s1 event", watcher.changed()).await;
    })
}

fn watch_data_on_delete(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let n = run.path("n");
        run.op("create n", s1.create(&n, b"a", &persistent)).await;
        let Some((_, _, watcher)) = run
            .op("s1 getData n watch", s1.get_and_watch_data(&n))
            .await
        else {
            return;
        };
        run.op("s2 delete n", s2.delete(&n, None)).await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s1 getData n", s1.get_data(&n)).await;
    })
}

fn watch_exists_on_create(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let n = run.path("n");
        let Some((stat, watcher)) = run
            .op("s1 exists n watch", s1.check_and_watch_stat(&n))
            .await
        else {
            return;
        };
        let _ = stat;
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op("s2 create ephemeral n", s2.create(&n, b"e", &ephemeral))
            .await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s1 exists n", s1.check_stat(&n)).await;
    })
}

fn watch_exists_on_set_and_delete(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let n = run.path("n");
        run.op("create n", s1.create(&n, b"a", &persistent)).await;
        let Some((_, watcher)) = run
            .op("s1 exists n watch", s1.check_and_watch_stat(&n))
            .await
        else {
            return;
        };
        run.op("s2 setData n", s2.set_data(&n, b"b", None)).await;
        run.event("s1 event", watcher.changed()).await;
        let Some((_, watcher)) = run
            .op("s1 exists n watch again", s1.check_and_watch_stat(&n))
            .await
        else {
            return;
        };
        run.op("s2 delete n", s2.delete(&n, None)).await;
        run.event("s1 event", watcher.changed()).await;
    })
}

fn watch_children_on_create_delete(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        run.op("create p", s1.create(&p, b"", &persistent)).await;
        let Some((_, _, watcher)) = run
            .op("s1 getChildren2 p watch", s1.get_and_watch_children(&p))
            .await
        else {
            return;
        };
        run.op(
            "s2 create p/a",
            s2.create(&run.path("p/a"), b"", &persistent),
        )
        .await;
        run.event("s1 event", watcher.changed()).await;
        let Some((_, watcher)) = run
            .op("s1 getChildren p watch", s1.list_and_watch_children(&p))
            .await
        else {
            return;
        };
        run.op("s2 delete p/a", s2.delete(&run.path("p/a"), None))
            .await;
        run.event("s1 event", watcher.changed()).await;
    })
}

fn watch_children_on_parent_delete(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        run.op("create p", s1.create(&p, b"", &persistent)).await;
        let Some((_, watcher)) = run
            .op("s1 getChildren p watch", s1.list_and_watch_children(&p))
            .await
        else {
            return;
        };
        run.op("s2 delete p", s2.delete(&p, None)).await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s1 getChildren p", s1.list_children(&p)).await;
    })
}

fn watch_data_ignores_children(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        run.op("create p", s1.create(&p, b"", &persistent)).await;
        let Some((_, _, watcher)) = run
            .op("s1 getData p watch", s1.get_and_watch_data(&p))
            .await
        else {
            return;
        };
        let mut changed = Box::pin(watcher.changed());
        run.op(
            "s2 create p/c",
            s2.create(&run.path("p/c"), b"", &persistent),
        )
        .await;
        run.quiet("s1 event after child create", &mut changed).await;
        run.op("s2 setData p", s2.set_data(&p, b"x", None)).await;
        run.event("s1 event after setData", changed).await;
    })
}

fn watch_children_ignore_data(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        run.op("create p", s1.create(&p, b"", &persistent)).await;
        run.op("create p/c", s1.create(&run.path("p/c"), b"", &persistent))
            .await;
        let Some((_, watcher)) = run
            .op("s1 getChildren p watch", s1.list_and_watch_children(&p))
            .await
        else {
            return;
        };
        let mut changed = Box::pin(watcher.changed());
        run.op("s2 setData p", s2.set_data(&p, b"x", None)).await;
        run.op("s2 setData p/c", s2.set_data(&run.path("p/c"), b"x", None))
            .await;
        run.quiet("s1 event after setData", &mut changed).await;
        run.op(
            "s2 create ephemeral p/e",
            s2.create(&run.path("p/e"), b"", &open(zk::CreateMode::Ephemeral)),
        )
        .await;
        run.event("s1 event after child create", changed).await;
    })
}

fn watch_own_change(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let n = run.path("n");
        run.op("create n", s1.create(&n, b"a", &persistent)).await;
        let Some((_, _, watcher)) = run
            .op("s1 getData n watch", s1.get_and_watch_data(&n))
            .await
        else {
            return;
        };
        run.op("s1 setData n", s1.set_data(&n, b"b", None)).await;
        run.event("s1 event", watcher.changed()).await;
    })
}

fn watch_multi_fires_each(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let (a, b) = (run.path("a"), run.path("b"));
        run.op("create a", s1.create(&a, b"", &persistent)).await;
        let Some((_, _, data)) = run
            .op("s1 getData a watch", s1.get_and_watch_data(&a))
            .await
        else {
            return;
        };
        let Some((_, exists)) = run
            .op("s1 exists b watch", s1.check_and_watch_stat(&b))
            .await
        else {
            return;
        };
        let Some((_, children)) = run
            .op(
                "s1 getChildren . watch",
                s1.list_and_watch_children(&run.path(".")),
            )
            .await
        else {
            return;
        };
        let mut multi = s2.new_multi_writer();
        multi.add_set_data(&a, b"x", None).unwrap();
        multi.add_create(&b, b"", &persistent).unwrap();
        run.op("s2 multi set a+create b", multi.commit()).await;
        run.event("s1 data event", data.changed()).await;
        run.event("s1 exists event", exists.changed()).await;
        run.event("s1 child event", children.changed()).await;
    })
}

fn watch_persistent(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        let Some(mut watcher) = run
            .op(
                "s1 addWatch p persistent",
                s1.watch(&p, zk::AddWatchMode::Persistent),
            )
            .await
        else {
            return;
        };
        run.op("s2 create p", s2.create(&p, b"", &persistent)).await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s2 setData p", s2.set_data(&p, b"1", None)).await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s2 setData p", s2.set_data(&p, b"2", None)).await;
        run.event("s1 event", watcher.changed()).await;
        run.op(
            "s2 create p/c",
            s2.create(&run.path("p/c"), b"", &persistent),
        )
        .await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s2 setData p/c", s2.set_data(&run.path("p/c"), b"x", None))
            .await;
        run.quiet(
            "s1 event after child setData",
            &mut Box::pin(watcher.changed()),
        )
        .await;
        run.op("s2 delete p/c", s2.delete(&run.path("p/c"), None))
            .await;
        run.event("s1 event", watcher.changed()).await;
        run.op("s2 delete p", s2.delete(&p, None)).await;
        run.event("s1 event", watcher.changed()).await;
    })
}

fn watch_persistent_recursive(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        let mode = zk::AddWatchMode::PersistentRecursive;
        let Some(mut watcher) = run.op("s1 addWatch p recursive", s1.watch(&p, mode)).await else {
            return;
        };
        let steps: [(&str, &str, Option<&[u8]>); 6] = [
            ("s2 create p", "p", None),
            ("s2 create p/a", "p/a", None),
            ("s2 setData p/a", "p/a", Some(b"x")),
            ("s2 create p/a/b", "p/a/b", None),
            ("s2 setData p", "p", Some(b"y")),
            ("s2 create p/a/b/c", "p/a/b/c", None),
        ];
        for (step, relative, data) in steps {
            let path = run.path(relative);
            match data {
                None => run
                    .op(step, s2.create(&path, b"", &persistent))
                    .await
                    .map(|_| ()),
                Some(data) => run
                    .op(step, s2.set_data(&path, data, None))
                    .await
                    .map(|_| ()),
            };
            run.event("s1 event", watcher.changed()).await;
        }
        run.op("s2 delete p/a/b/c", s2.delete(&run.path("p/a/b/c"), None))
            .await;
        run.event("s1 event", watcher.changed()).await;
        run.op(
            "s2 create q (outside)",
            s2.create(&run.path("q"), b"", &persistent),
        )
        .await;
        run.quiet(
            "s1 event after create outside",
            &mut Box::pin(watcher.changed()),
        )
        .await;
    })
}
