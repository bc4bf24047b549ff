//! Scenarios on multi (transactions of writes and checks, all or none)
//! and multiRead.

use super::run::{open, Run, Scenario, Steps};
use zookeeper_client as zk;

pub const SCENARIOS: &[Scenario] = &[
    ("multi_success", multi_success),
    ("multi_failing_check", multi_failing_check),
    ("multi_failing_create", multi_failing_create),
    ("multi_failing_last_op", multi_failing_last_op),
    ("multi_check_versions", multi_check_versions),
    ("multi_sees_its_own_ops", multi_sees_its_own_ops),
    ("multi_is_one_zxid", multi_is_one_zxid),
    ("multi_read", multi_read),
];

/// The scenario's `p` (data "p0", then setData to version 2) and `gone`.
async fn prepare(run: &mut Run, c: &zk::Client) {
    let persistent = open(zk::CreateMode::Persistent);
    run.op("create p", c.create(&run.path("p"), b"p0", &persistent))
        .await;
    run.op("setData p", c.set_data(&run.path("p"), b"p1", None))
        .await;
    run.op("setData p", c.set_data(&run.path("p"), b"p2", None))
        .await;
    run.op("create gone", c.create(&run.path("gone"), b"", &persistent))
        .await;
}

fn multi_success(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let persistent = open(zk::CreateMode::Persistent);
        let sequential = open(zk::CreateMode::PersistentSequential);
        let ephemeral = open(zk::CreateMode::Ephemeral);
        let mut multi = c.new_multi_writer();
        multi
            .add_create(&run.path("tx"), b"t0", &persistent)
            .unwrap();
        multi.add_set_data(&run.path("tx"), b"t1", Some(0)).unwrap();
        multi.add_set_data(&run.path("p"), b"tx", Some(2)).unwrap();
        multi.add_check_version(&run.path("p"), 3).unwrap();
        multi
            .add_create(&run.path("txs-"), b"s", &sequential)
            .unwrap();
        multi
            .add_create(&run.path("txe"), b"e", &ephemeral)
            .unwrap();
        multi.add_delete(&run.path("gone"), None).unwrap();
        run.op(
            "multi create+set+set+check+create-seq+create-eph+delete",
            multi.commit(),
        )
        .await;
        run.op("getData tx", c.get_data(&run.path("tx"))).await;
        run.op("getData p", c.get_data(&run.path("p"))).await;
        run.op("exists gone", c.check_stat(&run.path("gone"))).await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn multi_failing_check(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let persistent = open(zk::CreateMode::Persistent);
        let mut multi = c.new_multi_writer();
        multi
            .add_create(&run.path("tx2"), b"no", &persistent)
            .unwrap();
        multi.add_check_version(&run.path("p"), 99).unwrap();
        multi.add_set_data(&run.path("p"), b"no", None).unwrap();
        multi.add_delete(&run.path("gone"), None).unwrap();
        run.op("multi create+check(99)+set+delete", multi.commit())
            .await;
        run.op("exists tx2", c.check_stat(&run.path("tx2"))).await;
        run.op("getData p", c.get_data(&run.path("p"))).await;
        run.op("exists gone", c.check_stat(&run.path("gone"))).await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn multi_failing_create(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let persistent = open(zk::CreateMode::Persistent);
        let mut multi = c.new_multi_writer();
        multi.add_set_data(&run.path("p"), b"no", None).unwrap();
        multi
            .add_create(&run.path("p"), b"exists", &persistent)
            .unwrap();
        multi.add_delete(&run.path("gone"), None).unwrap();
        run.op("multi set+create(existing)+delete", multi.commit())
            .await;
        let ephemeral = open(zk::CreateMode::Ephemeral);
        let mut multi = c.new_multi_writer();
        multi.add_create(&run.path("e"), b"", &ephemeral).unwrap();
        multi
            .add_create(&run.path("e/child"), b"", &persistent)
            .unwrap();
        run.op("multi create-eph+create(child of it)", multi.commit())
            .await;
        run.op("getData p", c.get_data(&run.path("p"))).await;
        run.op("exists e", c.check_stat(&run.path("e"))).await;
    })
}

