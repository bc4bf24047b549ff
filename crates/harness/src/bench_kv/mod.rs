//! `bellwether bench kv`: load over the etcd v3 API. It speaks only that
//! API, so the same command measures a bellwether cluster or a real etcd.
//! Closed loop: each client sends one operation, waits for the answer, and
//! sends the next; clients share `--conns` connections round-robin. What
//! one operation is, per `--op`, is documented in [`load`].
//!
//! With `--compare-etcd` it starts a 3-node bellwether cluster and a
//! 3-member etcd 3.4 cluster itself and runs the same load against each
//! (see [`compare`]).

pub(crate) mod compare;
mod grpc_connection;
mod http1_connection;
pub(crate) mod load;

pub use load::{load, KvReport};

use anyhow::{bail, Context, Result};
use compare::{CompareSettings, Target};
use load::{LoadSpec, Op};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Flags of `bench kv`.
#[derive(clap::Args, Debug, Clone)]
pub struct KvArgs {
    /// etcd API endpoints (host:port), comma-separated; connection i goes to
    /// endpoint i mod N. Not with --compare-etcd, which starts its own.
    #[arg(long, value_delimiter = ',', default_values_t = ["127.0.0.1:7201".to_string(), "127.0.0.1:7202".to_string(), "127.0.0.1:7203".to_string()])]
    endpoints: Vec<String>,
    /// What each client repeats: put, get (linearizable range of one key),
    /// lease (LeaseGrant, TTL 60 s), campaign (Campaign + Resign on the
    /// client's own election) or gateway-put (a put through the JSON
    /// gateway, each client on its own HTTP/1.1 connection).
    #[arg(long, value_enum, default_value = "put")]
    op: Op,
    /// Concurrent closed-loop clients.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// Connections shared by the clients.
    #[arg(long, default_value_t = 4)]
    conns: usize,
    /// Measured duration.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Unmeasured lead-in before the measured duration.
    #[arg(long, default_value_t = 1.0)]
    warmup_seconds: f64,
    /// Value size in bytes (puts and campaigns).
    #[arg(long, default_value_t = 256)]
    value_bytes: usize,
    /// Start a 3-node bellwether cluster and a 3-member etcd 3.4 cluster
    /// (Debian's etcd-server; installed with apt-get when missing), run the
    /// same load against each, and report both with their ratios and the
    /// members' peak memory.
    #[arg(long, conflicts_with = "endpoints")]
    compare_etcd: bool,
    /// With --compare-etcd: connect to every member (followers forward) or
    /// only to the leader.
    #[arg(long, value_enum, default_value = "all", requires = "compare_etcd")]
    target: Target,
    /// With --compare-etcd: heartbeat interval, ms (both systems).
    #[arg(long, default_value_t = 100, requires = "compare_etcd")]
    heartbeat_ms: u64,
    /// With --compare-etcd: election timeout, ms (both systems).
    #[arg(long, default_value_t = 1000, requires = "compare_etcd")]
    election_ms: u64,
    /// With --compare-etcd: bellwether member i uses ports base+i (peers),
    /// base+100+i (HTTP) and base+200+i (etcd API); etcd uses 2379/2380 on
    /// its own loopback IPs.
    #[arg(long, default_value_t = 18000, requires = "compare_etcd")]
    base_port: u16,
    /// With --compare-etcd: directory for data and logs (must be empty;
    /// kept). Default: a temporary directory, removed afterwards.
    #[arg(long, requires = "compare_etcd")]
    dir: Option<PathBuf>,
    /// With --compare-etcd: run both systems with TLS and client
    /// certificates on their client and peer ports (a throwaway CA).
    #[arg(long, requires = "compare_etcd")]
    tls: bool,
    /// With --compare-etcd: bellwether serves linearizable reads from the
    /// leader's lease (`lease_reads`); etcd, which has no such mode, keeps
    /// ReadIndex.
    #[arg(long, requires = "compare_etcd")]
    lease_reads: bool,
    /// The CA (PEM) of TLS endpoints: connect over TLS (not with
    /// --compare-etcd, whose --tls makes its own).
    #[arg(long, conflicts_with = "compare_etcd")]
    cacert: Option<PathBuf>,
    /// A client certificate (PEM) to present, with --cacert.
    #[arg(long, requires_all = ["cacert", "key"])]
    cert: Option<PathBuf>,
    /// The key of --cert (PEM).
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// A TLS client set-up for the load: trusts `ca`, presents `identity`
/// (certificate and key) if given, and speaks HTTP/2 (ALPN `h2`).
pub fn tls_client_config(
    ca: &std::path::Path,
    identity: Option<(&std::path::Path, &std::path::Path)>,
) -> Result<Arc<rustls::ClientConfig>> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca)
        .with_context(|| format!("cannot read the CA {}", ca.display()))?
    {
        roots.add(certificate.with_context(|| format!("{} is not PEM", ca.display()))?)?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let mut config = match identity {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_file_iter(cert)
                .with_context(|| format!("cannot read {}", cert.display()))?
                .collect::<Result<Vec<_>, _>>()
                .with_context(|| format!("{} is not PEM", cert.display()))?;
            let key = PrivateKeyDer::from_pem_file(key)
                .with_context(|| format!("no key in {}", key.display()))?;
            builder.with_client_auth_cert(chain, key)?
        }
    };
    config.alpn_protocols = vec![b"h2".to_vec()];
    Ok(Arc::new(config))
}

