//! `/zookeeper/config`: the cluster's members as ZooKeeper 3.5+ shows its
//! ensemble, so that clients which follow it (Curator's ensemble tracker,
//! zkCli's `config`) find every member's ZooKeeper port.
//!
//! ZooKeeper writes the node from its quorum configuration, one line per
//! server, `server.ID=HOST:QUORUM_PORT:ELECTION_PORT:ROLE;CLIENT_ADDRESS`,
//! then `version=` and the configuration's zxid in hex. bellwether's
//! members have one peer port, which stands for both of ZooKeeper's; a
//! voter is a `participant` and a Raft learner an `observer` (ZooKeeper's
//! non-voting member). The leader logs the lines whenever the members or
//! their addresses change (`RECONFIG` entries, applied by
//! [`crate::tree::apply`]), and the version is the zxid of that write, so
//! every member shows the same node, its watches fire, and it moves with
//! the log through snapshots and restarts.

use std::fmt::Write;

/// The node's path.
pub const CONFIG_PATH: &str = "/zookeeper/config";

/// Longest list of server lines an entry may carry: far more than any
/// cluster's members need, and a bound on what the node holds.
pub const LINES_BYTES_MAX: usize = 64 * 1024;

/// One member as the node lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    /// The member id.
    pub id: u64,
    /// Where its peers reach it (`host:port`).
    pub peer_address: String,
    /// Whether it only learns (a Raft learner).
    pub observer: bool,
    /// Where it serves ZooKeeper's protocol (`host:port`), if known.
    pub zookeeper_address: Option<String>,
}

/// The server lines for `servers`, by id, each ending in a newline.
pub fn ensemble_lines(servers: &[Server]) -> String {
    let mut sorted: Vec<&Server> = servers.iter().collect();
    sorted.sort_by_key(|s| s.id);
    let mut lines = String::new();
    for server in sorted {
        let role = if server.observer {
            "observer"
        } else {
            "participant"
        };
        let peer = &server.peer_address;
        let _ = write!(
            lines,
            "server.{}={peer}:{}:{role}",
            server.id,
            port_of(peer)
        );
        if let Some(client) = &server.zookeeper_address {
            let _ = write!(lines, ";{client}");
        }
        lines.push('\n');
    }
    lines
}

/// The port of a `host:port` address (all of it if it has no colon).
fn port_of(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(_, port)| port)
}

/// Whether `lines` is what [`ensemble_lines`] writes: nothing, or
/// `server.` lines each ending in a newline, within [`LINES_BYTES_MAX`].
pub fn valid_lines(lines: &str) -> bool {
    lines.len() <= LINES_BYTES_MAX
        && (lines.is_empty() || lines.ends_with('\n'))
        && lines.lines().all(|line| {
            line.strip_prefix("server.")
                .and_then(|rest| rest.split_once('='))
                .is_some_and(|(id, _)| id.parse::<u64>().is_ok())
        })
}

/// The node's data: the lines, then `version=` and `zxid` in hex (no
/// newline after it, as ZooKeeper writes it).
pub fn data(lines: &str, zxid: i64) -> Vec<u8> {
    format!("{lines}version={zxid:x}").into_bytes()
}

/// The server lines of the node's `data` (its version line dropped); empty
/// for a node never written.
pub fn lines_of(data: &[u8]) -> String {
    let text = String::from_utf8_lossy(data);
    let mut lines = String::new();
    for line in text.lines().filter(|l| l.starts_with("server.")) {
        lines.push_str(line);
        lines.push('\n');
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(id: u64, observer: bool, zookeeper: Option<&str>) -> Server {
        Server {
            id,
            peer_address: format!("127.0.0.1:700{id}"),
            observer,
            zookeeper_address: zookeeper.map(str::to_string),
        }
    }

    #[test]
    fn lines_are_zookeepers_by_id_with_the_peer_port_for_both_of_its_ports() {
        let lines = ensemble_lines(&[
            server(3, true, None),
            server(1, false, Some("127.0.0.1:7301")),
        ]);
        assert_eq!(
            lines,
            "server.1=127.0.0.1:7001:7001:participant;127.0.0.1:7301\n\
             server.3=127.0.0.1:7003:7003:observer\n"
        );
        assert!(valid_lines(&lines));
        let data = data(&lines, 0x1a);
        assert!(data.ends_with(b"\nversion=1a"));
        assert_eq!(
            lines_of(&data),
            lines,
            "the lines come back out of the data"
        );
        assert_eq!(lines_of(b""), "");
    }

    #[test]
    fn anything_but_server_lines_is_not_valid() {
        assert!(valid_lines(""));
        assert!(!valid_lines("server.1=a:1:1:participant"), "no newline");
        assert!(!valid_lines("version=1\n"));
        assert!(!valid_lines("server.x=a\n"));
        let long = "server.1=a:1:1:participant\n".repeat(LINES_BYTES_MAX / 20);
        assert!(!valid_lines(&long));
    }
}
