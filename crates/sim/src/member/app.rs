//! [`EtcdApp`]: the key-value workload on simulated members that run the
//! member driver, with the `kv` crate's etcd store behind it. Clients put,
//! get and compare-and-set a few hot keys through any member: a follower
//! forwards writes and read barriers to its leader, as the server does.
//! The history goes through the linearizability checker; a write answered
//! from another operation's entry fails the run at once.
//!
//! Leases expire: every few hundred milliseconds the workload sends
//! keep-alives for the leases its clients were granted (each a few, then
//! it lets the lease lapse), mostly to the newest leader, sometimes to any
//! member; the members' lease clocks revoke what runs out. The
//! [`LeaseLedger`] checks that no lease expires before the guarantee its
//! grant or last renewal gave.

use super::etcd_entries::{client_entry, entry_tag, leased_put_entry, Write};
use super::lease_ledger::LeaseLedger;
use super::protocol::{ClientAnswer, OpRef, SimMember};
use super::zk_entries;
use crate::checkers::Violation;
use crate::event::NodeIndex;
use crate::kv::clients::{self, ClientWorkload, Clients, Reply, Timer};
use crate::kv::KvConfig;
use crate::linearizability::{Command, Key, Value};
use crate::world::{Application, World};
use bellwether_core::raft::RaftPersist;
use bellwether_core::Rng;
use bellwether_member::{ClientError, Request};
use std::collections::BTreeMap;
use std::time::Duration;

/// Time between rounds of keep-alives.
const RENEW_PERIOD_US: u64 = 300_000;
/// Keep-alives a lease gets at most, one a round, before it is let lapse.
const KEEP_ALIVES_MAX: u64 = 4;
/// The client id of keep-alives (answered by their own variant).
const RENEWER_CLIENT: u64 = 0xF_FFFF;

/// The workload.
pub struct EtcdApp {
    config: KvConfig,
    /// The clients and their history.
    pub clients: Clients,
    /// Keep-alives, expiries and the leases' guarantees.
    pub leases: LeaseLedger,
    /// Lease clocks' revokes on their way to their member, by number: the
    /// member, the incarnation's lessor client id, the request.
    lessor_requests: BTreeMap<u32, (NodeIndex, u64, Request<OpRef, OpRef>)>,
    lessor_sent: u32,
    /// Writes answered "not applied", which their clients send again.
    pub not_applied: u64,
}

impl EtcdApp {
    /// A workload for a cluster of `nodes`.
    pub fn new(config: KvConfig, nodes: usize, seed: u64) -> Self {
        let pace = config.pace();
        let rng = Rng::derive(seed, 0x6574_6364);
        let first_guess = |id: u64| (id as usize) % nodes;
        EtcdApp {
            clients: Clients::new(
                config.clients + config.readers,
                nodes,
                pace,
                rng,
                first_guess,
            ),
            leases: LeaseLedger::default(),
            lessor_requests: BTreeMap::new(),
            lessor_sent: 0,
            not_applied: 0,
            config,
        }
    }

    /// Starts every client, and the keep-alives.
    pub fn start(world: &mut World<SimMember, EtcdApp>) {
        clients::start(world);
        let at = world.now_us() + RENEW_PERIOD_US;
        world.schedule_app_timer(at, Timer::Renew.token());
    }

    /// Stops new operations; those still open, and expiry revokes whose
    /// fate is unknown, are recorded as indeterminate.
    pub fn finish(&mut self) {
        self.leases.note_grants(&self.clients.history, || 0);
        self.clients.finish();
        let open = self.leases.finish();
        self.clients.history.extend(open);
    }

    /// A lease that expired before its guarantee, if one did, beyond what
    /// the fastest host's clock takes off the TTL that promised it, and two
    /// ticks (a member's clock is read once per input, so a renewal may
    /// count from up to a tick before it). The TTL is the promise's own: a
    /// ZooKeeper session's is longer than a leased put's.
    pub fn lease_expired_early(world: &World<SimMember, EtcdApp>) -> Option<Violation> {
        let tick_us = world.config.tick_us;
        let fastest_us = world.hosts.iter().map(|h| h.tick_interval_us).min()?;
        let allowance =
            |ttl_us: u64| ttl_us.saturating_sub(ttl_us * fastest_us / tick_us) + 2 * tick_us;
        let (time_us, detail) = world.app.leases.expired_early(allowance)?;
        Some(Violation {
            property: "leases-never-expire-early",
            time_us,
            detail,
        })
    }
}

