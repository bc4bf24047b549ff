//! How an application describes its group: the algorithm, this node's id,
//! every node's address, a data directory and the timing. [`ElectorBuilder::start`]
//! checks all of it before anything runs, so a group with a wrong peer
//! list, a duplicate id or a foreign data directory never starts.

use crate::algorithm::Algorithm;
use crate::elector::Elector;
use crate::error::ElectorError;
use crate::runtime::{self, Plan};
use bellwether_core::bully::{BullyConfig, BullyNode};
use bellwether_core::paxos::{PaxosConfig, PaxosNode, NODE_ID_MAX};
use bellwether_core::raft::{RaftConfig, RaftNode};
use bellwether_core::ring::{RingConfig, RingNode};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The adaptive detector's default floor, in heartbeats.
pub const DETECTOR_HEARTBEATS_DEFAULT: u64 = 3;

/// Most nodes in one group (the Bully and Ring cores' limit).
pub const NODES_MAX: usize = 128;
/// One tick of the cores' logical clock.
pub const TICK: Duration = Duration::from_millis(1);

/// Settings of one elector; see [`Elector::builder`].
#[derive(Clone, Debug)]
pub struct ElectorBuilder {
    algorithm: Algorithm,
    id: u64,
    peers: Vec<(u64, SocketAddr)>,
    data_dir: Option<PathBuf>,
    group: String,
    heartbeat: Duration,
    election_timeout: Duration,
    leases: bool,
    detector_heartbeats: Option<u64>,
    rotate_after: Option<Duration>,
    tls: Option<std::sync::Arc<bellwether_transport::PeerTls>>,
}

impl Default for ElectorBuilder {
    fn default() -> Self {
        ElectorBuilder {
            algorithm: Algorithm::Raft,
            id: 0,
            peers: Vec::new(),
            data_dir: None,
            group: "bellwether".into(),
            heartbeat: Duration::from_millis(50),
            election_timeout: Duration::from_millis(150),
            leases: false,
            detector_heartbeats: None,
            rotate_after: None,
            tls: None,
        }
    }
}

impl ElectorBuilder {
    /// The algorithm (default Raft). Every node must run the same one.
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// This node's id: unique in the group, never 0, never reused for
    /// another node.
    pub fn id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// Every node of the group, this one included, with the address its
    /// elector listens on. Every node must be given the same list.
    pub fn peers(mut self, peers: impl IntoIterator<Item = (u64, SocketAddr)>) -> Self {
        self.peers = peers.into_iter().collect();
        self
    }

