//! What the Patroni nodes need before they start: PostgreSQL's binaries,
//! the user they run as, a directory that user owns, and each node's
//! patroni.yml made from tests/patroni/patroni.yml.in.
//!
//! PostgreSQL refuses to run as root and CI runs the tests as root, so
//! there Patroni (and the PostgreSQL it starts) runs as the `postgres`
//! user Debian's package creates, in directories it owns under a path it
//! can traverse.

use crate::common::zookeeper::workspace;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The superuser's and the replication user's password.
pub const PASSWORD: &str = "bellwether-test";
/// Where Debian installs each PostgreSQL major version's binaries.
const POSTGRESQL_ROOT: &str = "/usr/lib/postgresql";

/// PostgreSQL's binaries: the newest /usr/lib/postgresql/<version>/bin.
pub fn postgresql_bin() -> PathBuf {
    let versions = std::fs::read_dir(POSTGRESQL_ROOT)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version: u32 = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("postgres").exists().then_some((version, bin))
        });
    versions.max().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!(
            "no {POSTGRESQL_ROOT}/<version>/bin/postgres: install Debian's postgresql \
             (scripts/test.sh does)"
        )
    })
}

/// The (uid, gid) Patroni runs as: `postgres`'s when we are root, None
/// (ourselves) otherwise.
pub fn run_as() -> Option<(u32, u32)> {
    if !rustix::process::geteuid().is_root() {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").expect("/etc/passwd is readable");
    let entry = passwd
        .lines()
        .map(|line| line.split(':').collect::<Vec<_>>())
        .find(|fields| fields.len() > 3 && fields[0] == "postgres")
        .expect(
            "we are root and there is no `postgres` user to run PostgreSQL as: install \
             Debian's postgresql (scripts/test.sh does), which creates it",
        );
    Some((entry[2].parse().unwrap(), entry[3].parse().unwrap()))
}

/// A fresh directory for the test `name` that the user Patroni runs as can
/// reach: under the temporary directory if every directory above it is
/// world-executable, else under /tmp.
pub fn test_dir(name: &str) -> PathBuf {
    let leaf = format!("bw-patroni-{name}-{}", std::process::id());
    let temp = std::env::temp_dir();
    let base = if traversable(&temp) {
        temp
    } else {
        PathBuf::from("/tmp")
    };
    assert!(traversable(&base), "{} is not traversable", base.display());
    let dir = base.join(leaf);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Makes `dir` (a node's home: data directory, socket, pgpass) owned by
/// the user Patroni runs as, readable by it alone.
pub fn node_dir(dir: &Path, run_as: Option<(u32, u32)>) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    if let Some((uid, gid)) = run_as {
        std::os::unix::fs::chown(dir, Some(uid), Some(gid)).unwrap();
    }
}

/// One node's settings, as the template's @FIELD@s.
pub struct NodeConfig<'a> {
    /// Patroni's `scope`: the cluster's name in the DCS.
    pub scope: &'a str,
    /// Patroni's `name`.
    pub name: &'a str,
    /// REST API port on 127.0.0.1.
    pub api_port: u16,
    /// PostgreSQL port on 127.0.0.1.
    pub pg_port: u16,
    /// The DCS's client endpoints, `host:port`.
    pub dcs_hosts: &'a [String],
    /// The node's home, owned by the user Patroni runs as.
    pub node_dir: &'a Path,
    /// PostgreSQL's binaries.
    pub bin_dir: &'a Path,
}

/// tests/patroni/patroni.yml.in with `config`'s fields filled in.
pub fn patroni_yml(config: &NodeConfig) -> String {
    let template = workspace().join("tests/patroni/patroni.yml.in");
    let text = std::fs::read_to_string(&template)
        .unwrap_or_else(|error| panic!("cannot read {}: {error}", template.display()));
    let hosts = format!("[{}]", config.dcs_hosts.join(", "));
    let fields = [
        ("@SCOPE@", config.scope.to_string()),
        ("@NAME@", config.name.to_string()),
        ("@API_PORT@", config.api_port.to_string()),
        ("@PG_PORT@", config.pg_port.to_string()),
        ("@DCS_HOSTS@", hosts),
        ("@NODE_DIR@", config.node_dir.display().to_string()),
        ("@BIN_DIR@", config.bin_dir.display().to_string()),
        ("@PASSWORD@", PASSWORD.to_string()),
    ];
    let filled = fields
        .iter()
        .fold(text, |text, (field, value)| text.replace(field, value));
    assert!(
        !filled
            .lines()
            .any(|line| !line.starts_with('#') && line.contains('@')),
        "a field of {} was left unfilled:\n{filled}",
        template.display()
    );
    filled
}

/// Whether every directory from `/` down to `dir` lets others through.
fn traversable(dir: &Path) -> bool {
    dir.ancestors().all(|ancestor| {
        std::fs::metadata(ancestor).is_ok_and(|meta| meta.permissions().mode() & 0o001 != 0)
    })
}
