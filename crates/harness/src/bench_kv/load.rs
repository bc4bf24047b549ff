//! The closed loop of `bench kv`: each client sends one operation, waits
//! for its answer, and sends the next. Clients share the connections
//! round-robin; connection i goes to endpoint `i mod endpoints`.
//!
//! What one operation is, per `--op`:
//! - `put`: one `KV.Put` of the client's own key (`bench/<client>`) with a
//!   `--value-bytes` value.
//! - `get`: one linearizable `KV.Range` of the client's own key.
//! - `lease`: one `Lease.LeaseGrant` with a TTL of [`LEASE_TTL_SECONDS`] and
//!   a server-chosen id. Leases are not revoked: they expire on their own.
//! - `campaign`: one `Election.Campaign` on an election name of its own
//!   (`bench-election/<run>/<client>`, so it never waits for another
//!   client), immediately followed by one `Election.Resign` of the leader
//!   key it returned: two round trips, timed together. Before the loop each
//!   client is granted one lease (not timed), which every campaign uses.

use super::grpc_connection::{frame, GrpcConnection};
use crate::latency::Latencies;
use anyhow::{bail, Context, Result};
use bellwether_api::etcdserverpb::{
    LeaseGrantRequest, LeaseGrantResponse, PutRequest, PutResponse, RangeRequest, RangeResponse,
};
use bellwether_api::v3electionpb::{
    CampaignRequest, CampaignResponse, ResignRequest, ResignResponse,
};
use bytes::Bytes;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// TTL of the leases granted by `lease`; `campaign` adds it to what is left
/// of the run (see [`campaign_lease_ttl`]), so no campaign's lease expires
/// mid-run.
pub const LEASE_TTL_SECONDS: i64 = 60;
/// Most clients: each is a task with its own latency buffer.
pub const CLIENTS_MAX: usize = 10_000;
/// Most connections opened.
pub const CONNS_MAX: usize = 1_000;
/// Longest measured duration.
pub const SECONDS_MAX: f64 = 3_600.0;
/// Largest value.
pub const VALUE_BYTES_MAX: usize = 1 << 20;
/// Longest wait for one answer: a request that hangs longer counts as an
/// error, so a stuck cluster cannot stall the run past its deadline by more.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the loop looks at the interruption flag while clients run.
const INTERRUPT_POLL: Duration = Duration::from_millis(50);

/// The operation each client repeats.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Op {
    /// `KV.Put` of the client's own key.
    Put,
    /// Linearizable `KV.Range` of the client's own key.
    Get,
    /// `Lease.LeaseGrant`, TTL 60 s.
    Lease,
    /// `Election.Campaign` then `Election.Resign` on the client's own name.
    Campaign,
    /// `POST /v3/kv/put` through the JSON gateway, over HTTP/1.1.
    GatewayPut,
}

impl Op {
    /// The flag value.
    pub fn name(self) -> &'static str {
        match self {
            Op::Put => "put",
            Op::Get => "get",
            Op::Lease => "lease",
            Op::Campaign => "campaign",
            Op::GatewayPut => "gateway-put",
        }
    }

    /// What one operation is, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            Op::Put => "one KV.Put of the client's own key",
            Op::Get => "one linearizable KV.Range of the client's own key",
            Op::Lease => "one Lease.LeaseGrant (TTL 60 s, server-chosen id; never revoked)",
            Op::Campaign => {
                "one Election.Campaign on the client's own election name (never contended) plus one \
                 Election.Resign of the returned leader key, timed together; each client's lease is \
                 granted once before the loop"
            }
            Op::GatewayPut => {
                "one POST /v3/kv/put of the client's own key through the JSON gateway, over the \
                 client's own HTTP/1.1 keep-alive connection (--conns does not apply)"
            }
        }
    }

    /// Parses a flag value.
    pub fn parse(text: &str) -> Result<Op> {
        match text {
            "put" => Ok(Op::Put),
            "get" => Ok(Op::Get),
            "lease" => Ok(Op::Lease),
            "campaign" => Ok(Op::Campaign),
            "gateway-put" => Ok(Op::GatewayPut),
            other => bail!("--op must be put, get, lease, campaign or gateway-put, got {other:?}"),
        }
    }
}