impl ClientWorkload for EtcdApp {
    fn clients(&mut self) -> &mut Clients {
        &mut self.clients
    }

    /// Puts, leased puts, gets, revokes of a lease seen, and
    /// compare-and-sets; readers (the clients past `config.clients`) only
    /// get.
    fn next_command(&mut self, client: usize) -> Command {
        let key = Key(self.clients.rng.range(0, self.config.keys));
        if client >= self.config.clients {
            return Command::Get { key };
        }
        let state = self.clients.client(client);
        let value = Value(((client as u64) << 32) | u64::from(state.ops_started));
        let seen = state.last_seen.get(&key.0).copied().flatten();
        match self.clients.rng.range(0, 20) {
            0..=5 => Command::Put { key, value },
            // Bit 62 keeps a leased value, its lease's id, positive and
            // apart from the others.
            6 | 7 => Command::LeasedPut {
                key,
                value: Value(value.0 | 1 << 62),
            },
            8..=15 => Command::Get { key },
            16 if seen.is_some_and(|v| v & 1 << 62 != 0) => Command::Revoke {
                key,
                lease: Value(seen.expect("checked")),
            },
            // A znode's version, not its data, is what ZooKeeper compares:
            // a compare-and-set of a value it holds has no ZooKeeper form.
            _ if zk_entries::is_znode(key) && seen.is_some() => Command::Put { key, value },
            _ => Command::CompareAndSet {
                key,
                expected: seen.map(Value),
                new: value,
            },
        }
    }
}

impl EtcdApp {
    /// A round of keep-alives: one for each lease still kept alive, to the
    /// newest leader three times in four, else to any member (a follower
    /// or a deposed leader answers "not primary").
    fn on_renew(world: &mut World<SimMember, EtcdApp>) {
        if world.app.clients.stopped {
            return;
        }
        let app = &mut world.app;
        let rng = &mut app.clients.rng;
        app.leases.note_grants(&app.clients.history, || {
            rng.range(0, KEEP_ALIVES_MAX + 1) as u32
        });
        let newest = world
            .acting_leaders()
            .into_iter()
            .max_by_key(|(_, term)| *term);
        let leases: Vec<(i64, u32)> = world
            .app
            .leases
            .renewing
            .iter()
            .map(|(l, n)| (*l, *n))
            .collect();
        for (lease, left) in leases {
            match left {
                0 => world.app.leases.renewing.remove(&lease),
                _ => world.app.leases.renewing.insert(lease, left - 1),
            };
            if left == 0 {
                continue;
            }
            let rng = &mut world.app.clients.rng;
            let node = match newest {
                Some((leader, _)) if rng.range(0, 4) != 0 => (leader.0 - 1) as usize,
                _ => rng.range(0, world.hosts.len() as u64) as usize,
            };
            if !world.hosts[node].is_running() {
                continue;
            }
            let attempt = world.app.leases.keep_alive_sent(lease, world.now_us());
            let reply = OpRef {
                client: RENEWER_CLIENT,
                attempt,
                key: Key(0),
                renew: Some(lease),
                write: None,
                entry: 0,
            };
            let member = world.node_mut(node).expect("running");
            member.request(Request::ReadBarrier { reply });
            world.flush(node);
        }
        let at = world.now_us() + RENEW_PERIOD_US;
        world.schedule_app_timer(at, Timer::Renew.token());
    }

