//! The election workload of `bellwether verify`: clients campaign for one
//! name (etcd's election recipe, through `bellwether-client`) and, while
//! leading, write keys in txns guarded by their fencing token. In the
//! order the store applied them, the accepted writes' tokens must never go
//! down: a deposed leader's write must never land after its successor's.
//!
//! Now and then a leading client hangs, as a process stopped by a long GC
//! pause or a SIGSTOP would: its keep-alives stop, its lease expires,
//! another client wins and writes, and then the hung one wakes and makes
//! one more write as if it still led. Its fencing guard must refuse that
//! write; `--unfenced-writes` leaves the guard out, and the check must
//! then find the stale write landing after its successor's.

use super::session::{PAUSE_AFTER_FAILURE, REQUEST_TIMEOUT};
use super::Verdict;
use anyhow::{Context, Result};
use bellwether_api::etcdserverpb as pb;
use bellwether_client::Client;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The key prefix of the election workload's fenced writes.
pub const ELECTION_PREFIX: &str = "verify/election/w/";
/// The name the election clients campaign for.
const ELECTION_NAME: &str = "verify-election";
/// Fenced writes a leader makes before it resigns, so that leadership
/// moves often even without faults.
const WRITES_PER_LEADERSHIP: u64 = 20;
/// The least time from one hung leader's waking to the next hang: each
/// hang holds the election until the hung leader's lease expires, which a
/// nemesis that keeps moving the cluster's leadership (each new leader
/// renews every lease) may put off until it stops.
const HANG_GAP: Duration = Duration::from_secs(10);
/// The longest a client stays hung waiting for a successor to lead.
const HANG_MAX: Duration = Duration::from_secs(30);
/// How often a hung client looks for its successor.
const HANG_POLL: Duration = Duration::from_millis(50);

/// What the election clients recorded.
#[derive(Default)]
pub struct ElectionHistory {
    /// Leaderships won.
    pub leaderships: u64,
    /// Fenced writes the store accepted.
    pub accepted: u64,
    /// Fenced writes the store refused (the campaign key was gone).
    pub refused: u64,
    /// Fenced writes with no answer.
    pub unanswered: u64,
    /// Leaders that hung until a successor led, and woke to write.
    pub hangs: u64,
    /// Writes made on waking from a hang that the store accepted: no
    /// successor led before the hang's limit, or the write was not fenced.
    pub stale_accepted: u64,
    /// Writes made on waking from a hang that the store refused.
    pub stale_refused: u64,
    /// The time leaders spent hung, in all.
    pub hung_for: Duration,
    /// Whether a leader is hung now.
    hanging: bool,
    /// When the last hung leader woke.
    last_woke: Option<Instant>,
}

impl ElectionHistory {
    /// Whether a leader may hang now: the run lasts, none is hung, and
    /// none woke within [`HANG_GAP`]. Claims the hang when it may.
    fn claim_hang(&mut self, now: Instant, until: Instant) -> bool {
        let due = now < until
            && !self.hanging
            && self
                .last_woke
                .is_none_or(|woke| now.duration_since(woke) >= HANG_GAP);
        self.hanging |= due;
        due
    }

    /// Records a hung leader's waking write.
    fn woke(&mut self, hung_for: Duration, accepted: bool) {
        self.hanging = false;
        self.last_woke = Some(Instant::now());
        self.hangs += 1;
        self.hung_for += hung_for;
        match accepted {
            true => self.stale_accepted += 1,
            false => self.stale_refused += 1,
        }
    }
}

/// Whether the clients go on: the run lasts, or a leader is hung, whose
/// successor must still be able to win and write before it wakes.
fn going_on(history: &Mutex<ElectionHistory>, until: Instant) -> bool {
    Instant::now() < until || history.lock().expect("history lock").hanging
}

/// How long a client may wait to start a session or to win: the rest of
/// the run, or, while a leader is hung, up to [`HANG_MAX`].
fn time_left(history: &Mutex<ElectionHistory>, until: Instant) -> Duration {
    match history.lock().expect("history lock").hanging {
        true => HANG_MAX,
        false => until.saturating_duration_since(Instant::now()),
    }
}

/// Runs one election client until `until`: campaign, write under the
/// fencing token while leading, resign, and again. Every write is a txn
/// guarded by the campaign key's create revision (unless `fenced` is
/// false: a broken client), to a key of its own whose value is the token.
pub async fn election_client(
    client: u64,
    endpoints: Vec<String>,
    until: Instant,
    fenced: bool,
    history: Arc<Mutex<ElectionHistory>>,
) {
    use bellwether_client::{Election, Session, SessionOptions};
    let Ok(etcd) = Client::connect_with_deadline(&endpoints, Duration::from_secs(2)) else {
        return;
    };
    let options = SessionOptions::with_ttl(Duration::from_secs(2));
    while going_on(&history, until) {
        let left = time_left(&history, until);
        let Ok(Ok(session)) =
            tokio::time::timeout(left, Session::new(&etcd, options.clone())).await
        else {
            tokio::time::sleep(PAUSE_AFTER_FAILURE).await;
            continue;
        };
        let Ok(election) = Election::new(&session, ELECTION_NAME) else {
            return;
        };
        let left = time_left(&history, until);
        let campaign = election.campaign(format!("client-{client}"));
        let Ok(Ok(leadership)) = tokio::time::timeout(left, campaign).await else {
            continue;
        };
        history.lock().expect("history lock").leaderships += 1;
        let token = leadership.token();
        let write = |sequence: u64| {
            let put = pb::PutRequest {
                key: format!("{ELECTION_PREFIX}{client}/{token}/{sequence}").into_bytes(),
                value: token.to_string().into_bytes(),
                ..pb::PutRequest::default()
            };
            fenced_write(&etcd, &leadership, fenced, put)
        };
        for sequence in 1..=WRITES_PER_LEADERSHIP {
            if !leadership.is_leader() || !going_on(&history, until) {
                break;
            }
            let hangs = sequence == WRITES_PER_LEADERSHIP / 2
                && history
                    .lock()
                    .expect("history lock")
                    .claim_hang(Instant::now(), until);
            if hangs {
                session.stop_keep_alive();
                let hung_at = Instant::now();
                hang_until_succeeded(&etcd, token).await;
                // Awake, and still sure it leads: one more write.
                let accepted = write(sequence).await == Some(true);
                let mut history = history.lock().expect("history lock");
                history.woke(hung_at.elapsed(), accepted);
                break;
            }
            let answer = write(sequence).await;
            let mut history = history.lock().expect("history lock");
            match answer {
                Some(true) => history.accepted += 1,
                Some(false) => history.refused += 1,
                None => history.unanswered += 1,
            }
        }
        let _ = tokio::time::timeout(REQUEST_TIMEOUT, leadership.resign()).await;
    }
}

