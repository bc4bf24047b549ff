//! Real-socket tests of every route: the router runs on `127.0.0.1:0`
//! behind [`serve`], fed by a fake watch channel, and a raw HTTP/1.1 client
//! (a `TcpStream` and a hand-written request) reads the answers, so no
//! client crate is needed.

use bellwether_core::NodeId;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::listener::BoundedListener;
use super::{readiness, router, serve, HttpState, NotReady};
use crate::{LeadershipChange, MemberStatus, Metrics, NodeStatus};

/// Longest any single test exchange may take before the test fails.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest response the test client reads; the dashboard page is the biggest.
const RESPONSE_BYTES_MAX: u64 = 1 << 20;

/// One parsed HTTP response.
#[derive(Debug)]
struct Response {
    /// Status code, e.g. 200.
    code: u16,
    /// Headers with lower-cased names, in order.
    headers: Vec<(String, String)>,
    /// Body as text (every route answers text).
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A served router and the handles that drive it.
struct Harness {
    /// Where it listens.
    address: SocketAddr,
    /// The fake event loop's end of the status channel.
    status: Option<watch::Sender<NodeStatus>>,
    /// The metrics the router renders.
    metrics: Arc<Metrics>,
    /// Fires the graceful shutdown.
    shutdown: Option<oneshot::Sender<()>>,
    /// The `serve` task, to check it returns.
    server: JoinHandle<std::io::Result<()>>,
}

async fn start(status: NodeStatus) -> Harness {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let address = listener.local_addr().expect("local address");
    let (status_tx, status_rx) = watch::channel(status);
    let metrics = Arc::new(Metrics::default());
    let state = HttpState {
        status: status_rx,
        metrics: Arc::clone(&metrics),
    };
    let (shutdown_tx, shutdown_rx) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, state, None, async {
        let _ = shutdown_rx.await;
    }));
    Harness {
        address,
        status: Some(status_tx),
        metrics,
        shutdown: Some(shutdown_tx),
        server,
    }
}

/// Sends `GET path` on a fresh connection and reads the whole response.
async fn get(address: SocketAddr, path: &str) -> Response {
    request(
        address,
        &format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"),
    )
    .await
}

async fn request(address: SocketAddr, raw: &str) -> Response {
    let exchange = async {
        let mut stream = TcpStream::connect(address).await.expect("connect");
        stream
            .write_all(raw.as_bytes())
            .await
            .expect("write request");
        let mut bytes = Vec::new();
        stream
            .take(RESPONSE_BYTES_MAX)
            .read_to_end(&mut bytes)
            .await
            .expect("read response");
        bytes
    };
    let bytes = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .expect("response in time");
    parse(&String::from_utf8(bytes).expect("utf-8 response"))
}

fn parse(text: &str) -> Response {
    let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("status line");
    let code = status_line
        .split(' ')
        .nth(1)
        .expect("status code")
        .parse()
        .expect("numeric status");
    let headers: Vec<(String, String)> = lines
        .map(|line| line.split_once(':').expect("header line"))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    assert!(
        !headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked")),
        "the test client does not decode chunked bodies; every route has a known length"
    );
    Response {
        code,
        headers,
        body: body.to_owned(),
    }
}

fn status_fixture() -> NodeStatus {
    NodeStatus {
        id: NodeId(1),
        cluster: "test".to_owned(),
        version: "0.1.0".to_owned(),
        peer_address: "127.0.0.1:7001".to_owned(),
        http_address: "127.0.0.1:7101".to_owned(),
        role: bellwether_core::Role::Follower,
        term: 4,
        leader: None,
        commit: 10,
        applied: 10,
        last_index: 12,
        committed_in_term: false,
        uptime_ms: 65_000,
        leader_uptime_ms: 0,
        learner: false,
        repairing: false,
        detector: None,
        outside: false,
        members: vec![MemberStatus {
            id: NodeId(2),
            peer_address: "127.0.0.1:7002".to_owned(),
            http_address: Some("127.0.0.1:7102".to_owned()),
            client_address: None,
            learner: false,
            match_index: None,
            lag: None,
        }],
        leadership: vec![
            LeadershipChange {
                at_unix_ms: 1_700_000_000_000,
                term: 3,
                leader: Some(bellwether_core::NodeId(2)),
            },
            LeadershipChange {
                at_unix_ms: 1_700_000_060_000,
                term: 4,
                leader: None,
            },
        ],
    }
}

