//! The connections: one outbound connection per peer (dialed, with
//! batching and reconnect with backoff) and the inbound connections peers
//! dial to us. Every channel is bounded.
//!
//! A connection that breaks (a TCP reset or EOF, as when a peer's process
//! dies) is reported to the event loop as [`PeerEvent::Lost`], which feeds
//! the core's `peer_unreachable`: the fast failure-detection path. A
//! partition that silently drops packets produces no such event; the
//! election timeout covers it.

use crate::frame::HANDSHAKE_BYTES_MAX;
use crate::frame::{put_frame, put_frame_with, read_frame, read_frame_up_to, FrameError};
use crate::handshake::{Hello, Refusal};
use crate::tls::{PeerStream, PeerTls};
use crate::{Malformed, Observer, WireMessage};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// Messages queued for one peer, at most; more are dropped (the
/// algorithms resend).
pub const OUTBOUND_QUEUE_MAX: usize = 4_096;
/// Messages received from all peers and not yet handled, at most.
pub const INBOUND_QUEUE_MAX: usize = 8_192;
/// Messages written per batch, at most.
const BATCH_MESSAGES_MAX: usize = 1_024;
/// Write buffer of an outbound connection, as allocated.
const WRITE_BUFFER_BYTES: usize = 64 << 10;
/// A write or frame buffer that grew past this is replaced after use.
const WRITE_BUFFER_KEPT_BYTES_MAX: usize = 1 << 20;
/// Read buffer of an inbound connection.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// First reconnect delay; doubles up to [`RECONNECT_DELAY_MAX`].
const RECONNECT_DELAY_MIN: Duration = Duration::from_millis(10);
/// Longest reconnect delay.
const RECONNECT_DELAY_MAX: Duration = Duration::from_secs(1);
/// A dial or handshake that takes longer fails.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// What the transport tells the event loop.
#[derive(Debug)]
pub enum PeerEvent<M> {
    /// A message from `from`.
    Message(u64, M),
    /// A connection to or from `peer` broke.
    Lost(u64),
    /// `peer` refused us as a member removed from the cluster for good.
    Removed(u64),
}

/// Identity the transport speaks for.
#[derive(Clone, Debug)]
pub struct Identity {
    /// Cluster (or elector group) name.
    pub cluster: String,
    /// This node.
    pub id: u64,
    /// All member ids; a node whose membership changes at run time updates
    /// it, and a peer outside it is refused.
    pub members: std::sync::Arc<Members>,
    /// [`crate::fingerprint`] of the settings every node of the group must
    /// share (algorithm, winner rule, member list), or 0 for none. A peer
    /// whose fingerprint differs is refused.
    pub fingerprint: u32,
    /// Shared by the dialers and the acceptor: a peer that connects to us
    /// wakes our dialer for it.
    pub wakeups: std::sync::Arc<crate::Wakeups>,
    /// Local address outbound connections leave from: the peer listener's
    /// IP, so that a firewall rule on a node's IP cuts all its traffic.
    pub source_ip: std::net::IpAddr,
    /// Mutual TLS for every connection, or `None` for plain TCP.
    pub tls: Option<Arc<PeerTls>>,
}

/// The member ids a node accepts connections from. An open inbound
/// connection from a peer that leaves the set is closed at its next
/// message: connections notice a change by its generation number, so the
/// set's lock is not taken per message.
#[derive(Debug, Default)]
pub struct Members {
    /// The ids.
    ids: std::sync::RwLock<Vec<u64>>,
    /// Ids removed from the membership for good: told so when they call.
    removed: std::sync::RwLock<Vec<u64>>,
    /// Bumped by every [`Members::set`].
    generation: std::sync::atomic::AtomicU64,
}