    /// Where the term or epoch is kept across restarts. Required.
    pub fn data_dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.data_dir = Some(path.into());
        self
    }

    /// The group's name (default `"bellwether"`): nodes of other groups
    /// are refused at the handshake.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// How often a leader tells the others it is alive (default 50 ms).
    pub fn heartbeat(mut self, interval: Duration) -> Self {
        self.heartbeat = interval;
        self
    }

    /// The shortest time without a leader's heartbeat after which a node
    /// starts an election (default 150 ms; the actual timeout is drawn
    /// from `[t, 2t)`). A peer whose connection breaks is suspected at once.
    pub fn election_timeout(mut self, timeout: Duration) -> Self {
        self.election_timeout = timeout;
        self
    }

    /// Raft and Paxos: give the leader a validity deadline
    /// ([`crate::Leadership::valid_until`]) before which no other node can
    /// be elected. It costs the connection-loss shortcut: a follower then
    /// waits for the election timeout even when the leader's process is
    /// known dead, so failover takes about one election timeout instead of
    /// a few milliseconds.
    pub fn leases(mut self, on: bool) -> Self {
        self.leases = on;
        self
    }

    /// The adaptive detector's floor, in heartbeats: a node suspects a
    /// silent leader once the silence is well past the leader's learned
    /// heartbeat pattern, never sooner than this many heartbeats and never
    /// later than the election timeout, and starts an election as if its
    /// connection had broken (the others refuse while they still hear the
    /// leader, under Raft). Raft's default is 3, held to the election
    /// timeout (so with the default timings, 50 ms and 150 ms, it changes
    /// nothing); 0 turns it off, and Raft with [`ElectorBuilder::leases`]
    /// runs without it. Paxos, Bully and Ring have no pre-vote, so a node
    /// waking from a pause disturbs its leader more often with it: off
    /// unless set.
    pub fn detector_heartbeats(mut self, floor: u64) -> Self {
        self.detector_heartbeats = Some(floor);
        self
    }

    /// Raft only: after leading this long, a leader hands leadership to the
    /// next reachable node in id order (a graceful transfer, so no gap
    /// opens and no two leaders overlap). Spreads leader time evenly over
    /// the group; off by default. At least one election timeout.
    pub fn rotate_after(mut self, period: Duration) -> Self {
        self.rotate_after = Some(period);
        self
    }

    /// Mutual TLS between the nodes: each presents `tls`'s certificate and
    /// accepts only peers whose certificate the same CA signed (see
    /// [`bellwether_transport::PeerTls::load`]). Off by default. Any
    /// certificate that CA signs can speak as any node, so give the group
    /// a CA of its own.
    pub fn tls(mut self, tls: bellwether_transport::PeerTls) -> Self {
        self.tls = Some(std::sync::Arc::new(tls));
        self
    }

    /// Checks the settings, opens the data directory and the listener, and
    /// starts electing. Must be called inside a tokio runtime.
    pub async fn start(self) -> Result<Elector, ElectorError> {
        let plan = self.plan()?;
        let heartbeat = ticks(self.heartbeat);
        let election = ticks(self.election_timeout);
        match self.algorithm {
            Algorithm::Raft => {
                let config = self.raft_config(heartbeat, election);
                config
                    .validate()
                    .map_err(|e| ElectorError::Settings(e.to_string()))?;
                runtime::start::<RaftNode>(plan, config).await
            }
            Algorithm::Bully(winner) => {
                let config = BullyConfig {
                    winner,
                    heartbeat_ticks: heartbeat,
                    leader_timeout_ticks_min: election,
                    detector_floor_heartbeats: self.detector_floor(heartbeat, election),
                    ..BullyConfig::default()
                };
                config
                    .validate()
                    .map_err(|e| ElectorError::Settings(e.to_string()))?;
                runtime::start::<BullyNode>(plan, config).await
            }
            Algorithm::Ring(winner) => {
                let config = RingConfig {
                    winner,
                    heartbeat_ticks: heartbeat,
                    leader_timeout_ticks_min: election,
                    detector_floor_heartbeats: self.detector_floor(heartbeat, election),
                    ..RingConfig::default()
                };
                config
                    .validate()
                    .map_err(|e| ElectorError::Settings(e.to_string()))?;
                runtime::start::<RingNode>(plan, config).await
            }
            Algorithm::Paxos => {
                let config = self.paxos_config(heartbeat, election);
                config
                    .validate()
                    .map_err(|e| ElectorError::Settings(e.to_string()))?;
                runtime::start::<PaxosNode>(plan, config).await
            }
        }
    }

    /// The Raft core's settings for these timings (in ticks). With leases
    /// the connection-loss hint is off: a hinted follower could vote inside
    /// the leader's lease.
    fn raft_config(&self, heartbeat: u64, election: u64) -> RaftConfig {
        RaftConfig {
            heartbeat_ticks: heartbeat,
            election_ticks_min: election,
            election_jitter_ticks: election,
            hint_slot_ticks: if self.leases {
                0
            } else {
                RaftConfig::default().hint_slot_ticks
            },
            lease_reads: self.leases,
            lease_margin_ticks: (election / 10).max(1),
            rotate_after_ticks: self.rotate_after.map_or(0, ticks),
            // Lease reads count on followers that never vote inside a
            // whole election timeout.
            detector_floor_heartbeats: if self.leases {
                0
            } else {
                self.detector_floor(heartbeat, election)
            },
            ..RaftConfig::default()
        }
    }

    /// The detector's floor in heartbeats for these timings (in ticks): as
    /// set, or for Raft [`DETECTOR_HEARTBEATS_DEFAULT`] held to the
    /// timeout. The others have no pre-vote: a node that wakes from a pause
    /// suspects its leader and disturbs it (simulated, a follower paused
    /// every second: Paxos 1,483 leadership changes an hour with the fixed
    /// timeout, 2,984 with the detector; Bully 1,124 and 3,044; Ring 676
    /// and 3,022; Raft 0 and 0), so for them it is opt-in.
    fn detector_floor(&self, heartbeat: u64, election: u64) -> u64 {
        self.detector_heartbeats
            .unwrap_or_else(|| match self.algorithm {
                Algorithm::Raft => DETECTOR_HEARTBEATS_DEFAULT.min(election / heartbeat.max(1)),
                _ => 0,
            })
    }

    /// The Multi-Paxos core's settings for these timings (in ticks).
    fn paxos_config(&self, heartbeat: u64, election: u64) -> PaxosConfig {
        // The core's leases are always on (they keep two leaders
        // from acting at once); the builder's `leases` adds the
        // validity deadline, at the cost of the hint, as for Raft.
        PaxosConfig {
            heartbeat_ticks: heartbeat,
            election_ticks_min: election,
            election_jitter_ticks: election,
            promise_grace_ticks: (election / 5).max(1),
            leases: true,
            lease_margin_ticks: (election / 10).max(1),
            hint_slot_ticks: if self.leases {
                0
            } else {
                PaxosConfig::default().hint_slot_ticks
            },
            // Promises last one floor with the detector, so it never
            // suspects inside one: it goes with the validity deadline too.
            detector_floor_heartbeats: self.detector_floor(heartbeat, election),
            ..PaxosConfig::default()
        }
    }

    /// Everything checked, in the form the runtime takes.
    fn plan(&self) -> Result<Plan, ElectorError> {
        let bad = |text: String| Err(ElectorError::Settings(text));
        let ids = self.check_members()?;
        if self.group.is_empty() || self.group.len() > 255 {
            return bad("the group name must be 1 to 255 bytes".into());
        }
        self.check_algorithm_options()?;
        self.check_timing()?;
        let Some(data_dir) = self.data_dir.clone() else {
            return bad("a data dir is required: the term or epoch must survive restarts".into());
        };
        let winner = self.algorithm.winner().map_or("-", |w| w.as_str());
        let members: Vec<String> = ids.iter().map(u64::to_string).collect();
        let settings = format!(
            "{};{winner};leases={};{}",
            self.algorithm.name(),
            self.leases,
            members.join(",")
        );
        let listen = self
            .peers
            .iter()
            .find(|(id, _)| *id == self.id)
            .expect("checked")
            .1;
        Ok(Plan {
            algorithm: self.algorithm,
            id: self.id,
            peers: self.peers.iter().copied().collect(),
            listen,
            data_dir,
            group: self.group.clone(),
            fingerprint: bellwether_transport::fingerprint(&settings),
            leases: self.leases,
            tls: self.tls.clone(),
        })
    }

    /// Checks this node's id and the peer list (sizes, no id 0, no id or
    /// address twice, this node in it); returns the members' ids.
    fn check_members(&self) -> Result<BTreeSet<u64>, ElectorError> {
        let bad = |text: String| Err(ElectorError::Settings(text));
        if self.id == 0 {
            return bad("the id must be set and not 0".into());
        }
        if self.peers.is_empty() || self.peers.len() > NODES_MAX {
            return bad(format!(
                "a group has 1 to {NODES_MAX} nodes, not {}",
                self.peers.len()
            ));
        }
        let mut ids = BTreeSet::new();
        let mut addresses = BTreeSet::new();
        for (id, address) in &self.peers {
            if *id == 0 {
                return bad("node id 0 is not allowed".into());
            }
            if !ids.insert(*id) {
                return bad(format!("node id {id} appears twice in the peer list"));
            }
            if !addresses.insert(*address) {
                return bad(format!("address {address} is given to two nodes"));
            }
        }
        if !ids.contains(&self.id) {
            return bad(format!(
                "this node's id {} is not in the peer list {ids:?}",
                self.id
            ));
        }
        Ok(ids)
    }

    /// Checks the settings only some algorithms allow: Paxos's id range,
    /// leases (which need a quorum) and rotation (Raft only).
    fn check_algorithm_options(&self) -> Result<(), ElectorError> {
        let bad = |text: String| Err(ElectorError::Settings(text));
        if self.algorithm == Algorithm::Paxos && self.id > NODE_ID_MAX {
            return bad(format!(
                "paxos node ids go up to {NODE_ID_MAX} (they are part of the ballot), not {}",
                self.id
            ));
        }
        if let Some((id, _)) = self.peers.iter().find(|(id, _)| *id > NODE_ID_MAX) {
            if self.algorithm == Algorithm::Paxos {
                return bad(format!(
                    "paxos node ids go up to {NODE_ID_MAX} (they are part of the ballot), not {id}"
                ));
            }
        }
        if self.leases && !self.algorithm.has_quorum() {
            return bad(format!(
                "leases need a quorum; {} has none",
                self.algorithm.name()
            ));
        }
        if self.leases && self.algorithm == Algorithm::Raft && self.detector_heartbeats > Some(0) {
            return bad(
                "Raft's leases and the adaptive detector do not mix: a follower that suspects early could vote inside the lease; set detector_heartbeats(0)".into(),
            );
        }
        if self.rotate_after.is_some() && self.algorithm != Algorithm::Raft {
            return bad(format!(
                "rotation is a Raft policy; {} has none",
                self.algorithm.name()
            ));
        }
        if let Some(period) = self.rotate_after {
            if period < self.election_timeout {
                return bad(format!(
                    "rotate after {period:?} is shorter than the election timeout {:?}",
                    self.election_timeout
                ));
            }
        }
        Ok(())
    }

    /// Checks that the heartbeat and the election timeout are between one
    /// tick and ten minutes.
    fn check_timing(&self) -> Result<(), ElectorError> {
        for (name, value) in [
            ("heartbeat", self.heartbeat),
            ("election timeout", self.election_timeout),
        ] {
            if value < TICK || value > Duration::from_secs(600) {
                return Err(ElectorError::Settings(format!(
                    "the {name} must be between 1 ms and 10 minutes, not {value:?}"
                )));
            }
        }
        Ok(())
    }
}

