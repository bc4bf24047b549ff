//! Raft scenarios as message-trace scripts (etcd-io/raft's data-driven
//! style): each file in `testdata/` holds commands and, under each, the
//! trace the cluster must print. A reader sees the protocol's messages,
//! what each node persists and what it hands the application, in order.
//!
//! A step whose trace differs fails with both traces. After a deliberate
//! change, `BELLWETHER_REWRITE_TRACES=1 cargo test -p bellwether-core
//! trace` writes what ran back into the files; read the diff before
//! committing it.
//!
//! Commands, one per block, followed by `----` and the expected trace:
//! - `tick`: ticks every node until a follower's election timer fires, and
//!   says after how many ticks and which node acts (timeouts are random
//!   but seeded); a leader's heartbeats meanwhile are only counted;
//! - `heartbeat`: ticks every node until any has something to do;
//! - `stabilize`: carries out every node's `Ready` and delivers every
//!   message, until nothing is left; a message to or from an isolated
//!   node is dropped;
//! - `propose N DATA`: node N proposes a command;
//! - `isolate N` and `heal`: cut node N off, and mend it;
//! - `status`: each node's role, term, leader, commit and last index.

use super::{RaftConfig, RaftDurable, RaftMessage, RaftNode};
use crate::{Envelope, NodeId, Protocol, Rng, Role};
use std::collections::BTreeSet;
use std::fmt::Write;

/// Most ticks `tick N` waits for a node to act.
const TICKS_MAX: u32 = 1_000;

/// Most delivery rounds `stabilize` runs before it calls the cluster
/// unstable.
const ROUNDS_MAX: u32 = 100;

/// A cluster of Raft nodes driven by a script, with in-memory disks and a
/// network that delivers in send order.
struct TraceCluster {
    nodes: Vec<RaftNode>,
    disks: Vec<RaftDurable>,
    in_flight: Vec<(NodeId, Envelope<RaftMessage>)>,
    isolated: BTreeSet<NodeId>,
}

impl TraceCluster {
    /// `size` voters with ids 1..=size, each with a seeded random source.
    fn new(size: u64) -> TraceCluster {
        let members: Vec<NodeId> = (1..=size).map(NodeId).collect();
        let config = RaftConfig::default();
        let nodes = members
            .iter()
            .map(|id| {
                RaftNode::new(
                    &config,
                    *id,
                    &members,
                    RaftDurable::default(),
                    Rng::new(id.0),
                )
            })
            .collect();
        TraceCluster {
            nodes,
            disks: vec![RaftDurable::default(); size as usize],
            in_flight: Vec::new(),
            isolated: BTreeSet::new(),
        }
    }

    /// Runs one command and returns its trace.
    fn run(&mut self, command: &str) -> String {
        let words: Vec<&str> = command.split_whitespace().collect();
        let size = self.nodes.len();
        let node = |i: usize| -> usize {
            let id: usize = words
                .get(i)
                .and_then(|w| w.parse().ok())
                .expect("a node id");
            assert!((1..=size).contains(&id), "no node {id}");
            id - 1
        };
        let mut out = String::new();
        match words.as_slice() {
            ["tick"] => self.tick(&mut out),
            ["heartbeat"] => self.heartbeat(&mut out),
            ["stabilize"] => self.stabilize(&mut out),
            ["propose", _, data] => {
                let result = self.nodes[node(1)].propose(data.as_bytes().to_vec());
                let _ = writeln!(out, "{}", plain(&format!("{result:?}")));
            }
            ["isolate", _] => {
                self.isolated.insert(NodeId(node(1) as u64 + 1));
            }
            ["heal"] => self.isolated.clear(),
            ["status"] => self.status(&mut out),
            _ => panic!("unknown command {command:?}"),
        }
        out
    }

    /// Ticks every node, one tick at a time, until a node that does not
    /// lead has something to do (an election timer fired). A leader's
    /// heartbeats in the meantime, and the answers to them, are carried
    /// out and delivered without a trace: only their count is printed.
    fn tick(&mut self, out: &mut String) {
        let mut quiet_rounds = 0;
        for ticks in 1..=TICKS_MAX {
            for node in &mut self.nodes {
                node.tick();
            }
            let acting: Vec<u64> = self
                .nodes
                .iter()
                .filter(|n| n.has_ready() && n.status().role != Role::Leader)
                .map(|n| n.status().id.0)
                .collect();
            if !acting.is_empty() {
                let acting: Vec<String> = acting.iter().map(u64::to_string).collect();
                let _ = writeln!(
                    out,
                    "after {ticks} ticks ({quiet_rounds} heartbeat rounds): {} acts",
                    acting.join(", ")
                );
                return;
            }
            if self.nodes.iter().any(RaftNode::has_ready) {
                quiet_rounds += 1;
                self.stabilize(&mut String::new());
            }
        }
        panic!("no follower acted in {TICKS_MAX} ticks");
    }

    /// Ticks every node until any has something to do (a leader's
    /// heartbeat, most often), and says which.
    fn heartbeat(&mut self, out: &mut String) {
        for ticks in 1..=TICKS_MAX {
            for node in &mut self.nodes {
                node.tick();
            }
            let acting: Vec<String> = self
                .nodes
                .iter()
                .filter(|n| n.has_ready())
                .map(|n| n.status().id.0.to_string())
                .collect();
            if !acting.is_empty() {
                let _ = writeln!(out, "after {ticks} ticks: {} acts", acting.join(", "));
                return;
            }
        }
        panic!("no node acted in {TICKS_MAX} ticks");
    }

