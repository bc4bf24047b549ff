//! A TCP relay that delays what it carries: a slow network between local
//! member processes, for `bench failover --pauses --delay-ms`.
//!
//! netem would be the usual tool, but this machine's kernel is built
//! without it (`CONFIG_NET_SCH_NETEM is not set`), so members that should
//! see a delayed network dial each other through one of these instead.
//! Each chunk read from one side is held for the delay plus a jitter drawn
//! uniformly from [-jitter, +jitter], then written to the other side, in
//! the order it was read (a TCP stream cannot reorder; a chunk that drew a
//! shorter delay than the one before it leaves right after that one).
//! Both directions are delayed, so a request and its answer each pay one
//! delay. The queue between reader and writer is bounded: a writer that
//! falls behind stops the reader, and TCP's flow control does the rest.

use anyhow::{Context, Result};
use bellwether_core::rng::Rng;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Chunks in flight per direction of one connection.
const CHUNKS_IN_FLIGHT: usize = 256;
/// Largest chunk read at once.
const CHUNK_BYTES: usize = 64 * 1024;

/// How much a relay delays each chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delay {
    /// The mean one-way delay.
    pub mean: Duration,
    /// Each chunk's delay is `mean` plus or minus up to this much.
    pub jitter: Duration,
}

impl Delay {
    /// A delay drawn for one chunk.
    fn draw(&self, rng: &mut Rng) -> Duration {
        let jitter_us = self.jitter.as_micros() as u64;
        let offset_us = rng.range(0, 2 * jitter_us + 1);
        (self.mean + Duration::from_micros(offset_us)).saturating_sub(self.jitter)
    }
}

/// One listening relay to one target; stops accepting and cuts every
/// connection it carries when dropped.
pub struct DelayRelay {
    /// Where dialers connect.
    pub listen: SocketAddr,
    stopping: Arc<AtomicBool>,
    /// Both ends of every carried connection, to shut down on drop.
    streams: Arc<Mutex<Vec<TcpStream>>>,
}

impl DelayRelay {
    /// Listens on `listen` and carries every connection to `target`.
    pub fn start(listen: SocketAddr, target: SocketAddr, delay: Delay, seed: u64) -> Result<Self> {
        assert!(delay.jitter <= delay.mean, "a delay is never negative");
        let listener =
            TcpListener::bind(listen).with_context(|| format!("cannot listen on {listen}"))?;
        let stopping = Arc::new(AtomicBool::new(false));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let relay = DelayRelay {
            listen: listener.local_addr()?,
            stopping: stopping.clone(),
            streams: streams.clone(),
        };
        std::thread::spawn(move || {
            let mut rng = Rng::new(seed);
            for incoming in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(dialer) = incoming else { continue };
                // The target may be down (a stopped or restarting member):
                // the dialer sees its connection close, as it would.
                let Ok(upstream) = TcpStream::connect(target) else {
                    continue;
                };
                let _ = dialer.set_nodelay(true);
                let _ = upstream.set_nodelay(true);
                let (Ok(d), Ok(u)) = (dialer.try_clone(), upstream.try_clone()) else {
                    continue;
                };
                streams.lock().expect("not poisoned").extend([d, u]);
                let seeds = (rng.next_u64(), rng.next_u64());
                carry(&dialer, &upstream, delay, seeds.0);
                carry(&upstream, &dialer, delay, seeds.1);
            }
        });
        Ok(relay)
    }
}

impl Drop for DelayRelay {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees `stopping`.
        let _ = TcpStream::connect_timeout(&self.listen, Duration::from_millis(100));
        for stream in self.streams.lock().expect("not poisoned").drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
    }
}

/// Starts the reader and writer threads of one direction, `from` to `to`.
fn carry(from: &TcpStream, to: &TcpStream, delay: Delay, seed: u64) {
    let (Ok(mut from), Ok(to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (chunks, queued) = sync_channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
    std::thread::spawn(move || {
        let mut rng = Rng::new(seed);
        let mut buffer = vec![0u8; CHUNK_BYTES];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let due = Instant::now() + delay.draw(&mut rng);
                    if chunks.send((due, buffer[..n].to_vec())).is_err() {
                        break;
                    }
                }
            }
        }
        // Dropping `chunks` lets the writer finish what is queued, then
        // pass the end of the stream on.
    });
    std::thread::spawn(move || write_when_due(queued, to));
}

/// Writes each queued chunk once its time has come, then half-closes.
fn write_when_due(queued: Receiver<(Instant, Vec<u8>)>, mut to: TcpStream) {
    for (due, chunk) in queued {
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        if to.write_all(&chunk).is_err() {
            let _ = to.shutdown(Shutdown::Both);
            return;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relay_delays_each_way_by_at_least_the_mean_less_the_jitter_and_keeps_order() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let target = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut socket, _) = echo.accept().unwrap();
            let mut buffer = [0u8; 1024];
            loop {
                match socket.read(&mut buffer) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => socket.write_all(&buffer[..n]).unwrap(),
                }
            }
        });
        let delay = Delay {
            mean: Duration::from_millis(20),
            jitter: Duration::from_millis(10),
        };
        let relay = DelayRelay::start("127.0.0.1:0".parse().unwrap(), target, delay, 7).unwrap();
        let mut client = TcpStream::connect(relay.listen).unwrap();
        client.set_nodelay(true).unwrap();
        let mut received = Vec::new();
        for round in 0u8..5 {
            let sent = Instant::now();
            client.write_all(&[round, round + 100]).unwrap();
            let mut answer = [0u8; 2];
            client.read_exact(&mut answer).unwrap();
            let round_trip = sent.elapsed();
            // Two one-way delays of at least mean - jitter each.
            assert!(
                round_trip >= 2 * (delay.mean - delay.jitter),
                "round trip {round_trip:?}"
            );
            received.extend(answer);
        }
        let expected: Vec<u8> = (0u8..5).flat_map(|r| [r, r + 100]).collect();
        assert_eq!(received, expected, "bytes in order, none lost");
        drop(relay);
        // The relay cut the connection.
        let mut rest = Vec::new();
        let _ = client.read_to_end(&mut rest);
        assert!(rest.is_empty());
    }

    #[test]
    fn drawn_delays_stay_within_the_jitter() {
        let delay = Delay {
            mean: Duration::from_millis(20),
            jitter: Duration::from_millis(10),
        };
        let mut rng = Rng::new(1);
        let drawn: Vec<Duration> = (0..1000).map(|_| delay.draw(&mut rng)).collect();
        assert!(drawn.iter().all(|d| *d >= Duration::from_millis(10)));
        assert!(drawn.iter().all(|d| *d <= Duration::from_millis(30)));
        // Spread over the range, not stuck at one end.
        assert!(drawn.iter().any(|d| *d < Duration::from_millis(15)));
        assert!(drawn.iter().any(|d| *d > Duration::from_millis(25)));
    }
}
