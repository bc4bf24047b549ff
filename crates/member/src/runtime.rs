//! [`Runtime`]: how the runtime around the driver carries out its plans,
//! faithfully or broken on purpose. The broken ones exist to show that the
//! checks catch them: the simulator's (`bellwether sim --workload etcd`)
//! and `bellwether verify`'s against real processes. A server runs one
//! only when told to with a hidden, unsafe flag.

/// How the runtime around the driver behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    /// As planned: nothing answered before it is durable, nothing applied
    /// before it commits.
    #[default]
    Faithful,
    /// Goes on with a batch without waiting for its fsync: clients are
    /// answered, and acknowledgements sent, while the write may still be
    /// lost.
    AnswersBeforeFsync,
    /// Applies each entry it writes at once, before it commits.
    AppliesBeforeCommit,
    /// Starts without auditing the log against the promise record: a
    /// member that lost its log comes back as a blank voter.
    IgnoresPromises,
}

impl Runtime {
    /// Every runtime with its name, as flags spell it.
    pub const NAMES: [(Runtime, &'static str); 4] = [
        (Runtime::Faithful, "faithful"),
        (Runtime::AnswersBeforeFsync, "answers-before-fsync"),
        (Runtime::AppliesBeforeCommit, "applies-before-commit"),
        (Runtime::IgnoresPromises, "ignores-promises"),
    ];

    /// The runtime named `name`, if there is one.
    pub fn named(name: &str) -> Option<Runtime> {
        Runtime::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(runtime, _)| *runtime)
    }

    /// Its name, as flags spell it.
    pub fn name(self) -> &'static str {
        Runtime::NAMES
            .iter()
            .find(|(runtime, _)| *runtime == self)
            .map(|(_, name)| *name)
            .expect("every runtime is named")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_is_found_by_its_name() {
        for (runtime, name) in Runtime::NAMES {
            assert_eq!(Runtime::named(name), Some(runtime));
            assert_eq!(runtime.name(), name);
        }
        assert_eq!(Runtime::named("fast"), None);
    }
}
