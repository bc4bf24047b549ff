//! SQL through `psql` on one node: the rows the scenario writes and reads
//! back. Every call is bounded (connect timeout, statement timeout), so a
//! node that is down or mid-promotion answers an error, never a hang.

use super::setup::PASSWORD;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The table the scenario writes.
pub const TABLE: &str = "bellwether_rows";

/// Runs `sql` as the superuser on the PostgreSQL at 127.0.0.1:`port`;
/// psql's unaligned, tuples-only output, or its error.
pub fn psql(bin_dir: &Path, port: u16, sql: &str) -> Result<String, String> {
    let output = Command::new(bin_dir.join("psql"))
        .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["-U", "postgres", "-d", "postgres", "-c", sql])
        .env("PGPASSWORD", PASSWORD)
        .env("PGCONNECT_TIMEOUT", "2")
        .env("PGOPTIONS", "-c statement_timeout=5000")
        .output()
        .map_err(|error| format!("cannot run psql: {error}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

/// Creates the table and writes rows `ids` in one transaction.
pub fn create_and_fill(bin_dir: &Path, port: u16, ids: std::ops::RangeInclusive<u32>) {
    let sql = format!(
        "CREATE TABLE {TABLE} (id integer PRIMARY KEY, note text NOT NULL); \
         INSERT INTO {TABLE} SELECT i, 'row ' || i FROM generate_series({}, {}) AS i",
        ids.start(),
        ids.end()
    );
    psql(bin_dir, port, &sql).unwrap_or_else(|error| panic!("filling {TABLE}: {error}"));
}

/// Writes row `id` in a transaction of its own.
pub fn insert(bin_dir: &Path, port: u16, id: u32) -> Result<(), String> {
    let sql = format!("INSERT INTO {TABLE} VALUES ({id}, 'row {id}')");
    psql(bin_dir, port, &sql).map(|_| ())
}

/// Every id in the table on the node at `port`.
pub fn ids(bin_dir: &Path, port: u16) -> Result<BTreeSet<u32>, String> {
    let out = psql(
        bin_dir,
        port,
        &format!("SELECT id FROM {TABLE} ORDER BY id"),
    )?;
    Ok(out.lines().filter_map(|line| line.parse().ok()).collect())
}

/// Panics unless the node at `port` holds every row in `written` (the
/// rows whose commit was acknowledged), saying which are missing.
pub fn assert_has_rows(bin_dir: &Path, port: u16, written: &BTreeSet<u32>, what: &str) {
    let present =
        ids(bin_dir, port).unwrap_or_else(|error| panic!("{what}: reading {TABLE}: {error}"));
    let missing: Vec<&u32> = written.difference(&present).collect();
    assert!(
        missing.is_empty(),
        "{what}: {} of the {} acknowledged rows are missing: {missing:?}",
        missing.len(),
        written.len()
    );
}
