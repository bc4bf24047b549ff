//! Bully's wire form: a kind byte, then the epoch as a little-endian `u64`.
//! Every message is nine bytes.

use bellwether_core::bully::BullyMessage;
use bellwether_storage::codec::{put_u64, put_u8, Malformed, Reader};

const ELECTION: u8 = 1;
const ANSWER: u8 = 2;
const COORDINATOR: u8 = 3;
const HEARTBEAT: u8 = 4;

impl crate::WireMessage for BullyMessage {
    fn kind(&self) -> &'static str {
        bellwether_core::Message::kind(self)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let kind = match self {
            BullyMessage::Election { .. } => ELECTION,
            BullyMessage::Answer { .. } => ANSWER,
            BullyMessage::Coordinator { .. } => COORDINATOR,
            BullyMessage::Heartbeat { .. } => HEARTBEAT,
        };
        put_u8(out, kind);
        put_u64(out, self.epoch());
    }

    fn decode(bytes: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(bytes);
        let kind = r.u8("message kind")?;
        let epoch = r.u64("epoch")?;
        let message = match kind {
            ELECTION => BullyMessage::Election { epoch },
            ANSWER => BullyMessage::Answer { epoch },
            COORDINATOR => BullyMessage::Coordinator { epoch },
            HEARTBEAT => BullyMessage::Heartbeat { epoch },
            other => return Err(Malformed(format!("unknown bully message kind {other}"))),
        };
        r.finish("bully message")?;
        Ok(message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::WireMessage;

    #[test]
    fn every_message_round_trips_and_garbage_is_refused() {
        let messages = [
            BullyMessage::Election { epoch: 1 },
            BullyMessage::Answer { epoch: 2 },
            BullyMessage::Coordinator { epoch: u64::MAX },
            BullyMessage::Heartbeat { epoch: 0 },
        ];
        for message in messages {
            let mut bytes = Vec::new();
            message.encode(&mut bytes);
            assert_eq!(BullyMessage::decode(&bytes).unwrap(), message);
            assert!(BullyMessage::decode(&bytes[..bytes.len() - 1]).is_err());
            bytes.push(0);
            assert!(BullyMessage::decode(&bytes).is_err(), "trailing byte");
        }
        assert!(BullyMessage::decode(&[]).is_err());
        assert!(BullyMessage::decode(&[9, 0, 0, 0, 0, 0, 0, 0, 0]).is_err());
    }
}
