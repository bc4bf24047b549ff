//! Scenarios on ACLs: world, digest (with the session's auth), auth and
//! ip schemes; NoAuth, InvalidACL, aversion, and authentication itself.

use super::run::{open, Run, Scenario, Steps};
use zookeeper_client as zk;

pub const SCENARIOS: &[Scenario] = &[
    ("acl_world_read_only", acl_world_read_only),
    ("acl_digest_of_the_creator", acl_digest_of_the_creator),
    ("acl_digest_given", acl_digest_given),
    ("acl_ip", acl_ip),
    ("acl_invalid", acl_invalid),
    ("acl_set_with_aversion", acl_set_with_aversion),
    (
        "acl_parent_governs_create_and_delete",
        acl_parent_governs_create_and_delete,
    ),
    (
        "auth_unknown_scheme_fails_the_session",
        auth_unknown_scheme_fails_the_session,
    ),
    ("who_am_i", who_am_i),
];

/// bob's digest id for the password "secret": base64(sha1("bob:secret")).
const BOB_DIGEST: &str = "bob:fyVmFCwVbTJYrznoSu1koqYEYF0=";

fn acl(permission: zk::Permission, scheme: &str, id: &str) -> zk::Acl {
    zk::Acl::new(permission, zk::AuthId::new(scheme, id))
}

fn acl_world_read_only(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let read_only = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_read());
        let r = run.path("r");
        run.op("create r anyone-read", c.create(&r, b"r", &read_only))
            .await;
        run.op("getACL r", c.get_acl(&r)).await;
        run.op("getData r", c.get_data(&r)).await;
        run.op("setData r", c.set_data(&r, b"x", None)).await;
        let persistent = open(zk::CreateMode::Persistent);
        run.op(
            "create r/child",
            c.create(&run.path("r/child"), b"", &persistent),
        )
        .await;
        run.op("getChildren r", c.list_children(&r)).await;
        run.op(
            "setACL r",
            c.set_acl(&r, &[acl(zk::Permission::ALL, "world", "anyone")], None),
        )
        .await;
        run.op("exists r", c.check_stat(&r)).await;
        run.op("delete r", c.delete(&r, None)).await;
    })
}

fn acl_digest_of_the_creator(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(bob) = run.connect("bob").await else {
            return;
        };
        run.op(
            "bob addauth digest bob:secret",
            bob.auth("digest", b"bob:secret"),
        )
        .await;
        let creator = zk::CreateMode::Persistent.with_acls(zk::Acls::creator_all());
        let sec = run.path("sec");
        run.op(
            "bob create sec creator-all",
            bob.create(&sec, b"s", &creator),
        )
        .await;
        run.op("bob getACL sec", bob.get_acl(&sec)).await;
        run.op("bob getData sec", bob.get_data(&sec)).await;
        let Some(other) = run.connect("other").await else {
            return;
        };
        run.op("other getData sec", other.get_data(&sec)).await;
        run.op("other getACL sec", other.get_acl(&sec)).await;
        run.op("other exists sec", other.check_stat(&sec)).await;
        run.op("other setData sec", other.set_data(&sec, b"x", None))
            .await;
        run.op("other getChildren sec", other.list_children(&sec))
            .await;
        run.op(
            "other addauth digest bob:wrong",
            other.auth("digest", b"bob:wrong"),
        )
        .await;
        run.op(
            "other getData sec after wrong password",
            other.get_data(&sec),
        )
        .await;
        run.op(
            "other addauth digest bob:secret",
            other.auth("digest", b"bob:secret"),
        )
        .await;
        run.op("other getData sec as bob too", other.get_data(&sec))
            .await;
        run.op(
            "other setData sec as bob too",
            other.set_data(&sec, b"other", None),
        )
        .await;
    })
}

fn acl_digest_given(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let acls = [
            acl(zk::Permission::ALL, "digest", BOB_DIGEST),
            acl(zk::Permission::READ, "world", "anyone"),
        ];
        let given = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
        let g = run.path("g");
        run.op(
            "create g digest-bob-all+anyone-read",
            c.create(&g, b"g", &given),
        )
        .await;
        run.op("getACL g", c.get_acl(&g)).await;
        run.op("getData g", c.get_data(&g)).await;
        run.op("setData g", c.set_data(&g, b"x", None)).await;
        let Some(bob) = run
            .connect_with(
                "bob",
                super::run::connector().with_auth("digest", b"bob:secret"),
                &run.servers.first.clone(),
            )
            .await
        else {
            return;
        };
        run.op(
            "bob (auth at connect) setData g",
            bob.set_data(&g, b"bob", None),
        )
        .await;
        run.op("bob getData g", bob.get_data(&g)).await;
    })
}

fn acl_ip(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        for (name, id) in [
            ("loopback", "127.0.0.1"),
            ("loopback-net", "127.0.0.0/8"),
            ("other", "10.1.2.3"),
            ("other-net", "10.0.0.0/8"),
        ] {
            let acls = [acl(zk::Permission::ALL, "ip", id)];
            let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
            let path = run.path(name);
            let step = format!("create {name} ip:{id}");
            run.op(&step, c.create(&path, b"i", &options)).await;
            run.op(&format!("getData {name}"), c.get_data(&path)).await;
            run.op(&format!("getACL {name}"), c.get_acl(&path)).await;
        }
        run.op(
            "delete other (parent allows)",
            c.delete(&run.path("other"), None),
        )
        .await;
    })
}

