//! A differential test of the etcd API through etcd's gRPC-JSON gateway,
//! with curl: the same transcript of HTTP calls (KV, txn, lease and
//! keep-alive, watch as streamed JSON, compaction, Election, Lock, alarms,
//! defragment, hash, leader transfer, membership changes, auth with
//! tokens in `Authorization`, `/version`, `/health`, and bad requests) goes to a real etcd 3.4 and to bellwether
//! (through a follower, and through the leader), and the answers must
//! match: HTTP status and every JSON field, with member and cluster ids,
//! terms, lease ids, hashes and sizes normalised. Revisions are compared
//! as they are: both stores start at revision 1. Each JSON answer is the
//! gRPC answer's fields, so this compares the RPCs themselves too.

use super::common::etcd_server::EtcdServer;
use super::common::Cluster;
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// One HTTP call of the transcript.
struct Call {
    method: &'static str,
    path: &'static str,
    body: &'static str,
    /// Only the status and the gRPC code are compared (the JSON parser's
    /// message is the server's own).
    code_only: bool,
    /// A streaming call: read for this long, then hang up.
    stream_for: Option<Duration>,
    /// Sent with `Authorization:` and this captured token.
    token: Option<&'static str>,
}

const fn call(method: &'static str, path: &'static str, body: &'static str) -> Call {
    Call {
        method,
        path,
        body,
        code_only: false,
        stream_for: None,
        token: None,
    }
}

/// [`call`], as the user whose token was captured under `token`.
const fn call_as(token: &'static str, path: &'static str, body: &'static str) -> Call {
    Call {
        token: Some(token),
        ..call("POST", path, body)
    }
}

