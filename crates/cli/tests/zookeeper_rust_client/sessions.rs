//! Scenarios on sessions: the negotiated timeout, a closed or expired
//! session taking its ephemerals with it (one zxid, the other sessions'
//! watches firing), an expired session refused, and watches and
//! ephemerals surviving the loss of the server a session is on (the
//! scenario kills it: it runs last).

use super::run::{connector, open, Run, Scenario, Steps};
use std::collections::BTreeSet;
use std::time::Duration;
use zookeeper_client as zk;

pub const SCENARIOS: &[Scenario] = &[
    ("session_timeout_negotiated", session_timeout_negotiated),
    (
        "session_close_removes_ephemerals",
        session_close_removes_ephemerals,
    ),
    (
        "session_expiry_removes_ephemerals",
        session_expiry_removes_ephemerals,
    ),
];

/// Killing the first server: the last scenario of a run.
pub const LAST: &[Scenario] = &[("watches_across_a_reconnect", watches_across_a_reconnect)];

/// The shortest session timeout ZooKeeper grants by default (2 ticks).
const SHORT_SESSION: Duration = Duration::from_secs(4);
/// Longest wait for an expiry to show: the timeout, ZooKeeper's expiry
/// tick, and slack.
const EXPIRY_LIMIT: Duration = Duration::from_secs(30);
/// Attempts at getting a session onto the first server.
const LANDING_ATTEMPTS_MAX: usize = 12;

fn session_timeout_negotiated(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        for (asked, name) in [
            (Duration::from_millis(100), "s1"),
            (SHORT_SESSION, "s2"),
            (Duration::from_secs(15), "s3"),
            (Duration::from_secs(3600), "s4"),
        ] {
            let Some(client) = run
                .connect_with(
                    name,
                    connector().with_session_timeout(asked),
                    &run.servers.first.clone(),
                )
                .await
            else {
                continue;
            };
            let granted = client.session_timeout();
            run.note(
                &format!("{name} asked {} ms", asked.as_millis()),
                &format!("granted {} ms", granted.as_millis()),
            );
        }
    })
}

/// `a` and `b` (persistent), and `owner`'s ephemerals a/e, b/e and a
/// sequential a/s-; s1's watches on them.
async fn ephemerals_watched(
    run: &mut Run,
    s1: &zk::Client,
    owner: &zk::Client,
) -> Option<[zk::OneshotWatcher; 3]> {
    let persistent = open(zk::CreateMode::Persistent);
    let ephemeral = open(zk::CreateMode::Ephemeral);
    for parent in ["a", "b"] {
        run.op(
            &format!("create {parent}"),
            s1.create(&run.path(parent), b"", &persistent),
        )
        .await;
    }
    for child in ["a/e", "b/e"] {
        run.op(
            &format!("s2 create ephemeral {child}"),
            owner.create(&run.path(child), b"", &ephemeral),
        )
        .await;
    }
    let sequential = open(zk::CreateMode::EphemeralSequential);
    run.op(
        "s2 create ephemeral a/s-",
        owner.create(&run.path("a/s-"), b"", &sequential),
    )
    .await;
    let (_, a_e) = run
        .op(
            "s1 exists a/e watch",
            s1.check_and_watch_stat(&run.path("a/e")),
        )
        .await?;
    let (_, b_e) = run
        .op(
            "s1 exists b/e watch",
            s1.check_and_watch_stat(&run.path("b/e")),
        )
        .await?;
    let (_, a) = run
        .op(
            "s1 getChildren a watch",
            s1.list_and_watch_children(&run.path("a")),
        )
        .await?;
    Some([a_e, b_e, a])
}

/// s1's events once s2's ephemerals go, then what is left, and whether
/// both parents changed at one zxid.
async fn ephemerals_gone(run: &mut Run, s1: &zk::Client, watchers: [zk::OneshotWatcher; 3]) {
    let [a_e, b_e, a] = watchers;
    run.event_within("s1 event a/e", a_e.changed(), EXPIRY_LIMIT)
        .await;
    run.event_within("s1 event b/e", b_e.changed(), EXPIRY_LIMIT)
        .await;
    run.event_within("s1 event a", a.changed(), EXPIRY_LIMIT)
        .await;
    let a = run
        .op("s1 getChildren2 a", s1.get_children(&run.path("a")))
        .await;
    let b = run
        .op("s1 getChildren2 b", s1.get_children(&run.path("b")))
        .await;
    if let (Some((_, a)), Some((_, b))) = (a, b) {
        run.note(
            "pzxid of a == pzxid of b (one zxid)",
            &(a.pzxid == b.pzxid).to_string(),
        );
    }
    run.op("s1 exists a/e", s1.check_stat(&run.path("a/e")))
        .await;
}

fn session_close_removes_ephemerals(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let Some(s2) = run.connect("s2").await else {
            return;
        };
        let Some(watchers) = ephemerals_watched(run, &s1, &s2).await else {
            return;
        };
        // The last handle of a session that is not detached closes it.
        drop(s2);
        run.note("s2", "closed");
        ephemerals_gone(run, &s1, watchers).await;
    })
}

