//! One client connection: the handshake, then requests in order, watch
//! notifications, and the session's renewals.
//!
//! Requests are handled in the order they came: a reply is sent only once
//! this member's store holds the write it answers, and the notifications
//! of every change up to a reply's zxid go out before it. That gives a
//! session ZooKeeper's order: it reads its own writes, and it sees a watch
//! fire before it sees the data that fired it. Writes the client sent one
//! right after another go to the log together, in one entry, and are
//! answered in turn ([`super::pipeline`]): a pipelining client pays one
//! round trip to the leader for them, not one each.

use super::four_letter;
use super::packets::{read_body, read_packet, write_packet, PacketError};
use super::pipeline::{self, Packet};
use super::stats::ZkStats;
use crate::etcd::{EtcdBackend, LeaseService};
use bellwether_etcd::command::Command;
use bellwether_kv::KeyRange;
use bellwether_zookeeper::acl::AuthId;
use bellwether_zookeeper::codes::{keeper_state, op, xid, ErrorCode};
use bellwether_zookeeper::connect::{ConnectRequest, ConnectResponse};
use bellwether_zookeeper::entry::read_answer;
use bellwether_zookeeper::jute::{JuteReader, JuteWriter};
use bellwether_zookeeper::read::read;
use bellwether_zookeeper::request::RequestError;
use bellwether_zookeeper::tree::session;
use bellwether_zookeeper::watches::{changes, Fired, Watches};
use bellwether_zookeeper::znode::NODE_PREFIX;
use bellwether_zookeeper::{Request, SessionRecord, ZkBatch, ZkBatchAnswer, ZkEntry};
use prost::Message;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// How long a new connection has to send its connect request.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a member behind a client's last seen zxid waits to catch up
/// before it turns the client away (the client then tries another).
const CATCH_UP_WAIT: Duration = Duration::from_secs(2);
/// Packets read ahead of the one being handled, at most.
const PACKETS_QUEUED_MAX: usize = 64;
/// A session's lease is renewed when a packet comes this long or more
/// after the last renewal: clients ping every third of their timeout, so
/// a renewal follows each ping, and a busy client renews at most this often.
const RENEW_GAP_MAX: Duration = Duration::from_millis(200);
/// How long a closing connection waits for the client to close its side.
const CLOSE_LINGER: Duration = Duration::from_secs(1);
/// Attempts at choosing a session id no session holds.
const SESSION_ID_ATTEMPTS: usize = 4;

/// Why a connection ended.
#[derive(Debug)]
pub enum ConnectionError {
    /// Reading a packet failed.
    Packet(PacketError),
    /// Writing failed.
    Io(std::io::Error),
    /// The client broke the protocol.
    Protocol(String),
    /// The member could not serve: the client should try another.
    Unavailable(String),
}

impl std::fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectionError::Packet(e) => write!(f, "{e}"),
            ConnectionError::Io(e) => write!(f, "{e}"),
            ConnectionError::Protocol(e) => write!(f, "protocol error: {e}"),
            ConnectionError::Unavailable(e) => write!(f, "unavailable: {e}"),
        }
    }
}

impl From<std::io::Error> for ConnectionError {
    fn from(error: std::io::Error) -> Self {
        ConnectionError::Io(error)
    }
}

/// Whether the connection goes on after a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Flow {
    Continue,
    Close,
}

/// One connection and, once it is made, its session.
pub struct Connection {
    backend: EtcdBackend,
    lease: LeaseService,
    stopped: watch::Receiver<bool>,
    session: i64,
    timeout: Duration,
    watches: Watches,
    /// Store events from this revision on are still to be looked at for
    /// watches.
    next_event_revision: i64,
    /// When the session's lease was last renewed.
    renewed: Instant,
    stats: Arc<ZkStats>,
    /// The ids this connection has proven: its address, and digest users.
    auth: Vec<AuthId>,
}

impl Connection {
    /// A connection served with `backend`, renewing its session with `lease`.
    pub fn new(
        backend: EtcdBackend,
        lease: LeaseService,
        stopped: watch::Receiver<bool>,
        stats: Arc<ZkStats>,
    ) -> Self {
        Connection {
            stats,
            auth: Vec::new(),
            backend,
            lease,
            stopped,
            session: 0,
            timeout: Duration::ZERO,
            watches: Watches::default(),
            next_event_revision: 0,
            renewed: Instant::now(),
        }
    }

