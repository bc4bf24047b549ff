//! `bellwether sim run|sweep|compare`.

use crate::progress::ProgressBar;
use anyhow::{bail, Context, Result};
use bellwether_sim::compare::{compare, table, DEFAULT_SIZES};
use bellwether_sim::sweep::Percentiles;
use bellwether_sim::{
    run, sweep, Algorithm, FaultProfile, ReadMode, RunSpec, SweepSummary, Workload,
};
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// The simulator's subcommands.
#[derive(Subcommand)]
pub enum SimCommand {
    /// Run one seed and print a summary.
    Run(RunArgs),
    /// Run many seeds and print p50/p99 aggregates; exits 1 on any violation.
    Sweep(SweepArgs),
    /// Compare Raft, Bully, Ring and Multi-Paxos across cluster sizes.
    Compare(CompareArgs),
}

/// `sim compare`.
#[derive(Args)]
pub struct CompareArgs {
    /// Seeds per sweep (each row runs four sweeps: crash, silent crash, silent crash with the adaptive detector, partition).
    #[arg(long, default_value_t = 1000)]
    runs: u64,
    /// Cluster sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = DEFAULT_SIZES)]
    sizes: Vec<usize>,
    /// Algorithms, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = Algorithm::ALL)]
    algorithms: Vec<Algorithm>,
    /// Bully and Ring: which id wins, highest (as in the papers) or lowest.
    #[arg(long, default_value = "highest")]
    winner: String,
    /// Raft rows: hand leadership to the next caught-up voter after leading
    /// this many ms (0 = never).
    #[arg(long, default_value_t = 0)]
    rotate_after_ms: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print the rows as a JSON array.
    #[arg(long)]
    json: bool,
    /// Also write a self-contained HTML page with plots to this file.
    #[arg(long)]
    html: Option<std::path::PathBuf>,
    /// No progress output.
    #[arg(long)]
    quiet: bool,
}

/// `sim sweep`.
#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    spec: SpecArgs,
    /// Number of seeds to run.
    #[arg(long, default_value_t = 1000)]
    seeds: u64,
    /// First seed; seeds run from here upwards.
    #[arg(long, default_value_t = 1)]
    first_seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Print the summary as JSON.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
}

/// Options shared by every simulated run.
#[derive(Args, Clone)]
pub struct SpecArgs {
    /// raft, bully, ring or paxos.
    #[arg(long, default_value = "raft")]
    algorithm: Algorithm,
    /// Cluster size.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// none, crash, partition, chaos, storage (chaos, and half the
    /// restarts find a damaged disk: a wiped or truncated log, a corrupt
    /// record, a lost fsync'd write; needs --workload kv or etcd), or
    /// pauses (nothing fails; a follower pauses 100–300 ms every 0.5–1.5 s
    /// and latency is 1–25 ms: every election is spurious).
    #[arg(long, default_value = "crash")]
    faults: FaultProfile,
    /// The control for --faults storage: a restart ignores the promise
    /// record, so a member that lost its log comes back as a blank voter.
    /// The checks must catch it.
    #[arg(long)]
    ignore_promises: bool,
    /// The adaptive detector on (floor 3 heartbeats, heartbeat a tenth of
    /// the election or leader timeout), as members run by default: a
    /// silent leader is suspected after a few heartbeats.
    #[arg(long)]
    detector: bool,
    /// Disable connection-loss hints: every crash is a silent failure.
    #[arg(long)]
    no_hint: bool,
    /// Bully and Ring: which id wins, highest (as in the papers) or lowest.
    #[arg(long, default_value = "highest")]
    winner: String,
    /// Raft: hand leadership to the next caught-up voter after leading this
    /// many ms (0 = never).
    #[arg(long, default_value_t = 0)]
    rotate_after_ms: u64,
    /// All nodes must agree on a leader within this many ms after healing.
    #[arg(long, default_value_t = 5_000)]
    liveness_bound_ms: u64,
    /// Length of the chaos (or fault-free) phase in ms.
    #[arg(long, default_value_t = 3_000)]
    fault_phase_ms: u64,
    /// Clock-rate skew bound per node, in parts per million (default: 50000
    /// under chaos, 0 otherwise).
    #[arg(long)]
    skew_ppm: Option<u64>,
    /// none; kv: clients put/get/compare-and-set through the Raft log; or
    /// etcd: the same clients through the member driver that production
    /// runs, with the etcd store behind it, via leaders and followers
    /// (with either, disks take 500 µs per fsync, can stall, and lose
    /// unsynced writes on a crash).
    #[arg(long, default_value = "none")]
    workload: Workload,
    /// What to check besides the invariants: `linearizability` (needs
    /// `--workload kv`, where it is always on).
    #[arg(long)]
    check: Option<String>,
    /// How the kv workload's linearizable reads are confirmed: readindex,
    /// or lease (implies --no-hint; under chaos the clock skew defaults to
    /// the lease's drift bound, 47619 ppm, unless --skew-ppm is given).
    #[arg(long, default_value = "readindex")]
    reads: ReadMode,
    /// kv workload: the leader keeps removing a voter (possibly itself),
    /// adding it back as a learner and promoting it, keeping 3 voters.
    #[arg(long)]
    membership_changes: bool,
    /// kv workload: a client abandons an operation (outcome unknown) after
    /// this many ms.
    #[arg(long, default_value_t = 1_000)]
    op_timeout_ms: u64,
    /// kv workload: read-only clients besides the five mixed ones; a reader
    /// that knows a deposed leader keeps reading from it, so stale reads
    /// become observable.
    #[arg(long, default_value_t = 0)]
    readers: usize,
}

