//! Which of a session's queued packets go to the log together.
//!
//! A ZooKeeper client keeps several requests in flight on its session; the
//! connection reads them ahead into a bounded queue. When the packet at the
//! front is a write, every write queued right behind it joins it in one
//! [`bellwether_zookeeper::ZkBatch`] (see that module for why order needs
//! one entry), up to [`BATCH_WRITES_MAX`] writes and [`BATCH_BYTES_MAX`]
//! bytes. The first packet that cannot join (a read, a ping, a session's
//! close, a write past the bounds) is held back and handled next, so the
//! session's requests are still answered in the order they came.

use super::packets::PacketError;
use bellwether_zookeeper::codes::op;
use bellwether_zookeeper::Request;
use tokio::sync::mpsc;

/// Most writes in one batch.
pub const BATCH_WRITES_MAX: usize = 64;
/// Most bytes of packets in one batch; a batch's first write may be larger
/// on its own (up to the packet bound), as a write alone may.
pub const BATCH_BYTES_MAX: usize = 1024 * 1024;

/// A packet read from the client, or why reading failed.
pub type Packet = Result<Vec<u8>, PacketError>;

/// Whether `packet` may be logged in a batch: a well-formed write other
/// than the session's close (which ends the connection, so it is always
/// last and alone) and a bare `check` (refused outside a multi).
pub fn batchable(packet: &[u8]) -> bool {
    let Some(code) = packet
        .get(4..8)
        .map(|b| i32::from_be_bytes(b.try_into().expect("four bytes")))
    else {
        return false;
    };
    if code == op::CLOSE_SESSION || code == op::PING || code == op::AUTH {
        return false;
    }
    matches!(
        Request::decode(code, &packet[8..]),
        Ok(request) if request.is_write() && !matches!(request, Request::Check { .. })
    )
}

/// `first`, a batchable write, and the batchable writes queued right
/// behind it within the bounds. The first queued packet that does not
/// join is put in `held`, to be handled next.
pub fn gather(
    first: Vec<u8>,
    queued: &mut mpsc::Receiver<Packet>,
    held: &mut Option<Packet>,
) -> Vec<Vec<u8>> {
    assert!(held.is_none(), "a held packet is handled before the next");
    let mut bytes = first.len();
    let mut batch = vec![first];
    while batch.len() < BATCH_WRITES_MAX {
        match queued.try_recv() {
            Ok(Ok(next)) if bytes + next.len() <= BATCH_BYTES_MAX && batchable(&next) => {
                bytes += next.len();
                batch.push(next);
            }
            Ok(next) => {
                *held = Some(next);
                break;
            }
            Err(_) => break,
        }
    }
    batch
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_zookeeper::jute::JuteWriter;

    fn packet(xid: i32, code: i32, record: &[u8]) -> Vec<u8> {
        let mut w = JuteWriter::new();
        w.int(xid).int(code).raw(record);
        w.into_bytes()
    }

    fn set_data(xid: i32, path: &str, data_bytes: usize) -> Vec<u8> {
        let mut w = JuteWriter::new();
        w.string(path).buffer(&vec![b'x'; data_bytes]).int(-1);
        packet(xid, op::SET_DATA, &w.into_bytes())
    }

    fn get_data(xid: i32, path: &str) -> Vec<u8> {
        let mut w = JuteWriter::new();
        w.string(path).bool(false);
        packet(xid, op::GET_DATA, &w.into_bytes())
    }

    #[test]
    fn only_well_formed_writes_other_than_close_and_check_are_batchable() {
        assert!(batchable(&set_data(1, "/a", 3)));
        assert!(!batchable(&get_data(1, "/a")));
        assert!(!batchable(&packet(1, op::CLOSE_SESSION, &[])));
        assert!(!batchable(&packet(-2, op::PING, &[])));
        assert!(!batchable(&packet(1, op::SET_DATA, &[0, 0])), "malformed");
        assert!(!batchable(&[0, 0, 0]), "no header");
        let mut check = JuteWriter::new();
        check.string("/a").int(1);
        assert!(!batchable(&packet(1, op::CHECK, &check.into_bytes())));
    }

    #[test]
    fn queued_writes_join_in_order_and_the_first_other_packet_is_held() {
        let (send, mut queued) = mpsc::channel(16);
        for xid in 2..=4 {
            send.try_send(Ok(set_data(xid, "/a", 1))).unwrap();
        }
        send.try_send(Ok(get_data(5, "/a"))).unwrap();
        send.try_send(Ok(set_data(6, "/a", 1))).unwrap();
        let mut held = None;
        let batch = gather(set_data(1, "/a", 1), &mut queued, &mut held);
        let xids: Vec<i32> = batch
            .iter()
            .map(|p| i32::from_be_bytes(p[..4].try_into().unwrap()))
            .collect();
        assert_eq!(xids, [1, 2, 3, 4]);
        assert_eq!(held.unwrap().unwrap(), get_data(5, "/a"));
        assert_eq!(queued.try_recv().unwrap().unwrap(), set_data(6, "/a", 1));
    }

    #[test]
    fn a_batch_stops_at_its_bounds() {
        let (send, mut queued) = mpsc::channel(BATCH_WRITES_MAX + 8);
        for xid in 0..BATCH_WRITES_MAX as i32 + 4 {
            send.try_send(Ok(set_data(xid + 2, "/a", 1))).unwrap();
        }
        let mut held = None;
        let batch = gather(set_data(1, "/a", 1), &mut queued, &mut held);
        assert_eq!(batch.len(), BATCH_WRITES_MAX);
        assert!(held.is_none(), "the rest stays queued");

        let big = BATCH_BYTES_MAX / 2;
        let (send, mut queued) = mpsc::channel(4);
        send.try_send(Ok(set_data(2, "/a", big))).unwrap();
        send.try_send(Ok(set_data(3, "/a", big))).unwrap();
        let batch = gather(set_data(1, "/a", 16), &mut queued, &mut held);
        assert_eq!(batch.len(), 2, "a third half-MiB write is over the bytes");
        assert_eq!(held.unwrap().unwrap(), set_data(3, "/a", big));
    }
}