fn multi_failing_last_op(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let persistent = open(zk::CreateMode::Persistent);
        let mut multi = c.new_multi_writer();
        multi
            .add_create(&run.path("tx3"), b"no", &persistent)
            .unwrap();
        multi.add_delete(&run.path("gone"), None).unwrap();
        multi
            .add_create(&run.path("nowhere/tx4"), b"no", &persistent)
            .unwrap();
        run.op("multi create+delete+create(no parent)", multi.commit())
            .await;
        let mut multi = c.new_multi_writer();
        multi.add_delete(&run.path("."), None).unwrap();
        multi
            .add_create(&run.path("tx5"), b"no", &persistent)
            .unwrap();
        run.op("multi delete(not empty)+create", multi.commit())
            .await;
        let mut multi = c.new_multi_writer();
        multi.add_set_data(&run.path("p"), b"no", Some(7)).unwrap();
        run.op("multi set(bad version)", multi.commit()).await;
        run.op("exists tx3", c.check_stat(&run.path("tx3"))).await;
        run.op("exists gone", c.check_stat(&run.path("gone"))).await;
        run.op("getData p", c.get_data(&run.path("p"))).await;
    })
}

fn multi_check_versions(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let mut multi = c.new_multi_writer();
        multi.add_check_version(&run.path("p"), 2).unwrap();
        run.op("multi check(p, 2)", multi.commit()).await;
        let mut multi = c.new_multi_writer();
        multi.add_check_version(&run.path("p"), 1).unwrap();
        run.op("multi check(p, 1)", multi.commit()).await;
        let mut multi = c.new_multi_writer();
        multi.add_check_version(&run.path("p"), -1).unwrap();
        run.op("multi check(p, -1)", multi.commit()).await;
        let mut multi = c.new_multi_writer();
        multi.add_check_version(&run.path("missing"), -1).unwrap();
        run.op("multi check(missing, -1)", multi.commit()).await;
        let mut multi = c.new_multi_writer();
        multi.add_check_version(&run.path("gone"), 0).unwrap();
        multi.add_check_version(&run.path("p"), 2).unwrap();
        multi
            .add_set_data(&run.path("p"), b"checked", Some(2))
            .unwrap();
        run.op("multi check(gone,0)+check(p,2)+set(p,2)", multi.commit())
            .await;
        let checked = c.new_check_writer(&run.path("p"), Some(3));
        let mut checked = checked.unwrap();
        checked.add_delete(&run.path("gone"), None).unwrap();
        let answer = checked.commit().await.map_err(zk::Error::from);
        run.op("check-writer check(p,3)+delete", std::future::ready(answer))
            .await;
        run.op("getData p", c.get_data(&run.path("p"))).await;
    })
}

fn multi_sees_its_own_ops(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let mut multi = c.new_multi_writer();
        let n = run.path("n");
        multi.add_create(&n, b"a", &persistent).unwrap();
        multi.add_set_data(&n, b"b", Some(0)).unwrap();
        multi.add_check_version(&n, 1).unwrap();
        multi
            .add_create(&run.path("n/c"), b"c", &persistent)
            .unwrap();
        multi.add_delete(&run.path("n/c"), Some(0)).unwrap();
        multi.add_delete(&n, Some(1)).unwrap();
        run.op(
            "multi create+set+check+create child+delete child+delete",
            multi.commit(),
        )
        .await;
        run.op("exists n", c.check_stat(&n)).await;
        run.op("getChildren2 .", c.get_children(&run.path(".")))
            .await;
    })
}

fn multi_is_one_zxid(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create a", c.create(&run.path("a"), b"", &persistent))
            .await;
        let mut multi = c.new_multi_writer();
        multi
            .add_create(&run.path("a/x"), b"x", &persistent)
            .unwrap();
        multi.add_create(&run.path("b"), b"b", &persistent).unwrap();
        multi.add_set_data(&run.path("a"), b"a", None).unwrap();
        run.op("multi create a/x+create b+set a", multi.commit())
            .await;
        run.op("exists a", c.check_stat(&run.path("a"))).await;
        run.op("exists a/x", c.check_stat(&run.path("a/x"))).await;
        run.op("exists b", c.check_stat(&run.path("b"))).await;
        run.op("exists .", c.check_stat(&run.path("."))).await;
    })
}

fn multi_read(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        prepare(run, &c).await;
        let mut reader = c.new_multi_reader();
        reader.add_get_data(&run.path("p")).unwrap();
        reader.add_get_children(&run.path(".")).unwrap();
        reader.add_get_data(&run.path("missing")).unwrap();
        reader.add_get_children(&run.path("missing")).unwrap();
        reader.add_get_data(&run.path("gone")).unwrap();
        run.op(
            "multiRead getData p+getChildren .+getData missing+getChildren missing+getData gone",
            reader.commit(),
        )
        .await;
    })
}