impl Members {
    /// A set of `ids`.
    pub fn new(ids: Vec<u64>) -> std::sync::Arc<Members> {
        std::sync::Arc::new(Members {
            ids: std::sync::RwLock::new(ids),
            removed: std::sync::RwLock::new(Vec::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Replaces the set.
    pub fn set(&self, ids: Vec<u64>) {
        *self.ids.write().expect("members lock") = ids;
        self.generation
            .fetch_add(1, std::sync::atomic::Ordering::Release);
    }

    /// The ids now.
    pub fn ids(&self) -> Vec<u64> {
        self.ids.read().expect("members lock").clone()
    }

    /// Replaces the ids removed for good.
    pub fn set_removed(&self, ids: Vec<u64>) {
        *self.removed.write().expect("members lock") = ids;
    }

    /// The ids removed for good, now.
    pub fn removed(&self) -> Vec<u64> {
        self.removed.read().expect("members lock").clone()
    }

    /// Whether `id` is in the set now.
    pub fn contains(&self, id: u64) -> bool {
        self.ids.read().expect("members lock").contains(&id)
    }

    /// How many times the set was replaced.
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }
}

/// Starts the dialer for `peer` at `address`; returns its queue.
pub fn spawn_outbound<M: WireMessage, O: Observer>(
    identity: Identity,
    peer: u64,
    address: SocketAddr,
    events: mpsc::Sender<PeerEvent<M>>,
    metrics: Arc<O>,
) -> mpsc::Sender<M> {
    let (sender, receiver) = mpsc::channel(OUTBOUND_QUEUE_MAX);
    tokio::spawn(outbound(identity, peer, address, receiver, events, metrics));
    sender
}

async fn outbound<M: WireMessage, O: Observer>(
    identity: Identity,
    peer: u64,
    address: SocketAddr,
    mut queue: mpsc::Receiver<M>,
    events: mpsc::Sender<PeerEvent<M>>,
    metrics: Arc<O>,
) {
    let mut delay = RECONNECT_DELAY_MIN;
    loop {
        match dial(&identity, peer, address).await {
            Ok(stream) => {
                delay = RECONNECT_DELAY_MIN;
                // Anything queued while disconnected is stale; the
                // algorithms resend.
                if drain(&mut queue).is_none() {
                    return; // The peer left the membership.
                }
                let broke = pump(stream, peer, &mut queue, &*metrics).await;
                if broke.is_none() {
                    return; // The event loop is gone.
                }
                let _ = events.try_send(PeerEvent::Lost(peer));
                // Redial at once: a restarted peer is usually back already.
                continue;
            }
            Err(error) => {
                tracing::debug!(peer, %address, %error, "cannot reach peer");
                if error.kind() == std::io::ErrorKind::ConnectionRefused
                    && refusal_of(&error) == Some(Refusal::Removed)
                {
                    let _ = events.try_send(PeerEvent::Removed(peer));
                }
                if drain(&mut queue).is_none() {
                    return; // The peer left the membership.
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = identity.wakeups.woken(peer) => {}
        }
        delay = (delay * 2).min(RECONNECT_DELAY_MAX);
    }
}

/// Drops what is queued; `None` once the queue's sender is gone (the
/// event loop ended, or stopped sending to this peer for good).
fn drain<M>(queue: &mut mpsc::Receiver<M>) -> Option<()> {
    loop {
        match queue.try_recv() {
            Ok(_) => {}
            Err(mpsc::error::TryRecvError::Empty) => return Some(()),
            Err(mpsc::error::TryRecvError::Disconnected) => return None,
        }
    }
}

async fn dial(identity: &Identity, peer: u64, address: SocketAddr) -> std::io::Result<PeerStream> {
    let socket = if identity.source_ip.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.bind(SocketAddr::new(identity.source_ip, 0))?;
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, socket.connect(address)).await??;
    stream.set_nodelay(true)?;
    let mut stream = match &identity.tls {
        None => PeerStream::Plain(stream),
        Some(tls) => {
            let secured = tokio::time::timeout(CONNECT_TIMEOUT, tls.connect(address.ip(), stream));
            secured.await?.inspect_err(|error| {
                tracing::error!(peer, %address, %error, "TLS handshake with peer failed: check that both certificates come from the cluster's CA and that the peer's names its address");
            })?
        }
    };
    let hello = Hello {
        cluster: identity.cluster.clone(),
        from: identity.id,
        to: peer,
        fingerprint: identity.fingerprint,
    };
    let mut frame = Vec::new();
    put_frame(&mut frame, &hello.encode());
    stream.write_all(&frame).await?;
    stream.flush().await?;
    let mut answer = [0u8; 1];
    tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::io::AsyncReadExt::read_exact(&mut stream, &mut answer),
    )
    .await??;
    if answer[0] != 0 {
        let refusal = Refusal::from_code(answer[0]);
        let reason = refusal.map_or("unknown refusal", Refusal::as_str);
        if refusal == Some(Refusal::Removed) {
            tracing::error!(peer, %address, "peer refused our connection: this member was removed from the cluster");
        } else {
            tracing::error!(peer, %address, reason, "peer refused our connection: check that both use the same cluster name, member list and settings");
        }
        return Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            RefusedBy(refusal),
        ));
    }
    Ok(stream)
}

/// A peer's refusal, carried in the dial's error so that the dialer can
/// tell a removal from the other refusals.
#[derive(Debug)]
struct RefusedBy(Option<Refusal>);

impl std::fmt::Display for RefusedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.map_or("unknown refusal", Refusal::as_str))
    }
}