/// One load: what to send, where, and for how long.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// etcd API endpoints (host:port).
    pub endpoints: Vec<String>,
    /// What each client repeats.
    pub op: Op,
    /// Concurrent closed-loop clients.
    pub clients: usize,
    /// Connections the clients share.
    pub conns: usize,
    /// Measured duration.
    pub seconds: f64,
    /// Unmeasured lead-in: clients run but nothing is recorded.
    pub warmup_seconds: f64,
    /// Value size of puts and campaigns.
    pub value_bytes: usize,
    /// TLS for every connection (CA and client certificate), if set.
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl LoadSpec {
    /// Rejects values outside the bounds (messages name the flags).
    pub fn validate(&self) -> Result<()> {
        if self.endpoints.is_empty() {
            bail!("--endpoints must name at least one host:port");
        }
        if self.tls.is_some() && self.op == Op::GatewayPut {
            bail!("--op gateway-put speaks plain HTTP/1.1; it does not run over TLS");
        }
        if !(1..=CLIENTS_MAX).contains(&self.clients) {
            bail!("--clients must be between 1 and {CLIENTS_MAX}");
        }
        if !(1..=CONNS_MAX).contains(&self.conns) {
            bail!("--conns must be between 1 and {CONNS_MAX}");
        }
        if !(self.seconds > 0.0 && self.seconds <= SECONDS_MAX) {
            bail!("--seconds must be above 0 and at most {SECONDS_MAX}");
        }
        if !(self.warmup_seconds >= 0.0 && self.warmup_seconds <= SECONDS_MAX) {
            bail!("--warmup-seconds must be between 0 and {SECONDS_MAX}");
        }
        if self.value_bytes > VALUE_BYTES_MAX {
            bail!("--value-bytes must be at most {VALUE_BYTES_MAX}");
        }
        Ok(())
    }
}

/// What the load measured.
#[derive(Clone, Debug, Serialize)]
pub struct KvReport {
    /// Operation.
    pub op: String,
    /// Clients.
    pub clients: usize,
    /// Connections.
    pub conns: usize,
    /// Operations answered successfully in the measured window.
    pub completed: u64,
    /// Operations that failed in the measured window.
    pub errors: u64,
    /// The first failure's message, if any failed.
    pub first_error: Option<String>,
    /// Answered per second.
    pub per_second: f64,
    /// Median latency.
    pub latency_ms_p50: f64,
    /// 99th percentile latency.
    pub latency_ms_p99: f64,
}

/// Closed-loop load of `op` ("put", "get", "lease" or "campaign") on
/// `endpoints` for `seconds`, without warm-up.
pub async fn load(
    endpoints: &[String],
    op: &str,
    clients: usize,
    conns: usize,
    seconds: f64,
    value_bytes: usize,
) -> Result<KvReport> {
    let spec = LoadSpec {
        endpoints: endpoints.to_vec(),
        op: Op::parse(op)?,
        clients,
        conns,
        seconds,
        warmup_seconds: 0.0,
        value_bytes,
        tls: None,
    };
    run(&spec, Arc::new(AtomicBool::new(false))).await
}

/// What one client saw in the measured window.
#[derive(Default)]
struct ClientResult {
    /// Latencies of successful operations.
    latencies: Latencies,
    /// Failed operations.
    errors: u64,
    /// The first failure.
    first_error: Option<String>,
}

impl ClientResult {
    fn record(&mut self, outcome: Result<(), tonic::Status>, sent: Instant) {
        match outcome {
            Ok(()) => self.latencies.record(sent.elapsed()),
            Err(status) => {
                self.errors += 1;
                self.first_error.get_or_insert_with(|| status.to_string());
            }
        }
    }
}

/// The window in which answers count.
#[derive(Clone, Copy)]
struct Window {
    /// Operations sent before this are warm-up.
    measure_from: Instant,
    /// No operation is sent after this.
    deadline: Instant,
}

/// The runtime the load runs on: one thread. On a machine whose cores the
/// client shares with the servers it measures, one thread spends the least
/// CPU per request (no wake-ups across threads), and it is not the limit:
/// with [`GrpcConnection`] a request costs it a few microseconds.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

