//! The checks of the ZooKeeper workload, pure functions of what the
//! contenders recorded and of one linearizable read of the register once
//! the cluster settled:
//!
//! - **linearizable**: the register's reads (sync, then getData) and
//!   writes (setData expecting a version, that is, a compare-and-set on
//!   the value that version holds, since each version has one value) are
//!   checked with the simulator's checker, the final read included;
//! - **no two holders at once**: the election node's sequence number is
//!   the fencing token. A holder leads only once every lower node is gone,
//!   and gone nodes never come back, so a write under token t cannot land
//!   after one under a higher token: along the register's version chain
//!   the tokens of acknowledged writes never go down, and no write under a
//!   lower token is sent after one under a higher token was acknowledged;
//! - **no lost acknowledged write**: every acknowledged write has a
//!   version of its own, one above the version it expected, at most the
//!   final version; each version shows one value, whoever saw it; and the
//!   final version is at most the writes that could have taken effect.

use super::zookeeper_history::{AckedWrite, Observation, ZkHistory};
use bellwether_sim::linearizability::{
    check, CheckOptions, CheckResult, ClientId, Command, Key, Operation, Response,
};
use std::collections::BTreeMap;

/// The register's key in the linearizability history.
pub const REGISTER_KEY: Key = Key(0);
/// The client id of the final read.
const FINAL_READER: ClientId = ClientId(u64::MAX);

/// The register as one linearizable read showed it after the run.
#[derive(Clone, Copy, Debug)]
pub struct FinalRead {
    /// Its version and value.
    pub observation: Observation,
    /// When the read was sent, in µs from the run's origin.
    pub invoke_us: u64,
    /// When its answer came.
    pub complete_us: u64,
}

/// Every anomaly in `history` and `last`, first found first.
pub fn anomalies(history: &ZkHistory, last: &FinalRead) -> Vec<String> {
    let mut found = Vec::new();
    found.extend(linearizability(&history.operations, last));
    found.extend(chain_order(&history.writes));
    found.extend(real_time_order(&history.writes));
    found.extend(one_value_per_version(history, last));
    found.extend(lost_writes(history, last));
    found.extend(
        history
            .garbage
            .iter()
            .map(|data| format!("the register held {data}, which no contender wrote")),
    );
    found
}

/// The register's history with the final read, checked for
/// linearizability.
fn linearizability(operations: &[Operation], last: &FinalRead) -> Option<String> {
    let mut history = operations.to_vec();
    history.push(Operation::ok(
        FINAL_READER,
        Command::Get { key: REGISTER_KEY },
        last.invoke_us,
        last.complete_us,
        Response::Get(last.observation.value),
    ));
    match check(&history, &CheckOptions::default()) {
        CheckResult::Linearizable => None,
        CheckResult::NotLinearizable { explanation, .. } => {
            Some(format!("the register is not linearizable: {explanation}"))
        }
        CheckResult::Unknown { reason, .. } => Some(format!(
            "the checker could not decide the register: {reason:?}"
        )),
    }
}

/// Along the version chain: one write per version, each one above the
/// version it expected, and tokens that never go down.
fn chain_order(writes: &[AckedWrite]) -> Option<String> {
    if let Some(w) = writes.iter().find(|w| w.version != w.expected_version + 1) {
        return Some(format!(
            "client {}'s write of {} expected version {} but was acknowledged at version {}",
            w.client, w.value, w.expected_version, w.version
        ));
    }
    let mut chain = writes.to_vec();
    chain.sort_by_key(|w| (w.version, w.invoke_us));
    chain.windows(2).find_map(|pair| {
        let (before, after) = (pair[0], pair[1]);
        if before.version == after.version {
            return Some(format!(
                "two writes were acknowledged at version {}: client {}'s of {} and client {}'s of {}",
                after.version, before.client, before.value, after.client, after.value
            ));
        }
        (after.token < before.token).then(|| {
            format!(
                "two holders at once: a fenced write landed out of token order: client {}'s (token {}) at version {} after client {}'s (token {}) at version {}",
                after.client, after.token, after.version, before.client, before.token, before.version
            )
        })
    })
}