    fn stabilize(&mut self, out: &mut String) {
        for _ in 0..ROUNDS_MAX {
            for i in 0..self.nodes.len() {
                self.carry_out_readies(i, out);
            }
            if self.in_flight.is_empty() {
                return;
            }
            for (from, envelope) in std::mem::take(&mut self.in_flight) {
                let to = envelope.to;
                if self.isolated.contains(&from) || self.isolated.contains(&to) {
                    let _ = writeln!(
                        out,
                        "dropped {}->{} {}",
                        from.0,
                        to.0,
                        kind(&envelope.message)
                    );
                    continue;
                }
                self.nodes[(to.0 - 1) as usize].step(from, envelope.message);
            }
        }
        panic!("not stable after {ROUNDS_MAX} rounds");
    }

    /// Persists, sends and hands over node `i`'s output, in that order,
    /// printing each.
    fn carry_out_readies(&mut self, i: usize, out: &mut String) {
        let id = NodeId(i as u64 + 1);
        while self.nodes[i].has_ready() {
            let ready = self.nodes[i].ready();
            if let Some(persist) = ready.persist {
                let _ = writeln!(out, "{} persist {}", id.0, plain(&format!("{persist:?}")));
                RaftNode::apply_persist(&mut self.disks[i], persist);
            }
            for envelope in ready.messages {
                let text = plain(&format!("{:?}", envelope.message));
                let _ = writeln!(out, "{}->{} {text}", id.0, envelope.to.0);
                self.in_flight.push((id, envelope));
            }
            for output in ready.output {
                let _ = writeln!(out, "{} output {}", id.0, plain(&format!("{output:?}")));
            }
        }
    }

    fn status(&self, out: &mut String) {
        for node in &self.nodes {
            let status = node.status();
            let leader = status
                .leader
                .map_or("none".to_string(), |l| l.0.to_string());
            let _ = writeln!(
                out,
                "{} {} term {} leader {leader} commit {} last {}",
                status.id.0,
                status.role.as_str(),
                status.term.0,
                node.commit_index().0,
                node.log().last_index().0,
            );
        }
    }
}

/// The message's kind, for a dropped message.
fn kind(message: &RaftMessage) -> &'static str {
    crate::Message::kind(message)
}

/// `Debug` text with the id and index wrappers taken off (`Term(2)` reads
/// `2`) and commands shown as text.
fn plain(debug: &str) -> String {
    let mut text = debug.to_string();
    for wrapper in ["Term(", "LogIndex(", "NodeId("] {
        while let Some(start) = text.find(wrapper) {
            let inner = start + wrapper.len();
            let end = inner + text[inner..].find(')').expect("a closing parenthesis");
            text.replace_range(end..=end, "");
            text.replace_range(start..inner, "");
        }
    }
    while let Some(start) = text.find("Command([") {
        let inner = start + "Command([".len();
        let end = inner + text[inner..].find("])").expect("the bytes' end");
        let bytes: Vec<u8> = text[inner..end]
            .split(", ")
            .map(|b| b.parse().expect("a byte"))
            .collect();
        let shown = format!("Command({:?})", String::from_utf8_lossy(&bytes));
        text.replace_range(start..end + 2, &shown);
    }
    text
}

/// One block of a script: a command and the trace it must print.
struct Step {
    command: String,
    expected: String,
    /// Comment lines above the command, kept when the file is rewritten.
    comments: String,
}

/// Splits a script into steps: comments, the command, `----`, the trace,
/// and a blank line between steps.
fn parse(script: &str) -> Vec<Step> {
    let mut steps = Vec::new();
    let mut lines = script.lines().peekable();
    while lines.peek().is_some() {
        let mut comments = String::new();
        let mut command = None;
        for line in lines.by_ref() {
            if line.starts_with('#')
                || (line.is_empty() && command.is_none() && !comments.is_empty())
            {
                comments.push_str(line);
                comments.push('\n');
            } else if line.is_empty() {
                continue;
            } else {
                command = Some(line.to_string());
                break;
            }
        }
        let Some(command) = command else { break };
        assert_eq!(lines.next(), Some("----"), "no ---- under {command:?}");
        let mut expected = String::new();
        for line in lines.by_ref() {
            if line.is_empty() {
                break;
            }
            expected.push_str(line);
            expected.push('\n');
        }
        steps.push(Step {
            command,
            expected,
            comments,
        });
    }
    steps
}

/// Runs the script at `testdata/NAME` on a cluster of `size` nodes.
fn run_script(name: &str, size: u64) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/raft/testdata")
        .join(name);
    let script = std::fs::read_to_string(&path).expect("the script");
    let rewrite = std::env::var("BELLWETHER_REWRITE_TRACES").is_ok_and(|v| v == "1");
    let mut cluster = TraceCluster::new(size);
    let mut rewritten = String::new();
    for step in parse(&script) {
        let actual = cluster.run(&step.command);
        if rewrite {
            let _ = write!(
                rewritten,
                "{}{}\n----\n{actual}\n",
                step.comments, step.command
            );
        } else {
            assert_eq!(
                actual, step.expected,
                "{name}: `{}` printed another trace (expected right, actual left)",
                step.command
            );
        }
    }
    if rewrite {
        std::fs::write(&path, rewritten.trim_end().to_string() + "\n").expect("rewrite the script");
    }
}

#[test]
fn leader_election_replication_and_a_partitioned_leader() {
    run_script("leader_election.trace", 3);
}

#[test]
fn the_plain_text_drops_wrappers_and_shows_commands() {
    assert_eq!(
        plain("Entry { term: Term(2), index: LogIndex(3), payload: Command([104, 105]) }"),
        "Entry { term: 2, index: 3, payload: Command(\"hi\") }"
    );
}
