//! [`PrefixWatch`]: a stream of every event under a prefix, for the task
//! queue's leader and workers, which follow a range for as long as they run
//! (the recipes' one-shot waits use the shared [`crate::watch_hub`]).
//!
//! Whoever follows a range reads it and watches it: either [`list`] (one
//! revision) and a watch from the revision after, or a watch from now and
//! then [`list_latest`], which needs no old revision to survive
//! compaction. When the watch breaks (member down, compaction, cancel),
//! [`PrefixWatch::next`] fails and the caller reads again and opens a new
//! watch: nothing is missed, and events already applied are recognised by
//! their revisions.

use crate::client::Client;
use crate::connection::is_unavailable;
use crate::error::{Error, Result};
use crate::keys;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::mvccpb;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

/// Keys read per request when listing a range.
pub const LIST_PAGE_KEYS: i64 = 200;

/// A watch on one prefix, on its own stream.
pub(crate) struct PrefixWatch {
    /// Keeps the request side open; the stream ends when it is dropped.
    _requests: mpsc::Sender<pb::WatchRequest>,
    /// The answers.
    answers: tonic::Streaming<pb::WatchResponse>,
    /// The endpoint the stream runs on.
    endpoint: usize,
    /// The client, to move to another endpoint when the stream breaks.
    client: Client,
    /// The token the stream was opened with, forgotten if refused.
    token: Option<tonic::metadata::AsciiMetadataValue>,
}

impl PrefixWatch {
    /// Watches every key under `prefix` from `start_revision` on.
    pub(crate) async fn open(
        client: &Client,
        prefix: &[u8],
        start_revision: i64,
    ) -> Result<PrefixWatch> {
        client.ensure_token().await?;
        let (endpoint, channel) = client.channel();
        let token = channel.token();
        let (requests, receiver) = mpsc::channel(1);
        let create = pb::WatchRequest {
            request_union: Some(pb::watch_request::RequestUnion::CreateRequest(
                pb::WatchCreateRequest {
                    key: prefix.to_vec(),
                    range_end: keys::prefix_end(prefix),
                    start_revision,
                    ..pb::WatchCreateRequest::default()
                },
            )),
        };
        // etcd sends a stream's headers only with its first answer, so the
        // create goes before the call is awaited.
        requests
            .send(create)
            .await
            .expect("the receiver lives until the call below drops it");
        match Client::watch(channel)
            .watch(ReceiverStream::new(receiver))
            .await
        {
            Ok(answers) => {
                let mut watch = PrefixWatch {
                    _requests: requests,
                    answers: answers.into_inner(),
                    endpoint,
                    client: client.clone(),
                    token,
                };
                watch.wait_created().await?;
                Ok(watch)
            }
            Err(status) => {
                // A stream refused for its token gets a new one next
                // time, on the same member.
                if !client.watch_refused(&token, status.message()) && is_unavailable(&status) {
                    client.rotate(endpoint);
                }
                Err(Error::Status(status))
            }
        }
    }

    /// Waits for the server's answer that the watch exists: a read made
    /// after it sees everything the watch does not (a server may send the
    /// stream's headers before it handles the create).
    async fn wait_created(&mut self) -> Result<()> {
        loop {
            match self.answers.message().await {
                Ok(Some(answer)) if answer.created && !answer.canceled => return Ok(()),
                Ok(Some(answer)) if answer.canceled || answer.compact_revision > 0 => {
                    self.client
                        .watch_refused(&self.token, &answer.cancel_reason);
                    return Err(Error::WatchEnded("the server refused the watch"));
                }
                Ok(Some(_)) => continue,
                Ok(None) | Err(_) => {
                    self.client.rotate(self.endpoint);
                    return Err(Error::WatchEnded("the watch stream broke"));
                }
            }
        }
    }

    /// The next events if they have already arrived, without waiting:
    /// `None` when nothing is here yet.
    ///
    /// Not `timeout(Duration::ZERO, next())`: a pending timer fires only at
    /// the timer wheel's next millisecond, so that form waits up to 1 ms
    /// whenever the stream is empty, which is exactly when it is called.
    pub(crate) async fn next_if_here(&mut self) -> Option<Result<Vec<mvccpb::Event>>> {
        tokio::select! {
            biased;
            events = self.next() => Some(events),
            () = std::future::ready(()) => None,
        }
    }

    /// The next events, in revision order. Fails once the watch is over:
    /// read the range again and open a new one.
    pub(crate) async fn next(&mut self) -> Result<Vec<mvccpb::Event>> {
        loop {
            match self.answers.message().await {
                Ok(Some(answer)) => {
                    if answer.compact_revision > 0 {
                        return Err(Error::WatchEnded("the start revision was compacted"));
                    }
                    if answer.canceled {
                        return Err(Error::WatchEnded("the server cancelled the watch"));
                    }
                    if !answer.events.is_empty() {
                        return Ok(answer.events);
                    }
                }
                Ok(None) | Err(_) => {
                    self.client.rotate(self.endpoint);
                    return Err(Error::WatchEnded("the watch stream broke"));
                }
            }
        }
    }
}

/// Every key under `prefix` at one revision, read a page at a time;
/// returns the keys and that revision.
pub(crate) async fn list(client: &Client, prefix: &[u8]) -> Result<(Vec<mvccpb::KeyValue>, i64)> {
    read_pages(client, prefix, true).await
}

/// Every key under `prefix`, a page at a time, each page read at the
/// latest revision (so the whole read is not one snapshot: pair it with a
/// watch opened before it). No old revision must outlive the read.
pub(crate) async fn list_latest(client: &Client, prefix: &[u8]) -> Result<Vec<mvccpb::KeyValue>> {
    Ok(read_pages(client, prefix, false).await?.0)
}

/// Reads `prefix` a page at a time; with `one_revision`, every page at
/// the first page's revision. Returns the keys and that first revision.
async fn read_pages(
    client: &Client,
    prefix: &[u8],
    one_revision: bool,
) -> Result<(Vec<mvccpb::KeyValue>, i64)> {
    let end = keys::prefix_end(prefix);
    let mut from = prefix.to_vec();
    let mut revision = 0;
    let mut all = Vec::new();
    loop {
        let response = client
            .range(pb::RangeRequest {
                key: from.clone(),
                range_end: end.clone(),
                limit: LIST_PAGE_KEYS,
                revision: if one_revision { revision } else { 0 },
                ..pb::RangeRequest::default()
            })
            .await?;
        if revision == 0 {
            revision = response
                .header
                .as_ref()
                .map(|h| h.revision)
                .ok_or(Error::Malformed("a range answer without a header"))?;
        }
        let more = response.more;
        let Some(last) = response.kvs.last() else {
            return Ok((all, revision));
        };
        from = last.key.clone();
        from.push(0);
        all.extend(response.kvs);
        if !more {
            return Ok((all, revision));
        }
    }
}
