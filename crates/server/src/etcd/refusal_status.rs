//! A refusal of the state machine (`bellwether_etcd::Refusal`) as the gRPC
//! status a client gets: the codes are gRPC's numbers, so nothing is
//! mapped, only carried over.

use bellwether_etcd::{Code, Refusal};
use tonic::Status;

/// tonic's code for `code`.
pub fn grpc_code(code: Code) -> tonic::Code {
    tonic::Code::from_i32(i32::from(code.number()))
}

/// The status a client gets for `refusal`.
pub fn refusal_status(refusal: Refusal) -> Status {
    Status::new(grpc_code(refusal.code), refusal.message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_keeps_its_number_in_tonic() {
        for code in Code::ALL {
            assert_eq!(grpc_code(code) as i32, i32::from(code.number()));
        }
        let status = refusal_status(Refusal::new(Code::OutOfRange, "compacted"));
        assert_eq!(
            (status.code(), status.message()),
            (tonic::Code::OutOfRange, "compacted")
        );
    }
}
