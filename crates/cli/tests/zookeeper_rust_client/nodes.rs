//! Scenarios on znodes themselves: every create mode, create2's stat,
//! delete/setData with versions, reads, children lists and counts,
//! ephemerals, sync, and the parent's cversion/pzxid bookkeeping.

use super::run::{open, Run, Scenario, Steps};
use std::time::Duration;
use zookeeper_client as zk;

pub const SCENARIOS: &[Scenario] = &[
    ("create_persistent", create_persistent),
    ("create_without_parent", create_without_parent),
    ("create_ephemeral", create_ephemeral),
    ("create_persistent_sequential", create_persistent_sequential),
    ("create_ephemeral_sequential", create_ephemeral_sequential),
    ("create_container", create_container),
    ("create_ttl", create_ttl),
    (
        "create2_stat_is_the_nodes_stat",
        create2_stat_is_the_nodes_stat,
    ),
    ("delete_with_versions", delete_with_versions),
    ("delete_not_empty", delete_not_empty),
    ("set_data_with_versions", set_data_with_versions),
    ("reads_of_a_missing_node", reads_of_a_missing_node),
    ("children_sorted_with_stat", children_sorted_with_stat),
    ("all_children_number", all_children_number),
    ("ephemerals_of_the_session", ephemerals_of_the_session),
    ("sync_then_read", sync_then_read),
    ("empty_and_large_data", empty_and_large_data),
    ("parent_cversion_and_pzxid", parent_cversion_and_pzxid),
    (
        "sequence_counter_across_deletes",
        sequence_counter_across_deletes,
    ),
    ("sequence_counter_per_parent", sequence_counter_per_parent),
    ("no_children_for_ephemerals", no_children_for_ephemerals),
    ("ephemeral_owners_by_session", ephemeral_owners_by_session),
];

fn create_persistent(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let p = run.path("p");
        run.op("create p", c.create(&p, b"v1", &persistent)).await;
        run.op("exists p", c.check_stat(&p)).await;
        run.op("getData p", c.get_data(&p)).await;
        run.op("create p again", c.create(&p, b"v2", &persistent))
            .await;
        run.op("getData p after", c.get_data(&p)).await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn create_without_parent(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let child = run.path("missing/child");
        run.op("create missing/child", c.create(&child, b"x", &persistent))
            .await;
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op(
            "create ephemeral missing/child",
            c.create(&child, b"x", &ephemeral),
        )
        .await;
        let sequential = open(zk::CreateMode::PersistentSequential);
        run.op(
            "create sequential missing/s-",
            c.create(&run.path("missing/s-"), b"x", &sequential),
        )
        .await;
        run.op("exists missing", c.check_stat(&run.path("missing")))
            .await;
    })
}

fn create_ephemeral(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let e = run.path("e");
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op("s1 create ephemeral e", s1.create(&e, b"mine", &ephemeral))
            .await;
        run.op("s1 getData e", s1.get_data(&e)).await;
        run.op("s2 exists e", s2.check_stat(&e)).await;
        run.op(
            "s2 create ephemeral e",
            s2.create(&e, b"theirs", &ephemeral),
        )
        .await;
        run.op("s2 setData e", s2.set_data(&e, b"by s2", None))
            .await;
        run.op("s1 getData e", s1.get_data(&e)).await;
    })
}

fn create_persistent_sequential(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let sequential = open(zk::CreateMode::PersistentSequential);
        let prefix = run.path("q-");
        for i in 0..3 {
            let step = format!("create sequential q- #{i}");
            run.op(&step, c.create(&prefix, b"q", &sequential)).await;
        }
        let empty_prefix = run.path("");
        run.op(
            "create sequential with empty name",
            c.create(&empty_prefix, b"q", &sequential),
        )
        .await;
        run.op("getChildren .", c.list_children(&run.path(".")))
            .await;
        run.op(
            "getData q-0000000001",
            c.get_data(&run.path("q-0000000001")),
        )
        .await;
    })
}

fn create_ephemeral_sequential(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let sequential = open(zk::CreateMode::EphemeralSequential);
        let prefix = run.path("lock-");
        run.op(
            "create ephemeral sequential lock- #0",
            c.create(&prefix, b"a", &sequential),
        )
        .await;
        run.op(
            "create ephemeral sequential lock- #1",
            c.create(&prefix, b"b", &sequential),
        )
        .await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
        run.op(
            "exists lock-0000000001",
            c.check_stat(&run.path("lock-0000000001")),
        )
        .await;
    })
}

