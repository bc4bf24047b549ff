//! `bellwether snapshot restore FILE`: starts a member of a new cluster
//! from a snapshot file saved with `etcdctl snapshot save`, from a
//! bellwether member or from etcd, as `etcdctl snapshot restore` does for
//! etcd. The file is etcd's format either way (see
//! `bellwether_server::snapshot_file`).
//!
//! Run it once per member of the new cluster, each with that member's
//! flags (or `--config`), the same member list everywhere, and a new data
//! directory; then start the members with the same flags.

use crate::node_command::NodeArgs;
use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// `bellwether snapshot` subcommands.
#[derive(Subcommand, Debug)]
pub enum SnapshotCommand {
    /// Write a new member's data directory holding the snapshot's store,
    /// so that members restored from one file start a new cluster with
    /// its data.
    Restore(RestoreArgs),
}

/// Flags of `bellwether snapshot restore`.
#[derive(Args, Debug)]
pub struct RestoreArgs {
    /// The snapshot file (`etcdctl snapshot save FILE` against bellwether
    /// or etcd).
    file: PathBuf,
    /// The member's settings, as `bellwether node` takes them: its id, the
    /// new cluster's name and members, and a new (empty) data directory.
    #[command(flatten)]
    node: NodeArgs,
}

/// Runs `bellwether snapshot ...`.
pub fn execute(command: SnapshotCommand) -> Result<ExitCode> {
    match command {
        SnapshotCommand::Restore(args) => restore(args),
    }
}

fn restore(args: RestoreArgs) -> Result<ExitCode> {
    let bytes = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let file = bellwether_server::snapshot_file::decode(&bytes)
        .with_context(|| format!("{} cannot be restored", args.file.display()))?;
    let alarms: Vec<String> = file
        .decoded
        .alarms()
        .map(|a| format!("member {} {:?}", a.member_id, a.kind))
        .collect();
    if !alarms.is_empty() {
        eprintln!(
            "warning: the snapshot holds raised alarms ({}); the new cluster starts with them, and `etcdctl alarm disarm` clears them",
            alarms.join(", ")
        );
    }
    let config = args.node.resolve()?;
    let history_bytes = file.decoded.size_bytes();
    bellwether_server::data_dir::restore_snapshot(&config, file.store)?;
    let source = match &file.source {
        bellwether_server::snapshot_file::SnapshotSource::Bellwether(name) => {
            format!("bellwether cluster {name:?}")
        }
        bellwether_server::snapshot_file::SnapshotSource::Etcd => "etcd".to_string(),
    };
    println!(
        "restored {} (from {}, revision {}, {} bytes of history) into {} as member {} of {:?} with members {:?}",
        args.file.display(),
        source,
        file.revision,
        history_bytes,
        config.data_dir.display(),
        config.id.0,
        config.cluster,
        config.peers.keys().map(|id| id.0).collect::<Vec<_>>(),
    );
    Ok(ExitCode::SUCCESS)
}
