//! Node configuration from three layers, lowest precedence first:
//!
//! 1. a TOML file (`--config FILE`);
//! 2. command-line flags;
//! 3. `BELLWETHER_*` environment variables.
//!
//! A later layer overrides a setting of an earlier one. The merged result
//! is validated once, and every error says which setting to fix and how.
//!
//! Every setting is declared once, as a field of [`ConfigLayer`]: its name
//! is its key in the file (`peer_listen`), its flag (`--peer-listen`) and,
//! in upper case after `BELLWETHER_`, its environment variable
//! (`BELLWETHER_PEER_LISTEN`). The field's doc is the flag's `--help`.
//! Flags and variables are parsed by the same clap declaration; lists are
//! comma-separated there (`BELLWETHER_PEERS=1=a:1,2=b:2`) and TOML arrays
//! in the file. A variable's value is trimmed, a list's empty items are
//! dropped, and a variable set to nothing counts as unset.
//!
//! ```toml
//! id = 1
//! cluster = "bellwether"
//! name = "n1"                        # as `etcdctl member list` shows it
//! peer_listen = "127.0.0.1:7001"
//! http_listen = "127.0.0.1:7101"
//! client_listen = "127.0.0.1:7201"   # etcd v3 gRPC API; omit to not serve it
//! zookeeper_listen = "127.0.0.1:7301" # ZooKeeper's client protocol; omit to not serve it
//! data_dir = "data/n1"
//! heartbeat_ms = 100
//! election_ms = 1000
//! priority = 0
//! answer_poll_us = 100
//! quota_backend_bytes = 2147483648  # the store's size limit (0: this default)
//! corrupt_check_ms = 0               # the leader compares members' HashKV (0: never)
//! client_connections_max = 1024      # etcd API connections open at once
//! auth_token_ttl = 300               # seconds an Authenticate token is valid
//! lease_reads = false                # serve linearizable reads from the leader's lease
//! detector_heartbeats = 3            # suspect a silent leader after at least this many heartbeats (0: off)
//! peers = ["1=127.0.0.1:7001", "2=127.0.0.1:7002", "3=127.0.0.1:7003"]
//! peer_http = ["1=127.0.0.1:7101", "2=127.0.0.1:7102", "3=127.0.0.1:7103"]
//! peer_client = ["1=127.0.0.1:7201", "2=127.0.0.1:7202", "3=127.0.0.1:7203"]
//! peer_zookeeper = ["1=127.0.0.1:7301", "2=127.0.0.1:7302", "3=127.0.0.1:7303"]
//! peer_priority = ["3=5"]            # every member's priority; unlisted: 0
//! # TLS (etcd's flags): the client and HTTP ports, then the peer port
//! cert_file = "tls/n1.pem"
//! key_file = "tls/n1-key.pem"
//! trusted_ca_file = "tls/ca.pem"     # with client_cert_auth: clients need a certificate
//! client_cert_auth = false
//! http_tls = false                   # the HTTP port serves HTTPS with cert_file
//! peer_cert_file = "tls/n1.pem"      # all three peer files: mutual TLS between members
//! peer_key_file = "tls/n1-key.pem"
//! peer_trusted_ca_file = "tls/ca.pem"
//! ```

use bellwether_core::NodeId;
use clap::{Args, CommandFactory, FromArgMatches, Parser};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

/// The default of `answer_poll_us`: long enough for most followers'
/// answers to a lone write on the test machine (the median came 48 µs
/// after the leader's fsync ended, the 90th percentile 87 µs).
pub const ANSWER_POLL_US_DEFAULT: u64 = 100;
/// The most `answer_poll_us` may be: the poll holds the member's loop.
pub const ANSWER_POLL_US_MAX: u64 = 1_000;
/// The default storage quota, etcd's: 2 GiB of the store's own count of
/// its retained history (`KvStore::size_bytes`). The store lives in
/// memory, so this also bounds the member's memory for data.
pub const QUOTA_BACKEND_BYTES_DEFAULT: u64 = 2 << 30;
/// What every setting's environment variable starts with.
pub const ENV_PREFIX: &str = "BELLWETHER_";

