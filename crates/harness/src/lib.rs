//! The benchmark and verify harness behind `bellwether bench` and
//! `bellwether verify`, kept out of the command's user-facing crate: the
//! clusters of member processes it starts (bellwether's own, a real etcd,
//! a real ZooKeeper), the loads and faults it drives, and the checks of
//! what its clients saw. Members are started as `bellwether node`
//! processes of the running executable, so these run only from inside the
//! `bellwether` binary.

mod bench_abuse;
mod bench_election;
mod bench_elector;
mod bench_failover;
mod bench_failover_pauses;
mod bench_kv;
mod bench_raft;
mod bench_scale;
mod bench_support;
mod bench_tasks;
mod bench_tasks_chaos;
mod bench_tasks_kill;
mod bench_tasks_load;
mod bench_tasks_retention;
mod bench_zookeeper;
mod contender;
mod delay_relay;
mod etcd_cluster;
mod latency;
mod member_process;
mod partition;
mod process_cluster;
mod verify;
mod zookeeper_ensemble;

use clap::Subcommand;
pub use verify::{execute as verify, VerifyArgs};

/// `bellwether bench`'s subcommands.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Failover time of a real cluster after SIGKILL, SIGTERM and a silent
    /// partition of the leader, optionally against a real etcd cluster.
    Failover(bench_failover::FailoverArgs),
    /// Load over the etcd v3 API (works against bellwether or etcd).
    Kv(bench_kv::KvArgs),
    /// An abusive client against a member's limits (connections, watchers,
    /// leases) while a well-behaved client measures its latency.
    Abuse(bench_abuse::AbuseArgs),
    /// Leadership moving between application instances (handover, crash,
    /// observers, campaign cycles), optionally against a real etcd.
    Election(bench_election::ElectionArgs),
    /// Failover of embedded electors (`bellwether peer` processes) after a
    /// SIGKILL of the leader, beside the simulator's figure.
    Elector(bench_elector::ElectorArgs),
    /// The task queue end to end: throughput, submit -> start, worker and
    /// leader SIGKILLs, group aggregation; optionally against a real etcd.
    Tasks(bench_tasks::TasksArgs),
    /// Load over ZooKeeper's client protocol (create, setData, getData;
    /// works against bellwether or ZooKeeper), optionally against a real
    /// ZooKeeper 3.8 ensemble.
    Zookeeper(bench_zookeeper::ZookeeperArgs),
    /// What a large store costs: load and update rates, memory, leader
    /// changes, heartbeat gaps and follower restart at each store size,
    /// optionally against a real etcd.
    Scale(bench_scale::ScaleArgs),
    /// Commits per second of an in-process Raft cluster with no network.
    Raft {
        /// Cluster size.
        #[arg(long, default_value_t = 3)]
        nodes: usize,
        /// Concurrent closed-loop clients.
        #[arg(long, default_value_t = 64)]
        clients: usize,
        /// Measured duration.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// memory (no persistence) or wal (fsync'd write-ahead log).
        #[arg(long, value_enum, default_value = "memory")]
        storage: bench_raft::StorageKind,
        /// Bytes per write.
        #[arg(long, default_value_t = 0)]
        payload_bytes: usize,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs one benchmark and prints its report.
pub fn bench(command: BenchCommand) -> anyhow::Result<std::process::ExitCode> {
    match command {
        BenchCommand::Kv(args) => bench_kv::execute(args),
        BenchCommand::Abuse(args) => bench_abuse::execute(args),
        BenchCommand::Election(args) => bench_election::execute(args),
        BenchCommand::Tasks(args) => bench_tasks::execute(args),
        BenchCommand::Elector(args) => bench_elector::execute(args),
        BenchCommand::Zookeeper(args) => bench_zookeeper::execute(args),
        BenchCommand::Scale(args) => bench_scale::execute(args),
        BenchCommand::Failover(args) if args.pauses.is_some() => {
            let seconds = args.pauses.unwrap_or_default();
            let report = bench_failover_pauses::run(&args, seconds)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                bench_failover_pauses::print_text(&report);
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        BenchCommand::Failover(args) => {
            let report = bench_failover::run(&args)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                bench_failover::print_text(&report);
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
        BenchCommand::Raft {
            nodes,
            clients,
            seconds,
            storage,
            payload_bytes,
            json,
        } => {
            let report = bench_raft::run(nodes, clients, seconds, storage, payload_bytes)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                println!(
                    "raft bench: {} nodes, {} clients, {:?} storage, {} B payload, {:.1} s: {:.0} commits/s, latency p50 {:.3} ms, p99 {:.3} ms ({} threads, {} cycles, {:.1} writes/cycle)",
                    report.nodes,
                    report.clients,
                    report.storage,
                    report.payload_bytes,
                    report.seconds,
                    report.commits_per_second,
                    report.latency_ms_p50,
                    report.latency_ms_p99,
                    report.threads,
                    report.cycles,
                    report.commits as f64 / report.cycles.max(1) as f64
                );
            }
            Ok(std::process::ExitCode::SUCCESS)
        }
    }
}
