//! [`WatchHub`]: every watch of a [`crate::Client`] on one long-lived
//! Watch stream, as etcd's own client does.
//!
//! The recipes open a watch for each wait in line and drop it when the
//! wait ends. One gRPC stream per watch would reset a stream each time a
//! wait is abandoned (a resign, a lock released early); servers protect
//! themselves from floods of resets by closing the whole connection (HTTP/2
//! "too many resets"), which a busy application triggers. Here a watch is
//! a create request on the shared stream and ends with a cancel request.
//!
//! Every wait here needs only the first event (or the news that its start
//! revision was compacted, or that the stream broke): each watcher is a
//! one-shot. The server answers creates in the order they were sent, which
//! is how a created watch id is matched to its watcher.

use crate::connection::Connection;
use bellwether_api::etcdserverpb as pb;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::AsciiMetadataValue;

/// Commands queued to the hub, at most.
const COMMANDS_MAX: usize = 1024;

/// Watches one hub keeps open at once, at most; more are refused.
pub const WATCHES_MAX: usize = 65_536;

/// Requests queued on the stream, at most.
const STREAM_REQUESTS_MAX: usize = 256;

/// How often abandoned watchers are looked for and cancelled.
const SWEEP_INTERVAL: Duration = Duration::from_millis(500);

/// How a watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// The first event arrived.
    Event,
    /// The start revision was compacted away: read again and re-watch.
    Compacted,
    /// The stream broke, the server cancelled the watch, or the hub is
    /// full: read again and re-watch.
    Broken,
}

/// A request to the hub.
struct Watch {
    /// The create request to send.
    create: pb::WatchCreateRequest,
    /// Where the end goes.
    end: oneshot::Sender<WatchEnd>,
}

/// A handle on the hub task; cheap to clone.
#[derive(Clone)]
pub(crate) struct WatchHub {
    /// Watches to open.
    commands: mpsc::Sender<Watch>,
}

impl WatchHub {
    /// Starts the hub task for `client`'s endpoints. The task ends when the
    /// last handle is dropped.
    pub(crate) fn start(client: Arc<Connection>) -> WatchHub {
        let (commands, receiver) = mpsc::channel(COMMANDS_MAX);
        tokio::spawn(run(client, receiver));
        WatchHub { commands }
    }

    /// Waits for the first event on `create`'s key or range.
    pub(crate) async fn first_event(&self, create: pb::WatchCreateRequest) -> WatchEnd {
        let (end, ended) = oneshot::channel();
        if self.commands.send(Watch { create, end }).await.is_err() {
            return WatchEnd::Broken;
        }
        ended.await.unwrap_or(WatchEnd::Broken)
    }
}

/// The open stream and its watchers.
struct Stream {
    /// Requests to the server.
    requests: mpsc::Sender<pb::WatchRequest>,
    /// Answers from the server.
    answers: tonic::Streaming<pb::WatchResponse>,
    /// The endpoint it runs on.
    endpoint: usize,
    /// Creates sent and not yet answered, in order.
    pending: VecDeque<oneshot::Sender<WatchEnd>>,
    /// Created watches by server id.
    active: BTreeMap<i64, oneshot::Sender<WatchEnd>>,
    /// The token the stream was opened with.
    token: Option<AsciiMetadataValue>,
    /// A create was refused for its token: the stream must be reopened
    /// with a new one, since a stream's token is fixed when it opens.
    token_refused: Option<String>,
}

impl Stream {
    /// Watchers waiting, pending or active.
    fn len(&self) -> usize {
        self.pending.len() + self.active.len()
    }

    /// Ends every watcher with `Broken`.
    fn break_all(self) {
        for end in self.pending.into_iter().chain(self.active.into_values()) {
            let _ = end.send(WatchEnd::Broken);
        }
    }

    /// Sends a cancel for server watch `id`.
    fn cancel(&self, id: i64) {
        let cancel = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CancelRequest(
                pb::WatchCancelRequest { watch_id: id },
            )),
        };
        // A full queue leaves the watch open until the stream ends: its
        // events are then dropped here, which costs only their transfer.
        let _ = self.requests.try_send(cancel);
    }

    /// Handles one answer from the server.
    fn answer(&mut self, answer: pb::WatchResponse) {
        let id = answer.watch_id;
        if answer.created {
            let Some(end) = self.pending.pop_front() else {
                tracing::warn!(id, "watch hub: a create answer with no create pending");
                self.cancel(id);
                return;
            };
            if answer.canceled {
                self.token_refused = Some(answer.cancel_reason);
                let _ = end.send(WatchEnd::Broken);
                return;
            }
            self.active.insert(id, end);
        }
        let outcome = if answer.compact_revision > 0 {
            Some(WatchEnd::Compacted)
        } else if answer.canceled {
            Some(WatchEnd::Broken)
        } else if !answer.events.is_empty() {
            Some(WatchEnd::Event)
        } else {
            None
        };
        if let Some(outcome) = outcome {
            if let Some(end) = self.active.remove(&id) {
                let _ = end.send(outcome);
                if !answer.canceled {
                    self.cancel(id);
                }
            }
        }
    }

    /// Cancels the watches whose waiter went away.
    fn sweep(&mut self) {
        let abandoned: Vec<i64> = self
            .active
            .iter()
            .filter(|(_, end)| end.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for id in abandoned {
            self.active.remove(&id);
            self.cancel(id);
        }
    }
}

