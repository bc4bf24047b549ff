//! One run of the scenarios against one server set: the sessions the
//! scenarios open, each step's answer written to the transcript, and the
//! servers the reconnect scenario kills.

use super::transcript::{Answer, Part, Transcript};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;
use zookeeper_client as zk;

/// A scenario: its steps, against the run.
pub type Steps<'r> = Pin<Box<dyn Future<Output = ()> + 'r>>;
/// A named scenario.
pub type Scenario = (&'static str, fn(&mut Run) -> Steps<'_>);

/// Longest wait for one answer; a step that takes longer prints
/// `!StepTimeout` and the scenario goes on.
const STEP_LIMIT: Duration = Duration::from_secs(15);
/// Longest wait for a watch event that should come.
const EVENT_LIMIT: Duration = Duration::from_secs(15);
/// How long a watch that should not fire is watched.
const QUIET_WAIT: Duration = Duration::from_millis(400);
/// Longest scenario (the expiry one waits for a session to expire).
const SCENARIO_LIMIT: Duration = Duration::from_secs(90);
/// Pause before each step, so that a write's mtime differs from the
/// ctime an earlier step gave (one transaction has one time; that must
/// show, as `t=same`).
const STEP_PAUSE: Duration = Duration::from_millis(5);
/// Session timeout asked for (ZooKeeper grants 4 to 40 s at its tickTime).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

/// Where a run's clients connect, and how to kill the first server.
pub struct Servers {
    /// A follower: every session connects here unless a scenario says.
    pub first: String,
    /// Another follower, for the scenarios that use two servers.
    pub second: String,
    /// Kills `first`'s server (SIGKILL), once.
    pub kill_first: Box<dyn FnMut()>,
}

/// What one answer failing prints.
pub trait Failure {
    fn text(&self) -> String;
}

impl Failure for zk::Error {
    fn text(&self) -> String {
        format!("!{self:?}")
    }
}

impl Failure for zk::MultiWriteError {
    fn text(&self) -> String {
        match self {
            zk::MultiWriteError::OperationFailed { index, source } => {
                format!("!op{index} {source:?}")
            }
            zk::MultiWriteError::RequestFailed { source } => format!("!{source:?}"),
        }
    }
}

/// A run in progress.
pub struct Run {
    pub t: Transcript,
    pub servers: Servers,
    /// The run's random root.
    root: String,
    /// A session on `first` that makes each scenario's node.
    admin: Option<zk::Client>,
}

impl Run {
    pub fn new(servers: Servers, root: &str) -> Run {
        Run {
            t: Transcript::new(root),
            servers,
            root: root.to_string(),
            admin: None,
        }
    }

    /// Runs every scenario in order, each under its own node.
    pub async fn scenarios(&mut self, scenarios: &[Scenario]) {
        let admin = connector()
            .connect(&self.servers.first)
            .await
            .expect("a session for the run's root");
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        admin
            .create(&self.root, b"", &open)
            .await
            .expect("the run's root");
        self.admin = Some(admin);
        for (name, scenario) in scenarios {
            self.begin(name).await;
            let steps = scenario(self);
            if tokio::time::timeout(SCENARIO_LIMIT, steps).await.is_err() {
                self.note("SCENARIO TIMEOUT", "");
            }
        }
        self.admin = None;
    }

    /// Starts scenario `name` under a new node of the root.
    async fn begin(&mut self, name: &str) {
        let base = format!("{}/{name}", self.root);
        let open = zk::CreateMode::Persistent.with_acls(zk::Acls::anyone_all());
        let admin = self.admin.as_ref().expect("the run's session");
        if let Err(error) = admin.create(&base, b"", &open).await {
            panic!("cannot create {base} for scenario {name}: {error}");
        }
        self.t.begin(&base);
        self.t.line(vec![format!("== {name}").into()]);
    }

    /// An absolute path in the scenario's node ("." is the node).
    pub fn path(&self, relative: &str) -> String {
        match relative {
            "." => self.t.base.clone(),
            _ => format!("{}/{relative}", self.t.base),
        }
    }

    /// A new session on the first server, known as `name`; `None` (and
    /// the error in the transcript) if it cannot connect.
    pub async fn connect(&mut self, name: &str) -> Option<zk::Client> {
        let address = self.servers.first.clone();
        self.connect_with(name, connector(), &address).await
    }

    /// A new session through `connector` to `address`, known as `name`.
    pub async fn connect_with(
        &mut self,
        name: &str,
        connector: zk::Connector,
        address: &str,
    ) -> Option<zk::Client> {
        let error = match tokio::time::timeout(STEP_LIMIT, connector.connect(address)).await {
            Ok(Ok(client)) => {
                self.t.name_session(client.session_id().0, name);
                return Some(client);
            }
            Ok(Err(error)) => format!("!{error:?}"),
            Err(_) => "!StepTimeout".to_string(),
        };
        self.note(&format!("connect {name}"), &error);
        None
    }

    /// Writes `step: text`.
    pub fn note(&mut self, step: &str, text: &str) {
        self.t.line(vec![format!("{step}:").into(), text.into()]);
    }

    /// Awaits an operation and writes its answer; the value, if it
    /// succeeded.
    pub async fn op<T: Answer, E: Failure>(
        &mut self,
        step: &str,
        operation: impl Future<Output = Result<T, E>>,
    ) -> Option<T> {
        tokio::time::sleep(STEP_PAUSE).await;
        let mut parts: Vec<Part> = vec![format!("{step}:").into()];
        let value = match tokio::time::timeout(STEP_LIMIT, operation).await {
            Ok(Ok(value)) => {
                parts.extend(value.parts(&mut self.t));
                Some(value)
            }
            Ok(Err(error)) => {
                parts.push(error.text().into());
                None
            }
            Err(_) => {
                parts.push("!StepTimeout".into());
                None
            }
        };
        self.t.line(parts);
        value
    }

    /// Awaits a watch event that should come and writes it.
    pub async fn event(
        &mut self,
        step: &str,
        event: impl Future<Output = zk::WatchedEvent>,
    ) -> Option<zk::WatchedEvent> {
        self.event_within(step, event, EVENT_LIMIT).await
    }

    /// [`Run::event`], waiting up to `limit`.
    pub async fn event_within(
        &mut self,
        step: &str,
        event: impl Future<Output = zk::WatchedEvent>,
        limit: Duration,
    ) -> Option<zk::WatchedEvent> {
        let event = tokio::time::timeout(limit, event).await.ok();
        self.write_event(step, event.as_ref());
        event
    }

    /// Watches a watch that should not fire yet for a while; writes what
    /// came (`no event`, or the event).
    pub async fn quiet<F: Future<Output = zk::WatchedEvent> + Unpin>(
        &mut self,
        step: &str,
        event: &mut F,
    ) {
        let event = tokio::time::timeout(QUIET_WAIT, event).await.ok();
        self.write_event(step, event.as_ref());
    }

    fn write_event(&mut self, step: &str, event: Option<&zk::WatchedEvent>) {
        let text = match event {
            Some(event) => self.t.event(event),
            None => "no event".to_string(),
        };
        self.note(step, &text);
    }
}

/// How every session connects: a 10 s session timeout.
pub fn connector() -> zk::Connector {
    zk::Client::connector().with_session_timeout(SESSION_TIMEOUT)
}

/// Options for a node of `mode` that anyone may do anything with.
pub fn open(mode: zk::CreateMode) -> zk::CreateOptions<'static> {
    mode.with_acls(zk::Acls::anyone_all())
}