/// Runs `spec`; fails (after stopping every client) when `interrupted` is
/// set.
pub async fn run(spec: &LoadSpec, interrupted: Arc<AtomicBool>) -> Result<KvReport> {
    spec.validate()?;
    let connections = if spec.op == Op::GatewayPut {
        Vec::new()
    } else {
        connect(spec).await?
    };
    let run_tag = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let start = Instant::now();
    let measure_from = start + Duration::from_secs_f64(spec.warmup_seconds);
    let window = Window {
        measure_from,
        deadline: measure_from + Duration::from_secs_f64(spec.seconds),
    };
    let mut tasks = tokio::task::JoinSet::new();
    for c in 0..spec.clients {
        let (op, value_bytes) = (spec.op, spec.value_bytes);
        let flag = interrupted.clone();
        if op == Op::GatewayPut {
            let endpoint = spec.endpoints[c % spec.endpoints.len()].clone();
            tasks.spawn(async move {
                gateway_client_loop(c, endpoint, value_bytes, window, flag).await
            });
            continue;
        }
        let connection = connections[c % connections.len()].clone();
        let name = format!("bench-election/{run_tag}/{c}").into_bytes();
        tasks.spawn(async move {
            client_loop(op, c, connection, value_bytes, name, window, flag).await
        });
    }
    let mut results = Vec::with_capacity(spec.clients);
    loop {
        tokio::select! {
            joined = tasks.join_next() => match joined {
                Some(result) => results.push(result.context("a client task failed")?),
                None => break,
            },
            () = tokio::time::sleep(INTERRUPT_POLL) => {
                if interrupted.load(Ordering::SeqCst) {
                    tasks.abort_all();
                    bail!("interrupted during the load");
                }
            }
        }
    }
    if interrupted.load(Ordering::SeqCst) {
        bail!("interrupted during the load");
    }
    let elapsed = Instant::now()
        .saturating_duration_since(window.measure_from)
        .as_secs_f64();
    Ok(summarize(spec, results, elapsed))
}

async fn connect(spec: &LoadSpec) -> Result<Vec<GrpcConnection>> {
    let mut connections = Vec::with_capacity(spec.conns);
    for i in 0..spec.conns {
        let endpoint = &spec.endpoints[i % spec.endpoints.len()];
        connections
            .push(GrpcConnection::connect(endpoint, REQUEST_TIMEOUT, spec.tls.as_ref()).await?);
    }
    Ok(connections)
}

/// The URIs of the methods the load calls on one connection, built once
/// per client.
struct MethodUris {
    put: http::Uri,
    range: http::Uri,
    lease_grant: http::Uri,
    campaign: http::Uri,
    resign: http::Uri,
}

impl MethodUris {
    fn of(connection: &GrpcConnection) -> Result<MethodUris> {
        Ok(MethodUris {
            put: connection.method_uri("/etcdserverpb.KV/Put")?,
            range: connection.method_uri("/etcdserverpb.KV/Range")?,
            lease_grant: connection.method_uri("/etcdserverpb.Lease/LeaseGrant")?,
            campaign: connection.method_uri("/v3electionpb.Election/Campaign")?,
            resign: connection.method_uri("/v3electionpb.Election/Resign")?,
        })
    }
}

/// An answer whose fields say the operation was done: every etcd answer
/// carries a header, and a granted lease has an id and a TTL.
trait CheckedAnswer: prost::Message + Default {
    /// Why this answer does not show a completed operation, if it does not.
    fn problem(&self) -> Option<&'static str>;
}

impl CheckedAnswer for PutResponse {
    fn problem(&self) -> Option<&'static str> {
        self.header
            .is_none()
            .then_some("Put answered without a header")
    }
}

impl CheckedAnswer for RangeResponse {
    fn problem(&self) -> Option<&'static str> {
        self.header
            .is_none()
            .then_some("Range answered without a header")
    }
}

