//! Why an elector cannot start or had to stop; each message says what to do.

/// An elector's error.
#[derive(Debug, thiserror::Error)]
pub enum ElectorError {
    /// The settings are wrong (ids, peers, timeouts).
    #[error("elector settings: {0}")]
    Settings(String),
    /// The data directory cannot be created, locked or written.
    #[error("data dir {path}: {error}; choose a writable data dir")]
    DataDir {
        /// The directory.
        path: String,
        /// What failed.
        error: String,
    },
    /// Another elector holds the data directory's lock.
    #[error("data dir {path} is in use by another elector; each node needs its own")]
    DataDirInUse {
        /// The directory.
        path: String,
    },
    /// The data directory belongs to another node, group or algorithm.
    #[error("data dir {path} holds the state of a {found}, but this is a {wanted}; use its own data dir")]
    ForeignDataDir {
        /// The directory.
        path: String,
        /// Whose state is there.
        found: String,
        /// Who is starting.
        wanted: String,
    },
    /// The state file is damaged: the elector will not guess its term.
    #[error("state file {path} cannot be trusted: {reason}; restore it from a backup, or remove the data dir only if this node may safely start over from term 0 (no other node may have seen its tokens)")]
    CorruptState {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The peer listener could not be opened.
    #[error("cannot listen on {address}: {error}")]
    Listen {
        /// The address.
        address: String,
        /// What failed.
        error: String,
    },
    /// Persisting the term or epoch failed: the elector stops rather than
    /// act on a state it could not make durable.
    #[error("could not persist the elector's state in {path}: {error}; the elector stopped")]
    Persist {
        /// The directory.
        path: String,
        /// What failed.
        error: String,
    },
}