    /// A lease clock's revoke reaches its member's loop, unless that
    /// process is gone or paused (then the clock proposes it again later,
    /// if it still leads).
    fn on_lessor_request(world: &mut World<SimMember, EtcdApp>, n: u32) {
        let Some((node, client, request)) = world.app.lessor_requests.remove(&n) else {
            return;
        };
        let reply = match &request {
            Request::Propose { reply, .. } | Request::ProposeHere { reply, .. } => *reply,
            Request::ReadBarrier { reply } => *reply,
            Request::Call { .. } => unreachable!("a lease clock makes no member calls"),
        };
        let running = world.hosts[node].is_running();
        let member = world.node_mut(node).filter(|_| running);
        let Some(member) = member.filter(|m| m.lessor_client() == client) else {
            // Paused, or an earlier incarnation's: never proposed.
            world.app.leases.expiry_dropped(reply);
            return;
        };
        member.request(request);
        world.flush(node);
    }

    /// A request reaches its member, which serves or forwards it.
    fn on_arrive(world: &mut World<SimMember, EtcdApp>, client: u64, attempt: u32) {
        let Some(op) = world.app.clients.op_of_attempt(client, attempt) else {
            return;
        };
        let node = op.target;
        if !world.hosts[node].is_running() {
            // Refused at once by a member that is down; never read by a
            // paused one.
            if world.hosts[node].node.is_none() {
                clients::reply(world, client, attempt, Reply::Retry);
            }
            return;
        }
        let key = op.command.key();
        let reply = OpRef {
            client,
            attempt,
            key,
            renew: None,
            write: None,
            entry: 0,
        };
        let request = match op.command {
            Command::Get { .. } => Request::ReadBarrier { reply },
            command => {
                let (entry, write) = if zk_entries::is_znode(key) {
                    let (entry, zk) = zk_entries::first_entry(client, command);
                    (entry, Write::Zk(zk))
                } else {
                    client_entry(command)
                };
                let reply = OpRef {
                    write: Some(write),
                    entry: entry_tag(&entry),
                    ..reply
                };
                Request::Propose {
                    command: entry,
                    reply,
                }
            }
        };
        world.node_mut(node).expect("running").request(request);
        world.flush(node);
    }

    /// A leased put's lease is granted, or a ZooKeeper operation's session
    /// is open: the client takes its next step through the member that
    /// answered, as a client's next call goes.
    fn put_under_lease(world: &mut World<SimMember, EtcdApp>, node: NodeIndex, op: OpRef) {
        let Some(command) = world
            .app
            .clients
            .op_of_attempt(op.client, op.attempt)
            .map(|pending| pending.command)
        else {
            return; // the attempt is over (its deadline passed)
        };
        let (entry, write) = match command {
            command if zk_entries::is_znode(command.key()) => {
                zk_entries::op_entry(op.client, command, op.attempt)
            }
            Command::LeasedPut { key, value } => (leased_put_entry(key, value), Write::Put),
            _ => return,
        };
        let reply = OpRef {
            write: Some(write),
            entry: entry_tag(&entry),
            ..op
        };
        let member = world.node_mut(node).expect("it just answered");
        member.request(Request::Propose {
            command: entry,
            reply,
        });
        world.flush(node);
    }

    /// The state machine refused a write, so nothing changed: the client
    /// tries again. Only a leased put's put may be refused, when its lease
    /// expired before the put was applied; any other refusal is a
    /// violation.
    fn on_refused(
        world: &mut World<SimMember, EtcdApp>,
        node: NodeIndex,
        op: OpRef,
        refusal: bellwether_etcd::Refusal,
    ) {
        // Expiry revokes are no client's operation.
        let leased = !op.is_expiry()
            && matches!(
                world
                    .app
                    .clients
                    .op_of_attempt(op.client, op.attempt)
                    .map(|pending| pending.command),
                Some(Command::LeasedPut { .. })
            );
        let lease_gone = refusal.code == bellwether_etcd::Code::NotFound;
        // A ZooKeeper step may be refused with nothing changed: its put's
        // form did not fit (the other one will), or its session lapsed
        // (the retry opens it again).
        let znode = !op.is_expiry() && zk_entries::is_znode(op.key);
        let other_form = refusal.code == bellwether_etcd::Code::Aborted;
        let retried = (znode && (other_form || lease_gone))
            || (leased && op.write == Some(Write::Put) && lease_gone);
        if !retried {
            let detail = format!(
                "n{} refused client {} attempt {} ({:?}): {refusal}",
                node + 1,
                op.client,
                op.attempt,
                op.write
            );
            world.report_violation(Violation {
                property: "writes-applied-as-asked",
                time_us: world.now_us(),
                detail,
            });
            return;
        }
        clients::reply(world, op.client, op.attempt, Reply::Retry);
    }