impl CheckedAnswer for LeaseGrantResponse {
    fn problem(&self) -> Option<&'static str> {
        if self.header.is_none() {
            Some("LeaseGrant answered without a header")
        } else if !self.error.is_empty() {
            Some("LeaseGrant answered with an error")
        } else if self.id == 0 || self.ttl <= 0 {
            Some("LeaseGrant answered without a lease id or TTL")
        } else {
            None
        }
    }
}

impl CheckedAnswer for CampaignResponse {
    fn problem(&self) -> Option<&'static str> {
        match (&self.header, &self.leader) {
            (None, _) => Some("Campaign answered without a header"),
            (_, None) => Some("Campaign answered without a leader key"),
            _ => None,
        }
    }
}

impl CheckedAnswer for ResignResponse {
    fn problem(&self) -> Option<&'static str> {
        self.header
            .is_none()
            .then_some("Resign answered without a header")
    }
}

/// One call with the run's per-request timeout; an answer that does not
/// show a completed operation is an error.
async fn call<M: CheckedAnswer>(
    connection: &GrpcConnection,
    uri: &http::Uri,
    framed_request: Bytes,
) -> Result<M, tonic::Status> {
    let answer: M =
        match tokio::time::timeout(REQUEST_TIMEOUT, connection.unary(uri, framed_request)).await {
            Ok(answer) => answer?,
            Err(_) => {
                return Err(tonic::Status::deadline_exceeded(format!(
                    "no answer within {REQUEST_TIMEOUT:?}"
                )))
            }
        };
    match answer.problem() {
        Some(problem) => Err(tonic::Status::internal(problem)),
        None => Ok(answer),
    }
}

/// Pause after a failed operation, so a client whose connection broke (its
/// calls then fail at once) does not spin and starve the others on the
/// load's one thread.
const ERROR_PAUSE: Duration = Duration::from_millis(10);