/// One layer of settings, every one optional: a file, the flags or the
/// environment. The one declaration of every setting (see the module doc).
#[derive(Args, Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer {
    /// Member id (1 or more).
    #[arg(long)]
    pub id: Option<u64>,
    /// Cluster name; peers of another cluster are refused.
    #[arg(long)]
    pub cluster: Option<String>,
    /// This member's name, as `etcdctl member list` shows it (default:
    /// n<id>).
    #[arg(long)]
    pub name: Option<String>,
    /// Address peers connect to (default: this member's entry in peers).
    #[arg(long)]
    pub peer_listen: Option<String>,
    /// Address of /metrics, /health, /ready, /status and the dashboard.
    #[arg(long)]
    pub http_listen: Option<String>,
    /// Address of the etcd v3 gRPC API for etcdctl and etcd SDKs (unset:
    /// not served).
    #[arg(long)]
    pub client_listen: Option<String>,
    /// Address of ZooKeeper's client protocol, for ZooKeeper clients
    /// (Curator, kazoo, zkCli) on the same data as the etcd API (unset: not
    /// served). Needs `client_listen`.
    #[arg(long)]
    pub zookeeper_listen: Option<String>,
    /// Data directory: the write-ahead log and snapshots.
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Leader heartbeat interval in ms (default 100).
    #[arg(long)]
    pub heartbeat_ms: Option<u64>,
    /// Minimum election timeout in ms; the timeout is drawn from [this,
    /// 2 × this) (default 1000).
    #[arg(long)]
    pub election_ms: Option<u64>,
    /// The adaptive detector's floor, in heartbeats: a follower suspects a
    /// silent leader once the silence is well past the leader's learned
    /// arrival pattern, never sooner than this many heartbeats and never
    /// later than election_ms, and asks the others in a pre-vote, which
    /// they refuse while they still hear the leader (default 3; 0: off,
    /// the fixed election timeout only; off with lease_reads).
    #[arg(long)]
    pub detector_heartbeats: Option<u64>,
    /// Leadership priority: a leader hands over to a caught-up member of
    /// higher priority (default 0).
    #[arg(long)]
    pub priority: Option<u32>,
    /// Microseconds a leader that has just fsynced a lone client's write
    /// polls for the followers' answers before its thread sleeps (0: never;
    /// default 100, at most 1000). See `Node::poll_for_answers`.
    #[arg(long)]
    pub answer_poll_us: Option<u64>,
    /// The storage quota in bytes, as etcd's flag: a write that would grow
    /// the store past it is refused with "database space exceeded" and
    /// raises the NOSPACE alarm (0: the default, 2 GiB).
    #[arg(long)]
    pub quota_backend_bytes: Option<u64>,
    /// Every this many ms the leader compares each member's history hash
    /// (HashKV) with its own and raises the CORRUPT alarm for one that
    /// differs; writes are then refused until it is cleared (0: never).
    #[arg(long)]
    pub corrupt_check_ms: Option<u64>,
    /// etcd API connections open at once, at most; past it a new one is
    /// closed at once (0: the default, 1024).
    #[arg(long)]
    pub client_connections_max: Option<u64>,
    /// Seconds a token from Authenticate is valid (etcd's --auth-token-ttl;
    /// 0: etcd's default, 300).
    #[arg(long)]
    pub auth_token_ttl: Option<u64>,
    /// Every member as id=host:port peer addresses, this one included.
    #[arg(long, value_delimiter = ',')]
    pub peers: Option<Vec<String>>,
    /// Members' HTTP addresses as id=host:port (for the dashboard and
    /// `bellwether status`).
    #[arg(long, value_delimiter = ',')]
    pub peer_http: Option<Vec<String>>,
    /// Members' etcd API addresses as id=host:port, so that a follower can
    /// forward writes to the leader.
    #[arg(long, value_delimiter = ',')]
    pub peer_client: Option<Vec<String>>,
    /// Members' ZooKeeper addresses as id=host:port, which
    /// `/zookeeper/config` lists (a member that joins later publishes its
    /// own).
    #[arg(long, value_delimiter = ',')]
    pub peer_zookeeper: Option<Vec<String>>,
    /// Every member's priority as id=priority (unlisted: 0); the same list
    /// on every member, so that the leader's hand-off rule works.
    #[arg(long, value_delimiter = ',')]
    pub peer_priority: Option<Vec<String>>,
    /// This member's certificate (PEM) for the client and HTTP ports
    /// (etcd's --cert-file); with the key, the client port serves TLS only.
    /// Needs key_file and trusted_ca_file.
    #[arg(long)]
    pub cert_file: Option<PathBuf>,
    /// The key of cert_file (PEM).
    #[arg(long)]
    pub key_file: Option<PathBuf>,
    /// Serve linearizable reads from the leader's lease instead of a
    /// ReadIndex round (every member must agree). Safe while no two
    /// members' clocks run at rates more than 10% apart; off by default.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub lease_reads: Option<bool>,
    /// The CA (PEM) that signs client certificates; members also check
    /// each other's client port with it.
    #[arg(long)]
    pub trusted_ca_file: Option<PathBuf>,
    /// Refuse clients without a certificate signed by trusted_ca_file
    /// (etcd's --client-cert-auth).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub client_cert_auth: Option<bool>,
    /// Serve the HTTP port (metrics, status, dashboard) as HTTPS with
    /// cert_file; it asks no client certificate, its routes are read-only.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub http_tls: Option<bool>,
    /// This member's peer certificate (PEM, etcd's --peer-cert-file): with
    /// the peer key and CA, members speak mutual TLS and refuse a peer
    /// without a certificate from peer_trusted_ca_file.
    #[arg(long)]
    pub peer_cert_file: Option<PathBuf>,
    /// The key of peer_cert_file (PEM).
    #[arg(long)]
    pub peer_key_file: Option<PathBuf>,
    /// The CA (PEM) that signs every member's peer certificate.
    #[arg(long)]
    pub peer_trusted_ca_file: Option<PathBuf>,
    /// Testing only (`bellwether verify`), slower: keep the log's appended
    /// bytes in the process until their fsync, so that a SIGKILL loses
    /// them as a power cut would.
    #[arg(long, hide = true, num_args = 0..=1, require_equals = true,
          default_missing_value = "true",
          value_parser = clap::builder::BoolishValueParser::new())]
    pub hold_unsynced_writes: Option<bool>,
    /// UNSAFE, for `bellwether verify`'s own test only: run a runtime
    /// broken on purpose (answers-before-fsync, applies-before-commit), to
    /// show that the checks catch it. It loses acknowledged writes.
    #[arg(long, hide = true)]
    pub unsafe_mutation: Option<String>,
}

/// The settings alone as a command, to parse flags or variables with.
#[derive(Parser)]
#[command(no_binary_name = true)]
struct SettingsCommand {
    #[command(flatten)]
    settings: ConfigLayer,
}

impl ConfigLayer {
    /// Reads a TOML file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read config file {}: {e}", path.display())))?;
        let layer: ConfigLayer = toml::from_str(&text)
            .map_err(|e| ConfigError(format!("config file {}: {e}", path.display())))?;
        if layer.hold_unsynced_writes.is_some() || layer.unsafe_mutation.is_some() {
            return Err(ConfigError(format!(
                "config file {}: hold_unsynced_writes and unsafe_mutation are testing flags, \
accepted only on the command line",
                path.display()
            )));
        }
        Ok(layer)
    }

    /// The layer as a config file.
    pub fn to_toml(&self) -> Result<String, ConfigError> {
        toml::to_string(self).map_err(|e| ConfigError(format!("cannot write the settings: {e}")))
    }

    /// Reads the `BELLWETHER_*` variable of every setting through `lookup`
    /// (the process environment in production, a map in tests), parsed as
    /// the setting's flag would be.
    pub fn from_env(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let command = SettingsCommand::command();
        let mut argv = Vec::new();
        // Hidden flags are for testing, taken from the command line only.
        for setting in command.get_arguments().filter(|s| !s.is_hide_set()) {
            let Some(long) = setting.get_long() else {
                continue;
            };
            let variable = env_variable(setting.get_id().as_str());
            let Some(value) = lookup(&variable) else {
                continue;
            };
            // As a shell or an env file may leave them: spaces around the
            // value, a list's empty items (`a,b,` or an empty variable).
            let value = value.trim();
            let value = match setting.get_value_delimiter() {
                Some(delimiter) => value
                    .split(delimiter)
                    .map(str::trim)
                    .filter(|item| !item.is_empty())
                    .collect::<Vec<_>>()
                    .join(&delimiter.to_string()),
                None => value.to_string(),
            };
            if value.is_empty() {
                continue; // set but empty: as if unset
            }
            let flag = format!("--{long}={value}");
            // Parsed alone first, so that an error names its variable.
            if let Err(error) = command.clone().try_get_matches_from([&flag]) {
                let reason = error.to_string();
                let reason = reason.lines().next().unwrap_or_default();
                let reason = reason.strip_prefix("error: ").unwrap_or(reason);
                return Err(ConfigError(format!("{variable}={value:?}: {reason}")));
            }
            argv.push(flag);
        }
        let matches = command
            .try_get_matches_from(argv)
            .map_err(|e| ConfigError(format!("the BELLWETHER_* variables: {e}")))?;
        let parsed = SettingsCommand::from_arg_matches(&matches)
            .map_err(|e| ConfigError(format!("the BELLWETHER_* variables: {e}")))?;
        Ok(parsed.settings)
    }

    /// `self` overridden by every setting `over` has. Both go through
    /// their serde form (a JSON object, which holds any u64, where TOML
    /// stops at i64), so no setting is listed here; a path that is not
    /// UTF-8 has no such form and is refused.
    pub fn merge(self, over: ConfigLayer) -> Result<ConfigLayer, ConfigError> {
        let object = |layer: &ConfigLayer| match serde_json::to_value(layer) {
            Ok(serde_json::Value::Object(settings)) => Ok(settings),
            Ok(_) => unreachable!("a struct is an object"),
            Err(e) => Err(ConfigError(format!(
                "a setting cannot be read as text: {e}"
            ))),
        };
        let mut merged = object(&self)?;
        for (name, value) in object(&over)? {
            if !value.is_null() {
                merged.insert(name, value);
            }
        }
        serde_json::from_value(serde_json::Value::Object(merged))
            .map_err(|e| ConfigError(format!("the merged settings: {e}")))
    }
}

