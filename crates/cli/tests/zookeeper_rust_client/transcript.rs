//! The canonical transcript the Rust-client scenarios write: one line per
//! step, with what differs between two correct ZooKeeper servers (zxid
//! values, session ids, clock readings, the run's random root, the order
//! of a children list) normalized, so that two servers' transcripts can be
//! compared line by line:
//!
//! * paths are relative to the scenario's own node (`.` is that node);
//! * a zxid prints as `z<rank>`, its rank among every zxid its scenario
//!   saw, smallest first: equality and order stay, gaps and offsets go;
//! * ephemeralOwner prints as the name of the session (`s1`, `s2`...),
//!   `0`, or in hex when it is no session of the run (a container's
//!   `0x8000000000000000`, a TTL node's `0xff` marker and TTL);
//! * ctime and mtime print as `t=same|later|EARLIER` (mtime against
//!   ctime) and `clock=ok` when both are within ten minutes of this
//!   machine's clock;
//! * data prints as text when short, else as its length and a checksum.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{SystemTime, UNIX_EPOCH};
use zookeeper_client as zk;

/// Data longer than this prints as its length and a checksum.
const DATA_SHOWN_BYTES_MAX: usize = 48;
/// How far a node's time may be from this machine's clock and still be
/// `clock=ok`.
const CLOCK_SKEW_MS_MAX: i64 = 600_000;

/// One word of a line: text, or a zxid printed as its rank at the end.
#[derive(Clone, Debug)]
pub enum Part {
    Text(String),
    Zxid(i64),
}

impl From<&str> for Part {
    fn from(text: &str) -> Part {
        Part::Text(text.to_string())
    }
}

impl From<String> for Part {
    fn from(text: String) -> Part {
        Part::Text(text)
    }
}

/// The lines of one run and what printing them needs.
pub struct Transcript {
    /// The node the current scenario works under (absolute).
    pub base: String,
    /// Every line, as parts, with the scenario it belongs to.
    lines: Vec<(usize, Vec<Part>)>,
    /// Every zxid each scenario saw, to rank them: ranks are per
    /// scenario, so that one zxid answered differently shifts no other
    /// scenario's ranks.
    zxids: Vec<BTreeSet<i64>>,
    /// Session id -> the name the scenario gave it.
    sessions: BTreeMap<i64, String>,
}

impl Transcript {
    pub fn new(base: &str) -> Transcript {
        Transcript {
            base: base.to_string(),
            lines: Vec::new(),
            zxids: vec![BTreeSet::new()],
            sessions: BTreeMap::new(),
        }
    }

    /// Session `id` prints as `name` from now on.
    pub fn name_session(&mut self, id: i64, name: &str) {
        self.sessions.insert(id, name.to_string());
    }

    /// Starts a scenario working under `base`: its zxids rank apart.
    pub fn begin(&mut self, base: &str) {
        self.base = base.to_string();
        self.zxids.push(BTreeSet::new());
    }

    /// Adds a line.
    pub fn line(&mut self, parts: Vec<Part>) {
        self.lines.push((self.zxids.len() - 1, parts));
    }

    /// `path` relative to the scenario's node.
    pub fn rel(&self, path: &str) -> String {
        if path == self.base {
            return ".".to_string();
        }
        match path.strip_prefix(&format!("{}/", self.base)) {
            Some(relative) => relative.to_string(),
            None => format!("OUTSIDE:{path}"),
        }
    }

    pub fn zxid(&mut self, zxid: i64) -> Part {
        self.zxids.last_mut().unwrap().insert(zxid);
        Part::Zxid(zxid)
    }

    pub fn owner(&self, owner: i64) -> String {
        match (owner, self.sessions.get(&owner)) {
            (0, _) => "0".to_string(),
            (_, Some(name)) => name.clone(),
            _ => format!("{owner:#x}"),
        }
    }

    /// A Stat, every field: versions, sizes, owner, zxid ranks, times.
    pub fn stat(&mut self, stat: &zk::Stat) -> Vec<Part> {
        if stat.is_invalid() {
            return vec!["{stat invalid}".into()];
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let order = match stat.mtime.cmp(&stat.ctime) {
            std::cmp::Ordering::Equal => "same",
            std::cmp::Ordering::Greater => "later",
            std::cmp::Ordering::Less => "EARLIER",
        };
        let recent = [stat.ctime, stat.mtime]
            .iter()
            .all(|t| (t - now).abs() < CLOCK_SKEW_MS_MAX);
        vec![
            format!(
                "{{v={} cv={} av={} len={} kids={} owner={}",
                stat.version,
                stat.cversion,
                stat.aversion,
                stat.data_length,
                stat.num_children,
                self.owner(stat.ephemeral_owner)
            )
            .into(),
            "cz=".into(),
            self.zxid(stat.czxid),
            "mz=".into(),
            self.zxid(stat.mzxid),
            "pz=".into(),
            self.zxid(stat.pzxid),
            format!("t={order} clock={}}}", if recent { "ok" } else { "off" }).into(),
        ]
    }

    pub fn data(data: &[u8]) -> String {
        if data.len() <= DATA_SHOWN_BYTES_MAX {
            return format!("{:?}", String::from_utf8_lossy(data));
        }
        // FNV-1a: enough to tell two values apart in a transcript.
        let sum = data.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ *b as u64).wrapping_mul(0x0100_0000_01b3)
        });
        format!("bytes(len={} fnv={sum:016x})", data.len())
    }

    pub fn children(names: &[String]) -> String {
        let mut names = names.to_vec();
        names.sort();
        format!("[{}]", names.join(", "))
    }

    pub fn acls(acls: &[zk::Acl]) -> String {
        let shown: Vec<String> = acls
            .iter()
            .map(|acl| format!("{} {}:{}", acl.permission(), acl.scheme(), acl.id()))
            .collect();
        format!("[{}]", shown.join(", "))
    }

    pub fn event(&self, event: &zk::WatchedEvent) -> String {
        if event.event_type == zk::EventType::Session {
            return format!("event Session {}", event.session_state);
        }
        format!(
            "event {} {} {}",
            event.event_type,
            event.session_state,
            self.rel(&event.path)
        )
    }

    /// The lines, zxids as ranks; a zxid sticks to the word before it.
    pub fn render(&self) -> String {
        let ranks: Vec<BTreeMap<i64, usize>> = self
            .zxids
            .iter()
            .map(|zxids| zxids.iter().enumerate().map(|(r, z)| (*z, r)).collect())
            .collect();
        let mut out = String::new();
        for (scenario, parts) in &self.lines {
            let ranks = &ranks[*scenario];
            let mut text = String::new();
            for part in parts {
                match part {
                    Part::Zxid(zxid) => text.push_str(&format!("z{}", ranks[zxid])),
                    Part::Text(word) if word.is_empty() => {}
                    Part::Text(word) => {
                        if !text.is_empty() && !text.ends_with('=') {
                            text.push(' ');
                        }
                        text.push_str(word);
                    }
                }
            }
            out.push_str(&text);
            out.push('\n');
        }
        out
    }
}

