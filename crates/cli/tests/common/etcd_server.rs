//! A real etcd 3.4 (Debian's `etcd-server`) for tests that compare
//! bellwether's answers with etcd's, or show that a client works on both.
//!
//! One member on 127.0.0.1, its ports derived from the test's name like a
//! bellwether [`super::Cluster`]'s (the same network number, ports past
//! the ones its members use), its data in a temporary directory. The
//! process is killed and the directory removed on drop. A missing `etcd`
//! binary fails the test: scripts/test.sh installs etcd-server.

use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long etcd gets to start serving.
const START_WAIT: Duration = Duration::from_secs(30);

/// A running single-member etcd.
pub struct EtcdServer {
    /// Its data directory and log.
    pub dir: PathBuf,
    /// The client URL's address.
    pub client: SocketAddr,
    /// Where `/health` answers over plain HTTP: the client port, or with
    /// TLS a metrics port of its own.
    health: SocketAddr,
    /// The process; killed on drop.
    child: Child,
    /// The command line, to start it again.
    args: Vec<std::ffi::OsString>,
}

impl EtcdServer {
    /// Starts etcd for the test `name` and waits until its client port
    /// accepts connections and it answers a health check.
    pub fn start(name: &str) -> EtcdServer {
        EtcdServer::start_with_flags(name, &[])
    }

    /// [`EtcdServer::start`] on the data of an etcd snapshot file, which
    /// `etcdctl snapshot restore` unpacks into its data directory first.
    pub fn start_restored(name: &str, snapshot: &std::path::Path) -> EtcdServer {
        EtcdServer::start_from(name, &[], Some(snapshot))
    }

    /// [`EtcdServer::start`], with `flags` added to etcd's command line.
    pub fn start_with_flags(name: &str, flags: &[&str]) -> EtcdServer {
        EtcdServer::start_from(name, flags, None)
    }

    /// A single member for the test `name`, restored from `snapshot` if
    /// one is given.
    fn start_from(name: &str, flags: &[&str], snapshot: Option<&std::path::Path>) -> EtcdServer {
        let net = super::net_for(name);
        let base = 10_000 + net as u16 * 100;
        let client: SocketAddr = format!("127.0.0.1:{}", base + 90).parse().unwrap();
        let peer = format!("http://127.0.0.1:{}", base + 91);
        let dir = std::env::temp_dir().join(format!("bw-etcd-{name}-{}", std::process::id()));
        let initial_cluster = format!("etcd1={peer}");
        let member = Member {
            name: "etcd1",
            client,
            peer: &peer,
            initial_cluster: &initial_cluster,
            tls: None,
        };
        if let Some(snapshot) = snapshot {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            let output = Command::new("etcdctl")
                .env("ETCDCTL_API", "3")
                .args(["snapshot", "restore"])
                .arg(snapshot)
                .arg("--data-dir")
                .arg(dir.join("data"))
                .args(["--name", member.name, "--initial-cluster", &initial_cluster])
                .args(["--initial-advertise-peer-urls", &peer])
                .output()
                .expect("etcdctl runs");
            assert!(
                output.status.success(),
                "etcdctl snapshot restore {}: {}",
                snapshot.display(),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        launch(dir, &member, flags, snapshot.is_some())
    }

    /// [`EtcdServer::start`] with TLS on the client port (etcd's
    /// `--cert-file`, `--key-file`, `--trusted-ca-file`,
    /// `--client-cert-auth`): clients need a certificate the CA signed.
    pub fn start_tls(name: &str, cert: &str, key: &str, ca: &str) -> EtcdServer {
        let net = super::net_for(name);
        let base = 10_000 + net as u16 * 100;
        let client: SocketAddr = format!("127.0.0.1:{}", base + 90).parse().unwrap();
        let peer = format!("http://127.0.0.1:{}", base + 91);
        let dir = std::env::temp_dir().join(format!("bw-etcd-{name}-{}", std::process::id()));
        let initial_cluster = format!("etcd1={peer}");
        let health: SocketAddr = format!("127.0.0.1:{}", base + 92).parse().unwrap();
        let member = Member {
            name: "etcd1",
            client,
            peer: &peer,
            initial_cluster: &initial_cluster,
            tls: Some(health),
        };
        let metrics = format!("http://{health}");
        let flags = [
            "--cert-file",
            cert,
            "--key-file",
            key,
            "--trusted-ca-file",
            ca,
            "--client-cert-auth",
            "--listen-metrics-urls",
            &metrics,
        ];
        launch(dir, &member, &flags, false)
    }

    /// Kills etcd and starts it again on its data, waiting until it is
    /// healthy.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn(&self.dir, &self.args);
        self.wait_healthy();
    }

    /// The peer URL a second member started by [`EtcdServer::start_added`]
    /// listens on.
    pub fn spare_peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client.port() + 2)
    }

    /// Starts the member `etcdctl member add NAME` added to this one's
    /// cluster, as etcd's documentation says: with the
    /// `ETCD_INITIAL_CLUSTER` etcdctl printed and the state "existing". It
    /// peers on [`EtcdServer::spare_peer_url`] and serves clients on the
    /// next port. Waits until it is healthy.
    pub fn start_added(&self, name: &str, initial_cluster: &str) -> EtcdServer {
        let client: SocketAddr = format!("127.0.0.1:{}", self.client.port() + 3)
            .parse()
            .unwrap();
        let dir = self.dir.with_file_name(format!(
            "{}-{name}",
            self.dir.file_name().unwrap().to_string_lossy()
        ));
        let member = Member {
            name,
            client,
            peer: &self.spare_peer_url(),
            initial_cluster,
            tls: None,
        };
        launch(
            dir,
            &member,
            &["--initial-cluster-state", "existing"],
            false,
        )
    }

    /// The client URL, `http://…` (`https://…` with TLS).
    pub fn url(&self) -> String {
        let scheme = if self.health == self.client {
            "http"
        } else {
            "https"
        };
        format!("{scheme}://{}", self.client)
    }

    /// Waits until `/health` answers healthy.
    fn wait_healthy(&self) {
        let deadline = Instant::now() + START_WAIT;
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&self.health, Duration::from_millis(200)).is_ok() {
                let health = super::get(self.health, "/health").unwrap_or_default();
                if health.contains("\"health\":\"true\"") {
                    return;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
        panic!("etcd did not become healthy in {START_WAIT:?}; its log:\n{log}");
    }
}