impl std::error::Error for RefusedBy {}

/// The refusal a dial's error carries, if a peer refused it.
fn refusal_of(error: &std::io::Error) -> Option<Refusal> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<RefusedBy>())
        .and_then(|refused| refused.0)
}

/// Writes queued messages in batches until the connection breaks (`Some`)
/// or the queue closes (`None`). The peer never writes on this connection
/// after the handshake, so a readable end means it closed or reset: the
/// connection is known broken at once, not at the next failed write.
async fn pump<M: WireMessage>(
    stream: PeerStream,
    peer: u64,
    queue: &mut mpsc::Receiver<M>,
    metrics: &impl Observer,
) -> Option<()> {
    let (mut reader, mut writer) = stream.into_split();
    let mut buffer = Vec::with_capacity(WRITE_BUFFER_BYTES);
    let mut probe = [0u8; 1];
    loop {
        let first = tokio::select! {
            message = queue.recv() => message?,
            _ = tokio::io::AsyncReadExt::read(&mut reader, &mut probe) => return Some(()),
        };
        buffer.clear();
        let mut next = Some(first);
        let mut count = 0;
        while let Some(message) = next.take() {
            metrics.sent(peer, message.kind());
            if !put_frame_with(&mut buffer, |out| message.encode(out)) {
                tracing::warn!(
                    kind = message.kind(),
                    "dropped a message over the frame limit"
                );
            }
            count += 1;
            if count < BATCH_MESSAGES_MAX {
                next = queue.try_recv().ok();
            }
        }
        if writer.write_all(&buffer).await.is_err() || writer.flush().await.is_err() {
            return Some(());
        }
        if buffer.capacity() > WRITE_BUFFER_KEPT_BYTES_MAX {
            // A snapshot chunk grew it; do not hold that memory forever.
            buffer = Vec::with_capacity(WRITE_BUFFER_BYTES);
        }
    }
}

/// Inbound peer connections open at once, at most: a few per member is
/// plenty, and the bound keeps a flood of connections from exhausting
/// memory (each may hold a frame buffer).
pub const INBOUND_CONNECTIONS_MAX: usize = 64;

/// Accepts peer connections until the process ends.
pub async fn accept<M: WireMessage, O: Observer>(
    listener: TcpListener,
    identity: Identity,
    events: mpsc::Sender<PeerEvent<M>>,
    metrics: Arc<O>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(INBOUND_CONNECTIONS_MAX));
    loop {
        let Ok((stream, remote)) = listener.accept().await else {
            continue;
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics.refused("too_many_connections");
            tracing::warn!(%remote, limit = INBOUND_CONNECTIONS_MAX, "refused a peer connection: too many open");
            continue;
        };
        let (identity, events, metrics) = (identity.clone(), events.clone(), metrics.clone());
        tokio::spawn(async move {
            if let Err(error) = inbound(stream, &identity, &events, &*metrics).await {
                tracing::debug!(%remote, %error, "peer connection closed");
            }
            drop(slot);
        });
    }
}

