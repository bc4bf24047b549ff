//! The status codes an answer carries: gRPC's, with gRPC's numbers, so the
//! server hands them to tonic unchanged and the log's answers mean the same
//! to every member. Kept here, not taken from tonic, so that the state
//! machine needs no RPC library.

/// A gRPC status code (the numbers are gRPC's and never change).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Code {
    /// Not an error.
    Ok = 0,
    /// The operation was cancelled.
    Cancelled = 1,
    /// An error of no other kind.
    Unknown = 2,
    /// The request is invalid whatever the state.
    InvalidArgument = 3,
    /// The deadline passed first.
    DeadlineExceeded = 4,
    /// A named thing (a lease, a member) does not exist.
    NotFound = 5,
    /// What the request creates exists already.
    AlreadyExists = 6,
    /// The caller may not do this.
    PermissionDenied = 7,
    /// A limit was reached (leases, space).
    ResourceExhausted = 8,
    /// The state does not allow it now.
    FailedPrecondition = 9,
    /// Aborted, as by a conflict.
    Aborted = 10,
    /// A revision out of the store's range.
    OutOfRange = 11,
    /// Not implemented.
    Unimplemented = 12,
    /// An invariant broke.
    Internal = 13,
    /// Not available now; retry.
    Unavailable = 14,
    /// Data was lost or corrupted.
    DataLoss = 15,
    /// The caller is not authenticated.
    Unauthenticated = 16,
}

impl Code {
    /// Every code, in number order.
    pub const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code numbered `number`; `Unknown` for a number gRPC does not
    /// define, as gRPC reads it.
    pub fn from_number(number: u8) -> Code {
        Code::ALL
            .get(usize::from(number))
            .copied()
            .unwrap_or(Code::Unknown)
    }

    /// gRPC's number for it.
    pub fn number(self) -> u8 {
        self as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_unknown_numbers_read_as_unknown() {
        for (number, code) in Code::ALL.iter().enumerate() {
            assert_eq!(usize::from(code.number()), number);
            assert_eq!(Code::from_number(code.number()), *code);
        }
        assert_eq!(Code::from_number(17), Code::Unknown);
        assert_eq!(Code::from_number(255), Code::Unknown);
    }
}