fn session_expiry_removes_ephemerals(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = run.connect("s1").await else {
            return;
        };
        let first = run.servers.first.clone();
        let detached = connector()
            .with_session_timeout(SHORT_SESSION)
            .with_detached();
        let Some(s2) = run.connect_with("s2", detached, &first).await else {
            return;
        };
        let Some(watchers) = ephemerals_watched(run, &s1, &s2).await else {
            return;
        };
        // A detached session's last handle drops the connection only:
        // the session lives on until it expires.
        let session = s2.into_session();
        run.note("s2", "connection dropped, session not closed");
        ephemerals_gone(run, &s1, watchers).await;
        let resumed = connector().with_session(session).with_fail_eagerly();
        let answer = resumed.connect(&first).await.map(|_| ());
        run.op("s2 resumes its session", std::future::ready(answer))
            .await;
    })
}

fn watches_across_a_reconnect(run: &mut Run) -> Steps<'_> {
    Box::pin(async move {
        let Some(s1) = land_on_first(run).await else {
            run.note("s1 on the first server", "never");
            return;
        };
        let second = run.servers.second.clone();
        let Some(s2) = run.connect_with("s2", connector(), &second).await else {
            return;
        };
        let persistent = open(zk::CreateMode::Persistent);
        let ephemeral = open(zk::CreateMode::Ephemeral);
        run.op(
            "s1 create n",
            s1.create(&run.path("n"), b"before", &persistent),
        )
        .await;
        run.op(
            "s1 create ephemeral e",
            s1.create(&run.path("e"), b"", &ephemeral),
        )
        .await;
        let Some((_, _, data)) = run
            .op("s1 getData n watch", s1.get_and_watch_data(&run.path("n")))
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
        let Some((_, exists)) = run
            .op(
                "s1 exists later watch",
                s1.check_and_watch_stat(&run.path("later")),
            )
            .await
        else {
            return;
        };
        let mut states = s1.state_watcher();
        (run.servers.kill_first)();
        run.note("the first server (s1's)", "killed");
        run.op("s2 sync .", s2.sync(&run.path("."))).await;
        run.op("s2 setData n", s2.set_data(&run.path("n"), b"after", None))
            .await;
        run.op(
            "s2 create later",
            s2.create(&run.path("later"), b"", &persistent),
        )
        .await;
        run.event_within("s1 data event", data.changed(), EXPIRY_LIMIT)
            .await;
        run.event_within("s1 child event", children.changed(), EXPIRY_LIMIT)
            .await;
        run.event_within("s1 exists event", exists.changed(), EXPIRY_LIMIT)
            .await;
        let seen = states_until_connected(&mut states).await;
        run.note("s1 states", &seen);
        run.op("s1 getData n", s1.get_data(&run.path("n"))).await;
        run.op(
            "s2 exists e (s1's ephemeral)",
            s2.check_stat(&run.path("e")),
        )
        .await;
    })
}

/// A session, named s1, connected with both servers in its list but
/// talking to the first: the crate shuffles the list, so sessions are
/// opened until one's connection is to the first server.
async fn land_on_first(run: &mut Run) -> Option<zk::Client> {
    let (first, second) = (run.servers.first.clone(), run.servers.second.clone());
    for _ in 0..LANDING_ATTEMPTS_MAX {
        let before = local_ports_to(&first);
        let client = run
            .connect_with("s1", connector(), &format!("{first},{second}"))
            .await?;
        let after = local_ports_to(&first);
        if after.difference(&before).next().is_some() {
            return Some(client);
        }
    }
    None
}

/// The states s1 went through until connected again, e.g.
/// `Disconnected SyncConnected`.
async fn states_until_connected(states: &mut zk::StateWatcher) -> String {
    let mut seen = Vec::new();
    let mut state = states.state();
    seen.push(state.to_string());
    while state != zk::SessionState::SyncConnected && !state.is_terminated() {
        match tokio::time::timeout(EXPIRY_LIMIT, states.changed()).await {
            Ok(next) => state = next,
            Err(_) => {
                seen.push("(no more)".to_string());
                break;
            }
        }
        seen.push(state.to_string());
    }
    seen.join(" ")
}

/// Local ports of this process's established TCP connections to
/// `address` (ip:port), read from /proc.
fn local_ports_to(address: &str) -> BTreeSet<u16> {
    let address: std::net::SocketAddrV4 = address.parse().expect("an IPv4 address");
    let inodes: BTreeSet<String> = std::fs::read_dir("/proc/self/fd")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|target| {
            let target = target.to_string_lossy().to_string();
            Some(
                target
                    .strip_prefix("socket:[")?
                    .strip_suffix(']')?
                    .to_string(),
            )
        })
        .collect();
    let table = std::fs::read_to_string("/proc/self/net/tcp").unwrap_or_default();
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
            let fields: Vec<&str> = line.split_whitespace().collect();
            let established = fields.len() > 9 && fields[3] == "01" && inodes.contains(fields[9]);
            (established && parse_address(fields[2]) == Some(address))
                .then(|| parse_address(fields[1]).map(|local| local.port()))
                .flatten()
        })
        .collect()
}

/// `0100007F:1F90` (the IPv4 address in memory order, the port in hex).
fn parse_address(field: &str) -> Option<std::net::SocketAddrV4> {
    let (ip, port) = field.split_once(':')?;
    let ip = u32::from_str_radix(ip, 16).ok()?.to_le_bytes();
    let port = u16::from_str_radix(port, 16).ok()?;
    Some(std::net::SocketAddrV4::new(ip.into(), port))
}
