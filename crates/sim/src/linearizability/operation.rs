//! One client operation as recorded in a history: who sent what, when, and
//! what came back.
//!
//! A client that times out does not know whether its request took effect, so
//! the record says so ([`Outcome::Indeterminate`]) instead of guessing. The
//! checker treats such an operation as still running forever (Herlihy and
//! Wing's pending invocation, completed or dropped as needed; Herlihy & Wing
//! 1990, section 3.1).

use super::command::{Command, Key, Response};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The simulated client that issued an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ClientId(pub u64);

impl fmt::Display for ClientId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}", self.0)
    }
}

/// How an operation ended, as far as its client knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The client got an answer.
    Ok {
        /// The answer.
        response: Response,
        /// Virtual time at which the answer arrived; never before the invoke.
        complete_us: u64,
    },
    /// The client gave up (timeout, lost connection): the operation may have
    /// taken effect at any instant after its invoke, or never.
    Indeterminate,
}

/// One operation of a history.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Operation {
    /// Who sent it; used only in explanations, since linearizability orders
    /// operations by real time, not by client.
    pub client: ClientId,
    /// What was asked.
    pub command: Command,
    /// Virtual time at which the request was sent.
    pub invoke_us: u64,
    /// What came back, if anything.
    pub outcome: Outcome,
}

impl Operation {
    /// An operation that completed at `complete_us` with `response`.
    pub fn ok(
        client: ClientId,
        command: Command,
        invoke_us: u64,
        complete_us: u64,
        response: Response,
    ) -> Self {
        Operation {
            client,
            command,
            invoke_us,
            outcome: Outcome::Ok {
                response,
                complete_us,
            },
        }
    }

    /// An operation whose client never learned its fate.
    pub fn indeterminate(client: ClientId, command: Command, invoke_us: u64) -> Self {
        Operation {
            client,
            command,
            invoke_us,
            outcome: Outcome::Indeterminate,
        }
    }

    /// The key the operation touches.
    pub fn key(&self) -> Key {
        self.command.key()
    }

    /// The completion time, or `None` for an indeterminate operation (whose
    /// completion is taken to be infinitely late).
    pub fn complete_us(&self) -> Option<u64> {
        match self.outcome {
            Outcome::Ok { complete_us, .. } => Some(complete_us),
            Outcome::Indeterminate => None,
        }
    }

    /// The response, or `None` for an indeterminate operation.
    pub fn response(&self) -> Option<&Response> {
        match &self.outcome {
            Outcome::Ok { response, .. } => Some(response),
            Outcome::Indeterminate => None,
        }
    }

    /// Why the record cannot be checked, if it cannot: a completion before
    /// the invoke, or a response of the wrong kind for the command.
    pub fn malformation(&self) -> Option<String> {
        let Outcome::Ok {
            response,
            complete_us,
        } = self.outcome
        else {
            return None;
        };
        if complete_us < self.invoke_us {
            return Some(format!(
                "completes at {complete_us} us, before its invoke at {} us",
                self.invoke_us
            ));
        }
        if !self.command.accepts(&response) {
            return Some(format!(
                "{} cannot be answered by {response:?}",
                self.command
            ));
        }
        None
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.outcome {
            Outcome::Ok {
                response,
                complete_us,
            } => write!(
                f,
                "{} {} -> {} [{}, {}] us",
                self.client, self.command, response, self.invoke_us, complete_us
            ),
            Outcome::Indeterminate => write!(
                f,
                "{} {} -> ? [{}, inf) us",
                self.client, self.command, self.invoke_us
            ),
        }
    }
}
