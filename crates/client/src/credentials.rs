//! A user name and password for a cluster with etcd's auth enabled, and
//! the token the cluster issued for them.
//!
//! etcd's clients authenticate once, send the token with every call (the
//! `token` metadata), and authenticate again when a call is refused as
//! "invalid auth token" (the token expired, the password changed, auth
//! was turned off and on). This does the same: the token is fetched on
//! the first call that needs one and forgotten when a call is refused
//! with it, so the next call fetches a new one.

use bellwether_api::etcdserverpb as pb;
use std::sync::Mutex;
use tonic::metadata::AsciiMetadataValue;
use tonic::service::Interceptor;
use tonic::transport::Channel;

/// What etcd answers a call whose token is not (or no longer) valid.
const INVALID_TOKEN: &str = "invalid auth token";
/// What etcd answers a call without a token while auth is on.
const NO_USER: &str = "user name is empty";
/// What etcd answers Authenticate while auth is off.
const AUTH_OFF: &str = "authentication is not enabled";
/// What etcd answers a write checked against permissions that changed
/// before it was applied; it did nothing and may be made again.
const OLD_AUTH_REVISION: &str = "revision of auth store is old";

/// Where the client stands with the cluster's auth.
#[derive(Clone, Debug, PartialEq, Eq)]
enum TokenState {
    /// Not asked yet, or the last token was refused: ask before calling.
    Unknown,
    /// The cluster said auth is off: call without a token (etcd's clients
    /// do the same), until a call is refused for lack of one.
    AuthOff,
    /// The token to send.
    Issued(AsciiMetadataValue),
}

/// A user's name and password, and the token last issued for them.
pub(crate) struct Credentials {
    name: String,
    password: String,
    state: Mutex<TokenState>,
}

impl Credentials {
    pub(crate) fn new(name: String, password: String) -> Credentials {
        Credentials {
            name,
            password,
            state: Mutex::new(TokenState::Unknown),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, TokenState> {
        self.state.lock().expect("token lock")
    }

    /// The token to send, if one was issued and not forgotten.
    pub(crate) fn token(&self) -> Option<AsciiMetadataValue> {
        match &*self.state() {
            TokenState::Issued(token) => Some(token.clone()),
            TokenState::Unknown | TokenState::AuthOff => None,
        }
    }

    /// True when a call must wait for [`authenticate`](Self::authenticate).
    pub(crate) fn must_ask(&self) -> bool {
        *self.state() == TokenState::Unknown
    }

    /// Asks the member behind `channel` for a token and keeps it (or
    /// notes that auth is off there).
    pub(crate) async fn authenticate(&self, channel: Channel) -> Result<(), tonic::Status> {
        let request = pb::AuthenticateRequest {
            name: self.name.clone(),
            password: self.password.clone(),
        };
        let answer = pb::auth_client::AuthClient::new(channel)
            .authenticate(request)
            .await;
        let state = match answer {
            Ok(answer) => {
                let token = answer.into_inner().token;
                let token = AsciiMetadataValue::try_from(token.as_str()).map_err(|_| {
                    tonic::Status::internal("the cluster issued a token that is not ASCII metadata")
                })?;
                TokenState::Issued(token)
            }
            Err(status) if status.message().contains(AUTH_OFF) => TokenState::AuthOff,
            Err(status) => return Err(status),
        };
        *self.state() = state;
        Ok(())
    }

    /// Forgets `sent`, the token a call was refused with (`None`: the call
    /// went without one, auth being off), unless another call already
    /// replaced it, so that the next call asks again.
    pub(crate) fn forget(&self, sent: &Option<AsciiMetadataValue>) {
        let mut state = self.state();
        let same = match (&*state, sent) {
            (TokenState::Issued(token), Some(sent)) => token == sent,
            (TokenState::AuthOff, None) => true,
            _ => false,
        };
        if same {
            *state = TokenState::Unknown;
        }
    }
}

/// True when a refusal means "ask for a token and call again": the token
/// sent is not valid, or none was sent and auth is on.
pub(crate) fn wants_new_token(message: &str) -> bool {
    message.contains(INVALID_TOKEN) || message.contains(NO_USER)
}

/// True when a write was refused because permissions changed before it
/// was applied: it did nothing, and may be made again as it is.
pub(crate) fn is_old_auth_revision(status: &tonic::Status) -> bool {
    status.message().contains(OLD_AUTH_REVISION)
}

/// Puts the token, when there is one, into every request's metadata.
#[derive(Clone)]
pub(crate) struct TokenInterceptor {
    token: Option<AsciiMetadataValue>,
}

impl TokenInterceptor {
    pub(crate) fn new(token: Option<AsciiMetadataValue>) -> TokenInterceptor {
        TokenInterceptor { token }
    }
}

impl Interceptor for TokenInterceptor {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(token) = &self.token {
            request.metadata_mut().insert("token", token.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(text: &str) -> AsciiMetadataValue {
        AsciiMetadataValue::try_from(text).unwrap()
    }

    #[test]
    fn a_refused_token_is_forgotten_unless_a_newer_one_replaced_it() {
        let credentials = Credentials::new("alice".into(), "pw".into());
        assert!(credentials.must_ask() && credentials.token().is_none());
        *credentials.state() = TokenState::Issued(token("t1"));
        assert!(!credentials.must_ask());
        // A call refused with an older token leaves the newer one.
        credentials.forget(&Some(token("t0")));
        assert_eq!(credentials.token(), Some(token("t1")));
        credentials.forget(&None);
        assert_eq!(credentials.token(), Some(token("t1")));
        credentials.forget(&Some(token("t1")));
        assert!(credentials.must_ask() && credentials.token().is_none());
        // With auth off nothing is sent; a refusal of that (auth was
        // turned on since) makes the next call ask.
        *credentials.state() = TokenState::AuthOff;
        assert!(!credentials.must_ask() && credentials.token().is_none());
        credentials.forget(&Some(token("t1")));
        assert!(!credentials.must_ask());
        credentials.forget(&None);
        assert!(credentials.must_ask());
    }

    #[test]
    fn only_token_refusals_ask_for_a_new_token() {
        assert!(wants_new_token("etcdserver: invalid auth token"));
        assert!(wants_new_token("etcdserver: user name is empty"));
        assert!(!wants_new_token("etcdserver: permission denied"));
        assert!(!wants_new_token(
            "etcdserver: authentication failed, invalid user ID or password"
        ));
        assert!(is_old_auth_revision(&tonic::Status::failed_precondition(
            "etcdserver: revision of auth store is old"
        )));
        assert!(!is_old_auth_revision(&tonic::Status::unavailable(
            "no leader"
        )));
    }
}