/// How an answer prints.
pub trait Answer {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part>;
}

impl Answer for () {
    fn parts(&self, _: &mut Transcript) -> Vec<Part> {
        vec!["ok".into()]
    }
}

impl Answer for zk::Stat {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        transcript.stat(self)
    }
}

impl Answer for Option<zk::Stat> {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        match self {
            Some(stat) => transcript.stat(stat),
            None => vec!["none".into()],
        }
    }
}

impl Answer for (Vec<u8>, zk::Stat) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = vec![Transcript::data(&self.0).into()];
        parts.extend(transcript.stat(&self.1));
        parts
    }
}

impl Answer for (zk::Stat, zk::CreateSequence) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = Vec::new();
        if self.1.into_i64() >= 0 {
            parts.push(format!("seq={}", self.1).into());
        }
        parts.extend(transcript.stat(&self.0));
        parts
    }
}

impl Answer for Vec<String> {
    fn parts(&self, _: &mut Transcript) -> Vec<Part> {
        vec![Transcript::children(self).into()]
    }
}

impl Answer for (Vec<String>, zk::Stat) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = vec![Transcript::children(&self.0).into()];
        parts.extend(transcript.stat(&self.1));
        parts
    }
}

impl Answer for usize {
    fn parts(&self, _: &mut Transcript) -> Vec<Part> {
        vec![self.to_string().into()]
    }
}

impl Answer for (Vec<zk::Acl>, zk::Stat) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = vec![Transcript::acls(&self.0).into()];
        parts.extend(transcript.stat(&self.1));
        parts
    }
}

impl Answer for Vec<zk::MultiWriteResult> {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts: Vec<Part> = vec!["[".into()];
        for (i, result) in self.iter().enumerate() {
            if i > 0 {
                parts.push("|".into());
            }
            match result {
                zk::MultiWriteResult::Check => parts.push("check".into()),
                zk::MultiWriteResult::Delete => parts.push("delete".into()),
                zk::MultiWriteResult::Create { path, stat } => {
                    parts.push(format!("create {}", transcript.rel(path)).into());
                    parts.extend(transcript.stat(stat));
                }
                zk::MultiWriteResult::SetData { stat } => {
                    parts.push("setData".into());
                    parts.extend(transcript.stat(stat));
                }
                other => parts.push(format!("?{other:?}").into()),
            }
        }
        parts.push("]".into());
        parts
    }
}

impl Answer for Vec<zk::MultiReadResult> {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts: Vec<Part> = vec!["[".into()];
        for (i, result) in self.iter().enumerate() {
            if i > 0 {
                parts.push("|".into());
            }
            match result {
                zk::MultiReadResult::Data { data, stat } => {
                    parts.push(Transcript::data(data).into());
                    parts.extend(transcript.stat(stat));
                }
                zk::MultiReadResult::Children { children } => {
                    parts.push(Transcript::children(children).into())
                }
                zk::MultiReadResult::Error { err } => parts.push(format!("!{err:?}").into()),
                other => parts.push(format!("?{other:?}").into()),
            }
        }
        parts.push("]".into());
        parts
    }
}

impl Answer for (Vec<u8>, zk::Stat, zk::OneshotWatcher) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = vec![Transcript::data(&self.0).into()];
        parts.extend(transcript.stat(&self.1));
        parts
    }
}

impl Answer for (Option<zk::Stat>, zk::OneshotWatcher) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        self.0.parts(transcript)
    }
}

impl Answer for (Vec<String>, zk::Stat, zk::OneshotWatcher) {
    fn parts(&self, transcript: &mut Transcript) -> Vec<Part> {
        let mut parts = vec![Transcript::children(&self.0).into()];
        parts.extend(transcript.stat(&self.1));
        parts
    }
}

impl Answer for (Vec<String>, zk::OneshotWatcher) {
    fn parts(&self, _: &mut Transcript) -> Vec<Part> {
        vec![Transcript::children(&self.0).into()]
    }
}

impl Answer for zk::PersistentWatcher {
    fn parts(&self, _: &mut Transcript) -> Vec<Part> {
        vec!["ok".into()]
    }
}