/// The environment variable of the setting named `name`.
pub fn env_variable(name: &str) -> String {
    format!("{ENV_PREFIX}{}", name.to_uppercase())
}

/// Ticks run in a row when the clock says more are due (after a pause), at
/// most: past an election timeout's worth, more only repeat timeouts that
/// have long expired. With lease reads the configuration keeps an election
/// timeout within it, so a leader that wakes from a pause has counted its
/// lease out before it serves a read (checked here).
pub(crate) const MISSED_TICKS_MAX: u32 = 10_000;

/// A configuration that cannot run, with what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid configuration: {0}")]
pub struct ConfigError(pub String);

/// A validated node configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeConfig {
    /// This member.
    pub id: NodeId,
    /// Cluster name.
    pub cluster: String,
    /// This member's name in the member list.
    pub name: String,
    /// Where peers connect.
    pub peer_listen: SocketAddr,
    /// Where HTTP is served.
    pub http_listen: SocketAddr,
    /// Where the etcd v3 gRPC API is served, if at all.
    pub client_listen: Option<SocketAddr>,
    /// Where ZooKeeper's client protocol is served, if at all.
    pub zookeeper_listen: Option<SocketAddr>,
    /// Data directory.
    pub data_dir: PathBuf,
    /// Heartbeat interval.
    pub heartbeat_ms: u64,
    /// Minimum election timeout.
    pub election_ms: u64,
    /// This member's leadership priority.
    pub priority: u32,
    /// Linearizable reads from the leader's lease (see
    /// `bellwether_core::raft::RaftConfig::lease_reads`).
    pub lease_reads: bool,
    /// The adaptive detector's floor in heartbeats; 0 when it is off (see
    /// `bellwether_core::raft::RaftConfig::detector_floor_heartbeats`).
    pub detector_heartbeats: u64,
    /// Every member's priority (this one's included; members not listed
    /// have 0), so that the leader's hand-off rule works.
    pub priorities: BTreeMap<NodeId, u32>,
    /// Microseconds a leader polls for followers' answers after fsyncing a
    /// lone write; 0 never polls.
    pub answer_poll_us: u64,
    /// The storage quota in bytes; never 0.
    pub quota_backend_bytes: u64,
    /// The consistency check's interval in ms; 0: it does not run.
    pub corrupt_check_ms: u64,
    /// etcd API connections open at once, at most; never 0.
    pub client_connections_max: usize,
    /// How long an Authenticate token is valid; never 0.
    pub auth_token_ttl: std::time::Duration,
    /// Member id → peer address (includes this node).
    pub peers: BTreeMap<NodeId, SocketAddr>,
    /// Member id → HTTP address, where known.
    pub peer_http: BTreeMap<NodeId, SocketAddr>,
    /// Member id → etcd API address, where known.
    pub peer_client: BTreeMap<NodeId, SocketAddr>,
    /// Member id → ZooKeeper address, where known.
    pub peer_zookeeper: BTreeMap<NodeId, SocketAddr>,
    /// Set when this member joined a running cluster (`node --join`): the
    /// voters it was told of. It then starts as a learner of theirs, not
    /// as a voter of `peers`.
    pub join_voters: Vec<NodeId>,
    /// TLS on the client and HTTP ports, if set.
    pub client_tls: Option<ClientTlsFiles>,
    /// Mutual TLS between members, if set.
    pub peer_tls: Option<PeerTlsFiles>,
    /// Where the log's appended bytes wait for their fsync (in the kernel,
    /// unless `hold_unsynced_writes` or a mutation says otherwise).
    pub unsynced: bellwether_storage::Unsynced,
    /// The runtime: faithful, unless `unsafe_mutation` breaks it.
    pub runtime: bellwether_member::Runtime,
}

/// The files of the client and HTTP ports' TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTlsFiles {
    /// This member's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// The CA of client certificates, if any.
    pub trusted_ca: Option<PathBuf>,
    /// Whether every client must present a certificate the CA signed.
    pub client_cert_auth: bool,
    /// Whether the HTTP port serves HTTPS too.
    pub http: bool,
}

/// The files of the members' mutual TLS.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeerTlsFiles {
    /// This member's peer certificate chain (PEM).
    pub cert: PathBuf,
    /// Its key (PEM).
    pub key: PathBuf,
    /// The CA that signs every member's peer certificate.
    pub trusted_ca: PathBuf,
}

/// The client port's TLS files, checked for completeness.
pub fn client_tls(layer: &ConfigLayer) -> Result<Option<ClientTlsFiles>, ConfigError> {
    let auth = layer.client_cert_auth.unwrap_or(false);
    match (&layer.cert_file, &layer.key_file) {
        (Some(cert), Some(key)) => {
            if layer.trusted_ca_file.is_none() {
                return Err(ConfigError(
                    "client TLS needs trusted_ca_file too: members check each other's client port with it, and with client_cert_auth it signs client certificates"
                        .into(),
                ));
            }
            Ok(Some(ClientTlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                trusted_ca: layer.trusted_ca_file.clone(),
                client_cert_auth: auth,
                http: layer.http_tls.unwrap_or(false),
            }))
        }
        (None, None) if !auth && !layer.http_tls.unwrap_or(false) && layer.trusted_ca_file.is_none() => {
            Ok(None)
        }
        _ => Err(ConfigError(
            "client TLS needs both cert_file and key_file (trusted_ca_file, client_cert_auth and http_tls need them too)"
                .into(),
        )),
    }
}

/// The peer port's TLS files: all three or none.
fn peer_tls(layer: &ConfigLayer) -> Result<Option<PeerTlsFiles>, ConfigError> {
    match (
        &layer.peer_cert_file,
        &layer.peer_key_file,
        &layer.peer_trusted_ca_file,
    ) {
        (Some(cert), Some(key), Some(ca)) => Ok(Some(PeerTlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            trusted_ca: ca.clone(),
        })),
        (None, None, None) => Ok(None),
        _ => Err(ConfigError(
            "peer TLS is mutual: set peer_cert_file, peer_key_file and peer_trusted_ca_file together"
                .into(),
        )),
    }
}

