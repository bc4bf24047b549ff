//! `etcdserverpb.Auth`: users, roles, permissions, enable and disable,
//! and Authenticate, with etcd 3.4's rules and errors (`bellwether_kv`'s
//! `AuthState` holds the rules; this file turns calls into log entries).
//!
//! Changes go through the log as [`AuthChange`]s, checked for an
//! administrator like any client write (`auth_gate.rs`). Passwords are
//! hashed here, off the async runtime, before anything is proposed.
//! Queries and Authenticate are served after a read barrier from this
//! member's store: they see every change acknowledged before them.

use super::auth_gate::{auth_status, Caller};
use super::backend::EtcdBackend;
use super::credentials;
use bellwether_api::etcdserverpb as pb;
use bellwether_api::etcdserverpb::auth_server::Auth;
use bellwether_etcd::command::{AuthChange, AuthOp, Command};
use bellwether_kv::{AuthError, KvStore};
use tonic::{Request, Response, Status};

/// The Auth service of one node.
#[derive(Clone)]
pub struct AuthService {
    /// What the node's services share.
    pub backend: EtcdBackend,
}

/// Hashes a password on a blocking thread (PBKDF2 takes tens of ms).
async fn hashed(password: String) -> Result<Vec<u8>, Status> {
    tokio::task::spawn_blocking(move || credentials::hash_password(&password))
        .await
        .map_err(|_| Status::internal("password hashing failed"))
}

/// Applies `change` for `$caller` after an admin check (a follower's
/// goes to the leader through the member); answers `$response` with the
/// header of the write.
macro_rules! change {
    ($self:ident, $caller:ident, $change:expr, $response:ty) => {{
        $self.admin(&$caller).await?;
        let command = Command::Auth($change);
        let answer = $self
            .backend
            .write_as::<pb::AuthEnableResponse>(&$caller, &command)
            .await?;
        // Every Auth change answers a header only.
        let mut response = <$response>::default();
        response.header = answer.header;
        Ok(Response::new(response))
    }};
}

/// Serves a query for `$caller` after a read barrier and an admin check.
macro_rules! query {
    ($self:ident, $caller:ident, $answer:expr) => {{
        $self.backend.read_barrier().await?;
        let store = $self.backend.store();
        store
            .auth()
            .check_admin($caller.user.as_deref())
            .map_err(auth_status)?;
        let header = Some($self.backend.header_at(store.revision()));
        #[allow(clippy::redundant_closure_call)]
        let answer = ($answer)(&store, header)?;
        Ok(Response::new(answer))
    }};
}

impl AuthService {
    async fn admin(&self, caller: &Caller) -> Result<(), Status> {
        self.backend
            .authorize(caller, |store| {
                caller.check_admin(store).map_err(auth_status)
            })
            .await
    }

    fn change(op: AuthOp, name: &str) -> AuthChange {
        AuthChange {
            op: op as i32,
            name: name.to_string(),
            ..Default::default()
        }
    }
}

fn user_roles(store: &KvStore, name: &str) -> Result<Vec<String>, Status> {
    let user = store
        .auth()
        .user(name)
        .ok_or(auth_status(AuthError::UserNotFound))?;
    Ok(user.roles.iter().cloned().collect())
}