/// Writes `put` guarded by `leadership`'s fencing token, or with no guard
/// at all when `fenced` is false; `None` when there is no answer.
async fn fenced_write(
    etcd: &Client,
    leadership: &bellwether_client::Leadership,
    fenced: bool,
    put: pb::PutRequest,
) -> Option<bool> {
    let operation = pb::RequestOp {
        request: Some(pb::request_op::Request::RequestPut(put)),
    };
    let answer = if fenced {
        tokio::time::timeout(REQUEST_TIMEOUT, leadership.guarded(vec![operation])).await
    } else {
        let txn = pb::TxnRequest {
            success: vec![operation],
            ..pb::TxnRequest::default()
        };
        let write = async { Ok(etcd.txn(txn).await?.succeeded) };
        tokio::time::timeout(REQUEST_TIMEOUT, write).await
    };
    match answer {
        Ok(Ok(accepted)) => Some(accepted),
        Ok(Err::<_, bellwether_client::Error>(_)) | Err(_) => None,
    }
}

/// Hangs, as a stopped process would, until a write with a higher token
/// than `token` (a successor's) is the latest under the prefix; at most
/// [`HANG_MAX`].
async fn hang_until_succeeded(etcd: &Client, token: i64) {
    let deadline = Instant::now() + HANG_MAX;
    let latest = pb::RangeRequest {
        key: ELECTION_PREFIX.as_bytes().to_vec(),
        range_end: bellwether_client::keys::prefix_end(ELECTION_PREFIX.as_bytes()),
        limit: 1,
        sort_order: pb::range_request::SortOrder::Descend as i32,
        sort_target: pb::range_request::SortTarget::Mod as i32,
        ..pb::RangeRequest::default()
    };
    while Instant::now() < deadline {
        let read = tokio::time::timeout(REQUEST_TIMEOUT, etcd.range(latest.clone())).await;
        if let Ok(Ok(answer)) = read {
            let newest = answer.kvs.first().map(|kv| {
                String::from_utf8_lossy(&kv.value)
                    .parse::<i64>()
                    .unwrap_or(-1)
            });
            if newest.is_some_and(|newest| newest > token) {
                return;
            }
        }
        tokio::time::sleep(HANG_POLL).await;
    }
}

/// The fenced writes, in the order the store applied them (their mod
/// revision): their tokens must never go down.
pub async fn election_verdict(client: &Client, history: ElectionHistory) -> Result<Verdict> {
    let end = bellwether_client::keys::prefix_end(ELECTION_PREFIX.as_bytes());
    let request = pb::RangeRequest {
        key: ELECTION_PREFIX.as_bytes().to_vec(),
        range_end: end,
        ..pb::RangeRequest::default()
    };
    let answer = client
        .range(request)
        .await
        .context("the final read of the fenced writes failed")?;
    let mut writes: Vec<(i64, i64, String)> = answer
        .kvs
        .iter()
        .map(|kv| {
            let token = String::from_utf8_lossy(&kv.value).parse().unwrap_or(-1);
            (
                kv.mod_revision,
                token,
                String::from_utf8_lossy(&kv.key).into_owned(),
            )
        })
        .collect();
    writes.sort();
    let regression = writes
        .windows(2)
        .find(|pair| pair[1].1 < pair[0].1)
        .map(|pair| {
            format!(
                "{} (token {}) was applied at revision {} after {} (token {}) at revision {}",
                pair[1].2, pair[1].1, pair[1].0, pair[0].2, pair[0].1, pair[0].0
            )
        });
    let tokens: std::collections::BTreeSet<i64> = writes.iter().map(|w| w.1).collect();
    let summary = format!(
        "{} leaderships won, {} fenced writes accepted ({} refused, {} unanswered), {} hung leaders woke to write ({} refused, {} accepted; hung {:.1} s in all), {} read back under {} tokens",
        history.leaderships,
        history.accepted,
        history.refused,
        history.unanswered,
        history.hangs,
        history.stale_refused,
        history.stale_accepted,
        history.hung_for.as_secs_f64(),
        writes.len(),
        tokens.len()
    );
    let anomaly = match (regression, writes.len() as u64 >= history.accepted) {
        (Some(regression), _) => Some(format!(
            "a fenced write landed out of token order: {regression}"
        )),
        (None, false) => Some(format!(
            "{} accepted writes but only {} read back",
            history.accepted,
            writes.len()
        )),
        (None, true) => None,
    };
    let history_json = serde_json::json!({ "writes": writes }).to_string();
    Ok(Verdict {
        summary,
        anomaly,
        history_json,
    })
}