fn address(setting: &str, value: &str) -> Result<SocketAddr, ConfigError> {
    value.parse().map_err(|_| {
        ConfigError(format!(
            "{setting} = {value:?} is not an address; write it as host:port, e.g. 127.0.0.1:7001"
        ))
    })
}

fn members(setting: &str, list: &[String]) -> Result<BTreeMap<NodeId, SocketAddr>, ConfigError> {
    let mut out = BTreeMap::new();
    for item in list {
        let (id, addr) = item.split_once('=').ok_or_else(|| {
            ConfigError(format!(
                "{setting}: {item:?} should be id=host:port, e.g. 2=127.0.0.1:7002"
            ))
        })?;
        let id: u64 = id
            .trim()
            .parse()
            .map_err(|_| ConfigError(format!("{setting}: {id:?} is not a member id")))?;
        if id == 0 {
            return Err(ConfigError(format!("{setting}: member ids start at 1")));
        }
        if out
            .insert(NodeId(id), address(setting, addr.trim())?)
            .is_some()
        {
            return Err(ConfigError(format!(
                "{setting}: member {id} is listed twice"
            )));
        }
    }
    Ok(out)
}

/// This member's priority and every member's, from `priority` and
/// `peer_priority`; the two must agree on this member's.
fn priorities(
    own: Option<u32>,
    list: &Option<Vec<String>>,
    id: NodeId,
    peers: &BTreeMap<NodeId, SocketAddr>,
) -> Result<(u32, BTreeMap<NodeId, u32>), ConfigError> {
    let mut map = BTreeMap::new();
    for item in list.as_deref().unwrap_or_default() {
        let (member, priority) = item.split_once('=').ok_or_else(|| {
            ConfigError(format!(
                "peer_priority: {item:?} should be id=priority, e.g. 3=5"
            ))
        })?;
        let member: u64 = member
            .trim()
            .parse()
            .map_err(|_| ConfigError(format!("peer_priority: {member:?} is not a member id")))?;
        let priority: u32 = priority.trim().parse().map_err(|_| {
            ConfigError(format!(
                "peer_priority: {priority:?} is not a priority (0 to {})",
                u32::MAX
            ))
        })?;
        if !peers.contains_key(&NodeId(member)) {
            return Err(ConfigError(format!(
                "peer_priority names member {member}, which peers does not list"
            )));
        }
        if map.insert(NodeId(member), priority).is_some() {
            return Err(ConfigError(format!(
                "peer_priority: member {member} is listed twice"
            )));
        }
    }
    let listed = map.get(&id).copied();
    let priority = match (own, listed) {
        (Some(own), Some(listed)) if own != listed => {
            return Err(ConfigError(format!(
                "priority ({own}) differs from this member's entry in peer_priority ({listed}); give one"
            )))
        }
        (Some(own), _) => own,
        (None, listed) => listed.unwrap_or(0),
    };
    map.insert(id, priority);
    map.retain(|_, p| *p != 0);
    Ok((priority, map))
}

/// This member's id, every member's peer address and this member's own,
/// from `id` and `peers`: the id must be set and listed.
fn id_and_peers(
    layer: &ConfigLayer,
) -> Result<(NodeId, BTreeMap<NodeId, SocketAddr>, SocketAddr), ConfigError> {
    let id = layer.id.ok_or_else(|| {
        ConfigError("id is missing: set --id, BELLWETHER_ID or `id` in the file".into())
    })?;
    if id == 0 {
        return Err(ConfigError("id must be 1 or more".into()));
    }
    let peers = members("peers", layer.peers.as_deref().unwrap_or_default())?;
    if peers.is_empty() {
        return Err(ConfigError(
            "peers is missing: list every member as id=host:port, this one included".into(),
        ));
    }
    let own = *peers.get(&NodeId(id)).ok_or_else(|| {
        ConfigError(format!(
            "peers does not list this node's id {id}; add {id}=host:port"
        ))
    })?;
    Ok((NodeId(id), peers, own))
}

/// The heartbeat and the minimum election timeout in ms (defaults 100 and
/// 1000): an election timeout under two heartbeats would let followers
/// campaign against a healthy leader.
/// The adaptive detector's floor in heartbeats: 3 unless set, and off
/// with lease reads (a follower that suspects early may vote inside the
/// leader's lease).
fn detector_heartbeats(
    set: Option<u64>,
    lease_reads: bool,
    heartbeat_ms: u64,
    election_ms: u64,
) -> Result<u64, ConfigError> {
    match set {
        None if lease_reads => Ok(0),
        None => Ok(DETECTOR_HEARTBEATS_DEFAULT.min(election_ms / heartbeat_ms)),
        Some(0) => Ok(0),
        Some(_) if lease_reads => Err(ConfigError(
            "detector_heartbeats must be 0 with lease_reads: a follower that suspects its leader early may vote inside the leader's lease".into(),
        )),
        Some(n) if n.saturating_mul(heartbeat_ms) > election_ms => Err(ConfigError(format!(
            "detector_heartbeats ({n}) × heartbeat_ms ({heartbeat_ms}) must not exceed election_ms ({election_ms}): the detector only ever suspects sooner than the election timeout"
        ))),
        Some(n) => Ok(n),
    }
}

/// The adaptive detector's default floor, in heartbeats.
pub const DETECTOR_HEARTBEATS_DEFAULT: u64 = 3;

fn heartbeat_and_election_ms(
    heartbeat_ms: Option<u64>,
    election_ms: Option<u64>,
) -> Result<(u64, u64), ConfigError> {
    let heartbeat_ms = heartbeat_ms.unwrap_or(100);
    let election_ms = election_ms.unwrap_or(1000);
    // `election_ms / 2 < heartbeat_ms` is `election_ms < 2 * heartbeat_ms`
    // without the overflow of a huge heartbeat.
    if heartbeat_ms == 0 || election_ms / 2 < heartbeat_ms {
        return Err(ConfigError(format!(
            "election_ms ({election_ms}) must be at least twice heartbeat_ms ({heartbeat_ms}), and heartbeat_ms at least 1"
        )));
    }
    Ok((heartbeat_ms, election_ms))
}

/// The runtime `unsafe_mutation` names (faithful when unset).
fn runtime(name: Option<&str>) -> Result<bellwether_member::Runtime, ConfigError> {
    use bellwether_member::Runtime;
    let Some(name) = name else {
        return Ok(Runtime::Faithful);
    };
    Runtime::named(name).ok_or_else(|| {
        let names: Vec<&str> = Runtime::NAMES.iter().map(|(_, n)| *n).collect();
        ConfigError(format!(
            "unsafe_mutation {name:?} is none of {}",
            names.join(", ")
        ))
    })
}