/// Serves one inbound peer connection: TLS (when configured), the
/// handshake, then the peer's messages until the connection ends; the
/// event loop then hears that the peer was lost.
async fn inbound<M: WireMessage>(
    stream: TcpStream,
    identity: &Identity,
    events: &mpsc::Sender<PeerEvent<M>>,
    metrics: &impl Observer,
) -> Result<(), FrameError> {
    stream.set_nodelay(true)?;
    let remote = stream.peer_addr()?;
    let Some(mut stream) = secure(stream, identity, metrics, remote).await else {
        return Ok(());
    };
    let mut buffer = Vec::new();
    let Some((from, generation)) =
        handshake(&mut stream, &mut buffer, identity, metrics, remote).await?
    else {
        return Ok(());
    };
    // Buffered from here on: a batch of frames costs one read, not two per
    // frame. The handshake above stays unbuffered so nothing it did not
    // consume is left in a buffer it drops.
    let stream = tokio::io::BufReader::with_capacity(READ_BUFFER_BYTES, stream);
    let result = relay(stream, buffer, identity, events, from, generation).await;
    let _ = events.try_send(PeerEvent::Lost(from));
    result
}

/// Runs the TLS handshake of an inbound connection when the transport
/// uses TLS; `None` when it failed or timed out (logged and counted).
async fn secure(
    stream: TcpStream,
    identity: &Identity,
    metrics: &impl Observer,
    remote: SocketAddr,
) -> Option<PeerStream> {
    match &identity.tls {
        None => Some(PeerStream::Plain(stream)),
        Some(tls) => match tokio::time::timeout(CONNECT_TIMEOUT, tls.accept(stream)).await {
            Ok(Ok(stream)) => Some(stream),
            Ok(Err(error)) => {
                metrics.refused("tls");
                tracing::warn!(%remote, %error, "refused a peer connection: TLS handshake failed (no certificate, or one not from the cluster's CA)");
                None
            }
            Err(_) => {
                metrics.refused("tls");
                tracing::warn!(%remote, "refused a peer connection: TLS handshake timed out");
                None
            }
        },
    }
}

/// Reads and checks the peer's [`Hello`] and answers it. Returns the
/// peer's id and the membership generation seen at the handshake, or
/// `None` when the peer was refused (the refusal is answered and logged).
async fn handshake(
    stream: &mut PeerStream,
    buffer: &mut Vec<u8>,
    identity: &Identity,
    metrics: &impl Observer,
    remote: SocketAddr,
) -> Result<Option<(u64, u64)>, FrameError> {
    tokio::time::timeout(
        CONNECT_TIMEOUT,
        read_frame_up_to(stream, buffer, HANDSHAKE_BYTES_MAX),
    )
    .await
    .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "handshake timed out"))??;
    // The generation first: a change after it is seen by the relay loop.
    let generation = identity.members.generation();
    let hello = Hello::decode(buffer);
    let verdict = match &hello {
        Ok(hello) => hello.check(
            &identity.cluster,
            identity.id,
            &identity.members.ids(),
            &identity.members.removed(),
            identity.fingerprint,
        ),
        Err(_) => Err(Refusal::Malformed),
    };
    if let Err(refusal) = verdict {
        refuse(stream, &hello, refusal, identity, metrics, remote).await;
        return Ok(None);
    }
    let from = hello.expect("accepted").from;
    identity.wakeups.wake(from);
    stream.write_all(&[0]).await?;
    stream.flush().await?;
    Ok(Some((from, generation)))
}

/// Counts and logs a refused handshake and sends the refusal code; a
/// failure to send it does not matter, the connection is dropped anyway.
async fn refuse(
    stream: &mut PeerStream,
    hello: &Result<Hello, Malformed>,
    refusal: Refusal,
    identity: &Identity,
    metrics: &impl Observer,
    remote: SocketAddr,
) {
    metrics.refused(refusal.as_str());
    match hello {
        Ok(h) => {
            tracing::error!(%remote, reason = refusal.as_str(), their_cluster = %h.cluster, their_id = h.from, our_cluster = %identity.cluster, "refused a peer connection")
        }
        Err(e) => {
            tracing::error!(%remote, reason = refusal.as_str(), error = %e.0, "refused a peer connection")
        }
    }
    let _ = stream.write_all(&[refusal as u8]).await;
    let _ = stream.flush().await;
}

