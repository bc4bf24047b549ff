//! Network partitions of local member processes with nftables, shared by
//! `bench failover` and `verify`: one table per cut, loaded as one atomic
//! transaction and deleted when its guard is dropped. Rules sit on the
//! output hook and match the member's own loopback address (127.0.N.i), so
//! only traffic of this machine's processes is touched.

use anyhow::{bail, Context, Result};
use std::net::Ipv4Addr;
use std::process::Command;

/// An nftables table that cuts one member off, or one link (see
/// [`bridge_script`]); deleted on drop.
pub struct Partition {
    /// The table's name, in family `ip`.
    pub table: String,
}

/// The rule set dropping every packet from or to `ip` (and of `uid`'s
/// sockets), in nft's file syntax: loaded as one atomic transaction.
pub fn partition_script(table: &str, ip: Ipv4Addr, uid: Option<u32>) -> String {
    let uid_rule = uid.map_or(String::new(), |uid| format!("    meta skuid {uid} drop\n"));
    format!(
        "table ip {table} {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n    ip saddr {ip} drop\n    ip daddr {ip} drop\n{uid_rule}  }}\n}}\n"
    )
}

/// The rule set dropping every packet between `a` and `b` only, each
/// still reaching everyone else: a partial partition, where a third member
/// hears both sides (the case that makes naive elections flap).
pub fn bridge_script(table: &str, a: Ipv4Addr, b: Ipv4Addr) -> String {
    assert_ne!(a, b, "a link joins two members");
    format!(
        "table ip {table} {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n    ip saddr {a} ip daddr {b} drop\n    ip saddr {b} ip daddr {a} drop\n  }}\n}}\n"
    )
}

impl Partition {
    /// Loads `script` with `nft -f -`.
    pub fn apply(&self, script: &str) -> Result<()> {
        use std::io::Write;
        assert!(
            script.contains(&format!("table ip {} ", self.table)),
            "the script builds this guard's table"
        );
        let mut nft = Command::new("nft")
            .args(["-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .context("cannot run nft")?;
        nft.stdin
            .take()
            .expect("piped")
            .write_all(script.as_bytes())?;
        let output = nft.wait_with_output()?;
        if !output.status.success() {
            bail!(
                "nft -f failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(())
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        delete_table(&self.table);
    }
}

/// Deletes an nftables table, if it exists.
pub fn delete_table(table: &str) {
    let _ = Command::new("nft")
        .args(["delete", "table", "ip", table])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status();
}

/// Why partitions cannot be made here, if they cannot.
pub fn nft_unavailable() -> Option<String> {
    match Command::new("nft").args(["list", "tables"]).output() {
        Err(error) => Some(format!("nft cannot run ({error}); install nftables")),
        Ok(output) if !output.status.success() => Some(format!(
            "nft list tables failed ({}): {}; run as root (CAP_NET_ADMIN)",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridge_cuts_one_link_both_ways_and_nothing_else() {
        let (a, b) = (Ipv4Addr::new(127, 0, 9, 1), Ipv4Addr::new(127, 0, 9, 2));
        let script = bridge_script("bwtest", a, b);
        assert!(script.starts_with("table ip bwtest {"));
        let drops: Vec<&str> = script.lines().filter(|l| l.contains("drop")).collect();
        assert_eq!(
            drops,
            [
                "    ip saddr 127.0.9.1 ip daddr 127.0.9.2 drop",
                "    ip saddr 127.0.9.2 ip daddr 127.0.9.1 drop"
            ]
        );
    }
}