fn acl_invalid(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let cases: [(&str, zk::Acl); 6] = [
            ("auth without auth", acl(zk::Permission::ALL, "auth", "")),
            (
                "world:someone",
                acl(zk::Permission::ALL, "world", "someone"),
            ),
            (
                "digest without hash",
                acl(zk::Permission::ALL, "digest", "bob"),
            ),
            (
                "ip not an address",
                acl(zk::Permission::ALL, "ip", "not-an-ip"),
            ),
            ("unknown scheme", acl(zk::Permission::ALL, "nosuch", "x")),
            (
                "ip bad prefix",
                acl(zk::Permission::ALL, "ip", "10.0.0.0/99"),
            ),
        ];
        for (name, bad) in cases {
            let acls = [bad];
            let options = zk::CreateMode::Persistent.with_acls(zk::Acls::new(&acls));
            let step = format!("create with {name}");
            run.op(&step, c.create(&run.path("bad"), b"", &options))
                .await;
            let step = format!("setACL . with {name}");
            run.op(&step, c.set_acl(&run.path("."), &acls, None)).await;
        }
        run.op("exists bad", c.check_stat(&run.path("bad"))).await;
        run.op("getACL .", c.get_acl(&run.path("."))).await;
    })
}

fn acl_set_with_aversion(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let a = run.path("a");
        run.op("create a", c.create(&a, b"", &persistent)).await;
        let read_write = [acl(
            zk::Permission::READ | zk::Permission::WRITE | zk::Permission::ADMIN,
            "world",
            "anyone",
        )];
        run.op("setACL a version -1", c.set_acl(&a, &read_write, None))
            .await;
        run.op("setACL a version 0", c.set_acl(&a, &read_write, Some(0)))
            .await;
        run.op("setACL a version 1", c.set_acl(&a, &read_write, Some(1)))
            .await;
        run.op("getACL a", c.get_acl(&a)).await;
        let no_admin = [acl(zk::Permission::READ, "world", "anyone")];
        run.op("setACL a read-only", c.set_acl(&a, &no_admin, Some(2)))
            .await;
        run.op("setACL a without admin", c.set_acl(&a, &read_write, None))
            .await;
        run.op(
            "setACL missing",
            c.set_acl(&run.path("missing"), &read_write, None),
        )
        .await;
        run.op("getData a", c.get_data(&a)).await;
    })
}

fn acl_parent_governs_create_and_delete(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create p", c.create(&run.path("p"), b"", &persistent))
            .await;
        run.op("create p/c", c.create(&run.path("p/c"), b"", &persistent))
            .await;
        let read_create = [acl(
            zk::Permission::READ | zk::Permission::CREATE | zk::Permission::ADMIN,
            "world",
            "anyone",
        )];
        run.op(
            "setACL p read+create+admin",
            c.set_acl(&run.path("p"), &read_create, None),
        )
        .await;
        run.op("delete p/c", c.delete(&run.path("p/c"), None)).await;
        run.op("create p/d", c.create(&run.path("p/d"), b"", &persistent))
            .await;
        let read_delete = [acl(
            zk::Permission::READ | zk::Permission::DELETE | zk::Permission::ADMIN,
            "world",
            "anyone",
        )];
        run.op(
            "setACL p read+delete+admin",
            c.set_acl(&run.path("p"), &read_delete, None),
        )
        .await;
        run.op("create p/e", c.create(&run.path("p/e"), b"", &persistent))
            .await;
        run.op("delete p/c", c.delete(&run.path("p/c"), None)).await;
        run.op("getChildren2 p", c.get_children(&run.path("p")))
            .await;
    })
}

fn auth_unknown_scheme_fails_the_session(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        run.op("create n", c.create(&run.path("n"), b"n", &persistent))
            .await;
        run.op("addauth nosuch", c.auth("nosuch", b"x")).await;
        let state = c.state();
        run.note("session state", &state.to_string());
        run.op("getData n", c.get_data(&run.path("n"))).await;
        let Some(other) = run.connect("s2").await else {
            return;
        };
        run.op("s2 getData n", other.get_data(&run.path("n"))).await;
    })
}

fn who_am_i(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(c) = run.connect("s1").await else {
            return;
        };
        run.op("whoAmI", users(&c)).await;
        run.op("addauth digest bob:secret", c.auth("digest", b"bob:secret"))
            .await;
        run.op("addauth digest alice:x", c.auth("digest", b"alice:x"))
            .await;
        run.op("whoAmI after addauth", users(&c)).await;
    })
}

/// whoAmI as a sorted list of `scheme:user`.
async fn users(client: &zk::Client) -> Result<Vec<String>, zk::Error> {
    let users = client.list_auth_users().await?;
    Ok(users
        .iter()
        .map(|user| format!("{}:{}", user.scheme(), user.user()))
        .collect())
}