/// In real time: no write under a lower token is sent after a write under
/// a higher token was acknowledged.
fn real_time_order(writes: &[AckedWrite]) -> Option<String> {
    let mut by_completion = writes.to_vec();
    by_completion.sort_by_key(|w| w.complete_us);
    let mut by_invoke = writes.to_vec();
    by_invoke.sort_by_key(|w| w.invoke_us);
    let mut done = by_completion.iter().peekable();
    let mut highest: Option<&AckedWrite> = None;
    for write in &by_invoke {
        while let Some(earlier) = done.next_if(|e| e.complete_us < write.invoke_us) {
            if highest.is_none_or(|h| earlier.token > h.token) {
                highest = Some(earlier);
            }
        }
        if let Some(h) = highest.filter(|h| h.token > write.token) {
            return Some(format!(
                "two holders at once: client {} wrote under token {} at {} µs, after client {}'s write under token {} was acknowledged at {} µs",
                write.client, write.token, write.invoke_us, h.client, h.token, h.complete_us
            ));
        }
    }
    None
}

/// Every version shows one value to every reader and writer; version 0 is
/// the empty register.
fn one_value_per_version(history: &ZkHistory, last: &FinalRead) -> Option<String> {
    let written = history.writes.iter().map(|w| Observation {
        version: w.version,
        value: Some(bellwether_sim::linearizability::Value(w.value)),
    });
    let created = Observation {
        version: 0,
        value: None,
    };
    let mut seen: BTreeMap<i32, Observation> = BTreeMap::new();
    let all = std::iter::once(created)
        .chain(written)
        .chain(history.observations.iter().copied())
        .chain(std::iter::once(last.observation));
    for observation in all {
        let first = *seen.entry(observation.version).or_insert(observation);
        if first.value != observation.value {
            return Some(format!(
                "version {} of the register showed two values: {:?} and {:?}",
                observation.version, first.value, observation.value
            ));
        }
    }
    None
}