fn create_container(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let container = open(zk::CreateMode::Container);
        let box_path = run.path("box");
        run.op(
            "create container box",
            c.create(&box_path, b"c", &container),
        )
        .await;
        run.op(
            "create container box again",
            c.create(&box_path, b"c", &container),
        )
        .await;
        let persistent = open(zk::CreateMode::Persistent);
        run.op(
            "create box/item",
            c.create(&run.path("box/item"), b"i", &persistent),
        )
        .await;
        run.op("getData box", c.get_data(&box_path)).await;
        run.op(
            "create container under missing",
            c.create(&run.path("missing/box"), b"c", &container),
        )
        .await;
    })
}

fn create_ttl(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let ttl = Duration::from_secs(600);
        let persistent = open(zk::CreateMode::Persistent).with_ttl(ttl);
        run.op("create ttl t", c.create(&run.path("t"), b"t", &persistent))
            .await;
        run.op("getData t", c.get_data(&run.path("t"))).await;
        let sequential = open(zk::CreateMode::PersistentSequential).with_ttl(ttl);
        run.op(
            "create ttl sequential ts-",
            c.create(&run.path("ts-"), b"s", &sequential),
        )
        .await;
        run.op("setData t", c.set_data(&run.path("t"), b"t2", Some(0)))
            .await;
        run.op("getChildren .", c.list_children(&run.path(".")))
            .await;
    })
}

fn create2_stat_is_the_nodes_stat(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let n = run.path("n");
        let created = c.create(&n, b"data", &persistent).await;
        let read = c.check_stat(&n).await;
        let same = match (&created, &read) {
            (Ok((created, _)), Ok(Some(read))) => (created == read).to_string(),
            other => format!("{other:?}"),
        };
        run.note("create2 stat == exists stat", &same);
        run.op("exists n", c.check_stat(&n)).await;
    })
}

fn delete_with_versions(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let d = run.path("d");
        run.op("create d", c.create(&d, b"0", &persistent)).await;
        run.op("setData d", c.set_data(&d, b"1", None)).await;
        run.op("delete d version 0", c.delete(&d, Some(0))).await;
        run.op("delete d version 5", c.delete(&d, Some(5))).await;
        run.op("exists d", c.check_stat(&d)).await;
        run.op("delete d version 1", c.delete(&d, Some(1))).await;
        run.op("delete d again", c.delete(&d, None)).await;
        run.op("delete d version 1 again", c.delete(&d, Some(1)))
            .await;
        run.op("exists d after", c.check_stat(&d)).await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn delete_not_empty(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create a", c.create(&run.path("a"), b"", &persistent))
            .await;
        run.op("create a/b", c.create(&run.path("a/b"), b"", &persistent))
            .await;
        run.op("delete a", c.delete(&run.path("a"), None)).await;
        run.op("delete a version 0", c.delete(&run.path("a"), Some(0)))
            .await;
        run.op("delete a version 9", c.delete(&run.path("a"), Some(9)))
            .await;
        run.op("delete a/b", c.delete(&run.path("a/b"), None)).await;
        run.op("getData a", c.get_data(&run.path("a"))).await;
        run.op("delete a", c.delete(&run.path("a"), None)).await;
    })
}

fn set_data_with_versions(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let v = run.path("v");
        run.op("create v", c.create(&v, b"v0", &persistent)).await;
        run.op("setData v version 0", c.set_data(&v, b"v1", Some(0)))
            .await;
        run.op("setData v version 0 again", c.set_data(&v, b"v2", Some(0)))
            .await;
        run.op("setData v version -1", c.set_data(&v, b"v2", None))
            .await;
        run.op("setData v version 2", c.set_data(&v, b"v3", Some(2)))
            .await;
        run.op("setData v same data", c.set_data(&v, b"v3", None))
            .await;
        run.op("getData v", c.get_data(&v)).await;
        run.op(
            "setData missing",
            c.set_data(&run.path("missing"), b"x", None),
        )
        .await;
        run.op(
            "setData missing version 0",
            c.set_data(&run.path("missing"), b"x", Some(0)),
        )
        .await;
    })
}