/// The transcript. In a body, `LEASE` stands for the lease granted first,
/// `LEADER` for the leader key the campaign returned, `LOCKKEY` for the
/// lock's key and `MEMBER` for the member added.
fn transcript() -> Vec<Call> {
    vec![
        call("GET", "/health", ""),
        call("POST", "/v3/kv/put", r#"{"key":"Zm9v","value":"YmFy"}"#),
        call("POST", "/v3beta/kv/range", r#"{"key":"Zm9v"}"#),
        call(
            "POST",
            "/v3/kv/txn",
            r#"{"compare":[{"key":"Zm9v","target":"VALUE","result":"EQUAL","value":"YmFy"}],"success":[{"request_put":{"key":"Zm9v","value":"YmF6"}}]}"#,
        ),
        call(
            "POST",
            "/v3/kv/txn",
            r#"{"compare":[{"key":"Zm9v","target":"VERSION","result":"GREATER","version":"5"}],"failure":[{"request_range":{"key":"Zm9v"}}]}"#,
        ),
        call("POST", "/v3/lease/grant", r#"{"TTL":60}"#),
        call(
            "POST",
            "/v3/kv/put",
            r#"{"key":"YQ==","value":"Yg==","lease":"LEASE"}"#,
        ),
        call(
            "POST",
            "/v3/kv/lease/timetolive",
            r#"{"ID":"LEASE","keys":true}"#,
        ),
        call("POST", "/v3/lease/leases", "{}"),
        // etcd answers each keep-alive in the body, then ends the call.
        Call {
            stream_for: Some(Duration::from_secs(5)),
            ..call("POST", "/v3/lease/keepalive", r#"{"ID":"LEASE"}"#)
        },
        call("POST", "/v3/lease/revoke", r#"{"ID":"LEASE"}"#),
        call("POST", "/v3/kv/range", r#"{"key":"YQ=="}"#),
        call(
            "POST",
            "/v3/kv/deleterange",
            r#"{"key":"Zm9v","prev_kv":true}"#,
        ),
        Call {
            stream_for: Some(Duration::from_secs(1)),
            ..call(
                "POST",
                "/v3/watch",
                r#"{"create_request":{"key":"Zm9v","start_revision":"2"}}"#,
            )
        },
        // Election and Lock, on a lease of a chosen id (so that their keys,
        // which name it, are the same on both systems).
        call("POST", "/v3/lease/grant", r#"{"TTL":60,"ID":1000}"#),
        call(
            "POST",
            "/v3/election/campaign",
            r#"{"name":"ZWw=","lease":"1000","value":"djE="}"#,
        ),
        call(
            "POST",
            "/v3/election/proclaim",
            r#"{"leader":LEADER,"value":"djI="}"#,
        ),
        call("POST", "/v3/election/leader", r#"{"name":"ZWw="}"#),
        Call {
            stream_for: Some(Duration::from_secs(1)),
            ..call("POST", "/v3/election/observe", r#"{"name":"ZWw="}"#)
        },
        call("POST", "/v3/election/resign", r#"{"leader":LEADER}"#),
        call(
            "POST",
            "/v3/lock/lock",
            r#"{"name":"bG9jaw==","lease":"1000"}"#,
        ),
        call("POST", "/v3/lock/unlock", r#"{"key":"LOCKKEY"}"#),
        call("POST", "/v3/lease/revoke", r#"{"ID":"1000"}"#),
        call("POST", "/v3/kv/lease/timetolive", r#"{"ID":"1000"}"#),
        // Maintenance: alarms (a raised NOSPACE refuses puts), defragment,
        // hash, a refused leader transfer.
        call("POST", "/v3/maintenance/alarm", r#"{"action":"GET"}"#),
        call(
            "POST",
            "/v3/maintenance/alarm",
            r#"{"action":"ACTIVATE","memberID":"1","alarm":"NOSPACE"}"#,
        ),
        call("POST", "/v3/kv/put", r#"{"key":"Zm9v","value":"YmFy"}"#),
        call(
            "POST",
            "/v3/maintenance/alarm",
            r#"{"action":"DEACTIVATE","memberID":"1","alarm":"NOSPACE"}"#,
        ),
        call("POST", "/v3/maintenance/defragment", "{}"),
        call("POST", "/v3/maintenance/hash", "{}"),
        call(
            "POST",
            "/v3/maintenance/transfer-leadership",
            r#"{"targetID":"12345"}"#,
        ),
        // Cluster: a learner added, refused promotion, updated, removed.
        call(
            "POST",
            "/v3/cluster/member/add",
            r#"{"peerURLs":["http://127.0.0.1:1999"],"isLearner":true}"#,
        ),
        call("POST", "/v3/cluster/member/promote", r#"{"ID":"MEMBER"}"#),
        call(
            "POST",
            "/v3/cluster/member/update",
            r#"{"ID":"MEMBER","peerURLs":["http://127.0.0.1:1998"]}"#,
        ),
        call("POST", "/v3/cluster/member/remove", r#"{"ID":"MEMBER"}"#),
        call("POST", "/v3/cluster/member/remove", r#"{"ID":"MEMBER"}"#),
        call("POST", "/v3/kv/compaction", r#"{"revision":"3"}"#),
        call("POST", "/v3/kv/range", r#"{"key":"Zm9v","revision":"2"}"#),
        call("POST", "/v3/kv/compaction", r#"{"revision":"9999"}"#),
        call("POST", "/v3/kv/put", "{}"),
        Call {
            code_only: true,
            ..call("POST", "/v3/kv/range", "{bad")
        },
        call("POST", "/v3/lease/revoke", r#"{"ID":"12345"}"#),
        call("POST", "/v3/election/leader", r#"{"name":"ZWw="}"#),
        call("POST", "/v3/lock/unlock", r#"{"key":"bm9uZQ=="}"#),
        call("POST", "/v3/cluster/member/list", "{}"),
        call("POST", "/v3/maintenance/status", "{}"),
        call("GET", "/v3/kv/range", ""),
        call("POST", "/v3/no/such/path", "{}"),
        // Paths of no v3 API: what a client that mistakes the API reads
        // (Patroni's `etcd:` section asks for etcd's v2 `/v2/machines`).
        call("GET", "/v2/machines", ""),
        call("GET", "/", ""),
        // Auth, last: once it is on, every call needs a token.
        call(
            "POST",
            "/v3/auth/user/add",
            r#"{"name":"root","password":"rootpw"}"#,
        ),
        call(
            "POST",
            "/v3/auth/user/grant",
            r#"{"user":"root","role":"root"}"#,
        ),
        call("POST", "/v3/auth/role/add", r#"{"name":"app"}"#),
        call(
            "POST",
            "/v3/auth/role/grant",
            r#"{"name":"app","perm":{"permType":"READWRITE","key":"YQ==","range_end":"Yg=="}}"#,
        ),
        call("POST", "/v3/auth/role/get", r#"{"role":"app"}"#),
        call(
            "POST",
            "/v3/auth/user/add",
            r#"{"name":"u","password":"upw"}"#,
        ),
        call(
            "POST",
            "/v3/auth/user/grant",
            r#"{"user":"u","role":"app"}"#,
        ),
        call("POST", "/v3/auth/enable", "{}"),
        call("POST", "/v3/kv/range", r#"{"key":"YQ=="}"#),
        call(
            "POST",
            "/v3/auth/authenticate",
            r#"{"name":"u","password":"bad"}"#,
        ),
        call(
            "POST",
            "/v3/auth/authenticate",
            r#"{"name":"u","password":"upw"}"#,
        ),
        call(
            "POST",
            "/v3/auth/authenticate",
            r#"{"name":"root","password":"rootpw"}"#,
        ),
        call_as("TOKEN", "/v3/kv/put", r#"{"key":"YQ==","value":"eA=="}"#),
        call_as("TOKEN", "/v3/kv/range", r#"{"key":"YQ=="}"#),
        call_as("TOKEN", "/v3/kv/put", r#"{"key":"Zm9v","value":"eA=="}"#),
        call_as("TOKEN", "/v3/auth/user/list", "{}"),
        call_as("ROOTTOKEN", "/v3/auth/user/list", "{}"),
        call_as("ROOTTOKEN", "/v3/auth/user/get", r#"{"name":"u"}"#),
        call_as("ROOTTOKEN", "/v3/auth/disable", "{}"),
        call("POST", "/v3/kv/range", r#"{"key":"YQ=="}"#),
    ]
}

/// Replaces what differs between any two clusters by nature.
fn normalise(value: &mut Value) {
    match value {
        Value::Object(map) => {
            // bellwether's own version, beside etcd's in `/version`.
            map.remove("bellwether");
            for (key, inner) in map.iter_mut() {
                match key.as_str() {
                    "cluster_id" | "member_id" | "raft_term" | "ID" | "TTL" | "grantedTTL"
                    | "dbSize" | "dbSizeInUse" | "leader" | "raftIndex" | "raftTerm"
                    | "raftAppliedIndex" | "hash" | "token" => {
                        if !inner.is_object() {
                            *inner = Value::String("*".into());
                        }
                    }
                    "members" => *inner = Value::String("*".into()),
                    // The server's version (`3.4.23`), not a key's: its
                    // shape must be etcd's plain X.Y.Z, which clients such as
                    // Patroni parse part by part; any other text stays and
                    // shows as a difference.
                    "etcdserver" | "version" if inner.as_str().is_some_and(|v| v.contains('.')) => {
                        let plain = inner.as_str().is_some_and(|v| {
                            v.split('.').count() == 3
                                && v.split('.').all(|p| p.parse::<u32>().is_ok())
                        });
                        if plain {
                            *inner = Value::String("X.Y.Z".into());
                        }
                    }
                    _ => normalise(inner),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalise),
        _ => {}
    }
}

/// Runs the transcript against `base` (`http://host:port`); one line per
/// call: the HTTP status, then the normalised JSON (or text) answer.
fn run(base: &str) -> Vec<String> {
    let mut captured: Vec<(&str, String)> = Vec::new();
    let mut lines = Vec::new();
    for call in transcript() {
        let mut body = call.body.to_string();
        for (name, value) in &captured {
            body = body.replace(name, value);
        }
        let mut command = Command::new("curl");
        command
            .args(["-s", "-N", "-X", call.method, "-w", "\n%{http_code}"])
            .arg(format!("{base}{}", call.path));
        if call.method == "POST" {
            command.args(["-d", &body]);
        }
        if let Some(name) = call.token {
            let (_, token) = captured
                .iter()
                .find(|(captured, _)| *captured == name)
                .expect("the token was captured before");
            command.args(["-H", &format!("Authorization: {token}")]);
        }
        if let Some(duration) = call.stream_for {
            command.args(["-m", &format!("{}", duration.as_secs_f64())]);
        }
        let output = command.output().expect("curl runs");
        let text = String::from_utf8_lossy(&output.stdout).to_string();
        let (answer, status) = text.rsplit_once('\n').expect("curl writes the status");
        let mut parts = Vec::new();
        for line in answer.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Value>(line) {
                Ok(mut value) => {
                    let capture = match call.path {
                        "/v3/lease/grant" if captured.is_empty() => {
                            Some(("LEASE", value["ID"].as_str().map(String::from)))
                        }
                        "/v3/election/campaign" => {
                            Some(("LEADER", Some(value["leader"].to_string())))
                        }
                        "/v3/lock/lock" => {
                            Some(("LOCKKEY", value["key"].as_str().map(String::from)))
                        }
                        "/v3/cluster/member/add" => {
                            Some(("MEMBER", value["member"]["ID"].as_str().map(String::from)))
                        }
                        "/v3/auth/authenticate" => {
                            let name = if body.contains("root") {
                                "ROOTTOKEN"
                            } else {
                                "TOKEN"
                            };
                            Some((name, value["token"].as_str().map(String::from)))
                        }
                        _ => None,
                    };
                    if let Some((name, Some(found))) = capture {
                        captured.push((name, found));
                    }
                    if call.code_only {
                        value = value["code"].clone();
                    }
                    normalise(&mut value);
                    parts.push(value.to_string());
                }
                Err(_) => parts.push(line.trim().to_string()),
            }
        }
        // For a stream: did the server end it (curl's 0), or did curl hang
        // up after `stream_for` (28)?
        let ended = match call.stream_for {
            Some(_) => format!(" (curl exit {:?})", output.status.code()),
            None => String::new(),
        };
        lines.push(format!(
            "{} {} {} -> {status} {}{ended}",
            call.method,
            call.path,
            call.body,
            parts.join(" | ")
        ));
    }
    lines
}

#[test]
fn curl_transcripts_match_a_real_etcd() {
    assert!(
        Command::new("curl")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success()),
        "curl is missing: scripts/test.sh installs it"
    );
    let etcd = EtcdServer::start("gateway-etcd");
    let expected = run(&etcd.url());
    drop(etcd);
    eprintln!("etcd's transcript:\n{}", expected.join("\n"));
    // Through a follower (which forwards) and through the leader, each on
    // a fresh cluster so that revisions start where etcd's did.
    for through in ["follower", "leader"] {
        let mut cluster = Cluster::start(&format!("gateway-bw-{through}"), 3, 50, 500);
        let (leader, _) = cluster.wait_leader(&[1, 2, 3], Duration::from_secs(10));
        let member = match through {
            "leader" => leader,
            _ if leader == 1 => 2,
            _ => 1,
        };
        let actual = run(&format!("http://{}", cluster.client(member)));
        assert_eq!(actual.len(), expected.len());
        let differences: Vec<String> = expected
            .iter()
            .zip(&actual)
            .filter(|(e, a)| e != a)
            .map(|(e, a)| format!("etcd:       {e}\nbellwether: {a}"))
            .collect();
        assert!(
            differences.is_empty(),
            "through the {through}, {} of {} calls differ:\n{}",
            differences.len(),
            expected.len(),
            differences.join("\n")
        );
    }
}