    /// Serves the connection until the client leaves, the session ends or
    /// the member stops.
    pub async fn run(mut self, stream: TcpStream) -> Result<(), ConnectionError> {
        self.stats.connections.inc();
        let stats = self.stats.clone();
        let ran = self.run_counted(stream).await;
        stats.connections.dec();
        stats.watches.dec_by(self.watches.len() as u64);
        ran
    }

    async fn run_counted(&mut self, stream: TcpStream) -> Result<(), ConnectionError> {
        if let Ok(peer) = stream.peer_addr() {
            self.auth.push(AuthId {
                scheme: "ip".into(),
                id: peer.ip().to_string(),
            });
        }
        let (mut reader, mut writer) = stream.into_split();
        let mut word = [0u8; 4];
        tokio::time::timeout(HANDSHAKE_TIMEOUT, reader.read_exact(&mut word))
            .await
            .map_err(|_| ConnectionError::Protocol("no connect request in time".into()))??;
        if four_letter::WORDS.contains(&&word) {
            if let Some(text) = four_letter::answer(&word, &self.backend, &self.stats) {
                writer.write_all(text.as_bytes()).await?;
            }
            let _ = writer.shutdown().await;
            return Ok(());
        }
        let first = tokio::time::timeout(
            HANDSHAKE_TIMEOUT,
            read_body(&mut reader, i32::from_be_bytes(word)),
        )
        .await
        .map_err(|_| ConnectionError::Protocol("no connect request in time".into()))?
        .map_err(ConnectionError::Packet)?;
        let connect = ConnectRequest::decode(&first)
            .map_err(|e| ConnectionError::Protocol(format!("connect request: {e}")))?;
        let response = self.handshake(&connect).await?;
        write_packet(&mut writer, &[&response.encode()]).await?;
        if response.session_id == 0 {
            // The session is gone; the client learns so and closes.
            let _ = writer.shutdown().await;
            return Ok(());
        }
        let (packets_in, mut packets) = mpsc::channel(PACKETS_QUEUED_MAX);
        let mut reading = tokio::spawn(async move {
            // Once nothing takes packets any more, they are read and
            // dropped until the client closes its side (see below).
            let mut forwarding = true;
            loop {
                let packet = read_packet(&mut reader).await;
                let failed = packet.is_err();
                if forwarding && packets_in.send(packet).await.is_err() {
                    forwarding = false;
                }
                if failed {
                    break;
                }
            }
        });
        let served = self.serve(&mut packets, &mut writer).await;
        // The last replies (an AuthFailed, say) go out with the end of the
        // stream; what the client sent meanwhile is read and dropped until
        // it closes too. A socket closed with unread bytes would send a
        // reset instead, and the client could lose those replies.
        let _ = writer.shutdown().await;
        drop(packets);
        if tokio::time::timeout(CLOSE_LINGER, &mut reading)
            .await
            .is_err()
        {
            reading.abort();
        }
        served
    }