/// One client's loop; `name` is its election name (used by `campaign`).
async fn client_loop(
    op: Op,
    client: usize,
    connection: GrpcConnection,
    value_bytes: usize,
    name: Vec<u8>,
    window: Window,
    interrupted: Arc<AtomicBool>,
) -> ClientResult {
    let mut result = ClientResult::default();
    let uris = match MethodUris::of(&connection) {
        Ok(uris) => uris,
        Err(error) => {
            result.record(
                Err(tonic::Status::internal(error.to_string())),
                Instant::now(),
            );
            return result;
        }
    };
    let campaign_lease = if op == Op::Campaign {
        match grant_campaign_lease(&connection, &uris, window).await {
            Ok(lease) => lease,
            Err(status) => {
                // Without a lease this client cannot campaign: one error.
                result.record(Err(status), Instant::now());
                return result;
            }
        }
    } else {
        0
    };
    let request = framed_request(op, client, value_bytes, name, campaign_lease);
    while Instant::now() < window.deadline && !interrupted.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let outcome = match op {
            Op::Put => call::<PutResponse>(&connection, &uris.put, request.clone())
                .await
                .map(drop),
            Op::Get => call::<RangeResponse>(&connection, &uris.range, request.clone())
                .await
                .map(drop),
            Op::Lease => {
                call::<LeaseGrantResponse>(&connection, &uris.lease_grant, request.clone())
                    .await
                    .map(drop)
            }
            Op::Campaign => campaign_once(&connection, &uris, request.clone()).await,
            Op::GatewayPut => unreachable!("gateway clients run gateway_client_loop"),
        };
        let failed = outcome.is_err();
        if sent >= window.measure_from {
            result.record(outcome, sent);
        }
        if failed {
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    result
}

/// Grants the one lease every campaign of a `campaign` client uses (not
/// timed: it is set-up, not load); it lasts past the end of the run, see
/// [`campaign_lease_ttl`].
async fn grant_campaign_lease(
    connection: &GrpcConnection,
    uris: &MethodUris,
    window: Window,
) -> Result<i64, tonic::Status> {
    let request = LeaseGrantRequest {
        ttl: campaign_lease_ttl(window),
        id: 0,
    };
    call::<LeaseGrantResponse>(connection, &uris.lease_grant, frame(&request))
        .await
        .map(|granted| granted.id)
}

/// The request client `client` sends for `op`, framed once before its
/// loop: every request but Resign is the same each time, so the loop only
/// clones the bytes.
fn framed_request(
    op: Op,
    client: usize,
    value_bytes: usize,
    name: Vec<u8>,
    campaign_lease: i64,
) -> Bytes {
    let key = format!("bench/{client}").into_bytes();
    let value = vec![b'x'; value_bytes];
    match op {
        Op::Put => frame(&PutRequest {
            key,
            value,
            ..Default::default()
        }),
        Op::Get => frame(&RangeRequest {
            key,
            ..Default::default()
        }),
        Op::Lease => frame(&LeaseGrantRequest {
            ttl: LEASE_TTL_SECONDS,
            id: 0,
        }),
        Op::Campaign => frame(&CampaignRequest {
            name,
            lease: campaign_lease,
            value,
        }),
        Op::GatewayPut => unreachable!("gateway clients run gateway_client_loop"),
    }
}

/// One gateway client's loop: its own HTTP/1.1 connection, one JSON put
/// at a time; an answer that is not 200 with a header is an error.
async fn gateway_client_loop(
    client: usize,
    endpoint: String,
    value_bytes: usize,
    window: Window,
    interrupted: Arc<AtomicBool>,
) -> ClientResult {
    use super::http1_connection::Http1Connection;
    let mut result = ClientResult::default();
    let body = {
        // Base64 of the key and of a value of `value_bytes` 'x's.
        let key = base64(format!("bench/{client}"));
        let value = base64(vec![b'x'; value_bytes]);
        format!(r#"{{"key":"{key}","value":"{value}"}}"#).into_bytes()
    };
    let mut connection: Option<Http1Connection> = None;
    while Instant::now() < window.deadline && !interrupted.load(Ordering::Relaxed) {
        let sent = Instant::now();
        let attempt = async {
            if connection.is_none() {
                connection = Some(Http1Connection::connect(&endpoint).await?);
            }
            let open = connection.as_mut().expect("connected above");
            let (status, answer) = open.post_json("/v3/kv/put", &body).await?;
            if status != 200 || !answer.starts_with(b"{") || !contains(&answer, b"\"header\"") {
                anyhow::bail!("status {status}: {}", String::from_utf8_lossy(&answer));
            }
            anyhow::Ok(())
        };
        let outcome = match tokio::time::timeout(REQUEST_TIMEOUT, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(tonic::Status::unknown(format!("{error:#}"))),
            Err(_) => Err(tonic::Status::deadline_exceeded(format!(
                "no answer within {REQUEST_TIMEOUT:?}"
            ))),
        };
        let failed = outcome.is_err();
        if failed {
            connection = None; // Its state is unknown: start afresh.
        }
        if sent >= window.measure_from {
            result.record(outcome, sent);
        }
        if failed {
            tokio::time::sleep(ERROR_PAUSE).await;
        }
    }
    result
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Standard base64 with padding, as etcd's gateway reads bytes.
fn base64(input: impl AsRef<[u8]>) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let input = input.as_ref();
    let mut out = String::with_capacity(input.len().div_ceil(3) * 4);
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i)) as usize & 63] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The TTL of a campaign client's lease: what is left of the run plus the
/// default TTL, so it outlives the run whatever its length.
fn campaign_lease_ttl(window: Window) -> i64 {
    let left = window.deadline.saturating_duration_since(Instant::now());
    left.as_secs_f64().ceil() as i64 + LEASE_TTL_SECONDS
}

/// Campaign (`campaign` is the framed request), then resign the leader key
/// the campaign returned.
async fn campaign_once(
    connection: &GrpcConnection,
    uris: &MethodUris,
    campaign: Bytes,
) -> Result<(), tonic::Status> {
    let leader = call::<CampaignResponse>(connection, &uris.campaign, campaign)
        .await?
        .leader
        .expect("a Campaign answer without a leader key is refused by CheckedAnswer");
    let resign = frame(&ResignRequest {
        leader: Some(leader),
    });
    call::<ResignResponse>(connection, &uris.resign, resign)
        .await
        .map(drop)
}