fn ticks(duration: Duration) -> u64 {
    (duration.as_millis() / TICK.as_millis()).max(1) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn three() -> Vec<(u64, SocketAddr)> {
        (1..=3)
            .map(|i| (i, format!("127.0.0.1:{}", 7000 + i).parse().unwrap()))
            .collect()
    }

    fn error(builder: ElectorBuilder) -> String {
        builder.plan().unwrap_err().to_string()
    }

    #[test]
    fn bad_peer_lists_and_settings_get_clear_errors() {
        let base = Elector::builder().id(1).peers(three()).data_dir("/tmp/x");
        assert!(base.plan().is_ok());
        let mut duplicate = three();
        duplicate.push((2, "127.0.0.1:7999".parse().unwrap()));
        assert!(error(base.clone().peers(duplicate)).contains("node id 2 appears twice"));
        let mut shared = three();
        shared[2].1 = shared[0].1;
        assert!(error(base.clone().peers(shared)).contains("given to two nodes"));
        assert!(error(base.clone().id(9)).contains("not in the peer list"));
        assert!(error(base.clone().id(0)).contains("not 0"));
        assert!(
            error(ElectorBuilder::default().id(1).peers(three())).contains("data dir is required")
        );
        let bully = base.clone().algorithm(Algorithm::Bully(Default::default()));
        assert!(error(bully.leases(true)).contains("leases need a quorum"));
        assert!(error(base.clone().heartbeat(Duration::ZERO)).contains("heartbeat"));
        let short = base.clone().rotate_after(Duration::from_millis(100));
        assert!(error(short).contains("shorter than the election timeout"));
        let ring = base.clone().algorithm(Algorithm::Ring(Default::default()));
        assert!(error(ring.rotate_after(Duration::from_secs(1))).contains("Raft policy"));
        let leased = base.clone().leases(true).detector_heartbeats(3);
        assert!(error(leased).contains("do not mix"));
    }

    #[test]
    fn the_detector_floor_defaults_to_three_heartbeats_for_raft_held_to_the_timeout() {
        let base = Elector::builder().id(1).peers(three()).data_dir("/tmp/x");
        assert_eq!(base.detector_floor(10, 100), 3);
        assert_eq!(base.detector_floor(50, 150), 3);
        assert_eq!(base.detector_floor(50, 100), 2, "held to the timeout");
        let bully = base.clone().algorithm(Algorithm::Bully(Default::default()));
        assert_eq!(
            bully.detector_floor(10, 100),
            0,
            "opt-in without a pre-vote"
        );
        assert_eq!(bully.detector_heartbeats(3).detector_floor(10, 100), 3);
        assert_eq!(
            base.clone().detector_heartbeats(0).detector_floor(10, 100),
            0
        );
        for raft in [
            base.raft_config(10, 100),
            base.clone().leases(true).raft_config(10, 100),
        ] {
            assert!(raft.validate().is_ok(), "{raft:?}");
        }
        assert_eq!(
            base.clone()
                .leases(true)
                .raft_config(10, 100)
                .detector_floor_heartbeats,
            0
        );
        let paxos = base.clone().detector_heartbeats(3).paxos_config(10, 100);
        assert!(paxos.validate().is_ok());
        assert_eq!(paxos.promise_ticks(), 30);
    }

    #[test]
    fn the_fingerprint_covers_the_algorithm_the_rule_and_the_members() {
        let base = Elector::builder().id(1).peers(three()).data_dir("/tmp/x");
        let raft = base.plan().unwrap().fingerprint;
        let bully = base
            .clone()
            .algorithm("bully".parse().unwrap())
            .plan()
            .unwrap()
            .fingerprint;
        let lowest = base
            .clone()
            .algorithm("bully-lowest".parse().unwrap())
            .plan()
            .unwrap()
            .fingerprint;
        let two = base
            .clone()
            .peers(three().into_iter().take(2))
            .plan()
            .unwrap()
            .fingerprint;
        let all = [raft, bully, lowest, two];
        let distinct: BTreeSet<u32> = all.iter().copied().collect();
        assert_eq!(distinct.len(), all.len(), "{all:?}");
    }
}