/// Where appended log bytes wait for their fsync: held in the process for
/// `verify` (`hold`), and past their fsync when answering before the fsync
/// is the mutation (a SIGKILL can show that only when bytes are held).
fn unsynced(
    hold: Option<bool>,
    runtime: bellwether_member::Runtime,
) -> bellwether_storage::Unsynced {
    use bellwether_storage::Unsynced;
    match (runtime, hold) {
        (bellwether_member::Runtime::AnswersBeforeFsync, _) => Unsynced::HeldPastTheirFsync,
        (_, Some(true)) => Unsynced::HeldInProcess,
        _ => Unsynced::InKernel,
    }
}

/// `answer_poll_us`, defaulted and bounded: the poll holds the member's
/// loop, so it may not be long.
fn answer_poll_us(answer_poll_us: Option<u64>) -> Result<u64, ConfigError> {
    let answer_poll_us = answer_poll_us.unwrap_or(ANSWER_POLL_US_DEFAULT);
    if answer_poll_us > ANSWER_POLL_US_MAX {
        return Err(ConfigError(format!(
            "answer_poll_us ({answer_poll_us}) must be at most {ANSWER_POLL_US_MAX}; 0 turns polling off"
        )));
    }
    Ok(answer_poll_us)
}

/// `quota_backend_bytes` in bytes: unset or 0 is the default (2 GiB), as
/// etcd reads its flag.
fn quota_backend_bytes(bytes: Option<u64>) -> u64 {
    match bytes {
        None | Some(0) => QUOTA_BACKEND_BYTES_DEFAULT,
        Some(bytes) => bytes,
    }
}

/// `client_connections_max`: unset or 0 is the default (1,024), and any
/// value is capped at 2^20, so a mistyped huge number stays a bound.
fn client_connections_max(max: Option<u64>) -> usize {
    match max {
        None | Some(0) => crate::etcd::client_limits::CLIENT_CONNECTIONS_MAX_DEFAULT,
        Some(max) => usize::try_from(max).unwrap_or(usize::MAX).min(1 << 20),
    }
}

/// `auth_token_ttl` as a duration: unset or 0 is etcd's default (300 s),
/// and any value is capped at a year, so a mistyped huge number stays a
/// bound.
fn auth_token_ttl(seconds: Option<u64>) -> std::time::Duration {
    match seconds {
        None | Some(0) => crate::etcd::auth_gate::AUTH_TOKEN_TTL_DEFAULT,
        Some(seconds) => std::time::Duration::from_secs(seconds.min(365 * 24 * 3600)),
    }
}

impl NodeConfig {
    /// Validates a merged layer.
    pub fn from_layer(layer: ConfigLayer) -> Result<Self, ConfigError> {
        let client_tls = client_tls(&layer)?;
        let peer_tls = peer_tls(&layer)?;
        let (id, peers, own) = id_and_peers(&layer)?;
        let peer_listen = match &layer.peer_listen {
            Some(value) => address("peer_listen", value)?,
            None => own,
        };
        let http_listen = address(
            "http_listen",
            layer.http_listen.as_deref().unwrap_or("127.0.0.1:0"),
        )?;
        let client_listen = layer
            .client_listen
            .as_deref()
            .map(|a| address("client_listen", a))
            .transpose()?;
        let zookeeper_listen = layer
            .zookeeper_listen
            .as_deref()
            .map(|a| address("zookeeper_listen", a))
            .transpose()?;
        if zookeeper_listen.is_some() && client_listen.is_none() {
            return Err(ConfigError(
                "zookeeper_listen needs client_listen: ZooKeeper's sessions are served by \
                 the same services as the etcd API"
                    .into(),
            ));
        }
        let data_dir = layer.data_dir.ok_or_else(|| {
            ConfigError(
                "data_dir is missing: set --data-dir, BELLWETHER_DATA_DIR or `data_dir`".into(),
            )
        })?;
        let (heartbeat_ms, election_ms) =
            heartbeat_and_election_ms(layer.heartbeat_ms, layer.election_ms)?;
        let answer_poll_us = answer_poll_us(layer.answer_poll_us)?;
        let runtime = runtime(layer.unsafe_mutation.as_deref())?;
        let (priority, priorities) = priorities(layer.priority, &layer.peer_priority, id, &peers)?;
        let lease_reads = layer.lease_reads.unwrap_or(false);
        let election_ticks = election_ms / (heartbeat_ms / 10).max(1);
        if lease_reads && election_ticks > u64::from(MISSED_TICKS_MAX) {
            return Err(ConfigError(format!(
                "lease_reads needs election_ms at most {} ticks of heartbeat_ms / 10 \
                 (here {election_ticks}): a leader woken from a pause counts at most \
                 that many ticks before it serves a read; raise heartbeat_ms or lower election_ms",
                MISSED_TICKS_MAX
            )));
        }
        let detector_heartbeats = detector_heartbeats(
            layer.detector_heartbeats,
            lease_reads,
            heartbeat_ms,
            election_ms,
        )?;
        let cluster = layer.cluster.unwrap_or_else(|| "bellwether".to_string());
        if cluster.is_empty() || cluster.len() > 255 {
            return Err(ConfigError("cluster must be 1 to 255 bytes".into()));
        }
        let name = layer.name.unwrap_or_else(|| format!("n{}", id.0));
        if name.is_empty() || name.len() > 255 {
            return Err(ConfigError("name must be 1 to 255 bytes".into()));
        }
        let config = NodeConfig {
            id,
            cluster,
            name,
            peer_listen,
            http_listen,
            client_listen,
            zookeeper_listen,
            data_dir,
            heartbeat_ms,
            election_ms,
            priority,
            priorities,
            lease_reads,
            detector_heartbeats,
            answer_poll_us,
            quota_backend_bytes: quota_backend_bytes(layer.quota_backend_bytes),
            corrupt_check_ms: layer.corrupt_check_ms.unwrap_or(0),
            client_connections_max: client_connections_max(layer.client_connections_max),
            auth_token_ttl: auth_token_ttl(layer.auth_token_ttl),
            peers,
            peer_http: members("peer_http", layer.peer_http.as_deref().unwrap_or_default())?,
            peer_client: members(
                "peer_client",
                layer.peer_client.as_deref().unwrap_or_default(),
            )?,
            peer_zookeeper: members(
                "peer_zookeeper",
                layer.peer_zookeeper.as_deref().unwrap_or_default(),
            )?,
            join_voters: Vec::new(),
            client_tls,
            peer_tls,
            unsynced: unsynced(layer.hold_unsynced_writes, runtime),
            runtime,
        };
        config.assert_valid();
        Ok(config)
    }

