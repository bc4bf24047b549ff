//! The security suite, against real member processes: TLS on the client
//! port with client certificates (the same etcdctl commands on a real etcd
//! 3.4 and on bellwether), and mutual TLS between members. Certificates
//! come from `bellwether certs`.

mod common;

use common::etcd_server::EtcdServer;
use common::{bellwether_binary, etcdctl, Cluster};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Issues certificates for `names`, valid for `hosts`, into `dir` (with
/// the CA there, or a new one).
fn certs(dir: &Path, names: &str, hosts: &str) {
    let output = std::process::Command::new(bellwether_binary())
        .args(["certs", "--names", names, "--hosts", hosts, "--dir"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "bellwether certs: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The files of one certificate in `dir`, as etcdctl flags.
struct Credentials {
    ca: Option<PathBuf>,
    cert: Option<(PathBuf, PathBuf)>,
}

impl Credentials {
    fn of(dir: &Path, ca_dir: &Path, name: &str) -> Credentials {
        Credentials {
            ca: Some(ca_dir.join("ca.pem")),
            cert: Some((
                dir.join(format!("{name}.pem")),
                dir.join(format!("{name}-key.pem")),
            )),
        }
    }

    fn flags(&self) -> Vec<String> {
        let mut flags = vec![
            "--dial-timeout=2s".to_string(),
            "--command-timeout=3s".into(),
        ];
        if let Some(ca) = &self.ca {
            flags.push(format!("--cacert={}", ca.display()));
        }
        if let Some((cert, key)) = &self.cert {
            flags.push(format!("--cert={}", cert.display()));
            flags.push(format!("--key={}", key.display()));
        }
        flags
    }
}

/// Runs etcdctl at `endpoint` with `credentials`.
fn etcdctl_with(endpoint: &str, credentials: &Credentials, args: &[&str]) -> (bool, String) {
    let flags = credentials.flags();
    let mut all: Vec<&str> = flags.iter().map(String::as_str).collect();
    all.extend_from_slice(args);
    etcdctl::run(endpoint, &all, None)
}

/// etcdctl's `--cluster` over TLS: it dials every member by the
/// `https://` client URL `member list` gives (sent as HTTP/2's
/// `:authority`, which the client port repairs), and each of the
/// `members` answers.
fn cluster_flag_over_tls(system: &str, https: &str, ours: &Path, members: usize) {
    let good = Credentials::of(ours, ours, "client");
    for command in [["endpoint", "status"], ["endpoint", "hashkv"]] {
        let mut args = command.to_vec();
        args.extend(["--cluster", "-w", "json"]);
        let (ok, out) = etcdctl_with(https, &good, &args);
        assert!(ok, "{system}: {args:?}: {out}");
        let answers: serde_json::Value =
            serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{system}: {e}: {out}"));
        let endpoints: Vec<&str> = answers
            .as_array()
            .expect("one answer per member")
            .iter()
            .map(|a| a["Endpoint"].as_str().expect("Endpoint"))
            .collect();
        assert_eq!(endpoints.len(), members, "{system}: {args:?}: {out}");
        assert!(
            endpoints.iter().all(|e| e.starts_with("https://")),
            "{system}: {endpoints:?}"
        );
    }
    let (ok, out) = etcdctl_with(https, &good, &["endpoint", "health", "--cluster"]);
    assert!(ok, "{system}: endpoint health --cluster: {out}");
    assert_eq!(
        out.matches("is healthy").count(),
        members,
        "{system}: {out}"
    );
}

/// What a TLS client port must do, on `system` at `https` (its
/// `https://` URL): serve a client with a certificate from `ours`, and
/// refuse plain HTTP, a TLS client without a certificate, and one whose
/// certificate comes from another CA.
fn client_port_checks(system: &str, https: &str, ours: &Path, foreign: &Path, key: &str) {
    let good = Credentials::of(ours, ours, "client");
    let (ok, out) = etcdctl_with(https, &good, &["put", key, "secret"]);
    assert!(
        ok,
        "{system}: a client with the cluster's certificate writes: {out}"
    );
    let (ok, out) = etcdctl_with(https, &good, &["get", key, "--print-value-only"]);
    assert!(ok && out.trim() == "secret", "{system}: and reads: {out}");
    let plain = https.replace("https://", "http://");
    let none = Credentials {
        ca: None,
        cert: None,
    };
    let (ok, out) = etcdctl_with(&plain, &none, &["get", key]);
    assert!(
        !ok && !out.contains("secret"),
        "{system}: plain HTTP is refused: {out}"
    );
    let anonymous = Credentials {
        ca: Some(ours.join("ca.pem")),
        cert: None,
    };
    let (ok, out) = etcdctl_with(https, &anonymous, &["get", key]);
    assert!(
        !ok && !out.contains("secret"),
        "{system}: no client certificate is refused: {out}"
    );
    let stranger = Credentials::of(foreign, ours, "client");
    let (ok, out) = etcdctl_with(https, &stranger, &["get", key]);
    assert!(
        !ok && !out.contains("secret"),
        "{system}: another CA's certificate is refused: {out}"
    );
    client_crate_checks(system, https, ours, key);
}

/// The client crate over TLS: with the CA and a client certificate it
/// reads what etcdctl wrote; without the certificate its call fails.
fn client_crate_checks(system: &str, https: &str, ours: &Path, key: &str) {
    use bellwether_client::{Client, Tls};
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (ca, cert, cert_key) = (
            ours.join("ca.pem"),
            ours.join("client.pem"),
            ours.join("client-key.pem"),
        );
        let tls = Tls::from_files(&ca, Some((&cert, &cert_key))).unwrap();
        let client = Client::connect_tls([https], tls).unwrap();
        let value = client.get(key).await.unwrap();
        assert_eq!(
            value.as_deref(),
            Some(&b"secret"[..]),
            "{system}: the client crate reads over TLS"
        );
        let anonymous = Client::connect_tls([https], Tls::from_files(&ca, None).unwrap()).unwrap();
        let refused = tokio::time::timeout(Duration::from_secs(30), anonymous.get(key)).await;
        assert!(
            matches!(refused, Ok(Err(_))),
            "{system}: without a client certificate the client crate is refused: {refused:?}"
        );
    });
}

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("bw-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_tls_client_port_needs_a_certificate_from_the_clusters_ca_on_etcd_and_here() {
    etcdctl::require();
    let name = "tls_client_port";
    let scratch = Scratch::new(name);
    let ours = scratch.0.join("ours");
    let foreign = scratch.0.join("foreign");
    let net = common::net_for(name);
    let hosts: Vec<String> = std::iter::once("127.0.0.1".to_string())
        .chain((1..=3).map(|i| format!("127.0.{net}.{i}")))
        .collect();
    certs(&ours, "member,client", &hosts.join(","));
    certs(&foreign, "client", "127.0.0.1");
    let file = |name: &str| ours.join(name).display().to_string();

    let etcd = EtcdServer::start_tls(
        name,
        &file("member.pem"),
        &file("member-key.pem"),
        &file("ca.pem"),
    );
    client_port_checks("etcd", &etcd.url(), &ours, &foreign, "etcd-key");
    cluster_flag_over_tls("etcd", &etcd.url(), &ours, 1);
    drop(etcd);

    let (cert, key, ca) = (file("member.pem"), file("member-key.pem"), file("ca.pem"));
    let flags = [
        "--cert-file",
        &cert,
        "--key-file",
        &key,
        "--trusted-ca-file",
        &ca,
        "--client-cert-auth",
        "--peer-cert-file",
        &cert,
        "--peer-key-file",
        &key,
        "--peer-trusted-ca-file",
        &ca,
    ];
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, &flags);
    let (leader, _) = cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    let follower = if leader == 1 { 2 } else { 1 };
    // Through a follower: its write reaches the leader over mutual TLS.
    let https = format!("https://{}", cluster.client(follower));
    client_port_checks("bellwether", &https, &ours, &foreign, "bellwether-key");
    // Every member serves the write over TLS.
    let good = Credentials::of(&ours, &ours, "client");
    for i in cluster.all() {
        let https = format!("https://{}", cluster.client(i));
        let (ok, out) = etcdctl_with(
            &https,
            &good,
            &["get", "bellwether-key", "--print-value-only"],
        );
        assert!(ok && out.trim() == "secret", "n{i}: {out}");
    }
    cluster_flag_over_tls("bellwether", &https, &ours, 3);
    // `bellwether transfer` speaks TLS as every client command does, and
    // without the CA says what to pass instead of blaming the cluster.
    let transfer = |tls: bool| {
        let mut command = std::process::Command::new(bellwether_binary());
        command.args(["transfer", "--endpoints", &cluster.client_endpoints()]);
        if tls {
            command
                .arg("--cacert")
                .arg(ours.join("ca.pem"))
                .arg("--cert")
                .arg(ours.join("client.pem"))
                .arg("--key")
                .arg(ours.join("client-key.pem"));
        }
        let output = command.output().unwrap();
        let text = String::from_utf8_lossy(&output.stdout).to_string()
            + &String::from_utf8_lossy(&output.stderr);
        (output.status.success(), text)
    };
    let (ok, out) = transfer(false);
    assert!(!ok && out.contains("--cacert"), "{out}");
    let (ok, out) = transfer(true);
    assert!(
        ok && out.contains(&format!("leadership moved from n{leader} to n")),
        "{out}"
    );
}

/// Sum of `bellwether_refused_peers_total{reason="tls"}` on member `i`.
fn tls_refusals(cluster: &Cluster, i: usize) -> u64 {
    let metrics = common::get(cluster.http(i), "/metrics").unwrap_or_default();
    metrics
        .lines()
        .filter(|l| l.starts_with("bellwether_refused_peers_total") && l.contains("\"tls\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[test]
fn a_peer_without_a_certificate_from_the_clusters_ca_is_refused() {
    let name = "tls_peer_port";
    let scratch = Scratch::new(name);
    let ours = scratch.0.join("ours");
    let foreign = scratch.0.join("foreign");
    let net = common::net_for(name);
    let hosts: Vec<String> = (1..=4).map(|i| format!("127.0.{net}.{i}")).collect();
    certs(&ours, "member", &hosts.join(","));
    certs(&foreign, "member", &hosts.join(","));
    let file = |dir: &Path, name: &str| dir.join(name).display().to_string();
    let (cert, key, ca) = (
        file(&ours, "member.pem"),
        file(&ours, "member-key.pem"),
        file(&ours, "ca.pem"),
    );
    let flags = [
        "--peer-cert-file",
        &cert,
        "--peer-key-file",
        &key,
        "--peer-trusted-ca-file",
        &ca,
    ];
    let mut cluster = Cluster::start_with_flags(name, 3, 50, 300, &flags);
    // Members certified by the one CA elect a leader over mutual TLS.
    cluster.wait_leader(&cluster.all(), Duration::from_secs(15));
    assert_eq!(tls_refusals(&cluster, 1), 0);
    // An intruder with another CA's certificate dials n1 as member 4. It
    // trusts the cluster's CA, so it is n1 that refuses it (its client
    // certificate), not the intruder that refuses n1.
    let intruder_dir = scratch.0.join("intruder");
    let mut intruder = std::process::Command::new(bellwether_binary())
        .arg("node")
        .args(["--id", "4", "--cluster", "test"])
        .arg(format!(
            "--peers=1={}:{},4=127.0.{net}.4:7000",
            cluster.ip(1),
            cluster.peer_port
        ))
        .args(["--http-listen", "127.0.0.1:0", "--data-dir"])
        .arg(&intruder_dir)
        .args(["--peer-cert-file", &file(&foreign, "member.pem")])
        .args(["--peer-key-file", &file(&foreign, "member-key.pem")])
        .args(["--peer-trusted-ca-file", &ca])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while tls_refusals(&cluster, 1) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = intruder.kill();
    let _ = intruder.wait();
    assert!(
        tls_refusals(&cluster, 1) > 0,
        "n1 counts the intruder's refused TLS handshakes"
    );
    let log = cluster.log(1);
    assert!(
        log.contains("TLS handshake failed"),
        "n1 logs the refusal: {log}"
    );
    // The cluster itself is unharmed: one leader, agreed by all.
    cluster.wait_leader(&cluster.all(), Duration::from_secs(5));
}

/// The client port's bounds: past `--client-connections-max` a new
/// connection is closed at once and etcdctl fails; a freed slot serves
/// again; and every connection is told it may run at most
/// `STREAMS_PER_CONNECTION_MAX` calls at once.
#[test]
fn client_connections_and_streams_are_bounded() {
    use std::io::Read;
    etcdctl::require();
    let mut cluster = Cluster::start_with_flags(
        "client_limits",
        1,
        50,
        300,
        &["--client-connections-max", "8"],
    );
    cluster.wait_leader(&[1], Duration::from_secs(15));
    let endpoint = cluster.client(1).to_string();
    etcdctl::run_ok(&endpoint, &["put", "k", "v"]);
    let holders: Vec<std::net::TcpStream> = (0..8)
        .map(|_| std::net::TcpStream::connect(cluster.client(1)).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    let mut extra = std::net::TcpStream::connect(cluster.client(1)).unwrap();
    extra
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut byte = [0u8; 1];
    let asked = Instant::now();
    let answer = extra.read(&mut byte);
    let closed = match &answer {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted
        ),
    };
    assert!(
        closed && asked.elapsed() < Duration::from_secs(2),
        "a connection past the limit is closed at once: {answer:?} after {:?}",
        asked.elapsed()
    );
    let (ok, out) = etcdctl::run(
        &endpoint,
        &["--dial-timeout=1s", "--command-timeout=2s", "get", "k"],
        None,
    );
    assert!(!ok, "etcdctl fails while every slot is held: {out}");
    drop(holders);
    std::thread::sleep(Duration::from_millis(200));
    let value = etcdctl::run_ok(&endpoint, &["get", "k", "--print-value-only"]);
    assert_eq!(value.trim(), "v", "freed slots serve again");

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let max_streams = runtime.block_on(async {
        let tcp = tokio::net::TcpStream::connect(cluster.client(1))
            .await
            .unwrap();
        let (send, connection) = h2::client::handshake(tcp).await.unwrap();
        tokio::spawn(connection);
        let mut send = send.ready().await.unwrap();
        let request = http::Request::builder()
            .method("POST")
            .uri(format!(
                "http://{}/etcdserverpb.Maintenance/Status",
                cluster.client(1)
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(())
            .unwrap();
        let (answer, mut body) = send.send_request(request, false).unwrap();
        body.send_data(bytes::Bytes::from_static(&[0, 0, 0, 0, 0]), true)
            .unwrap();
        answer.await.unwrap();
        send.current_max_send_streams()
    });
    let limit = bellwether_server::etcd::client_limits::STREAMS_PER_CONNECTION_MAX;
    assert_eq!(
        max_streams, limit as usize,
        "SETTINGS_MAX_CONCURRENT_STREAMS"
    );
}

/// GET `path` from `address` over TLS, trusting only the CA in `ca`: the
/// response body, or why there is none.
fn https_get(address: std::net::SocketAddr, ca: &Path, path: &str) -> std::io::Result<String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use std::io::{Read, Write};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the CA file reads") {
        roots.add(cert.expect("a CA certificate")).unwrap();
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let mut connection = rustls::ClientConnection::new(std::sync::Arc::new(config), name)
        .map_err(std::io::Error::other)?;
    let mut tcp = std::net::TcpStream::connect_timeout(&address, Duration::from_millis(300))?;
    tcp.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut tls = rustls::Stream::new(&mut connection, &mut tcp);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )?;
    let mut response = Vec::new();
    match tls.read_to_end(&mut response) {
        Ok(_) => {}
        // A server that closes without TLS's close_notify: what came is
        // the whole answer.
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof && !response.is_empty() => {
        }
        Err(error) => return Err(error),
    }
    let response = String::from_utf8_lossy(&response).into_owned();
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
        .unwrap_or_default())
}

#[test]
fn the_http_port_serves_https_with_the_client_ports_certificate() {
    let name = "tls_http_port";
    let scratch = Scratch::new(name);
    let dir = scratch.0.join("certs");
    let net = common::net_for(name);
    certs(&dir, "member", &format!("127.0.0.1,127.0.{net}.1"));
    let file = |name: &str| dir.join(name).display().to_string();
    let (cert, key, ca) = (file("member.pem"), file("member-key.pem"), file("ca.pem"));
    let flags = [
        "--cert-file",
        &cert,
        "--key-file",
        &key,
        "--trusted-ca-file",
        &ca,
        "--http-tls",
    ];
    let cluster = Cluster::start_with_flags(name, 1, 50, 300, &flags);
    let ca = dir.join("ca.pem");
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        match https_get(cluster.http(1), &ca, "/status") {
            Ok(body) if body.contains("\"role\":\"leader\"") => break body,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no leader's status over HTTPS within 15 s: {other:?}"),
        }
    };
    assert!(status.contains("\"id\":1"), "{status}");
    let metrics = https_get(cluster.http(1), &ca, "/metrics").unwrap();
    assert!(metrics.contains("bellwether_"), "{metrics:.300}");
    // Plain HTTP on the same port gets no answer.
    let plain = common::get(cluster.http(1), "/status").unwrap_or_default();
    assert!(
        !plain.contains("leader"),
        "plain HTTP was answered: {plain:.300}"
    );
    // A client that does not trust the cluster's CA does not connect.
    let other = scratch.0.join("other");
    certs(&other, "member", "127.0.0.1");
    assert!(https_get(cluster.http(1), &other.join("ca.pem"), "/status").is_err());
}

/// One HTTP/2 frame: its 9-byte header and `payload`.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let length = payload.len() as u32;
    let mut frame = length.to_be_bytes()[1..].to_vec();
    frame.extend([kind, flags]);
    frame.extend(stream.to_be_bytes());
    frame.extend(payload);
    frame
}

/// The header block of a gRPC Watch call, in HPACK without the dynamic
/// table (indexed fields and literals without indexing), so that every
/// stream's block is the same bytes.
fn watch_call_headers() -> Vec<u8> {
    let literal = |block: &mut Vec<u8>, value: &[u8]| {
        block.push(value.len() as u8);
        block.extend(value);
    };
    let mut block = vec![0x83, 0x86]; // :method POST, :scheme http
    block.push(0x04); // :path, name 4 of the static table
    literal(&mut block, b"/etcdserverpb.Watch/Watch");
    block.push(0x01); // :authority
    literal(&mut block, b"127.0.0.1");
    block.extend([0x0f, 0x10]); // content-type, name 31
    literal(&mut block, b"application/grpc");
    block.push(0x00); // a new name
    literal(&mut block, b"te");
    literal(&mut block, b"trailers");
    block
}

#[test]
fn a_client_that_ignores_the_stream_bound_gets_refused_stream() {
    use std::io::{Read, Write};
    let cluster = Cluster::start_with_flags("client_stream_bound", 1, 50, 300, &[]);
    let limit = bellwether_server::etcd::client_limits::STREAMS_PER_CONNECTION_MAX;
    let deadline = Instant::now() + Duration::from_secs(15);
    let mut tcp = loop {
        match std::net::TcpStream::connect(cluster.client(1)) {
            Ok(tcp) => break tcp,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(error) => panic!("the client port does not open: {error}"),
        }
    };
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
    tcp.write_all(&h2_frame(0x4, 0, 0, &[])).unwrap(); // our SETTINGS
    let read_frame = |tcp: &mut std::net::TcpStream| -> (u8, u8, u32, Vec<u8>) {
        let mut header = [0u8; 9];
        tcp.read_exact(&mut header)
            .expect("a frame from the member");
        let length = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let stream = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; length];
        tcp.read_exact(&mut payload).unwrap();
        (header[3], header[4], stream, payload)
    };
    // The member's SETTINGS (not an ACK) first: acknowledge them.
    loop {
        let (kind, flags, _, _) = read_frame(&mut tcp);
        if kind == 0x4 && flags & 0x1 == 0 {
            tcp.write_all(&h2_frame(0x4, 0x1, 0, &[])).unwrap();
            break;
        }
    }
    // One Watch call more than the bound, each left open.
    let block = watch_call_headers();
    let mut calls = Vec::new();
    for i in 0..=limit {
        calls.extend(h2_frame(0x1, 0x4, 2 * i + 1, &block));
    }
    tcp.write_all(&calls).unwrap();
    let last = 2 * limit + 1;
    let refused = loop {
        let (kind, _, stream, payload) = read_frame(&mut tcp);
        match kind {
            // RST_STREAM: its error code.
            0x3 => {
                let code = u32::from_be_bytes(payload[..4].try_into().unwrap());
                assert_eq!(
                    stream, last,
                    "only the call past the bound is reset (code {code})"
                );
                break code;
            }
            // GOAWAY would end the whole connection instead.
            0x7 => panic!("the member closed the connection: {payload:?}"),
            _ => {}
        }
    };
    assert_eq!(refused, 0x7, "REFUSED_STREAM, which clients retry");
}