impl SpecArgs {
    fn spec(&self, seed: u64) -> Result<RunSpec> {
        if !(1..=1024).contains(&self.nodes) {
            bail!("--nodes must be between 1 and 1024, got {}", self.nodes);
        }
        if let Some(check) = &self.check {
            if check != "linearizability" {
                bail!("--check accepts only 'linearizability', got '{check}'");
            }
            if self.workload == Workload::None {
                bail!("--check linearizability needs --workload kv or etcd (a history to check)");
            }
        }
        if self.workload != Workload::Kv
            && (self.reads != ReadMode::ReadIndex || self.membership_changes)
        {
            bail!("--reads and --membership-changes apply to --workload kv only");
        }
        if self.workload != Workload::None && self.algorithm != Algorithm::Raft {
            bail!(
                "--workload {} needs --algorithm raft: the state machine runs on Raft's log",
                self.workload
            );
        }
        if self.workload == Workload::Etcd && self.readers != 0 {
            bail!("--readers applies to --workload kv only");
        }
        let mut spec = match self.workload {
            Workload::Kv => RunSpec::kv(self.nodes, seed, self.faults),
            Workload::Etcd => RunSpec::etcd(self.nodes, seed, self.faults),
            Workload::None => RunSpec::new(self.algorithm, self.nodes, seed, self.faults),
        };
        if self.faults == FaultProfile::Storage && self.workload == Workload::None {
            bail!("--faults storage needs --workload kv or etcd: their members keep the promise record a restart audits");
        }
        if self.ignore_promises && self.faults != FaultProfile::Storage {
            bail!("--ignore-promises is the control for --faults storage");
        }
        spec.ignores_promises = self.ignore_promises;
        if self.detector && self.reads == ReadMode::Lease {
            bail!("--detector and --reads lease do not mix: a follower that suspects early may vote inside the lease");
        }
        spec.detector = self.detector;
        spec.hint = !self.no_hint;
        spec.lowest_id_wins = lowest_id_wins(&self.winner)?;
        spec.rotate_after_ms = self.rotate_after_ms;
        if spec.rotate_after_ms != 0 && self.algorithm != Algorithm::Raft {
            bail!("--rotate-after-ms applies to raft");
        }
        if spec.rotate_after_ms != 0 && spec.rotate_after_ms < 150 {
            bail!("--rotate-after-ms must be at least one election timeout (150 ms)");
        }
        if spec.lowest_id_wins && !self.algorithm.has_winner_rule() {
            bail!(
                "--winner applies to bully and ring: {} elects whoever a majority accepts",
                self.algorithm
            );
        }
        if self.reads == ReadMode::Lease {
            spec = spec.with_lease_reads();
        }
        if self.membership_changes {
            spec = spec.with_membership_changes();
        }
        if self.op_timeout_ms == 0 {
            bail!("--op-timeout-ms must be at least 1");
        }
        spec.op_timeout_ms = self.op_timeout_ms;
        if self.readers > 16 {
            bail!("--readers must be at most 16, got {}", self.readers);
        }
        spec.readers = self.readers;
        spec.liveness_bound_ms = self.liveness_bound_ms;
        spec.fault_phase_ms = self.fault_phase_ms;
        if let Some(skew) = self.skew_ppm {
            if skew >= 500_000 {
                bail!("--skew-ppm must be below 500000 (50%), got {skew}");
            }
            spec.skew_ppm_max = Some(skew);
        }
        Ok(spec)
    }
}