fn reads_of_a_missing_node(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let m = run.path("m");
        run.op("exists m", c.check_stat(&m)).await;
        run.op("getData m", c.get_data(&m)).await;
        run.op("getChildren m", c.list_children(&m)).await;
        run.op("getChildren2 m", c.get_children(&m)).await;
        run.op("getAllChildrenNumber m", c.count_descendants_number(&m))
            .await;
        run.op("getACL m", c.get_acl(&m)).await;
        run.op("delete m", c.delete(&m, None)).await;
    })
}

fn children_sorted_with_stat(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        for name in ["c", "a", "b", "ab", "a0"] {
            let step = format!("create {name}");
            run.op(
                &step,
                c.create(&run.path(name), name.as_bytes(), &persistent),
            )
            .await;
        }
        run.op("getChildren .", c.list_children(&run.path(".")))
            .await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
        run.op("getChildren2 a (leaf)", c.get_children(&run.path("a")))
            .await;
        run.op("delete b", c.delete(&run.path("b"), None)).await;
        run.op(
            "getChildren2 . after delete",
            c.get_children(&run.path(".")),
        )
        .await;
    })
}

fn all_children_number(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        for name in ["d", "d/x", "d/x/y", "d/x/z", "d/w"] {
            let step = format!("create {name}");
            run.op(&step, c.create(&run.path(name), b"", &persistent))
                .await;
        }
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op(
            "create ephemeral d/e",
            c.create(&run.path("d/e"), b"", &ephemeral),
        )
        .await;
        run.op(
            "getAllChildrenNumber d",
            c.count_descendants_number(&run.path("d")),
        )
        .await;
        run.op(
            "getAllChildrenNumber d/x",
            c.count_descendants_number(&run.path("d/x")),
        )
        .await;
        run.op(
            "getAllChildrenNumber d/w",
            c.count_descendants_number(&run.path("d/w")),
        )
        .await;
        run.op(
            "getAllChildrenNumber .",
            c.count_descendants_number(&run.path(".")),
        )
        .await;
    })
}

fn ephemerals_of_the_session(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op("s1 create x", s1.create(&run.path("x"), b"", &persistent))
            .await;
        for name in ["e1", "x/e2", "x/e3"] {
            let step = format!("s1 create ephemeral {name}");
            run.op(&step, s1.create(&run.path(name), b"", &ephemeral))
                .await;
        }
        run.op(
            "s2 create ephemeral e4",
            s2.create(&run.path("e4"), b"", &ephemeral),
        )
        .await;
        ephemerals(run, &s1, "s1 getEphemerals .", ".").await;
        ephemerals(run, &s1, "s1 getEphemerals x", "x").await;
        ephemerals(run, &s1, "s1 getEphemerals x/e", "x/e").await;
        ephemerals(run, &s2, "s2 getEphemerals .", ".").await;
        ephemerals(run, &s2, "s2 getEphemerals missing", "missing").await;
    })
}

/// getEphemerals under `relative`, as paths relative to the scenario.
async fn ephemerals(run: &mut Run, client: &zk::Client, step: &str, relative: &str) {
    let prefix = run.path(relative);
    let answer = client.list_ephemerals(&prefix).await;
    let text = match answer {
        Ok(paths) => {
            let mut paths: Vec<String> = paths.iter().map(|p| run.t.rel(p)).collect();
            paths.sort();
            format!("[{}]", paths.join(", "))
        }
        Err(error) => format!("!{error:?}"),
    };
    run.note(step, &text);
}

fn sync_then_read(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let second = run.servers.second.clone();
        let Some(s2) = run
            .connect_with("s2", super::run::connector(), &second)
            .await
        else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op(
            "s2 (second server) create n",
            s2.create(&run.path("n"), b"new", &persistent),
        )
        .await;
        run.op("s1 sync n", s1.sync(&run.path("n"))).await;
        run.op("s1 getData n", s1.get_data(&run.path("n"))).await;
        run.op("s1 sync .", s1.sync(&run.path("."))).await;
        run.op("s1 sync missing", s1.sync(&run.path("missing")))
            .await;
    })
}

fn empty_and_large_data(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op(
            "create empty",
            c.create(&run.path("empty"), b"", &persistent),
        )
        .await;
        run.op("getData empty", c.get_data(&run.path("empty")))
            .await;
        let large: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        run.op(
            "create large",
            c.create(&run.path("large"), &large, &persistent),
        )
        .await;
        run.op("getData large", c.get_data(&run.path("large")))
            .await;
        run.op(
            "setData large to empty",
            c.set_data(&run.path("large"), b"", None),
        )
        .await;
        let binary = [0u8, 255, 1, 254];
        run.op(
            "setData empty to binary",
            c.set_data(&run.path("empty"), &binary, None),
        )
        .await;
        run.op("getData empty", c.get_data(&run.path("empty")))
            .await;
    })
}

