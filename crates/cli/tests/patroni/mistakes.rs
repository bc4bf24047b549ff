//! Configuration mistakes a Patroni user makes with its DCS, each made
//! against bellwether and against a real etcd 3.4: Patroni must say the
//! same thing on both, so that what a user reads (and searches for) is
//! what they would read on etcd.
//!
//! Each mistake runs one Patroni node for [`RUN`] (it never gets as far as
//! PostgreSQL); its log, without timestamps and with the DCS's address
//! replaced, is compared line by line as a set (how many times a line
//! repeats depends on timing).

use super::nodes::spawn_patroni;
use super::setup::{self, NodeConfig};
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// How long each Patroni runs: more than one of its 5-second retries.
const RUN: Duration = Duration::from_secs(7);
/// The user that exists but was granted nothing, and its password.
const UNGRANTED: (&str, &str) = ("patroni", "patroni-pw");
/// The root user's password.
const ROOT_PASSWORD: &str = "root-pw";

/// A mistake in the `etcd3` section, and a line Patroni must log for it.
#[derive(Clone, Copy, Debug)]
pub enum Mistake {
    /// `etcd:` (etcd's v2 API) where `etcd3:` was meant.
    V2Section,
    /// The root user with a wrong password.
    WrongPassword,
    /// A user the DCS knows but that has no role on Patroni's keys.
    UngrantedUser,
}

/// Every mistake, in order.
pub const MISTAKES: [Mistake; 3] = [
    Mistake::V2Section,
    Mistake::WrongPassword,
    Mistake::UngrantedUser,
];

impl Mistake {
    /// The `etcd3` section of a good configuration turned into this
    /// mistake.
    fn apply(self, yml: &str) -> String {
        let section = match self {
            Mistake::V2Section => return yml.replacen("\netcd3:\n", "\netcd:\n", 1),
            Mistake::WrongPassword => "\netcd3:\n  username: root\n  password: wrong\n".into(),
            Mistake::UngrantedUser => format!(
                "\netcd3:\n  username: {}\n  password: {}\n",
                UNGRANTED.0, UNGRANTED.1
            ),
        };
        yml.replacen("\netcd3:\n", &section, 1)
    }

    /// A line Patroni logs for this mistake, so that a comparison of two
    /// empty logs cannot pass.
    pub fn telltale(self) -> &'static str {
        match self {
            Mistake::V2Section => "Bad response : 404 page not found",
            Mistake::WrongPassword => "authentication failed, invalid user ID or password",
            Mistake::UngrantedUser => "Trying to authenticate on Etcd",
        }
    }
}

/// Turns on auth at the DCS whose client endpoint is `endpoint`: a root
/// user, and one granted nothing.
pub fn enable_auth(endpoint: &str) {
    let steps: [&[&str]; 4] = [
        &["user", "add", &format!("root:{ROOT_PASSWORD}")],
        &["user", "grant-role", "root", "root"],
        &["user", "add", &format!("{}:{}", UNGRANTED.0, UNGRANTED.1)],
        &["auth", "enable"],
    ];
    for args in steps {
        let out = Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .arg("--endpoints")
            .arg(endpoint)
            .args(args)
            .output()
            .expect("etcdctl runs (Debian's etcd-client; scripts/test.sh installs it)");
        assert!(
            out.status.success(),
            "etcdctl {args:?} at {endpoint}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Runs one Patroni node called `name` with `mistake` against the DCS at
/// `host`, its ports from `ports_base` (slot `slot`), its files under
/// `dir`; the distinct lines it logged, normalized.
pub fn what_patroni_says(
    dir: &Path,
    name: &str,
    ports_base: u16,
    slot: u16,
    host: &str,
    mistake: Mistake,
) -> BTreeSet<String> {
    let run_as = setup::run_as();
    let venv_bin = super::venv::patroni_venv(run_as);
    let bin_dir = setup::postgresql_bin();
    let home = dir.join(name);
    setup::node_dir(&home, run_as);
    let hosts = [host.to_string()];
    let config = NodeConfig {
        scope: "mistakes",
        name,
        api_port: ports_base + 80 + slot,
        pg_port: ports_base + 70 + slot,
        dcs_hosts: &hosts,
        node_dir: &home,
        bin_dir: &bin_dir,
    };
    let yml = dir.join(format!("{name}.yml"));
    std::fs::write(&yml, mistake.apply(&setup::patroni_yml(&config))).unwrap();
    let log = dir.join(format!("{name}.log"));
    let mut child = spawn_patroni(&venv_bin, &yml, &home, &log, run_as);
    std::thread::sleep(RUN);
    let group = rustix::process::Pid::from_child(&child);
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
    let _ = child.wait();
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    normalize(&text, host)
}

/// The distinct lines of a Patroni log, without their timestamps
/// (`2026-11-29 11:27:53,988 `) and with the DCS's `host` as `DCS`.
fn normalize(log: &str, host: &str) -> BTreeSet<String> {
    log.lines()
        .map(|line| {
            let stamped = line.len() > 24 && line.as_bytes()[..4].iter().all(u8::is_ascii_digit);
            let text = if stamped { &line[24..] } else { line };
            text.replace(host, "DCS").trim().to_string()
        })
        .filter(|line| !line.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_log_loses_its_timestamps_and_the_dcs_address() {
        let log = "2026-11-29 11:27:53,988 ERROR: Failed at http://127.0.3.1:10351/v2: x\n\
                   2026-11-29 11:27:58,990 ERROR: Failed at http://127.0.3.1:10351/v2: x\n\n";
        let lines = normalize(log, "127.0.3.1:10351");
        assert_eq!(
            lines.into_iter().collect::<Vec<_>>(),
            ["ERROR: Failed at http://DCS/v2: x"]
        );
    }

    #[test]
    fn each_mistake_changes_the_etcd3_section() {
        let yml = "scope: s\netcd3:\n  hosts: [h]\nbootstrap:\n";
        assert!(Mistake::V2Section.apply(yml).contains("\netcd:\n  hosts"));
        assert!(Mistake::WrongPassword
            .apply(yml)
            .contains("password: wrong\n  hosts"));
        assert!(Mistake::UngrantedUser
            .apply(yml)
            .contains("username: patroni"));
    }
}
