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
    /// The process; killed on drop.
    child: Child,
}

impl EtcdServer {
    /// Starts etcd for the test `name` and waits until its client port
    /// accepts connections and it answers a health check.
    pub fn start(name: &str) -> EtcdServer {
        let net = super::net_for(name);
        let base = 10_000 + net as u16 * 100;
        let client: SocketAddr = format!("127.0.0.1:{}", base + 90).parse().unwrap();
        let peer = format!("http://127.0.0.1:{}", base + 91);
        let dir = std::env::temp_dir().join(format!("bw-etcd-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let log = std::fs::File::create(dir.join("etcd.log")).unwrap();
        let child = Command::new("etcd")
            .arg("--name")
            .arg("etcd1")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--listen-client-urls")
            .arg(format!("http://{client}"))
            .arg("--advertise-client-urls")
            .arg(format!("http://{client}"))
            .arg("--listen-peer-urls")
            .arg(&peer)
            .arg("--initial-advertise-peer-urls")
            .arg(&peer)
            .arg("--initial-cluster")
            .arg(format!("etcd1={peer}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot start etcd ({error}): install Debian's etcd-server \
                     (scripts/test.sh does)"
                )
            });
        let server = EtcdServer { dir, client, child };
        server.wait_healthy();
        server
    }

    /// The client URL, `http://…`.
    pub fn url(&self) -> String {
        format!("http://{}", self.client)
    }

    /// Waits until `/health` answers healthy.
    fn wait_healthy(&self) {
        let deadline = Instant::now() + START_WAIT;
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&self.client, Duration::from_millis(200)).is_ok() {
                let health = super::get(self.client, "/health").unwrap_or_default();
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

impl Drop for EtcdServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