    async fn serve(
        &mut self,
        packets: &mut mpsc::Receiver<Packet>,
        writer: &mut OwnedWriteHalf,
    ) -> Result<(), ConnectionError> {
        let mut revisions = self.backend.revisions.clone();
        let mut last_heard = Instant::now();
        // A packet read ahead by a batch but not part of it: it comes next.
        let mut held: Option<Packet> = None;
        loop {
            let silence_ends = last_heard + self.timeout;
            let packet = match held.take() {
                Some(packet) => packet,
                None => tokio::select! {
                    packet = packets.recv() => match packet {
                        None => return Ok(()),
                        Some(packet) => packet,
                    },
                    changed = revisions.changed() => {
                        if changed.is_err() {
                            return Ok(());
                        }
                        let watched = self.watches.len();
                        let fired = self.fire_pending();
                        self.count_watches(watched);
                        self.notify(writer, &fired?).await?;
                        if !self.session_open() {
                            // Expired at the leader and now applied here.
                            return Ok(());
                        }
                        continue;
                    }
                    _ = tokio::time::sleep_until(silence_ends) => {
                        // ZooKeeper closes a silent client's connection too;
                        // the session itself lives until its lease runs out.
                        return Ok(());
                    }
                    _ = self.stopped.changed() => return Ok(()),
                },
            };
            let packet = packet.map_err(ConnectionError::Packet)?;
            last_heard = Instant::now();
            // The lease counts from a renewal at most this long before the
            // client's last packet, so the session lives at least its
            // timeout less that after the client was last heard
            // (ZooKeeper's clients give up on a server after two thirds
            // of it).
            if self.renewed.elapsed() >= RENEW_GAP_MAX && !self.renew().await? {
                return Ok(());
            }
            let requests = if pipeline::batchable(&packet) {
                pipeline::gather(packet, packets, &mut held)
            } else {
                vec![packet]
            };
            let count = requests.len() as u64;
            self.stats.received.inc_by(count);
            self.stats.outstanding.inc_by(count);
            let started = std::time::Instant::now();
            let watched = self.watches.len();
            let handled = match &requests[..] {
                [one] => self.handle(one, writer).await,
                batch => self.write_batch(batch, writer).await,
            };
            self.stats.outstanding.dec_by(count);
            self.stats.sent.inc_by(count);
            for _ in 0..count {
                self.stats.latency.record(started.elapsed());
            }
            self.count_watches(watched);
            if handled? == Flow::Close {
                return Ok(());
            }
        }
    }

    /// Moves the member's watch count by how this session's changed since
    /// it held `before`.
    fn count_watches(&self, before: usize) {
        let now = self.watches.len();
        if now > before {
            self.stats.watches.inc_by((now - before) as u64);
        } else {
            self.stats.watches.dec_by((before - now) as u64);
        }
    }

    /// Whether this session is still open in the member's store.
    fn session_open(&self) -> bool {
        bellwether_zookeeper::tree::session_alive(&self.backend.store(), self.session)
    }

    /// Renews the session's lease; false once it is gone. A renewal that
    /// cannot reach the lease clock (its leader just failed) is tried again
    /// as soon as another leader is known, for up to a third of the
    /// session's timeout: a Raft leader's crash must not cost the clients
    /// of the other members their connections (ZooKeeper's own followers
    /// drop every connection when their leader fails).
    async fn renew(&mut self) -> Result<bool, ConnectionError> {
        self.renewed = Instant::now();
        let give_up = self.renewed + self.timeout / 3;
        loop {
            match self.lease.renew(self.session).await {
                Ok(ttl) => return Ok(ttl > 0),
                Err(_) if Instant::now() < give_up => {
                    self.backend
                        .news_of_a_leader(crate::etcd::backend::REROUTE_PAUSE)
                        .await;
                }
                Err(status) => {
                    return Err(ConnectionError::Unavailable(format!(
                        "cannot renew session {:#x}: {}",
                        self.session,
                        status.message()
                    )))
                }
            }
        }
    }

    async fn handshake(
        &mut self,
        connect: &ConnectRequest,
    ) -> Result<ConnectResponse, ConnectionError> {
        self.catch_up(connect.last_zxid_seen).await?;
        let read_only = connect.read_only.map(|_| false);
        let (session, record) = if connect.session_id == 0 {
            self.create_session(connect.negotiated_timeout_ms()).await?
        } else {
            let record = session(&self.backend.store(), connect.session_id);
            match record {
                Some(record) if record.password == connect.password => {
                    self.session = connect.session_id;
                    self.timeout = Duration::from_millis(record.timeout_ms as u64);
                    if !self.renew().await? {
                        return Ok(ConnectResponse::expired(read_only));
                    }
                    (connect.session_id, record)
                }
                _ => return Ok(ConnectResponse::expired(read_only)),
            }
        };
        self.session = session;
        self.timeout = Duration::from_millis(record.timeout_ms as u64);
        self.next_event_revision = self.backend.store().revision() + 1;
        Ok(ConnectResponse {
            protocol_version: 0,
            timeout_ms: record.timeout_ms,
            session_id: session,
            password: record.password,
            read_only,
        })
    }

