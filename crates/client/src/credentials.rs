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
pub(crate) const INVALID_TOKEN: &str = "invalid auth token";

/// A user's name and password, and the token last issued for them.
pub(crate) struct Credentials {
    name: String,
    password: String,
    token: Mutex<Option<AsciiMetadataValue>>,
}

impl Credentials {
    pub(crate) fn new(name: String, password: String) -> Credentials {
        Credentials {
            name,
            password,
            token: Mutex::new(None),
        }
    }

    /// The token to send, if one was issued and not forgotten.
    pub(crate) fn token(&self) -> Option<AsciiMetadataValue> {
        self.token.lock().expect("token lock").clone()
    }

    /// Asks the member behind `channel` for a token and keeps it.
    pub(crate) async fn authenticate(&self, channel: Channel) -> Result<(), tonic::Status> {
        let request = pb::AuthenticateRequest {
            name: self.name.clone(),
            password: self.password.clone(),
        };
        let answer = pb::auth_client::AuthClient::new(channel)
            .authenticate(request)
            .await?
            .into_inner();
        let token = AsciiMetadataValue::try_from(answer.token.as_str()).map_err(|_| {
            tonic::Status::internal("the cluster issued a token that is not ASCII metadata")
        })?;
        *self.token.lock().expect("token lock") = Some(token);
        Ok(())
    }

    /// Forgets `stale`, the token a call was refused with (unless another
    /// call already replaced it), so that the next call authenticates.
    pub(crate) fn forget(&self, stale: &Option<AsciiMetadataValue>) {
        let mut token = self.token.lock().expect("token lock");
        if *token == *stale {
            *token = None;
        }
    }
}

/// True when a call was refused because its token is not valid.
pub(crate) fn is_invalid_token(status: &tonic::Status) -> bool {
    status.message().contains(INVALID_TOKEN)
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
