//! A bounded channel's receiving end as a `Stream`, the shape tonic wants
//! for server streams (keep-alive, watch, observe). The sender side is
//! bounded, so a client that stops reading slows its producer instead of
//! growing the server's memory.

use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// Items from a bounded channel, ending when every sender is gone.
#[derive(Debug)]
pub struct ChannelStream<T> {
    receiver: mpsc::Receiver<T>,
}

impl<T> ChannelStream<T> {
    /// Streams what `receiver` gets.
    pub fn new(receiver: mpsc::Receiver<T>) -> Self {
        ChannelStream { receiver }
    }
}

impl<T> tonic::codegen::tokio_stream::Stream for ChannelStream<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        self.receiver.poll_recv(cx)
    }
}