    /// Waits until this member's store is at `zxid`, a bounded time.
    async fn catch_up(&self, zxid: i64) -> Result<(), ConnectionError> {
        if self.backend.store().revision() >= zxid {
            return Ok(());
        }
        let reached =
            tokio::time::timeout(CATCH_UP_WAIT, self.backend.wait_revision_after(zxid - 1)).await;
        match reached {
            Ok(true) => Ok(()),
            _ => Err(ConnectionError::Unavailable(format!(
                "the client has seen zxid {zxid:#x}, which this member has not applied yet"
            ))),
        }
    }

    async fn create_session(
        &mut self,
        timeout_ms: i32,
    ) -> Result<(i64, SessionRecord), ConnectionError> {
        let record = SessionRecord {
            timeout_ms,
            password: password(),
        };
        for _ in 0..SESSION_ID_ATTEMPTS {
            let id = self.backend.lease_ids.choose();
            let entry = ZkEntry {
                session: id,
                time_ms: now_ms(),
                op: op::CREATE_SESSION,
                body: record.encode_to_vec(),
                auth: Vec::new(),
            };
            let answer = self.propose(entry).await?;
            let (zxid, err, _) = read_answer(&answer)
                .ok_or_else(|| ConnectionError::Protocol("a malformed answer".into()))?;
            if err == ErrorCode::Ok.code() {
                self.wait_applied(zxid).await?;
                return Ok((id, record));
            }
        }
        Err(ConnectionError::Unavailable(
            "no free session id was found".into(),
        ))
    }

    /// Logs `entry` through the member (which forwards it to the leader)
    /// and returns the answer. A write the member refused before logging
    /// it, or knows was not applied, is tried again (at once if it was
    /// not applied, since the log has moved past it; else once another
    /// leader is known, or after a pause); one that may have been applied
    /// is not: the client is told the connection is lost, as ZooKeeper
    /// tells it.
    async fn propose(&self, entry: ZkEntry) -> Result<Vec<u8>, ConnectionError> {
        self.propose_command(Command::ZooKeeper(entry)).await
    }

    /// [`Connection::propose`] for any command: through
    /// [`EtcdBackend::propose`](crate::etcd::EtcdBackend::propose), the one
    /// way a follower's write reaches the leader, which tries again what
    /// is safe to try again.
    async fn propose_command(&self, command: Command) -> Result<Vec<u8>, ConnectionError> {
        self.backend
            .propose(command.encode())
            .await
            .map_err(|error| ConnectionError::Unavailable(error.to_string()))
    }

    /// Waits until this member has applied `zxid`.
    async fn wait_applied(&self, zxid: i64) -> Result<(), ConnectionError> {
        if self.backend.store().revision() >= zxid {
            return Ok(());
        }
        if self.backend.wait_revision_after(zxid - 1).await {
            Ok(())
        } else {
            Err(ConnectionError::Unavailable("the member stopped".into()))
        }
    }