#[tonic::async_trait]
impl Auth for AuthService {
    async fn auth_enable(
        &self,
        request: Request<pb::AuthEnableRequest>,
    ) -> Result<Response<pb::AuthEnableResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let mut change = Self::change(AuthOp::Enable, "");
        change.secret = credentials::new_secret();
        // Tokens are signed with it; an empty one would sign none.
        assert!(
            !change.secret.is_empty(),
            "auth is enabled with a token secret"
        );
        change!(self, caller, change, pb::AuthEnableResponse)
    }

    async fn auth_disable(
        &self,
        request: Request<pb::AuthDisableRequest>,
    ) -> Result<Response<pb::AuthDisableResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let change = Self::change(AuthOp::Disable, "");
        change!(self, caller, change, pb::AuthDisableResponse)
    }

    async fn authenticate(
        &self,
        request: Request<pb::AuthenticateRequest>,
    ) -> Result<Response<pb::AuthenticateResponse>, Status> {
        let request = request.into_inner();
        self.backend.read_barrier().await?;
        // The hash and `since` are read together: a token is issued for the
        // password that was checked, and dies if it has changed since.
        let stored = {
            let store = self.backend.store();
            if !store.auth().is_enabled() {
                return Err(auth_status(AuthError::NotEnabled));
            }
            store
                .auth()
                .user(&request.name)
                .map(|u| (u.password.clone(), u.since))
        };
        let password = request.password;
        let since = stored.as_ref().map(|(_, since)| *since);
        let matches = tokio::task::spawn_blocking(move || {
            stored.is_some_and(|(stored, _)| credentials::password_matches(&stored, &password))
        })
        .await
        .unwrap_or(false);
        let (true, Some(since)) = (matches, since) else {
            return Err(auth_status(AuthError::AuthFailed));
        };
        let store = self.backend.store();
        let token = self
            .backend
            .auth
            .issue(&store, &request.name, since)
            .map_err(auth_status)?;
        Ok(Response::new(pb::AuthenticateResponse {
            header: Some(self.backend.header_at(store.revision())),
            token,
        }))
    }

    async fn user_add(
        &self,
        request: Request<pb::AuthUserAddRequest>,
    ) -> Result<Response<pb::AuthUserAddResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        self.admin(&caller).await?;
        let no_password = request.options.as_ref().is_some_and(|o| o.no_password);
        let mut change = Self::change(AuthOp::UserAdd, &request.name);
        if !no_password {
            change.password_hash = hashed(request.password.clone()).await?;
        }
        // An empty hash is a user without a password (it never
        // authenticates): only one asked for without gets it.
        assert!(
            no_password || !change.password_hash.is_empty(),
            "a user added with a password is stored with its hash"
        );
        change!(self, caller, change, pb::AuthUserAddResponse)
    }

    async fn user_get(
        &self,
        request: Request<pb::AuthUserGetRequest>,
    ) -> Result<Response<pb::AuthUserGetResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let name = request.name.clone();
        query!(self, caller, |store: &KvStore, header| {
            Ok::<_, Status>(pb::AuthUserGetResponse {
                header,
                roles: user_roles(store, &name)?,
            })
        })
    }

    async fn user_list(
        &self,
        request: Request<pb::AuthUserListRequest>,
    ) -> Result<Response<pb::AuthUserListResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        query!(self, caller, |store: &KvStore, header| {
            Ok::<_, Status>(pb::AuthUserListResponse {
                header,
                users: store.auth().user_names().map(String::from).collect(),
            })
        })
    }

    async fn user_delete(
        &self,
        request: Request<pb::AuthUserDeleteRequest>,
    ) -> Result<Response<pb::AuthUserDeleteResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let change = Self::change(AuthOp::UserDelete, &request.name);
        change!(self, caller, change, pb::AuthUserDeleteResponse)
    }

    async fn user_change_password(
        &self,
        request: Request<pb::AuthUserChangePasswordRequest>,
    ) -> Result<Response<pb::AuthUserChangePasswordResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        self.admin(&caller).await?;
        let mut change = Self::change(AuthOp::UserChangePassword, &request.name);
        change.password_hash = hashed(request.password.clone()).await?;
        assert!(
            !change.password_hash.is_empty(),
            "a new password is stored as its hash"
        );
        change!(self, caller, change, pb::AuthUserChangePasswordResponse)
    }

    async fn user_grant_role(
        &self,
        request: Request<pb::AuthUserGrantRoleRequest>,
    ) -> Result<Response<pb::AuthUserGrantRoleResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let mut change = Self::change(AuthOp::UserGrantRole, &request.user);
        change.role = request.role.clone();
        change!(self, caller, change, pb::AuthUserGrantRoleResponse)
    }

    async fn user_revoke_role(
        &self,
        request: Request<pb::AuthUserRevokeRoleRequest>,
    ) -> Result<Response<pb::AuthUserRevokeRoleResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let mut change = Self::change(AuthOp::UserRevokeRole, &request.name);
        change.role = request.role.clone();
        change!(self, caller, change, pb::AuthUserRevokeRoleResponse)
    }

    async fn role_add(
        &self,
        request: Request<pb::AuthRoleAddRequest>,
    ) -> Result<Response<pb::AuthRoleAddResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let change = Self::change(AuthOp::RoleAdd, &request.name);
        change!(self, caller, change, pb::AuthRoleAddResponse)
    }

    async fn role_get(
        &self,
        request: Request<pb::AuthRoleGetRequest>,
    ) -> Result<Response<pb::AuthRoleGetResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let name = request.role.clone();
        query!(self, caller, |store: &KvStore, header| {
            let perms = store.auth().role(&name).map_err(auth_status)?;
            Ok::<_, Status>(pb::AuthRoleGetResponse {
                header,
                perm: perms
                    .iter()
                    .map(|p| bellwether_api::authpb::Permission {
                        perm_type: p.kind.number(),
                        key: p.key.clone(),
                        range_end: p.range_end.clone(),
                    })
                    .collect(),
            })
        })
    }

    async fn role_list(
        &self,
        request: Request<pb::AuthRoleListRequest>,
    ) -> Result<Response<pb::AuthRoleListResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        query!(self, caller, |store: &KvStore, header| {
            Ok::<_, Status>(pb::AuthRoleListResponse {
                header,
                roles: store.auth().role_names().map(String::from).collect(),
            })
        })
    }

    async fn role_delete(
        &self,
        request: Request<pb::AuthRoleDeleteRequest>,
    ) -> Result<Response<pb::AuthRoleDeleteResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let change = Self::change(AuthOp::RoleDelete, &request.role);
        change!(self, caller, change, pb::AuthRoleDeleteResponse)
    }

    async fn role_grant_permission(
        &self,
        request: Request<pb::AuthRoleGrantPermissionRequest>,
    ) -> Result<Response<pb::AuthRoleGrantPermissionResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let Some(perm) = request.perm.clone() else {
            return Err(Status::invalid_argument(
                "etcdserver: a permission grant names no permission",
            ));
        };
        let mut change = Self::change(AuthOp::RoleGrantPermission, &request.name);
        change.perm_kind = perm.perm_type;
        change.key = perm.key;
        change.range_end = perm.range_end;
        change!(self, caller, change, pb::AuthRoleGrantPermissionResponse)
    }

    async fn role_revoke_permission(
        &self,
        request: Request<pb::AuthRoleRevokePermissionRequest>,
    ) -> Result<Response<pb::AuthRoleRevokePermissionResponse>, Status> {
        let caller = self.backend.caller(&request)?;
        let request = request.into_inner();
        let mut change = Self::change(AuthOp::RoleRevokePermission, &request.role);
        change.key = request.key.clone();
        change.range_end = request.range_end.clone();
        change!(self, caller, change, pb::AuthRoleRevokePermissionResponse)
    }
}