    /// What validation guarantees every part of the member that reads the
    /// configuration; checked on each validated configuration.
    fn assert_valid(&self) {
        assert!(
            self.id.0 >= 1 && self.peers.contains_key(&self.id),
            "a member's id is 1 or more and peers lists it"
        );
        assert!(
            self.heartbeat_ms >= 1 && self.election_ms / 2 >= self.heartbeat_ms,
            "election_ms >= 2 * heartbeat_ms >= 2"
        );
        assert!(
            self.answer_poll_us <= ANSWER_POLL_US_MAX,
            "answer polling is bounded"
        );
        assert!(
            self.quota_backend_bytes > 0
                && self.client_connections_max > 0
                && !self.auth_token_ttl.is_zero(),
            "the quota, the connection bound and the token lifetime are never 0"
        );
        assert!(
            !self.cluster.is_empty() && self.cluster.len() <= 255,
            "a cluster name is 1 to 255 bytes"
        );
        assert_eq!(
            self.priorities.get(&self.id).copied().unwrap_or(0),
            self.priority,
            "the priorities agree with this member's own"
        );
        assert!(
            self.priorities.keys().all(|id| self.peers.contains_key(id)),
            "priorities name only members peers lists"
        );
    }

    /// Length of one Raft tick: a tenth of the heartbeat, at least 1 ms.
    pub fn tick_ms(&self) -> u64 {
        (self.heartbeat_ms / 10).max(1)
    }

    /// The largest snapshot this member writes, reads or accepts from its
    /// leader: enough for a store filled to the quota. A snapshot holds
    /// each retained write's key twice and its value once, with about 60
    /// bytes of numbers, where the quota counts the key and value once and
    /// 64 bytes; three quotas cover that for any key and value sizes, and
    /// the 256 MiB the event log and the leases add. The fixed 1 GiB this
    /// replaces stopped every member at about 2.6 million keys of 256-byte
    /// values (a 405 MB snapshot per million), under the default quota.
    pub fn snapshot_bytes_max(&self) -> u64 {
        self.quota_backend_bytes
            .saturating_mul(3)
            .saturating_add(SNAPSHOT_BYTES_BEYOND_QUOTA)
            .max(SNAPSHOT_BYTES_MAX_MIN)
    }
}

/// What a snapshot may hold beyond three quotas (see
/// [`NodeConfig::snapshot_bytes_max`]).
const SNAPSHOT_BYTES_BEYOND_QUOTA: u64 = 256 << 20;