/// `sim run`.
#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    spec: SpecArgs,
    /// The seed that fixes every random choice.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the event trace before the summary.
    #[arg(long)]
    trace: bool,
    /// Print the report as JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs one simulator subcommand.
pub fn execute(command: SimCommand) -> Result<ExitCode> {
    match command {
        SimCommand::Run(args) => run_one(args),
        SimCommand::Sweep(args) => run_sweep(args),
        SimCommand::Compare(args) => run_compare(args),
    }
}

fn run_one(args: RunArgs) -> Result<ExitCode> {
    let mut spec = args.spec.spec(args.seed)?;
    spec.trace = args.trace;
    spec.timeline = true;
    let report = run(&spec);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for line in &report.trace {
            println!("{line}");
        }
        print!("{}", report.summary());
    }
    Ok(if report.passed() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Worker threads: the flag, or every core.
pub fn threads_or_all(threads: Option<usize>) -> usize {
    threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

fn run_sweep(args: SweepArgs) -> Result<ExitCode> {
    if args.seeds == 0 {
        bail!("--seeds must be at least 1");
    }
    let spec = args.spec.spec(args.first_seed)?;
    let bar = ProgressBar::new(!args.quiet && !args.json);
    let summary = sweep(
        &spec,
        args.seeds,
        threads_or_all(args.threads),
        &|done, total| bar.update(done, total),
    );
    bar.finish();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&summary)?);
    } else {
        print!("{}", sweep_text(&summary));
    }
    Ok(if summary.failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn cell(p: &Percentiles) -> String {
    match (p.p50, p.p99) {
        (Some(p50), Some(p99)) => format!("p50 {p50:>8.1}   p99 {p99:>8.1}   (n={})", p.samples),
        _ => "-".to_string(),
    }
}

/// A sweep summary as text, with replay commands for failures.
fn sweep_text(s: &SweepSummary) -> String {
    let spec = &s.spec;
    let mut out = format!(
        "{} · {} nodes · faults {} · hint {} · seeds {}..{} · liveness bound {} ms{}\n",
        spec.algorithm,
        spec.nodes,
        spec.faults,
        if spec.hint { "on" } else { "off" },
        spec.seed,
        spec.seed + s.runs - 1,
        spec.liveness_bound_ms,
        spec.workload_label()
    );
    out += &format!(
        "  runs                   {} ({} failed)\n",
        s.runs, s.failed
    );
    out += &format!("  election ms            {}\n", cell(&s.election_ms));
    out += &format!("  failover ms            {}\n", cell(&s.failover_ms));
    out += &format!(
        "  messages per election  {}\n",
        cell(&s.messages_per_election)
    );
    out += &format!("  recovery ms            {}\n", cell(&s.recovery_ms));
    out += &format!("  leader elections/run   {}\n", cell(&s.leader_elections));
    if s.spec.faults == FaultProfile::Pauses {
        out += &format!(
            "  spurious elections     {} in {:.2} h of pauses ({:.1} per hour)\n",
            s.fault_phase_elections,
            s.runs as f64 * s.spec.fault_phase_ms as f64 / 3_600_000.0,
            s.fault_phase_elections_per_hour()
        );
    }
    if let Some(max) = s.catch_up_entries_max {
        out += &format!(
            "  entries fetched        {} (max {max}) per new leader before it served\n",
            cell(&s.catch_up_entries)
        );
    }
    out += &format!(
        "  split brain            {} runs ({:.1} per 1000), {} incidents ({} with equal terms), {:.1} ms total\n",
        s.split_brain_runs,
        s.split_brain_runs_per_1000(),
        s.split_brain_incidents,
        s.split_brain_same_term,
        s.split_brain_ms_total
    );
    if s.spec.faults == FaultProfile::Storage {
        out += &format!(
            "  disk faults            {} injected, {} found by the restart's audit{}\n",
            s.disk_faults,
            s.disk_audits_failed,
            if s.spec.ignores_promises {
                " (control: the audit was ignored)"
            } else {
                ""
            }
        );
    }
    out += &format!(
        "  speed                  {} events in {:.2} s on {} threads = {:.0} events/s\n",
        s.events,
        s.wall_seconds,
        s.threads,
        s.events_per_second()
    );
    for failure in &s.failures {
        out += &format!(
            "  FAILED seed {}: {}\n    replay: {}\n",
            failure.seed, failure.violation, failure.replay
        );
    }
    if s.failed as usize > s.failures.len() {
        out += &format!(
            "  … and {} more failing seeds\n",
            s.failed as usize - s.failures.len()
        );
    }
    out
}

/// `--winner`: true for "lowest".
fn lowest_id_wins(winner: &str) -> Result<bool> {
    match winner {
        "highest" => Ok(false),
        "lowest" => Ok(true),
        other => bail!("unknown --winner {other:?}: use highest or lowest"),
    }
}

fn run_compare(args: CompareArgs) -> Result<ExitCode> {
    if args.runs == 0 || args.sizes.is_empty() || args.algorithms.is_empty() {
        bail!("--runs, --sizes and --algorithms must not be empty");
    }
    if let Some(size) = args.sizes.iter().find(|s| !(1..=1024).contains(*s)) {
        bail!("cluster sizes must be between 1 and 1024, got {size}");
    }
    if args.rotate_after_ms != 0 && args.rotate_after_ms < 150 {
        bail!("--rotate-after-ms must be at least one election timeout (150 ms)");
    }
    let threads = threads_or_all(args.threads);
    let show = !args.quiet;
    let rows = compare(
        &args.algorithms,
        &args.sizes,
        args.runs,
        threads,
        lowest_id_wins(&args.winner)?,
        args.rotate_after_ms,
        &|label, done, total| {
            if show && (done == total || done % (total / 10).max(1) == 0) {
                eprint!("\r{label:<28} {done}/{total}   ");
                if done == total {
                    eprintln!();
                }
            }
        },
    );
    if let Some(path) = &args.html {
        let timelines: Vec<_> = args
            .algorithms
            .iter()
            .map(|algorithm| {
                let mut spec = RunSpec::new(*algorithm, 5, 1, FaultProfile::Partition);
                spec.timeline = true;
                run(&spec)
            })
            .collect();
        std::fs::write(path, bellwether_sim::html::page(&rows, &timelines))
            .with_context(|| format!("cannot write the HTML report to {}", path.display()))?;
        if show {
            eprintln!("wrote {}", path.display());
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", table(&rows));
        for failure in rows.iter().flat_map(|r| &r.failures) {
            println!("FAILED: {failure}");
        }
    }
    let failed: u64 = rows.iter().map(|r| r.failed_runs).sum();
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