    async fn handle(
        &mut self,
        packet: &[u8],
        writer: &mut OwnedWriteHalf,
    ) -> Result<Flow, ConnectionError> {
        let mut header = JuteReader::new(packet);
        let (Ok(request_xid), Ok(code)) = (header.int(), header.int()) else {
            return Err(ConnectionError::Protocol(
                "a request without a header".into(),
            ));
        };
        let body = &packet[8..];
        match code {
            op::PING => {
                let zxid = self.backend.store().revision();
                reply(writer, request_xid, zxid, ErrorCode::Ok, &[]).await?;
                return Ok(Flow::Continue);
            }
            op::AUTH => {
                // ZooKeeper answers auth packets with zxid 0, under the
                // packet's own xid: -4 from most clients, an ordinary one
                // from some (the zookeeper-client crate's).
                let zxid = 0;
                return match digest_id(body) {
                    Some(id) => {
                        if !self.auth.contains(&id) {
                            self.auth.push(id);
                        }
                        reply(writer, request_xid, zxid, ErrorCode::Ok, &[]).await?;
                        Ok(Flow::Continue)
                    }
                    // A scheme not served, or a malformed packet: said, and
                    // the connection closes, as ZooKeeper does.
                    None => {
                        reply(writer, request_xid, zxid, ErrorCode::AuthFailed, &[]).await?;
                        Ok(Flow::Close)
                    }
                };
            }
            _ => {}
        }
        let request = match Request::decode(code, body) {
            Ok(request) => request,
            // As ZooKeeper: an operation it does not serve is answered
            // UNIMPLEMENTED, and the connection closes.
            Err(RequestError::Unimplemented(_)) => {
                reply(writer, request_xid, -1, ErrorCode::Unimplemented, &[]).await?;
                return Ok(Flow::Close);
            }
            Err(RequestError::Jute(error)) => {
                let zxid = self.backend.store().revision();
                reply(writer, request_xid, zxid, ErrorCode::MarshallingError, &[]).await?;
                return Err(ConnectionError::Protocol(format!(
                    "request {code}: {error}"
                )));
            }
        };
        if matches!(request, Request::Check { .. }) {
            // `check` is only valid inside a multi.
            reply(writer, request_xid, -1, ErrorCode::Unimplemented, &[]).await?;
            return Ok(Flow::Close);
        }
        if request.is_write() {
            return self.write(request_xid, code, body, writer).await;
        }
        match request {
            Request::SetWatches(set) => {
                let fired = self.fire_pending()?;
                self.notify(writer, &fired).await?;
                let again = self.watches.set_again(&self.backend.store(), &set);
                let zxid = self.backend.store().revision();
                match again {
                    Ok(fired) => {
                        self.notify(writer, &fired).await?;
                        reply(writer, request_xid, zxid, ErrorCode::Ok, &[]).await?;
                    }
                    Err(_) => reply(writer, request_xid, zxid, ErrorCode::SystemError, &[]).await?,
                }
            }
            Request::Sync { ref path } => {
                // Linearizable: what the leader has committed is applied here.
                if self.backend.read_barrier().await.is_err() {
                    return Err(ConnectionError::Unavailable(
                        "sync: no leader confirmed the member's state".into(),
                    ));
                }
                let fired = self.fire_pending()?;
                self.notify(writer, &fired).await?;
                let zxid = self.backend.store().revision();
                let mut w = JuteWriter::new();
                w.string(path);
                reply(writer, request_xid, zxid, ErrorCode::Ok, &w.into_bytes()).await?;
            }
            Request::AddWatch { ref path, mode } => {
                let zxid = self.backend.store().revision();
                let code = match mode {
                    0 | 1 => match self.watches.watch_persistent(path, mode == 1) {
                        Ok(()) => ErrorCode::Ok,
                        Err(_) => ErrorCode::SystemError,
                    },
                    _ => ErrorCode::BadArguments,
                };
                let mut w = JuteWriter::new();
                w.int(code.code());
                let record = if code == ErrorCode::Ok {
                    w.into_bytes()
                } else {
                    Vec::new()
                };
                reply(writer, request_xid, zxid, code, &record).await?;
            }
            Request::RemoveWatches {
                ref path,
                kind,
                remove,
            } => {
                let zxid = self.backend.store().revision();
                let code = if self.watches.remove(path, kind, remove) {
                    ErrorCode::Ok
                } else {
                    ErrorCode::NoWatcher
                };
                reply(writer, request_xid, zxid, code, &[]).await?;
            }
            Request::WhoAmI => {
                let zxid = self.backend.store().revision();
                reply(
                    writer,
                    request_xid,
                    zxid,
                    ErrorCode::Ok,
                    &who_am_i(&self.auth),
                )
                .await?;
            }
            request => self.read(request_xid, &request, writer).await?,
        }
        Ok(Flow::Continue)
    }

    /// Answers a read from this member's store, after the notifications of
    /// every change the answer shows.
    async fn read(
        &mut self,
        request_xid: i32,
        request: &Request,
        writer: &mut OwnedWriteHalf,
    ) -> Result<(), ConnectionError> {
        let backend = self.backend.clone();
        let (fired, zxid, code, record) = {
            let store = backend.store();
            let fired = self.fire_pending_in(&store, i64::MAX)?;
            let (mut code, record) = read(&store, request, self.session, &self.auth);
            let watched = match request {
                // An exists watch stays on a missing node, to fire on create.
                Request::Exists { path, watch: true }
                    if matches!(code, ErrorCode::Ok | ErrorCode::NoNode) =>
                {
                    self.watches.watch_data(path)
                }
                Request::GetData { path, watch: true } if code == ErrorCode::Ok => {
                    self.watches.watch_data(path)
                }
                Request::GetChildren {
                    path, watch: true, ..
                } if code == ErrorCode::Ok => self.watches.watch_children(path),
                _ => Ok(()),
            };
            if watched.is_err() {
                code = ErrorCode::SystemError;
            }
            (fired, store.revision(), code, record)
        };
        self.notify(writer, &fired).await?;
        let record = if code == ErrorCode::Ok {
            record
        } else {
            Vec::new()
        };
        reply(writer, request_xid, zxid, code, &record).await?;
        Ok(())
    }