fn parent_cversion_and_pzxid(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create p", c.create(&run.path("p"), b"", &persistent))
            .await;
        run.op("create p/x", c.create(&run.path("p/x"), b"", &persistent))
            .await;
        run.op("exists p", c.check_stat(&run.path("p"))).await;
        run.op("setData p/x", c.set_data(&run.path("p/x"), b"x", None))
            .await;
        run.op("exists p after child setData", c.check_stat(&run.path("p")))
            .await;
        run.op("setData p", c.set_data(&run.path("p"), b"p", None))
            .await;
        run.op("exists p after own setData", c.check_stat(&run.path("p")))
            .await;
        run.op("delete p/x", c.delete(&run.path("p/x"), None)).await;
        run.op("exists p after child delete", c.check_stat(&run.path("p")))
            .await;
        run.op("create p/y", c.create(&run.path("p/y"), b"", &persistent))
            .await;
        run.op("exists p after second create", c.check_stat(&run.path("p")))
            .await;
        run.op(
            "failed create p/y",
            c.create(&run.path("p/y"), b"", &persistent),
        )
        .await;
        run.op("exists p after failed create", c.check_stat(&run.path("p")))
            .await;
    })
}

fn sequence_counter_across_deletes(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let sequential = open(zk::CreateMode::PersistentSequential);
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create s-", c.create(&run.path("s-"), b"", &sequential))
            .await;
        run.op(
            "delete s-0000000000",
            c.delete(&run.path("s-0000000000"), None),
        )
        .await;
        run.op(
            "create plain",
            c.create(&run.path("plain"), b"", &persistent),
        )
        .await;
        run.op(
            "create s- after delete",
            c.create(&run.path("s-"), b"", &sequential),
        )
        .await;
        run.op("delete plain", c.delete(&run.path("plain"), None))
            .await;
        run.op(
            "create other-",
            c.create(&run.path("other-"), b"", &sequential),
        )
        .await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn sequence_counter_per_parent(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let sequential = open(zk::CreateMode::PersistentSequential);
        let persistent = open(zk::CreateMode::Persistent);
        for parent in ["a", "b"] {
            let step = format!("create {parent}");
            run.op(&step, c.create(&run.path(parent), b"", &persistent))
                .await;
        }
        run.op("create a/n-", c.create(&run.path("a/n-"), b"", &sequential))
            .await;
        run.op("create a/n-", c.create(&run.path("a/n-"), b"", &sequential))
            .await;
        run.op("create b/n-", c.create(&run.path("b/n-"), b"", &sequential))
            .await;
        let ephemeral = open(zk::CreateMode::EphemeralSequential);
        run.op(
            "create ephemeral b/n-",
            c.create(&run.path("b/n-"), b"", &ephemeral),
        )
        .await;
        run.op("getChildren b", c.list_children(&run.path("b")))
            .await;
    })
}

fn no_children_for_ephemerals(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op(
            "create ephemeral e",
            c.create(&run.path("e"), b"", &ephemeral),
        )
        .await;
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create e/c", c.create(&run.path("e/c"), b"", &persistent))
            .await;
        run.op(
            "create ephemeral e/c",
            c.create(&run.path("e/c"), b"", &ephemeral),
        )
        .await;
        let sequential = open(zk::CreateMode::EphemeralSequential);
        run.op(
            "create ephemeral sequential e/s-",
            c.create(&run.path("e/s-"), b"", &sequential),
        )
        .await;
        run.op("getChildren2 e", c.get_children(&run.path("e")))
            .await;
    })
}

fn ephemeral_owners_by_session(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op(
            "s1 create ephemeral a",
            s1.create(&run.path("a"), b"", &ephemeral),
        )
        .await;
        run.op(
            "s2 create ephemeral b",
            s2.create(&run.path("b"), b"", &ephemeral),
        )
        .await;
        run.op("s2 exists a", s2.check_stat(&run.path("a"))).await;
        run.op("s1 exists b", s1.check_stat(&run.path("b"))).await;
        run.op("s2 delete a", s2.delete(&run.path("a"), None)).await;
        run.op("s1 exists a", s1.check_stat(&run.path("a"))).await;
    })
}