impl KvArgs {
    fn spec(&self) -> LoadSpec {
        LoadSpec {
            endpoints: self.endpoints.clone(),
            op: self.op,
            clients: self.clients,
            conns: self.conns,
            seconds: self.seconds,
            warmup_seconds: self.warmup_seconds,
            value_bytes: self.value_bytes,
            tls: None,
        }
    }

    /// The comparison's settings, after checking the cluster flags.
    fn compare_settings(&self) -> Result<CompareSettings> {
        if self.heartbeat_ms == 0
            || self.election_ms < 5 * self.heartbeat_ms
            || self.election_ms > 50_000
        {
            bail!("--election-ms must be at least 5 × --heartbeat-ms (at least 1) and at most 50000: etcd refuses other timeouts");
        }
        if self.base_port < 1024
            || self.base_port as usize + 200 + compare::NODES > u16::MAX as usize
        {
            bail!("--base-port must be at least 1024 and leave room for base+200+3");
        }
        let load = self.spec();
        load.validate()?;
        if self.tls && self.op == Op::GatewayPut {
            bail!("--op gateway-put speaks plain HTTP/1.1; it does not run over --tls");
        }
        Ok(CompareSettings {
            load,
            target: self.target,
            heartbeat_ms: self.heartbeat_ms,
            election_ms: self.election_ms,
            base_port: self.base_port,
            dir: self.dir.clone(),
            tls: self.tls,
            lease_reads: self.lease_reads,
        })
    }
}

/// Runs the load (or the comparison) and prints the report.
pub fn execute(args: KvArgs) -> Result<std::process::ExitCode> {
    if args.compare_etcd {
        let report = compare::run(&args.compare_settings()?)?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        } else {
            compare::print_text(&report);
        }
        return Ok(std::process::ExitCode::SUCCESS);
    }
    let mut spec = args.spec();
    if let Some(ca) = &args.cacert {
        let identity = args.cert.as_deref().zip(args.key.as_deref());
        spec.tls = Some(tls_client_config(ca, identity)?);
    }
    spec.validate()?;
    let runtime = load::runtime()?;
    let report = runtime.block_on(load::run(&spec, Arc::new(AtomicBool::new(false))))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "kv bench: {} · {} clients · {} conns: {:.0} op/s, p50 {:.3} ms, p99 {:.3} ms ({} ok, {} errors)",
            report.op, report.clients, report.conns, report.per_second, report.latency_ms_p50, report.latency_ms_p99, report.completed, report.errors
        );
        println!("  one op: {}", spec.op.describe());
        if let Some(error) = &report.first_error {
            println!("  first error: {error}");
        }
    }
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        kv: KvArgs,
    }

    fn parse(args: &[&str]) -> Result<KvArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("kv").chain(args.iter().copied())).map(|c| c.kv)
    }

    #[test]
    fn every_op_is_accepted_and_unknown_ones_are_refused() {
        for op in ["put", "get", "lease", "campaign"] {
            assert_eq!(parse(&["--op", op]).unwrap().op.name(), op);
        }
        assert!(parse(&["--op", "txn"]).is_err());
    }

    #[test]
    fn compare_etcd_refuses_explicit_endpoints_and_cluster_flags_need_it() {
        assert!(parse(&["--compare-etcd", "--op", "lease"]).is_ok());
        assert!(parse(&["--compare-etcd", "--endpoints", "127.0.0.1:2379"]).is_err());
        assert!(parse(&["--target", "leader"]).is_err());
        assert!(parse(&["--compare-etcd", "--target", "leader"]).is_ok());
    }

    #[test]
    fn compare_settings_refuse_timeouts_etcd_refuses() {
        let args = parse(&[
            "--compare-etcd",
            "--heartbeat-ms",
            "100",
            "--election-ms",
            "400",
        ])
        .unwrap();
        let error = args.compare_settings().unwrap_err().to_string();
        assert!(error.contains("--election-ms"), "{error}");
        let args = parse(&["--compare-etcd", "--clients", "0"]).unwrap();
        assert!(args.compare_settings().is_err());
        let args = parse(&["--compare-etcd"]).unwrap();
        let settings = args.compare_settings().unwrap();
        assert_eq!(settings.load.value_bytes, 256);
    }
}
