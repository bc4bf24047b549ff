//! `bellwether bench kv`: load over the etcd v3 API. It speaks only that
//! API, so the same command measures a bellwether cluster or a real etcd.
//! Closed loop: each client sends one request, waits for the answer, and
//! sends the next; clients share `--conns` connections round-robin.

use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb::{kv_client::KvClient, PutRequest, RangeRequest};
use serde::Serialize;
use std::time::{Duration, Instant};
use tonic::transport::Channel;

/// Flags of `bench kv`.
#[derive(clap::Args, Debug, Clone)]
pub struct KvArgs {
    /// etcd API endpoints (host:port), comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = ["127.0.0.1:7201".to_string(), "127.0.0.1:7202".to_string(), "127.0.0.1:7203".to_string()])]
    endpoints: Vec<String>,
    /// put or get (a linearizable range of one key).
    #[arg(long, default_value = "put")]
    op: String,
    /// Concurrent closed-loop clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Connections shared by the clients.
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Measured duration.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Value size in bytes.
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// What the load measured.
#[derive(Debug, Serialize)]
pub struct KvReport {
    /// Operation.
    pub op: String,
    /// Clients.
    pub clients: usize,
    /// Connections.
    pub conns: usize,
    /// Requests answered successfully.
    pub completed: u64,
    /// Requests that failed.
    pub errors: u64,
    /// Answered per second.
    pub per_second: f64,
    /// Median latency.
    pub latency_ms_p50: f64,
    /// 99th percentile latency.
    pub latency_ms_p99: f64,
}

/// Runs the load and prints the report.
pub fn execute(args: KvArgs) -> Result<std::process::ExitCode> {
    if args.clients == 0 || args.conns == 0 || args.endpoints.is_empty() || args.seconds <= 0.0 {
        bail!("--clients, --conns, --endpoints and --seconds must be positive");
    }
    if args.op != "put" && args.op != "get" {
        bail!("--op must be put or get, got {:?}", args.op);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let report = runtime.block_on(run(args.clone()))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "kv bench: {} · {} clients · {} conns: {:.0} req/s, p50 {:.3} ms, p99 {:.3} ms ({} ok, {} errors)",
            report.op, report.clients, report.conns, report.per_second, report.latency_ms_p50, report.latency_ms_p99, report.completed, report.errors
        );
    }
    Ok(std::process::ExitCode::SUCCESS)
}

async fn run(args: KvArgs) -> Result<KvReport> {
    load(
        &args.endpoints,
        &args.op,
        args.clients,
        args.conns,
        args.seconds,
        args.value_bytes,
    )
    .await
}

/// Closed-loop load of `op` ("put" or "get") on `endpoints` for `seconds`.
pub async fn load(
    endpoints: &[String],
    op: &str,
    clients: usize,
    conns: usize,
    seconds: f64,
    value_bytes: usize,
) -> Result<KvReport> {
    let args = KvArgs {
        endpoints: endpoints.to_vec(),
        op: op.to_string(),
        clients,
        conns,
        seconds,
        value_bytes,
        json: false,
    };
    let mut channels = Vec::new();
    for i in 0..args.conns {
        let endpoint = &args.endpoints[i % args.endpoints.len()];
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{endpoint}"))?
            .connect()
            .await
            .with_context(|| format!("cannot connect to {endpoint}"))?;
        channels.push(channel);
    }
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..args.clients {
        let mut client: KvClient<Channel> = KvClient::new(channels[c % channels.len()].clone());
        let (op, value) = (args.op.clone(), vec![b'x'; args.value_bytes]);
        tasks.push(tokio::spawn(async move {
            let (mut latencies, mut errors) = (Vec::new(), 0u64);
            let key = format!("bench/{c}").into_bytes();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let ok = if op == "put" {
                    client
                        .put(PutRequest {
                            key: key.clone(),
                            value: value.clone(),
                            ..Default::default()
                        })
                        .await
                        .is_ok()
                } else {
                    client
                        .range(RangeRequest {
                            key: key.clone(),
                            ..Default::default()
                        })
                        .await
                        .is_ok()
                };
                if ok {
                    latencies.push(sent.elapsed().as_micros() as u64);
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        }));
    }
    let (mut all, mut errors) = (Vec::new(), 0);
    for task in tasks {
        let (latencies, failed) = task.await?;
        all.extend(latencies);
        errors += failed;
    }
    let elapsed = started.elapsed().as_secs_f64();
    all.sort_unstable();
    let pick = |q: f64| {
        all.get(((all.len() as f64 * q) as usize).min(all.len().saturating_sub(1)))
            .map_or(0.0, |us| *us as f64 / 1000.0)
    };
    Ok(KvReport {
        op: args.op,
        clients: args.clients,
        conns: args.conns,
        completed: all.len() as u64,
        errors,
        per_second: all.len() as f64 / elapsed,
        latency_ms_p50: pick(0.5),
        latency_ms_p99: pick(0.99),
    })
}