/// The smallest bound on a snapshot, whatever the quota.
const SNAPSHOT_BYTES_MAX_MIN: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ConfigLayer {
        ConfigLayer {
            id: Some(1),
            peers: Some(vec!["1=127.0.0.1:7001".into(), "2=127.0.0.1:7002".into()]),
            data_dir: Some("d".into()),
            ..ConfigLayer::default()
        }
    }

    #[test]
    fn file_then_flags_then_environment() {
        let file: ConfigLayer = toml::from_str("id = 1\nheartbeat_ms = 50\nelection_ms = 500\npeers = [\"1=127.0.0.1:7001\"]\ndata_dir = \"x\"").unwrap();
        let flags = ConfigLayer {
            heartbeat_ms: Some(20),
            ..ConfigLayer::default()
        };
        let env = ConfigLayer::from_env(|name| {
            (name == "BELLWETHER_ELECTION_MS").then(|| "400".to_string())
        })
        .unwrap();
        let config =
            NodeConfig::from_layer(file.merge(flags).unwrap().merge(env).unwrap()).unwrap();
        assert_eq!((config.heartbeat_ms, config.election_ms), (20, 400));
        assert_eq!(config.peer_listen, "127.0.0.1:7001".parse().unwrap());
    }

    #[test]
    fn zookeeper_is_served_only_beside_the_etcd_api() {
        let alone = ConfigLayer {
            zookeeper_listen: Some("127.0.0.1:7301".into()),
            client_listen: None,
            ..base()
        };
        let error = NodeConfig::from_layer(alone).unwrap_err().0;
        assert!(
            error.contains("zookeeper_listen needs client_listen"),
            "{error}"
        );
        let beside = ConfigLayer {
            zookeeper_listen: Some("127.0.0.1:7301".into()),
            client_listen: Some("127.0.0.1:7201".into()),
            ..base()
        };
        let config = NodeConfig::from_layer(beside).unwrap();
        assert_eq!(
            config.zookeeper_listen,
            Some("127.0.0.1:7301".parse().unwrap())
        );
        let garbled = ConfigLayer {
            zookeeper_listen: Some("nowhere".into()),
            client_listen: Some("127.0.0.1:7201".into()),
            ..base()
        };
        let error = NodeConfig::from_layer(garbled).unwrap_err().0;
        assert!(error.contains("zookeeper_listen"), "{error}");
    }

    #[test]
    fn answer_polling_defaults_on_can_be_turned_off_and_is_bounded() {
        let config = NodeConfig::from_layer(base()).unwrap();
        assert_eq!(config.answer_poll_us, ANSWER_POLL_US_DEFAULT);
        let env = ConfigLayer::from_env(|name| {
            (name == "BELLWETHER_ANSWER_POLL_US").then(|| "0".to_string())
        })
        .unwrap();
        assert_eq!(
            NodeConfig::from_layer(base().merge(env).unwrap())
                .unwrap()
                .answer_poll_us,
            0
        );
        let too_long = ConfigLayer {
            answer_poll_us: Some(ANSWER_POLL_US_MAX + 1),
            ..base()
        };
        let error = NodeConfig::from_layer(too_long).unwrap_err().0;
        assert!(
            error.contains("answer_poll_us (1001) must be at most 1000"),
            "{error}"
        );
    }

    #[test]
    fn the_detector_is_on_by_default_off_with_lease_reads_and_never_past_the_timeout() {
        let config = NodeConfig::from_layer(base()).unwrap();
        assert_eq!(config.detector_heartbeats, DETECTOR_HEARTBEATS_DEFAULT);
        let raft = crate::node::raft_config_of(&config);
        let bounds = raft.detector_bounds().expect("on by default");
        assert_eq!(bounds.floor_ticks, 3 * raft.heartbeat_ticks);
        assert_eq!(bounds.ceiling_ticks, raft.election_ticks_min);
        assert!(raft.validate().is_ok());
        let with = |flags: &[&str]| {
            let parsed = SettingsCommand::try_parse_from(flags).unwrap().settings;
            NodeConfig::from_layer(base().merge(parsed).unwrap())
        };
        let leased = with(&["--lease-reads"]).unwrap();
        assert_eq!(leased.detector_heartbeats, 0);
        assert!(crate::node::raft_config_of(&leased).validate().is_ok());
        let error = with(&["--lease-reads", "--detector-heartbeats", "3"]).unwrap_err();
        assert!(error.0.contains("lease_reads"), "{error}");
        let error = with(&["--detector-heartbeats", "11"]).unwrap_err();
        assert!(error.0.contains("must not exceed election_ms"), "{error}");
        assert_eq!(
            with(&["--detector-heartbeats", "0"])
                .unwrap()
                .detector_heartbeats,
            0
        );
    }

    #[test]
    fn lease_reads_are_off_unless_asked_for_and_give_a_valid_raft_configuration() {
        let config = NodeConfig::from_layer(base()).unwrap();
        assert!(!config.lease_reads);
        let raft = crate::node::raft_config_of(&config);
        assert!(!raft.lease_reads && raft.hint_slot_ticks > 0);
        let parsed = SettingsCommand::try_parse_from(["--lease-reads"])
            .unwrap()
            .settings;
        let config = NodeConfig::from_layer(base().merge(parsed).unwrap()).unwrap();
        assert!(config.lease_reads);
        let raft = crate::node::raft_config_of(&config);
        assert!(raft.lease_reads && raft.hint_slot_ticks == 0);
        assert!(
            raft.validate().is_ok(),
            "leases need CheckQuorum and stickiness"
        );
    }

    #[test]
    fn every_members_priority_is_known_and_must_agree_with_our_own() {
        let listed = ConfigLayer {
            peer_priority: Some(vec!["2=5".into()]),
            ..base()
        };
        let config = NodeConfig::from_layer(listed.clone()).unwrap();
        assert_eq!(config.priority, 0);
        assert_eq!(config.priorities, BTreeMap::from([(NodeId(2), 5)]));
        let own = ConfigLayer {
            priority: Some(3),
            ..listed.clone()
        };
        let config = NodeConfig::from_layer(own).unwrap();
        assert_eq!(
            config.priorities,
            BTreeMap::from([(NodeId(1), 3), (NodeId(2), 5)])
        );
        let disagree = ConfigLayer {
            priority: Some(3),
            peer_priority: Some(vec!["1=4".into()]),
            ..base()
        };
        let error = NodeConfig::from_layer(disagree).unwrap_err().0;
        assert!(
            error.contains("differs from this member's entry"),
            "{error}"
        );
        let stranger = ConfigLayer {
            peer_priority: Some(vec!["9=1".into()]),
            ..base()
        };
        let error = NodeConfig::from_layer(stranger).unwrap_err().0;
        assert!(error.contains("which peers does not list"), "{error}");
        let env = ConfigLayer::from_env(|name| {
            (name == "BELLWETHER_PEER_PRIORITY").then(|| "1=2, 2=7".to_string())
        })
        .unwrap();
        let config = NodeConfig::from_layer(base().merge(env).unwrap()).unwrap();
        assert_eq!((config.priority, config.priorities[&NodeId(2)]), (2, 7));
    }

    #[test]
    fn tls_files_come_complete_or_not_at_all() {
        let none = NodeConfig::from_layer(base()).unwrap();
        assert_eq!((none.client_tls, none.peer_tls), (None, None));
        let env = ConfigLayer::from_env(|name| {
            let value = match name {
                "BELLWETHER_CERT_FILE" => "c.pem",
                "BELLWETHER_KEY_FILE" => "k.pem",
                "BELLWETHER_TRUSTED_CA_FILE" => "ca.pem",
                "BELLWETHER_CLIENT_CERT_AUTH" => "true",
                "BELLWETHER_PEER_CERT_FILE" => "p.pem",
                "BELLWETHER_PEER_KEY_FILE" => "pk.pem",
                "BELLWETHER_PEER_TRUSTED_CA_FILE" => "ca.pem",
                _ => return None,
            };
            Some(value.to_string())
        })
        .unwrap();
        let config = NodeConfig::from_layer(base().merge(env).unwrap()).unwrap();
        let client = config.client_tls.unwrap();
        assert!(client.client_cert_auth);
        assert_eq!(client.trusted_ca, Some(PathBuf::from("ca.pem")));
        assert_eq!(config.peer_tls.unwrap().key, PathBuf::from("pk.pem"));
        let half = ConfigLayer {
            cert_file: Some("c.pem".into()),
            ..base()
        };
        let error = NodeConfig::from_layer(half).unwrap_err().0;
        assert!(error.contains("both cert_file and key_file"), "{error}");
        let without_ca = ConfigLayer {
            cert_file: Some("c.pem".into()),
            key_file: Some("k.pem".into()),
            ..base()
        };
        let error = NodeConfig::from_layer(without_ca).unwrap_err().0;
        assert!(error.contains("needs trusted_ca_file"), "{error}");
        let peer_half = ConfigLayer {
            peer_cert_file: Some("p.pem".into()),
            peer_key_file: Some("pk.pem".into()),
            ..base()
        };
        let error = NodeConfig::from_layer(peer_half).unwrap_err().0;
        assert!(error.contains("peer TLS is mutual"), "{error}");
        let bad = ConfigLayer::from_env(|name| {
            (name == "BELLWETHER_CLIENT_CERT_AUTH").then(|| "maybe".to_string())
        });
        let error = bad.unwrap_err().0;
        assert!(
            error.starts_with("BELLWETHER_CLIENT_CERT_AUTH=\"maybe\": invalid value"),
            "{error}"
        );
    }

    #[test]
    fn errors_say_what_to_fix() {
        let missing_self = ConfigLayer {
            id: Some(3),
            ..base()
        };
        assert!(NodeConfig::from_layer(missing_self)
            .unwrap_err()
            .0
            .contains("add 3=host:port"));
        let bad_timing = ConfigLayer {
            heartbeat_ms: Some(100),
            election_ms: Some(150),
            ..base()
        };
        assert!(NodeConfig::from_layer(bad_timing)
            .unwrap_err()
            .0
            .contains("at least twice"));
        let bad_peer = ConfigLayer {
            peers: Some(vec!["1-127.0.0.1:7001".into()]),
            ..base()
        };
        assert!(NodeConfig::from_layer(bad_peer)
            .unwrap_err()
            .0
            .contains("id=host:port"));
        let unknown: Result<ConfigLayer, _> = toml::from_str("idd = 1");
        assert!(unknown.is_err(), "a misspelt setting is refused");
        let env = ConfigLayer::from_env(|_| Some("x".into()));
        let error = env.unwrap_err().0;
        assert!(
            error.starts_with("BELLWETHER_ID=\"x\": invalid value 'x' for '--id <ID>'"),
            "{error}"
        );
    }

    /// Every setting set, each to a value of its type.
    fn every_setting() -> ConfigLayer {
        ConfigLayer {
            id: Some(2),
            cluster: Some("c".into()),
            name: Some("second".into()),
            peer_listen: Some("127.0.0.1:1".into()),
            http_listen: Some("127.0.0.1:2".into()),
            client_listen: Some("127.0.0.1:3".into()),
            zookeeper_listen: Some("127.0.0.1:13".into()),
            data_dir: Some("d".into()),
            heartbeat_ms: Some(4),
            election_ms: Some(5),
            priority: Some(6),
            answer_poll_us: Some(7),
            quota_backend_bytes: Some(8),
            corrupt_check_ms: Some(9),
            client_connections_max: Some(10),
            auth_token_ttl: Some(11),
            lease_reads: Some(true),
            detector_heartbeats: Some(12),
            peers: Some(vec!["1=127.0.0.1:1".into(), "2=127.0.0.1:4".into()]),
            peer_http: Some(vec!["1=127.0.0.1:2".into()]),
            peer_client: Some(vec!["1=127.0.0.1:3".into()]),
            peer_zookeeper: Some(vec!["1=127.0.0.1:14".into()]),
            peer_priority: Some(vec!["1=3".into(), "2=6".into()]),
            cert_file: Some("c.pem".into()),
            key_file: Some("k.pem".into()),
            trusted_ca_file: Some("ca.pem".into()),
            client_cert_auth: Some(true),
            http_tls: Some(false),
            peer_cert_file: Some("p.pem".into()),
            peer_key_file: Some("pk.pem".into()),
            peer_trusted_ca_file: Some("pca.pem".into()),
            // The testing flags are taken from the command line only.
            hold_unsynced_writes: None,
            unsafe_mutation: None,
        }
    }

    /// The layer's settings as (name, text of its value) pairs, lists
    /// comma-separated, as a flag or a variable gives them.
    fn as_text(layer: &ConfigLayer) -> Vec<(String, String)> {
        toml::Table::try_from(layer)
            .unwrap()
            .into_iter()
            .map(|(name, value)| {
                let text = match value {
                    toml::Value::String(text) => text,
                    toml::Value::Array(items) => items
                        .iter()
                        .map(|item| item.as_str().unwrap().to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                    other => other.to_string(),
                };
                (name, text)
            })
            .collect()
    }

    #[test]
    fn every_setting_is_read_alike_from_the_file_a_flag_and_the_environment() {
        let all = every_setting();
        let settings = as_text(&all);
        let declared = SettingsCommand::command()
            .get_arguments()
            .filter(|s| !s.is_hide_set())
            .count();
        assert_eq!(settings.len(), declared, "every setting is set once here");

        let file: ConfigLayer = toml::from_str(&all.to_toml().unwrap()).unwrap();
        assert_eq!(file, all);

        let flags: Vec<String> = settings
            .iter()
            .map(|(name, text)| format!("--{}={text}", name.replace('_', "-")))
            .collect();
        let parsed = SettingsCommand::try_parse_from(flags).unwrap();
        assert_eq!(parsed.settings, all);

        let variables: BTreeMap<String, String> = settings
            .iter()
            .map(|(name, text)| (env_variable(name), text.clone()))
            .collect();
        let env = ConfigLayer::from_env(|name| variables.get(name).cloned()).unwrap();
        assert_eq!(env, all);
        assert_eq!(
            ConfigLayer::from_env(|_| None).unwrap(),
            ConfigLayer::default()
        );
    }

    #[test]
    fn the_testing_flags_come_from_the_command_line_only() {
        let flags = [
            "--hold-unsynced-writes",
            "--unsafe-mutation=answers-before-fsync",
        ];
        let parsed = SettingsCommand::try_parse_from(flags).unwrap().settings;
        assert_eq!(parsed.hold_unsynced_writes, Some(true));
        assert_eq!(
            parsed.unsafe_mutation.as_deref(),
            Some("answers-before-fsync")
        );
        let variables = BTreeMap::from([
            ("BELLWETHER_HOLD_UNSYNCED_WRITES", "true"),
            ("BELLWETHER_UNSAFE_MUTATION", "answers-before-fsync"),
        ]);
        let env = ConfigLayer::from_env(|name| variables.get(name).map(|v| v.to_string()));
        assert_eq!(
            env.unwrap(),
            ConfigLayer::default(),
            "variables are ignored"
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "unsafe_mutation = \"applies-before-commit\"\n").unwrap();
        let error = ConfigLayer::from_file(&path).unwrap_err().0;
        assert!(
            error.contains("accepted only on the command line"),
            "{error}"
        );
    }

    #[test]
    fn a_later_layer_overrides_only_the_settings_it_has() {
        let all = every_setting();
        assert_eq!(all.clone().merge(ConfigLayer::default()).unwrap(), all);
        assert_eq!(ConfigLayer::default().merge(all.clone()).unwrap(), all);
        let over = ConfigLayer {
            heartbeat_ms: Some(40),
            peers: Some(vec!["9=127.0.0.1:9".into()]),
            http_tls: Some(true),
            ..ConfigLayer::default()
        };
        let merged = all.clone().merge(over).unwrap();
        assert_eq!(
            merged,
            ConfigLayer {
                heartbeat_ms: Some(40),
                peers: Some(vec!["9=127.0.0.1:9".into()]),
                http_tls: Some(true),
                ..all
            }
        );
    }

    #[test]
    fn the_snapshot_bound_covers_a_store_filled_to_the_quota() {
        let config = NodeConfig::from_layer(base()).unwrap();
        assert_eq!(config.quota_backend_bytes, QUOTA_BACKEND_BYTES_DEFAULT);
        assert_eq!(
            config.snapshot_bytes_max(),
            3 * QUOTA_BACKEND_BYTES_DEFAULT + (256 << 20)
        );
        let small = ConfigLayer {
            quota_backend_bytes: Some(8),
            ..base()
        };
        let small = NodeConfig::from_layer(small).unwrap();
        assert_eq!(small.snapshot_bytes_max(), 1 << 30, "never below 1 GiB");
        let huge = ConfigLayer {
            quota_backend_bytes: Some(u64::MAX),
            ..base()
        };
        let huge = NodeConfig::from_layer(huge).unwrap();
        assert_eq!(huge.snapshot_bytes_max(), u64::MAX, "saturates");
    }

    #[test]
    fn variables_are_trimmed_and_empty_list_items_dropped() {
        let variables = BTreeMap::from([
            ("BELLWETHER_ELECTION_MS", " 400 "),
            ("BELLWETHER_CLIENT_CERT_AUTH", "true\r"),
            ("BELLWETHER_PEERS", "1=127.0.0.1:1, 2=127.0.0.1:2,"),
            ("BELLWETHER_PEER_HTTP", ""),
        ]);
        let env = ConfigLayer::from_env(|name| variables.get(name).map(|v| v.to_string())).unwrap();
        assert_eq!(env.election_ms, Some(400));
        assert_eq!(env.client_cert_auth, Some(true));
        assert_eq!(
            env.peers,
            Some(vec!["1=127.0.0.1:1".into(), "2=127.0.0.1:2".into()])
        );
        assert_eq!(env.peer_http, None, "an empty variable is as if unset");
    }

    #[test]
    fn numbers_past_i64_survive_the_merge() {
        let huge = ConfigLayer {
            quota_backend_bytes: Some(u64::MAX),
            ..ConfigLayer::default()
        };
        let merged = base().merge(huge).unwrap();
        assert_eq!(merged.quota_backend_bytes, Some(u64::MAX));
        assert_eq!(merged.id, Some(1));
    }

    #[test]
    fn a_bare_boolean_flag_means_true() {
        let parsed =
            SettingsCommand::try_parse_from(["--client-cert-auth", "--http-tls=false"]).unwrap();
        assert_eq!(parsed.settings.client_cert_auth, Some(true));
        assert_eq!(parsed.settings.http_tls, Some(false));
    }
}
