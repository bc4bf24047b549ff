//! The process's open-files limit: a member holds thousands of client
//! connections, and `bench abuse` opens thousands of its own.

/// Raises the soft open-files limit to the hard one.
pub fn raise_soft_open_files_limit() -> rustix::io::Result<()> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current == limit.maximum {
        return Ok(());
    }
    let raised = Rlimit {
        current: limit.maximum,
        maximum: limit.maximum,
    };
    setrlimit(Resource::Nofile, raised)
}
