//! What the server's tasks hear of the state machine's applies: the
//! store's revision (for watches, elections and locks, which wait on it),
//! whether auth is on (for every call's check, without locking the store)
//! and the leases granted and revoked (for the leader's [`Lessor`]).

use super::auth_gate::AuthSummary;
use super::lessor::Lessor;
use bellwether_etcd::{EtcdMachine, LeaseApplied, Observer};
use bellwether_kv::KvStore;
use tokio::sync::watch;

/// The signals a server's [`EtcdMachine`] keeps current.
#[derive(Clone, Debug)]
pub struct MachineSignals {
    /// The store's revision after each apply that changed it.
    pub revisions: watch::Receiver<i64>,
    /// The lease clock the machine tells of grants and revokes.
    pub lessor: Lessor,
    /// Whether auth is on and its revision.
    pub auth: AuthSummary,
}

/// The observer behind [`MachineSignals`].
struct Publisher {
    revisions: watch::Sender<i64>,
    lessor: Lessor,
    auth: AuthSummary,
}

impl Observer for Publisher {
    fn published(&self, store: &KvStore) {
        let revision = store.revision();
        self.revisions.send_if_modified(|current| {
            let changed = *current != revision;
            *current = revision;
            changed
        });
        self.auth.publish(store);
    }

    fn lease(&self, applied: LeaseApplied) {
        self.lessor.applied(applied);
    }

    /// Frees a replaced store on a blocking thread, off the member's loop
    /// (inline only where no runtime runs, as in unit tests).
    fn retired(&self, store: KvStore) {
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn_blocking(move || drop(store));
            }
            Err(_) => drop(store),
        }
    }
}

/// An empty state machine and the signals it keeps current.
pub fn machine_with_signals() -> (EtcdMachine, MachineSignals) {
    // The machine starts from an empty store, at an empty store's revision.
    let (revisions, receiver) = watch::channel(KvStore::new().revision());
    let signals = MachineSignals {
        revisions: receiver,
        lessor: Lessor::default(),
        auth: AuthSummary::default(),
    };
    let publisher = Publisher {
        revisions,
        lessor: signals.lessor.clone(),
        auth: signals.auth.clone(),
    };
    (EtcdMachine::new(Box::new(publisher)), signals)
}