/// What names one etcd member on its command line.
struct Member<'a> {
    /// `--name`.
    name: &'a str,
    /// Where it serves clients.
    client: SocketAddr,
    /// Its peer URL.
    peer: &'a str,
    /// `--initial-cluster`.
    initial_cluster: &'a str,
    /// With TLS: the plain-HTTP address of `/health`.
    tls: Option<SocketAddr>,
}

/// Starts `member` in a fresh `dir`, with `flags` added, and waits until
/// it is healthy.
/// With `restored`, `dir` already holds the data a snapshot restore
/// wrote, and is kept.
fn launch(dir: PathBuf, member: &Member, flags: &[&str], restored: bool) -> EtcdServer {
    if !restored {
        let _ = std::fs::remove_dir_all(&dir);
    }
    std::fs::create_dir_all(&dir).unwrap();
    let scheme = if member.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let client_url = format!("{scheme}://{}", member.client);
    let named = [
        ("--name", member.name),
        ("--listen-client-urls", &client_url),
        ("--advertise-client-urls", &client_url),
        ("--listen-peer-urls", member.peer),
        ("--initial-advertise-peer-urls", member.peer),
        ("--initial-cluster", member.initial_cluster),
    ];
    let mut args: Vec<std::ffi::OsString> = vec!["--data-dir".into(), dir.join("data").into()];
    for (flag, value) in named {
        args.extend([flag.into(), value.into()]);
    }
    args.extend(flags.iter().map(std::ffi::OsString::from));
    let child = spawn(&dir, &args);
    let server = EtcdServer {
        dir,
        client: member.client,
        health: member.tls.unwrap_or(member.client),
        child,
        args,
    };
    server.wait_healthy();
    server
}

/// Starts `etcd ARGS`, appending to its log in `dir`.
fn spawn(dir: &std::path::Path, args: &[std::ffi::OsString]) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("etcd.log"))
        .unwrap();
    Command::new("etcd")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|error| {
            panic!(
                "cannot start etcd ({error}): install Debian's etcd-server \
                 (scripts/test.sh does)"
            )
        })
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