    /// Logs a write and answers it once this member has applied it.
    async fn write(
        &mut self,
        request_xid: i32,
        code: i32,
        body: &[u8],
        writer: &mut OwnedWriteHalf,
    ) -> Result<Flow, ConnectionError> {
        let answer = self.propose(self.entry(code, body)).await?;
        let (zxid, err, _) = read_answer(&answer)
            .ok_or_else(|| ConnectionError::Protocol("a malformed answer".into()))?;
        self.wait_applied(zxid).await?;
        let fired = self.fire_pending()?;
        self.notify(writer, &fired).await?;
        write_packet(writer, &[&request_xid.to_be_bytes(), &answer]).await?;
        let ended = code == op::CLOSE_SESSION || err == ErrorCode::SessionExpired.code();
        Ok(if ended { Flow::Close } else { Flow::Continue })
    }

    /// The log entry of this session's request `code` with `body`.
    fn entry(&self, code: i32, body: &[u8]) -> ZkEntry {
        ZkEntry {
            session: self.session,
            time_ms: now_ms(),
            op: code,
            body: body.to_vec(),
            auth: self.auth.clone(),
        }
    }

    /// Logs writes of this session that came one right after another as
    /// one batch (see [`pipeline`]) and answers each in turn once this
    /// member has applied them all, each after the notifications of the
    /// changes up to its own zxid, as if they had been handled one by one.
    async fn write_batch(
        &mut self,
        packets: &[Vec<u8>],
        writer: &mut OwnedWriteHalf,
    ) -> Result<Flow, ConnectionError> {
        let header = |packet: &[u8]| {
            let word = |at: usize| i32::from_be_bytes(packet[at..at + 4].try_into().expect("4"));
            (word(0), word(4))
        };
        let entries = packets
            .iter()
            .map(|packet| self.entry(header(packet).1, &packet[8..]))
            .collect();
        let answer = self
            .propose_command(Command::ZooKeeperBatch(ZkBatch { entries }))
            .await?;
        let answers = ZkBatchAnswer::decode(answer.as_slice())
            .map_err(|e| ConnectionError::Protocol(format!("a malformed batch answer: {e}")))?
            .answers;
        if answers.len() != packets.len() {
            return Err(ConnectionError::Protocol(format!(
                "{} answers to a batch of {} writes",
                answers.len(),
                packets.len()
            )));
        }
        let mut read = Vec::with_capacity(answers.len());
        for answer in &answers {
            read.push(
                read_answer(answer)
                    .ok_or_else(|| ConnectionError::Protocol("a malformed answer".into()))?,
            );
        }
        let last = read.iter().map(|(zxid, _, _)| *zxid).max().unwrap_or(0);
        self.wait_applied(last).await?;
        let mut flow = Flow::Continue;
        for ((packet, answer), (zxid, err, _)) in packets.iter().zip(&answers).zip(&read) {
            let fired = self.fire_pending_until(*zxid)?;
            self.notify(writer, &fired).await?;
            write_packet(writer, &[&header(packet).0.to_be_bytes(), answer]).await?;
            if *err == ErrorCode::SessionExpired.code() {
                flow = Flow::Close;
            }
        }
        Ok(flow)
    }

    /// The notifications the changes applied since the last look fire.
    fn fire_pending(&mut self) -> Result<Vec<Fired>, ConnectionError> {
        self.fire_pending_until(i64::MAX)
    }

