//! `bellwether sim run|sweep|compare`.

use anyhow::{bail, Result};
use bellwether_sim::{run, Algorithm, FaultProfile, RunSpec};
use clap::{Args, Subcommand};
use std::process::ExitCode;

/// The simulator's subcommands.
#[derive(Subcommand)]
pub enum SimCommand {
    /// Run one seed and print a summary.
    Run(RunArgs),
}

/// Options shared by every simulated run.
#[derive(Args, Clone)]
pub struct SpecArgs {
    /// raft, bully or ring.
    #[arg(long, default_value = "raft")]
    algorithm: Algorithm,
    /// Cluster size.
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// none, crash, partition or chaos.
    #[arg(long, default_value = "crash")]
    faults: FaultProfile,
    /// Disable connection-loss hints: every crash is a silent failure.
    #[arg(long)]
    no_hint: bool,
    /// All nodes must agree on a leader within this many ms after healing.
    #[arg(long, default_value_t = 5_000)]
    liveness_bound_ms: u64,
    /// Length of the chaos (or fault-free) phase in ms.
    #[arg(long, default_value_t = 3_000)]
    fault_phase_ms: u64,
}

impl SpecArgs {
    fn spec(&self, seed: u64) -> Result<RunSpec> {
        if !(1..=1024).contains(&self.nodes) {
            bail!("--nodes must be between 1 and 1024, got {}", self.nodes);
        }
        let mut spec = RunSpec::new(self.algorithm, self.nodes, seed, self.faults);
        spec.hint = !self.no_hint;
        spec.liveness_bound_ms = self.liveness_bound_ms;
        spec.fault_phase_ms = self.fault_phase_ms;
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
    }
}

fn run_one(args: RunArgs) -> Result<ExitCode> {
    let mut spec = args.spec.spec(args.seed)?;
    spec.trace = args.trace;
    spec.timeline = args.json;
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