/// Opens a stream on the client's current endpoint, with `first` as its
/// first request (etcd sends the stream's headers only with an answer).
async fn open(client: &Connection, first: pb::WatchRequest) -> Option<Stream> {
    if let Err(error) = client.ensure_token().await {
        tracing::debug!(%error, "watch hub: no token for a new stream");
        return None;
    }
    let (endpoint, channel) = client.channel();
    let token = channel.token();
    let (requests, receiver) = mpsc::channel(STREAM_REQUESTS_MAX);
    requests
        .send(first)
        .await
        .expect("the receiver is alive until the call below drops it");
    match channel
        .watch_client()
        .watch(ReceiverStream::new(receiver))
        .await
    {
        Ok(answers) => Some(Stream {
            requests,
            answers: answers.into_inner(),
            endpoint,
            pending: VecDeque::new(),
            active: BTreeMap::new(),
            token,
            token_refused: None,
        }),
        Err(status) => {
            tracing::debug!(%status, "watch hub: cannot open a stream");
            // A stream refused for its token gets a new one next time, on
            // the same member.
            if !client.watch_refused(&token, status.message()) {
                client.rotate(endpoint);
            }
            None
        }
    }
}

/// The hub's loop: opens watches, routes answers, sweeps abandoned ones.
async fn run(client: Arc<Connection>, mut commands: mpsc::Receiver<Watch>) {
    let mut stream: Option<Stream> = None;
    let mut sweep = tokio::time::interval(SWEEP_INTERVAL);
    loop {
        let answer = async {
            match stream.as_mut() {
                Some(open) => open.answers.message().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            command = commands.recv() => {
                let Some(watch) = command else {
                    if let Some(open) = stream.take() {
                        open.break_all();
                    }
                    return;
                };
                add_watch(&client, &mut stream, watch).await;
            }
            answer = answer => route_answer(&client, &mut stream, answer),
            _ = sweep.tick() => {
                if let Some(open) = stream.as_mut() {
                    open.sweep();
                }
            }
        }
    }
}

/// Sends `watch`'s create on the shared stream, opening a stream first
/// when there is none. The watcher ends at once with `Broken` when the hub
/// is full, no stream opens, or the stream cannot take the request (then
/// the stream is broken: it is dropped and its watchers end too).
async fn add_watch(client: &Connection, stream: &mut Option<Stream>, watch: Watch) {
    let Watch { create, end } = watch;
    if stream.as_ref().is_some_and(|s| s.len() >= WATCHES_MAX) {
        let _ = end.send(WatchEnd::Broken);
        return;
    }
    let request = pb::WatchRequest {
        request_union: Some(pb::watch_request::RequestUnion::CreateRequest(create)),
    };
    match stream.as_mut() {
        Some(open) => {
            if open.requests.send(request).await.is_err() {
                let _ = end.send(WatchEnd::Broken);
                if let Some(broken) = stream.take() {
                    broken.break_all();
                }
                return;
            }
            open.pending.push_back(end);
        }
        None => match open(client, request).await {
            Some(mut opened) => {
                opened.pending.push_back(end);
                *stream = Some(opened);
            }
            None => {
                let _ = end.send(WatchEnd::Broken);
            }
        },
    }
}

/// Handles what the open stream gave: an answer goes to its watcher (and
/// a create refused for the stream's token drops the stream, if the token
/// was forgotten, so that the next watch opens one with a new token); the
/// stream's end or failure drops it, moves on to the next endpoint, and
/// ends every watcher with `Broken`.
fn route_answer(
    client: &Connection,
    stream: &mut Option<Stream>,
    answer: Result<Option<pb::WatchResponse>, tonic::Status>,
) {
    match answer {
        Ok(Some(answer)) => {
            let open = stream.as_mut().expect("answers come from an open stream");
            open.answer(answer);
            if let Some(reason) = open.token_refused.take() {
                let before = open.token.clone();
                if client.watch_refused(&before, &reason) {
                    // The token was forgotten: the next watch
                    // opens a stream that carries a new one.
                    if let Some(stale) = stream.take() {
                        stale.break_all();
                    }
                }
            }
        }
        Ok(None) | Err(_) => {
            let broken = stream.take().expect("answers come from an open stream");
            client.rotate(broken.endpoint);
            broken.break_all();
        }
    }
}