    /// The notifications the changes applied since the last look, up to
    /// revision `until`, fire; later ones are looked at next time.
    fn fire_pending_until(&mut self, until: i64) -> Result<Vec<Fired>, ConnectionError> {
        let backend = self.backend.clone();
        let store = backend.store();
        self.fire_pending_in(&store, until)
    }

    fn fire_pending_in(
        &mut self,
        store: &bellwether_kv::KvStore,
        until: i64,
    ) -> Result<Vec<Fired>, ConnectionError> {
        let start = self.next_event_revision;
        let until = until.min(store.revision());
        if start > until {
            return Ok(Vec::new());
        }
        self.next_event_revision = until + 1;
        if self.watches.is_empty() {
            return Ok(Vec::new());
        }
        let range = KeyRange::prefix(NODE_PREFIX.to_vec());
        match store.events_since(start, &range) {
            Ok(mut events) => {
                events.retain(|event| event.kv.mod_revision <= until);
                Ok(changes(&events)
                    .iter()
                    .flat_map(|change| self.watches.fire(change))
                    .collect())
            }
            // Fell behind the store's event log: the watches cannot be
            // kept exactly here. The connection closes; the client
            // reconnects and sends its watches again with the last zxid it
            // saw, and each fires then if its node changed since.
            Err(_) => Err(ConnectionError::Unavailable(
                "the session's watches fell behind the store's event log".into(),
            )),
        }
    }

    async fn notify(
        &self,
        writer: &mut OwnedWriteHalf,
        fired: &[Fired],
    ) -> Result<(), ConnectionError> {
        self.stats.sent.inc_by(fired.len() as u64);
        for event in fired {
            let mut w = JuteWriter::new();
            w.int(event.kind)
                .int(keeper_state::SYNC_CONNECTED)
                .string(&event.path);
            reply(
                writer,
                xid::NOTIFICATION,
                -1,
                ErrorCode::Ok,
                &w.into_bytes(),
            )
            .await?;
        }
        Ok(())
    }
}

/// Sends a reply: the header, then the record.
async fn reply(
    writer: &mut OwnedWriteHalf,
    request_xid: i32,
    zxid: i64,
    code: ErrorCode,
    record: &[u8],
) -> std::io::Result<()> {
    let mut w = JuteWriter::new();
    w.int(request_xid).long(zxid).int(code.code());
    write_packet(writer, &[&w.into_bytes(), record]).await
}

/// whoAmI's record: each id the connection has proven as its scheme and
/// user (a digest's user name, without its hash), the ids added with
/// `addauth` first and the address last, as ZooKeeper 3.8 lists them.
fn who_am_i(auth: &[AuthId]) -> Vec<u8> {
    let added = auth.iter().filter(|id| id.scheme != "ip");
    let addresses = auth.iter().filter(|id| id.scheme == "ip");
    let ids: Vec<&AuthId> = added.chain(addresses).collect();
    let mut w = JuteWriter::new();
    w.count(ids.len());
    for id in ids {
        let user = match id.scheme.as_str() {
            "digest" => id.id.split(':').next().unwrap_or_default(),
            _ => id.id.as_str(),
        };
        w.string(&id.scheme).string(user);
    }
    w.into_bytes()
}

/// The id an auth packet proves, for the `digest` scheme: `user:` and the
/// base64 of the SHA-1 of `user:password`, as ZooKeeper computes it.
fn digest_id(packet: &[u8]) -> Option<AuthId> {
    use base64::Engine;
    let mut r = JuteReader::new(packet);
    let _type = r.int().ok()?;
    let scheme = r.text().ok()?;
    let secret = r.buffer().ok()?.unwrap_or_default();
    if scheme != "digest" {
        return None;
    }
    let text = std::str::from_utf8(&secret).ok()?;
    let (user, _) = text.split_once(':')?;
    let hash = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, text.as_bytes());
    let encoded = base64::engine::general_purpose::STANDARD.encode(hash.as_ref());
    Some(AuthId {
        scheme: "digest".into(),
        id: format!("{user}:{encoded}"),
    })
}

/// A session's password: 16 random bytes.
fn password() -> Vec<u8> {
    use ring::rand::SecureRandom;
    let mut bytes = vec![0; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source works");
    bytes
}

/// Milliseconds since the epoch: a node's ctime and mtime.
pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
