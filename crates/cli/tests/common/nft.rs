//! nftables for the partition tests: one table with an output chain
//! `out`, deleted however the test ends. Rules go to the output hook, so
//! they cut traffic between local processes on loopback only.

use std::process::{Command, Stdio};

/// Runs `nft ARGS`; whether it succeeded.
pub fn nft(args: &str) -> bool {
    Command::new("nft")
        .args(args.split_whitespace())
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Fails the test when nft cannot be used (it needs root and nftables).
pub fn require_nft() {
    assert!(
        nft("list tables"),
        "nft is not usable here: run as root with nftables installed (./scripts/test.sh installs it)"
    );
}

/// A table `FAMILY NAME` with an output chain `out`.
pub struct NftTable {
    family: &'static str,
    name: String,
}

impl NftTable {
    /// Creates the table and its chain.
    pub fn new(family: &'static str, name: &str) -> NftTable {
        require_nft();
        assert!(nft(&format!("add table {family} {name}")));
        let table = NftTable {
            family,
            name: name.to_string(),
        };
        assert!(nft(&format!(
            "add chain {family} {name} out {{ type filter hook output priority 0 ; }}"
        )));
        table
    }

    /// Adds `rule` to the chain.
    pub fn rule(&self, rule: &str) {
        assert!(
            nft(&format!(
                "add rule {} {} out {rule}",
                self.family, self.name
            )),
            "nft refused the rule {rule:?}"
        );
    }

    /// Removes every rule.
    pub fn flush(&self) {
        assert!(nft(&format!(
            "flush chain {} {} out",
            self.family, self.name
        )));
    }
}

impl Drop for NftTable {
    fn drop(&mut self) {
        nft(&format!("delete table {} {}", self.family, self.name));
    }
}