fn summarize(spec: &LoadSpec, results: Vec<ClientResult>, elapsed_seconds: f64) -> KvReport {
    let mut all = Latencies::default();
    let (mut errors, mut first_error) = (0, None);
    for result in results {
        all.merge(&result.latencies);
        errors += result.errors;
        first_error = first_error.or(result.first_error);
    }
    KvReport {
        op: spec.op.name().to_string(),
        clients: spec.clients,
        conns: spec.conns,
        completed: all.count(),
        errors,
        first_error,
        per_second: all.count() as f64 / elapsed_seconds.max(f64::MIN_POSITIVE),
        latency_ms_p50: all.quantile_ms(0.5),
        latency_ms_p99: all.quantile_ms(0.99),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> LoadSpec {
        LoadSpec {
            endpoints: vec!["127.0.0.1:2379".into()],
            op: Op::Put,
            clients: 16,
            conns: 4,
            seconds: 1.0,
            warmup_seconds: 0.0,
            value_bytes: 256,
            tls: None,
        }
    }

    #[test]
    fn every_op_name_parses_back_and_others_are_refused() {
        assert_eq!(base64("foo"), "Zm9v");
        assert_eq!(base64("fo"), "Zm8=");
        assert_eq!(base64("f"), "Zg==");
        for op in [Op::Put, Op::Get, Op::Lease, Op::Campaign, Op::GatewayPut] {
            assert_eq!(Op::parse(op.name()).unwrap(), op);
        }
        assert!(Op::parse("delete").is_err());
    }

    #[test]
    fn out_of_bounds_specs_are_refused_with_the_flag_named() {
        assert!(spec().validate().is_ok());
        type Breaker = fn(&mut LoadSpec);
        let cases: [(Breaker, &str); 6] = [
            (|s| s.clients = 0, "--clients"),
            (|s| s.conns = CONNS_MAX + 1, "--conns"),
            (|s| s.seconds = 0.0, "--seconds"),
            (|s| s.seconds = f64::NAN, "--seconds"),
            (|s| s.endpoints.clear(), "--endpoints"),
            (|s| s.value_bytes = VALUE_BYTES_MAX + 1, "--value-bytes"),
        ];
        for (break_it, flag) in cases {
            let mut broken = spec();
            break_it(&mut broken);
            let error = broken.validate().unwrap_err().to_string();
            assert!(error.contains(flag), "{error:?} names {flag}");
        }
    }

    #[test]
    fn answers_without_a_header_or_a_lease_id_are_problems() {
        use bellwether_api::etcdserverpb::ResponseHeader;
        let header = Some(ResponseHeader::default());
        assert!(PutResponse::default().problem().is_some());
        let put = PutResponse {
            header,
            ..Default::default()
        };
        assert!(put.problem().is_none());
        let granted = LeaseGrantResponse {
            header,
            id: 7,
            ttl: 60,
            error: String::new(),
        };
        assert!(granted.problem().is_none());
        for broken in [
            LeaseGrantResponse {
                id: 0,
                ..granted.clone()
            },
            LeaseGrantResponse {
                ttl: 0,
                ..granted.clone()
            },
            LeaseGrantResponse {
                error: "lease exists".into(),
                ..granted.clone()
            },
            LeaseGrantResponse {
                header: None,
                ..granted.clone()
            },
        ] {
            assert!(broken.problem().is_some(), "{broken:?}");
        }
        let campaign = CampaignResponse {
            header,
            leader: None,
        };
        assert!(campaign.problem().is_some(), "no leader key");
    }

    #[test]
    fn a_summary_counts_every_client_and_keeps_the_first_error() {
        let results = vec![
            ClientResult {
                latencies: Latencies::of_ms([3.0, 1.0]),
                errors: 0,
                first_error: None,
            },
            ClientResult {
                latencies: Latencies::of_ms([2.0]),
                errors: 2,
                first_error: Some("unavailable".into()),
            },
        ];
        let report = summarize(&spec(), results, 0.5);
        assert_eq!((report.completed, report.errors), (3, 2));
        assert_eq!(report.per_second, 6.0);
        assert_eq!(report.latency_ms_p50, 2.0);
        assert_eq!(report.first_error.as_deref(), Some("unavailable"));
    }
}