    /// What a member told its clients.
    fn on_answers(world: &mut World<SimMember, EtcdApp>, node: NodeIndex) {
        let Some(member) = world.node_mut(node) else {
            return;
        };
        for answer in member.take_answers() {
            let (op, result) = match answer {
                ClientAnswer::KeepAlive(op, renewal) => {
                    world.app.leases.keep_alive_answered(op, renewal);
                    continue;
                }
                ClientAnswer::Answered(op, result) if op.is_expiry() => {
                    let now = world.now_us();
                    if let Some(done) = world.app.leases.expiry_answered(op, result, now) {
                        world.app.clients.history.push(done);
                    }
                    continue;
                }
                ClientAnswer::Answered(op, result) => (op, result),
                ClientAnswer::Granted(op) => {
                    Self::put_under_lease(world, node, op);
                    continue;
                }
                ClientAnswer::Refused(op, refusal) => {
                    Self::on_refused(world, node, op, refusal);
                    continue;
                }
                ClientAnswer::Misrouted(op, entry_op) => {
                    let detail = format!(
                        "n{} answered client {} attempt {} from the entry tagged {entry_op:#x}",
                        node + 1,
                        op.client,
                        op.attempt
                    );
                    world.report_violation(Violation {
                        property: "answers-from-own-entry",
                        time_us: world.now_us(),
                        detail,
                    });
                    continue;
                }
            };
            let reply = match result {
                Ok(response) => Reply::Done(response),
                Err(ClientError::NotLeader { leader }) => {
                    Reply::Redirect(leader.map(|l| (l.0 - 1) as usize))
                }
                Err(ClientError::Busy) => Reply::Retry,
                Err(ClientError::NotApplied) => {
                    world.app.not_applied += 1;
                    Reply::Retry
                }
                // Unknown outcome: the deadline records it.
                Err(ClientError::LeaderChanged | ClientError::TimedOut | ClientError::Stopped) => {
                    continue
                }
                Err(ClientError::Unreachable { .. }) => {
                    unreachable!("the simulator's clients make no member calls")
                }
            };
            clients::reply(world, op.client, op.attempt, reply);
        }
    }
}

impl Application<SimMember> for EtcdApp {
    fn on_persisted(world: &mut World<SimMember, Self>, node: NodeIndex, _persist: &RaftPersist) {
        if let Some(member) = world.node_mut(node) {
            member.persist_done();
        }
    }

    fn on_flushed(world: &mut World<SimMember, Self>, node: NodeIndex) {
        let now = world.now_us();
        // The host's clock: the simulated time at the host's rate.
        let wall_us = u128::from(now) * u128::from(world.config.tick_us)
            / u128::from(world.hosts[node].tick_interval_us);
        let wall = Duration::from_micros(u64::try_from(wall_us).expect("a run's length"));
        if let Some(member) = world.node_mut(node) {
            member.lease_clock(wall);
            let (client, requests) = member.take_lessor_requests();
            for request in requests {
                world.app.lessor_sent += 1;
                let n = world.app.lessor_sent;
                world.app.lessor_requests.insert(n, (node, client, request));
                world.schedule_app_timer(now, Timer::Lessor(n).token());
            }
        }
        if let Some(member) = world.node_mut(node) {
            let (revokes, expired) = (member.take_expiry_revokes(), member.take_expired());
            for (op, command) in revokes {
                world.app.leases.expiry_proposed(op, command, now);
            }
            for lease in expired {
                world.app.leases.expired(lease, now);
            }
        }
        Self::on_answers(world, node);
    }

    fn on_timer(world: &mut World<SimMember, Self>, token: u64) {
        match clients::on_timer(world, token) {
            Some(Timer::Arrive(client, attempt)) => Self::on_arrive(world, client, attempt),
            Some(Timer::Renew) => Self::on_renew(world),
            Some(Timer::Lessor(n)) => Self::on_lessor_request(world, n),
            _ => {}
        }
    }
}