#[tokio::test]
async fn metrics_serves_the_exposition_format() {
    let harness = start(status_fixture()).await;
    harness.metrics.term.set(7);
    let response = get(harness.address, "/metrics").await;
    assert_eq!(response.code, 200);
    assert_eq!(
        response.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert!(
        response.body.contains("# TYPE bellwether_term gauge"),
        "{}",
        response.body
    );
    assert!(
        response.body.contains("\nbellwether_term 7\n"),
        "{}",
        response.body
    );
    let scraper = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\nConnection: close\r\n\r\n";
    let response = request(harness.address, scraper).await;
    assert_eq!(
        response.header("content-type"),
        Some("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        "a scraper that asks for OpenMetrics gets it by name"
    );
    assert!(response.body.ends_with("# EOF\n"), "{}", response.body);
}

#[tokio::test]
async fn ready_waits_for_a_leader_and_for_applied_to_reach_commit() {
    let harness = start(status_fixture()).await;
    let sender = harness.status.as_ref().expect("sender");

    let response = get(harness.address, "/ready").await;
    assert_eq!(
        (response.code, response.body.as_str()),
        (503, "no leader known")
    );

    sender.send_modify(|s| {
        s.leader = Some(NodeId(2));
        s.applied = 8;
    });
    let response = get(harness.address, "/ready").await;
    assert_eq!(
        (response.code, response.body.as_str()),
        (503, "applying: applied 8 of commit 10")
    );

    sender.send_modify(|s| s.applied = 10);
    let response = get(harness.address, "/ready").await;
    assert_eq!((response.code, response.body.as_str()), (200, "ready"));
}

#[tokio::test]
async fn status_round_trips_as_json_and_allows_any_origin() {
    let harness = start(status_fixture()).await;
    let response = get(harness.address, "/status").await;
    assert_eq!(response.code, 200);
    assert_eq!(response.header("access-control-allow-origin"), Some("*"));
    assert_eq!(response.header("content-type"), Some("application/json"));
    let decoded: NodeStatus = serde_json::from_str(&response.body).expect("a NodeStatus");
    assert_eq!(decoded, status_fixture());
}

#[tokio::test]
async fn status_follows_the_watch_channel() {
    let harness = start(status_fixture()).await;
    harness
        .status
        .as_ref()
        .expect("sender")
        .send_modify(|s| s.term = 9);
    let decoded: NodeStatus =
        serde_json::from_str(&get(harness.address, "/status").await.body).expect("a NodeStatus");
    assert_eq!(decoded.term, 9);
}

#[tokio::test]
async fn health_turns_503_when_the_event_loop_drops_its_sender() {
    let mut harness = start(status_fixture()).await;
    let response = get(harness.address, "/health").await;
    assert_eq!((response.code, response.body.as_str()), (200, "ok"));

    drop(harness.status.take());
    let response = get(harness.address, "/health").await;
    assert_eq!(response.code, 503);
    let response = get(harness.address, "/ready").await;
    assert_eq!(
        (response.code, response.body.as_str()),
        (503, "event loop stopped")
    );
}

#[tokio::test]
async fn dashboard_page_and_assets_are_served() {
    let harness = start(status_fixture()).await;
    let page = get(harness.address, "/").await;
    assert_eq!(page.code, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        page.body.contains("id=\"leader\""),
        "the page lacks the leader element"
    );
    assert!(page.body.contains("src=\"dashboard.js\""));

    let script = get(harness.address, "/dashboard.js").await;
    assert_eq!(script.code, 200);
    assert_eq!(
        script.header("content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert!(script.body.contains("getElementById(\"leader\")"));

    let style = get(harness.address, "/dashboard.css").await;
    assert_eq!(style.code, 200);
    assert_eq!(
        style.header("content-type"),
        Some("text/css; charset=utf-8")
    );
}

#[tokio::test]
async fn unknown_routes_and_methods_are_refused() {
    let harness = start(status_fixture()).await;
    assert_eq!(get(harness.address, "/nope").await.code, 404);
    let post = "POST /status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    assert_eq!(request(harness.address, post).await.code, 405);
}

#[tokio::test]
async fn serve_returns_after_the_shutdown_signal() {
    let mut harness = start(status_fixture()).await;
    assert_eq!(get(harness.address, "/health").await.code, 200);
    harness
        .shutdown
        .take()
        .expect("shutdown sender")
        .send(())
        .expect("server listening for shutdown");
    let result = tokio::time::timeout(EXCHANGE_TIMEOUT, &mut harness.server).await;
    result
        .expect("serve returns in time")
        .expect("serve task not panicked")
        .expect("serve ok");
    assert!(
        TcpStream::connect(harness.address).await.is_err(),
        "still accepting after shutdown"
    );
}

#[test]
fn readiness_explains_itself_and_agrees_with_is_ready() {
    let mut status = status_fixture();
    assert_eq!(readiness(&status), Err(NotReady::NoLeader));
    status.leader = Some(NodeId(1));
    status.applied = 3;
    let verdict = readiness(&status);
    assert_eq!(
        verdict,
        Err(NotReady::Applying {
            applied: 3,
            commit: 10
        })
    );
    assert_eq!(
        verdict.unwrap_err().to_string(),
        "applying: applied 3 of commit 10"
    );
    status.applied = 10;
    assert_eq!(readiness(&status), Ok(()));
}

/// Serves the router on a listener with explicit bounds.
async fn start_bounded(connections_max: usize, idle_max: Duration) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind 127.0.0.1:0");
    let address = listener.local_addr().expect("local address");
    let (status_tx, status_rx) = watch::channel(status_fixture());
    let state = HttpState {
        status: status_rx,
        metrics: Arc::new(Metrics::default()),
    };
    let listener = BoundedListener::new(listener, connections_max, idle_max);
    tokio::spawn(async move {
        let _keep_loop_alive = status_tx;
        axum::serve(listener, router(state)).await
    });
    address
}

#[tokio::test]
async fn connections_past_the_maximum_wait_for_a_free_slot() {
    let address = start_bounded(1, Duration::from_secs(30)).await;
    let holder = TcpStream::connect(address).await.expect("first connection");
    // Give the server time to accept the holder, so it owns the only slot.
    tokio::time::sleep(Duration::from_millis(100)).await;

    let waiting = tokio::spawn(get(address, "/health"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a second connection was served while the only slot was taken"
    );

    drop(holder);
    let response = tokio::time::timeout(EXCHANGE_TIMEOUT, waiting)
        .await
        .expect("served in time")
        .expect("task");
    assert_eq!(response.code, 200);
}

#[tokio::test]
async fn idle_connections_are_closed() {
    let address = start_bounded(4, Duration::from_millis(200)).await;
    let mut idle = TcpStream::connect(address).await.expect("connect");
    let mut byte = [0_u8; 1];
    let read = tokio::time::timeout(EXCHANGE_TIMEOUT, idle.read(&mut byte))
        .await
        .expect("closed in time");
    // Closed either cleanly (0 bytes) or by reset; never left open.
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "idle connection got data: {read:?}"
    );
}

/// The HTTP port over TLS: a TLS client that trusts the CA gets `/health`;
/// a plain-HTTP request gets nothing; and a client that connects and
/// never starts its handshake does not keep others from being served.
#[tokio::test]
async fn https_serves_tls_clients_only_and_a_stalled_handshake_holds_no_one_else() {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    use rustls::pki_types::ServerName;
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let files = crate::config::ClientTlsFiles {
        cert: dir.path().join("cert.pem"),
        key: dir.path().join("key.pem"),
        trusted_ca: None,
        client_cert_auth: false,
        http: true,
    };
    std::fs::write(&files.cert, cert.pem()).unwrap();
    std::fs::write(&files.key, key.serialize_pem()).unwrap();
    let config = crate::tls::http_server_config(&files).unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (status_tx, status_rx) = watch::channel(status_fixture());
    let state = HttpState {
        status: status_rx,
        metrics: Arc::new(Metrics::default()),
    };
    let listener = BoundedListener::new(listener, 8, Duration::from_secs(30)).with_tls(config);
    tokio::spawn(async move {
        let _keep_loop_alive = status_tx;
        axum::serve(listener, router(state)).await
    });

    // Connects and sends nothing.
    let _stalled = TcpStream::connect(address).await.unwrap();

    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let client = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(client));
    let exchange = async {
        let tcp = TcpStream::connect(address).await.unwrap();
        let name = ServerName::IpAddress(std::net::IpAddr::from([127, 0, 0, 1]).into());
        let mut tls = connector.connect(name, tcp).await.unwrap();
        tls.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut bytes = Vec::new();
        let _ = tls.read_to_end(&mut bytes).await;
        String::from_utf8_lossy(&bytes).to_string()
    };
    let answer = tokio::time::timeout(EXCHANGE_TIMEOUT, exchange)
        .await
        .expect("an HTTPS answer in time, with a stalled handshake open");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    let plain = async {
        let mut tcp = TcpStream::connect(address).await.unwrap();
        tcp.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .unwrap();
        let mut bytes = Vec::new();
        let _ = tcp.read_to_end(&mut bytes).await;
        bytes
    };
    let bytes = tokio::time::timeout(EXCHANGE_TIMEOUT, plain).await.unwrap();
    assert!(
        !String::from_utf8_lossy(&bytes).contains("HTTP/1.1 200"),
        "plain HTTP is not served"
    );
}