/// Hands the messages of an accepted peer to the event loop until the
/// connection breaks (the error), or the peer leaves the membership, sends
/// something undecodable or the event loop is gone (`Ok`).
async fn relay<M: WireMessage>(
    mut stream: tokio::io::BufReader<PeerStream>,
    mut buffer: Vec<u8>,
    identity: &Identity,
    events: &mpsc::Sender<PeerEvent<M>>,
    from: u64,
    mut generation: u64,
) -> Result<(), FrameError> {
    loop {
        if let Err(error) = read_frame(&mut stream, &mut buffer).await {
            break Err(error);
        }
        // A peer removed from the membership since the handshake: what it
        // sends now (a forwarded write, a vote) must not reach the loop.
        if identity.members.generation() != generation {
            generation = identity.members.generation();
            if !identity.members.contains(from) {
                tracing::info!(
                    peer = from,
                    "closing the connection of a peer that left the membership"
                );
                break Ok(());
            }
        }
        let decoded = M::decode(&buffer);
        if buffer.capacity() > WRITE_BUFFER_KEPT_BYTES_MAX {
            buffer = Vec::new(); // A large frame grew it; give it back.
        }
        match decoded {
            Ok(message) => {
                if events
                    .send(PeerEvent::Message(from, message))
                    .await
                    .is_err()
                {
                    break Ok(());
                }
            }
            Err(error) => {
                tracing::error!(peer = from, error = %error.0, "undecodable message; closing the connection");
                break Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_core::bully::BullyMessage;

    struct Quiet;

    impl Observer for Quiet {
        fn sent(&self, _: u64, _: &'static str) {}
        fn refused(&self, _: &'static str) {}
    }

    fn identity(id: u64, members: &Arc<Members>) -> Identity {
        Identity {
            cluster: "test".into(),
            id,
            members: members.clone(),
            fingerprint: 0,
            wakeups: Arc::new(crate::Wakeups::new(&[1, 2])),
            source_ip: "127.0.0.1".parse().unwrap(),
            tls: None,
        }
    }

    async fn next(
        received: &mut mpsc::Receiver<PeerEvent<BullyMessage>>,
    ) -> PeerEvent<BullyMessage> {
        tokio::time::timeout(Duration::from_secs(5), received.recv())
            .await
            .expect("an event in time")
            .expect("open")
    }

    /// A peer removed from the membership loses its open connection at its
    /// next message, and that message is not delivered.
    #[tokio::test]
    async fn an_open_connection_from_a_removed_peer_is_closed() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let members = Members::new(vec![1, 2]);
        let (events, mut received) = mpsc::channel(16);
        tokio::spawn(accept::<BullyMessage, _>(
            listener,
            identity(1, &members),
            events,
            Arc::new(Quiet),
        ));
        let (dialer_events, _dialer_received) = mpsc::channel(16);
        let outbound = spawn_outbound(
            identity(2, &Members::new(vec![1, 2])),
            1,
            address,
            dialer_events,
            Arc::new(Quiet),
        );
        // What is queued before the connection opens is dropped: send
        // until one arrives.
        let first = loop {
            let heartbeat = BullyMessage::Heartbeat { epoch: 1 };
            outbound.send(heartbeat).await.unwrap();
            let wait = tokio::time::timeout(Duration::from_millis(50), received.recv());
            if let Ok(event) = wait.await {
                break event.expect("open");
            }
        };
        assert!(
            matches!(
                first,
                PeerEvent::Message(2, BullyMessage::Heartbeat { epoch: 1 })
            ),
            "{first:?}"
        );
        // Heartbeats sent twice in one interval may both have arrived.
        tokio::time::sleep(Duration::from_millis(50)).await;
        while let Ok(PeerEvent::Message(..)) = received.try_recv() {}
        members.set(vec![1]);
        outbound
            .send(BullyMessage::Heartbeat { epoch: 2 })
            .await
            .unwrap();
        let event = next(&mut received).await;
        assert!(matches!(event, PeerEvent::Lost(2)), "{event:?}");
        // The dialer reconnects, and the handshake refuses it now.
        outbound
            .send(BullyMessage::Heartbeat { epoch: 3 })
            .await
            .unwrap();
        let quiet = tokio::time::timeout(Duration::from_millis(500), received.recv()).await;
        assert!(
            !matches!(quiet, Ok(Some(PeerEvent::Message(..)))),
            "{quiet:?}"
        );
    }

    /// A CA, and one certificate it signs for 127.0.0.1: (CA PEM,
    /// certificate PEM, key PEM).
    fn authority() -> (String, String, String) {
        use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &ca)
            .unwrap();
        (ca.pem(), cert.pem(), key.serialize_pem())
    }

    /// Counts refusals by reason.
    #[derive(Default)]
    struct Refusals(std::sync::Mutex<Vec<&'static str>>);

    impl Observer for Refusals {
        fn sent(&self, _: u64, _: &'static str) {}
        fn refused(&self, reason: &'static str) {
            self.0.lock().unwrap().push(reason);
        }
    }

    /// Sends heartbeats from node 2 to node 1 for `patience`; whether one
    /// arrived.
    async fn delivered(
        outbound: &mpsc::Sender<BullyMessage>,
        received: &mut mpsc::Receiver<PeerEvent<BullyMessage>>,
        patience: Duration,
    ) -> bool {
        let deadline = tokio::time::Instant::now() + patience;
        while tokio::time::Instant::now() < deadline {
            let _ = outbound.try_send(BullyMessage::Heartbeat { epoch: 1 });
            let wait = tokio::time::timeout(Duration::from_millis(20), received.recv());
            if let Ok(Some(PeerEvent::Message(2, _))) = wait.await {
                return true;
            }
        }
        false
    }

    /// Mutual TLS: a peer certified by the cluster's CA gets through; one
    /// with a certificate from another CA, and one without TLS, are
    /// refused at the TLS handshake and counted as `tls` refusals.
    #[tokio::test]
    async fn peers_need_a_certificate_from_the_clusters_ca() {
        let (ca, cert, key) = authority();
        let ours =
            Arc::new(PeerTls::from_pem(cert.as_bytes(), key.as_bytes(), ca.as_bytes()).unwrap());
        let (foreign_ca, foreign_cert, foreign_key) = authority();
        let foreign = Arc::new(
            PeerTls::from_pem(
                foreign_cert.as_bytes(),
                foreign_key.as_bytes(),
                foreign_ca.as_bytes(),
            )
            .unwrap(),
        );
        // Trusts our CA, so the handshake gets as far as our check of its
        // certificate.
        let impostor = Arc::new(
            PeerTls::from_pem(
                foreign_cert.as_bytes(),
                foreign_key.as_bytes(),
                ca.as_bytes(),
            )
            .unwrap(),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let members = Members::new(vec![1, 2]);
        let (events, mut received) = mpsc::channel(64);
        let refusals = Arc::new(Refusals::default());
        let server = Identity {
            tls: Some(ours.clone()),
            ..identity(1, &members)
        };
        tokio::spawn(accept::<BullyMessage, _>(
            listener,
            server,
            events,
            refusals.clone(),
        ));
        for (name, tls, admitted) in [
            ("plain TCP", None, false),
            ("another CA", Some(foreign), false),
            (
                "another CA's certificate, our CA trusted",
                Some(impostor),
                false,
            ),
            ("the cluster's CA", Some(ours), true),
        ] {
            let (dialer_events, _dialer_received) = mpsc::channel(16);
            let dialer = Identity {
                tls,
                ..identity(2, &members)
            };
            let outbound = spawn_outbound(dialer, 1, address, dialer_events, Arc::new(Quiet));
            let patience = Duration::from_millis(if admitted { 5_000 } else { 500 });
            assert_eq!(
                delivered(&outbound, &mut received, patience).await,
                admitted,
                "{name}"
            );
            drop(outbound);
        }
        let refused = refusals.0.lock().unwrap().clone();
        assert!(
            !refused.is_empty() && refused.iter().all(|r| *r == "tls"),
            "{refused:?}"
        );
    }
}