/// No acknowledged write beyond the final version, and no more versions
/// than writes that could have made them.
fn lost_writes(history: &ZkHistory, last: &FinalRead) -> Option<String> {
    let end = last.observation.version;
    if let Some(lost) = history.writes.iter().find(|w| w.version > end) {
        return Some(format!(
            "an acknowledged write was lost: client {}'s write of {} at version {}, but the register ends at version {end}",
            lost.client, lost.value, lost.version
        ));
    }
    let could = history.writes.len() + history.unanswered_writes();
    (end as usize > could).then(|| {
        format!(
            "the register ends at version {end}, but only {} writes were acknowledged and {} unanswered",
            history.writes.len(),
            history.unanswered_writes()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bellwether_sim::linearizability::Value;

    /// Client `client`'s acknowledged write of `value` under `token`, from
    /// version `version - 1` to `version`, sent at `at` ms.
    fn write(client: u64, token: i64, value: u64, version: i32, at: u64) -> AckedWrite {
        AckedWrite {
            client,
            token,
            value,
            expected_version: version - 1,
            version,
            invoke_us: at * 1_000,
            complete_us: at * 1_000 + 500,
        }
    }

    /// A history of `writes`, each also in the register's operations.
    fn history_of(writes: &[AckedWrite]) -> ZkHistory {
        let mut history = ZkHistory::default();
        let mut value_at: BTreeMap<i32, Value> = BTreeMap::new();
        for w in writes {
            value_at.insert(w.version, Value(w.value));
        }
        for w in writes {
            let expected = value_at.get(&w.expected_version).copied();
            let command = Command::CompareAndSet {
                key: REGISTER_KEY,
                expected,
                new: Value(w.value),
            };
            let response = Response::CompareAndSet(true);
            let operation = Operation::ok(
                ClientId(w.client),
                command,
                w.invoke_us,
                w.complete_us,
                response,
            );
            history.operations.push(operation);
        }
        history.writes = writes.to_vec();
        history
    }

    /// The register read at `at` ms as `value` at `version`.
    fn final_read(version: i32, value: Option<u64>, at: u64) -> FinalRead {
        FinalRead {
            observation: Observation {
                version,
                value: value.map(Value),
            },
            invoke_us: at * 1_000,
            complete_us: at * 1_000 + 500,
        }
    }

    #[test]
    fn holders_that_follow_each_other_in_token_order_pass() {
        let writes = [
            write(1, 3, 11, 1, 0),
            write(1, 3, 12, 2, 1),
            write(2, 5, 21, 3, 2),
        ];
        let history = history_of(&writes);
        assert_eq!(
            anomalies(&history, &final_read(3, Some(21), 10)),
            Vec::<String>::new()
        );
    }

    #[test]
    fn a_write_under_an_older_token_after_a_newer_one_is_two_holders_at_once() {
        // Client 1 held token 3, hung, and wrote after client 2 (token 5).
        let writes = [
            write(1, 3, 11, 1, 0),
            write(2, 5, 21, 2, 1),
            write(1, 3, 12, 3, 2),
        ];
        let history = history_of(&writes);
        let found = anomalies(&history, &final_read(3, Some(12), 10));
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("landed out of token order"), "{found:?}");
        assert!(
            found[1].contains("client 1 wrote under token 3"),
            "{found:?}"
        );
    }

    #[test]
    fn overlapping_writes_of_two_holders_are_caught_without_versions() {
        // The chain looks fine, but client 1's later write was sent after
        // client 2's (higher token) was acknowledged.
        let mut late = write(1, 3, 12, 2, 0);
        late.invoke_us = 5_000;
        late.complete_us = 5_500;
        let writes = [write(2, 5, 21, 3, 1), late];
        let found = real_time_order(&writes);
        assert!(found.is_some_and(|f| f.contains("two holders at once")));
        let in_order = [write(1, 3, 12, 2, 0), write(2, 5, 21, 3, 1)];
        assert_eq!(real_time_order(&in_order), None);
    }

    #[test]
    fn an_acknowledged_write_missing_at_the_end_is_lost() {
        let writes = [write(1, 3, 11, 1, 0), write(1, 3, 12, 2, 1)];
        let history = history_of(&writes);
        let found = anomalies(&history, &final_read(1, Some(11), 10));
        assert!(
            found
                .iter()
                .any(|f| f.contains("an acknowledged write was lost")),
            "{found:?}"
        );
        assert!(
            found.iter().any(|f| f.contains("not linearizable")),
            "{found:?}"
        );
    }

    #[test]
    fn versions_nobody_wrote_and_two_values_at_one_version_are_caught() {
        let writes = [write(1, 3, 11, 1, 0)];
        let mut history = history_of(&writes);
        history.observations.push(Observation {
            version: 1,
            value: Some(Value(99)),
        });
        let found = anomalies(&history, &final_read(2, Some(11), 10));
        assert!(
            found.iter().any(|f| f.contains("showed two values")),
            "{found:?}"
        );
        assert!(
            found
                .iter()
                .any(|f| f.contains("ends at version 2, but only 1")),
            "{found:?}"
        );
    }

    #[test]
    fn a_stale_read_is_not_linearizable() {
        let writes = [write(1, 3, 11, 1, 0)];
        let mut history = history_of(&writes);
        history.operations.push(Operation::ok(
            ClientId(2),
            Command::Get { key: REGISTER_KEY },
            2_000,
            2_500,
            Response::Get(None),
        ));
        let found = anomalies(&history, &final_read(1, Some(11), 10));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("not linearizable"), "{found:?}");
    }
}
