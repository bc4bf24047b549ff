//! Users, roles and key-range permissions: etcd's Auth model, as state that
//! every replica applies from the log.
//!
//! The rules follow etcd 3.4, because `etcdctl user`, `role` and `auth`
//! and the SDKs depend on them:
//!
//! - auth can be enabled only once a user `root` exists and holds the role
//!   `root`; while it is enabled that user, that grant and that role cannot
//!   be removed;
//! - a user with the role `root` may do anything; any other user may read
//!   or write a key only inside a range one of its roles grants;
//! - every change advances [`AuthState::revision`]. A write checked against
//!   an older revision is refused when it is applied
//!   ([`AuthError::OldRevision`]), so a revoked permission takes effect at
//!   once, on every member, at the same log entry.
//!
//! This crate does no IO and reads no clock: password hashes, the token
//! signing secret and every check of a password or token belong to the
//! server, which stores them here as opaque bytes so that they replicate.

use crate::codec::{Decoder, Encoder};
use crate::KvError;
use std::collections::{BTreeMap, BTreeSet};

/// The user that may enable auth and that always holds every permission.
pub const ROOT_USER: &str = "root";

/// The role that grants every permission.
pub const ROOT_ROLE: &str = "root";

/// Most users a store holds (bounded, like every collection here).
pub const AUTH_USERS_MAX: usize = 65_536;

/// Most roles a store holds.
pub const AUTH_ROLES_MAX: usize = 65_536;

/// Most key permissions one role holds.
pub const ROLE_PERMISSIONS_MAX: usize = 4_096;

/// Most roles one user holds.
pub const USER_ROLES_MAX: usize = 1_024;

/// Longest user or role name, in bytes.
pub const AUTH_NAME_BYTES_MAX: usize = 1_024;

/// What a permission allows (etcd's `authpb.Permission.Type` numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Permission {
    /// Range and watch.
    Read = 0,
    /// Put and delete.
    Write = 1,
    /// Both.
    ReadWrite = 2,
}

impl Permission {
    /// From etcd's number; `None` for an unknown one.
    pub fn from_number(number: i32) -> Option<Permission> {
        match number {
            0 => Some(Permission::Read),
            1 => Some(Permission::Write),
            2 => Some(Permission::ReadWrite),
            _ => None,
        }
    }

    /// etcd's number.
    pub fn number(self) -> i32 {
        self as i32
    }

    /// True when a grant of `self` allows an operation needing `needed`.
    fn allows(self, needed: Permission) -> bool {
        self == Permission::ReadWrite || self == needed
    }
}

/// One grant of a role: `kind` on `[key, range_end)`, with etcd's
/// conventions (an empty `range_end` is the single key, `"\0"` is every key
/// from `key` on).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeyPermission {
    /// The first key.
    pub key: Vec<u8>,
    /// The end of the range (see the type's docs).
    pub range_end: Vec<u8>,
    /// What is allowed.
    pub kind: Permission,
}

/// A user as the store keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct User {
    /// The server's password hash; empty for a user added without one,
    /// who can only be authenticated by a client certificate.
    pub password: Vec<u8>,
    /// Granted roles, in name order.
    pub roles: BTreeSet<String>,
    /// The auth revision at which the user was added or its password last
    /// changed: tokens issued before it are no longer valid.
    pub since: u64,
}

/// Why an auth request or check failed. The messages are etcd's, word for
/// word: clients match on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// Enable without a user `root`.
    #[error("etcdserver: root user does not exist")]
    RootUserNotExist,
    /// Enable while `root` lacks the role `root`.
    #[error("etcdserver: root user does not have root role")]
    RootRoleNotExist,
    /// A request without a user while auth is enabled, or an empty name.
    #[error("etcdserver: user name is empty")]
    UserEmpty,
    /// Adding a user that exists.
    #[error("etcdserver: user name already exists")]
    UserAlreadyExist,
    /// Naming a user that does not exist.
    #[error("etcdserver: user name not found")]
    UserNotFound,
    /// An empty role name.
    #[error("etcdserver: role name is empty")]
    RoleEmpty,
    /// Adding a role that exists.
    #[error("etcdserver: role name already exists")]
    RoleAlreadyExist,
    /// Naming a role that does not exist.
    #[error("etcdserver: role name not found")]
    RoleNotFound,
    /// Revoking a permission the role does not have.
    #[error("etcdserver: permission is not granted to the role")]
    PermissionNotGranted,
    /// Revoking a role the user does not have.
    #[error("etcdserver: role is not granted to the user")]
    RoleNotGranted,
    /// Removing root's user, grant or role while auth is enabled.
    #[error("etcdserver: invalid auth management")]
    InvalidAuthMgmt,
    /// The user's roles do not allow the operation.
    #[error("etcdserver: permission denied")]
    PermissionDenied,
    /// The write was checked against auth state that changed since.
    #[error("etcdserver: revision of auth store is old")]
    OldRevision,
    /// A token that is malformed, forged, expired or revoked.
    #[error("etcdserver: invalid auth token")]
    InvalidToken,
    /// Authenticate with a wrong user or password.
    #[error("etcdserver: authentication failed, invalid user ID or password")]
    AuthFailed,
    /// Authenticate while auth is disabled.
    #[error("etcdserver: authentication is not enabled")]
    NotEnabled,
    /// An enable without a token secret (never from a member of ours).
    #[error("bellwether: auth enable without a token secret")]
    NoSecret,
    /// A name, role or permission count past its bound (see the `*_MAX`
    /// constants).
    #[error("etcdserver: too many users, roles or permissions")]
    TooMany,
}

/// The auth part of a store (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AuthState {
    enabled: bool,
    revision: u64,
    users: BTreeMap<String, User>,
    roles: BTreeMap<String, Vec<KeyPermission>>,
    /// The token signing secret, chosen by the member that proposed the
    /// enable; empty while auth is disabled.
    secret: Vec<u8>,
}

fn check_name(name: &str, empty: AuthError) -> Result<(), AuthError> {
    if name.is_empty() {
        return Err(empty);
    }
    if name.len() > AUTH_NAME_BYTES_MAX {
        return Err(AuthError::TooMany);
    }
    Ok(())
}

impl AuthState {
    /// True while permissions are checked.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Advanced by every change (see the module docs).
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The token signing secret (empty while disabled).
    pub fn secret(&self) -> &[u8] {
        &self.secret
    }

    /// A user, if it exists.
    pub fn user(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// Every user name, in order.
    pub fn user_names(&self) -> impl Iterator<Item = &str> {
        self.users.keys().map(String::as_str)
    }

    /// Every role name, in order.
    pub fn role_names(&self) -> impl Iterator<Item = &str> {
        self.roles.keys().map(String::as_str)
    }

    /// A role's permissions, in key order; `root` lists none (it needs none).
    pub fn role(&self, name: &str) -> Result<&[KeyPermission], AuthError> {
        self.roles
            .get(name)
            .map(Vec::as_slice)
            .ok_or(AuthError::RoleNotFound)
    }

    fn changed<T>(&mut self, value: T) -> Result<T, AuthError> {
        self.revision += 1;
        Ok(value)
    }

    /// Turns checks on, with `secret` to sign tokens. Enabling twice is
    /// not an error.
    pub fn enable(&mut self, secret: Vec<u8>) -> Result<(), AuthError> {
        if self.enabled {
            return Ok(());
        }
        let root = self
            .users
            .get(ROOT_USER)
            .ok_or(AuthError::RootUserNotExist)?;
        if !root.roles.contains(ROOT_ROLE) {
            return Err(AuthError::RootRoleNotExist);
        }
        if secret.is_empty() {
            // Members always draw one; an entry without is refused alike
            // on every member rather than crashing them all.
            return Err(AuthError::NoSecret);
        }
        self.enabled = true;
        self.secret = secret;
        self.changed(())
    }

    /// Turns checks off; every token issued so far becomes invalid.
    pub fn disable(&mut self) -> Result<(), AuthError> {
        if !self.enabled {
            return Ok(());
        }
        self.enabled = false;
        self.secret.clear();
        self.changed(())
    }

    /// Adds a user with the server's `password` hash (empty: none).
    pub fn user_add(&mut self, name: &str, password: Vec<u8>) -> Result<(), AuthError> {
        check_name(name, AuthError::UserEmpty)?;
        if self.users.contains_key(name) {
            return Err(AuthError::UserAlreadyExist);
        }
        if self.users.len() >= AUTH_USERS_MAX {
            return Err(AuthError::TooMany);
        }
        let since = self.revision + 1;
        let user = User {
            password,
            roles: BTreeSet::new(),
            since,
        };
        self.users.insert(name.to_string(), user);
        self.changed(())
    }

    /// Deletes a user (not root while enabled).
    pub fn user_delete(&mut self, name: &str) -> Result<(), AuthError> {
        if self.enabled && name == ROOT_USER {
            return Err(AuthError::InvalidAuthMgmt);
        }
        self.users.remove(name).ok_or(AuthError::UserNotFound)?;
        self.changed(())
    }

    /// Replaces a user's password hash; its tokens become invalid.
    pub fn user_change_password(&mut self, name: &str, password: Vec<u8>) -> Result<(), AuthError> {
        let since = self.revision + 1;
        let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
        user.password = password;
        user.since = since;
        self.changed(())
    }

    /// Grants `role` (which must exist, unless it is `root`) to a user.
    pub fn user_grant_role(&mut self, name: &str, role: &str) -> Result<(), AuthError> {
        if role != ROOT_ROLE && !self.roles.contains_key(role) {
            return Err(AuthError::RoleNotFound);
        }
        let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
        if user.roles.len() >= USER_ROLES_MAX && !user.roles.contains(role) {
            return Err(AuthError::TooMany);
        }
        user.roles.insert(role.to_string());
        self.changed(())
    }

    /// Revokes a role from a user (not root's `root` while enabled).
    pub fn user_revoke_role(&mut self, name: &str, role: &str) -> Result<(), AuthError> {
        if self.enabled && name == ROOT_USER && role == ROOT_ROLE {
            return Err(AuthError::InvalidAuthMgmt);
        }
        let user = self.users.get_mut(name).ok_or(AuthError::UserNotFound)?;
        if !user.roles.remove(role) {
            return Err(AuthError::RoleNotGranted);
        }
        self.changed(())
    }

    /// Adds a role without permissions.
    pub fn role_add(&mut self, name: &str) -> Result<(), AuthError> {
        check_name(name, AuthError::RoleEmpty)?;
        if self.roles.contains_key(name) {
            return Err(AuthError::RoleAlreadyExist);
        }
        if self.roles.len() >= AUTH_ROLES_MAX {
            return Err(AuthError::TooMany);
        }
        self.roles.insert(name.to_string(), Vec::new());
        self.changed(())
    }

    /// Deletes a role and revokes it from every user (not `root` while
    /// enabled).
    pub fn role_delete(&mut self, name: &str) -> Result<(), AuthError> {
        if self.enabled && name == ROOT_ROLE {
            return Err(AuthError::InvalidAuthMgmt);
        }
        self.roles.remove(name).ok_or(AuthError::RoleNotFound)?;
        for user in self.users.values_mut() {
            user.roles.remove(name);
        }
        self.changed(())
    }

    /// Grants a permission to a role; a grant on exactly the same range
    /// replaces the earlier one's kind, as in etcd.
    pub fn role_grant_permission(
        &mut self,
        name: &str,
        permission: KeyPermission,
    ) -> Result<(), AuthError> {
        let perms = self.roles.get_mut(name).ok_or(AuthError::RoleNotFound)?;
        let same =
            |p: &KeyPermission| p.key == permission.key && p.range_end == permission.range_end;
        if let Some(existing) = perms.iter_mut().find(|p| same(p)) {
            existing.kind = permission.kind;
        } else {
            if perms.len() >= ROLE_PERMISSIONS_MAX {
                return Err(AuthError::TooMany);
            }
            perms.push(permission);
            perms.sort();
        }
        self.changed(())
    }

    /// Revokes the permission on exactly `[key, range_end)` from a role.
    pub fn role_revoke_permission(
        &mut self,
        name: &str,
        key: &[u8],
        range_end: &[u8],
    ) -> Result<(), AuthError> {
        let perms = self.roles.get_mut(name).ok_or(AuthError::RoleNotFound)?;
        let before = perms.len();
        perms.retain(|p| !(p.key == key && p.range_end == range_end));
        if perms.len() == before {
            return Err(AuthError::PermissionNotGranted);
        }
        self.changed(())
    }

    /// Whether `user` may run an administrative request (auth and
    /// membership changes, hashes, snapshots): always while auth is
    /// disabled, otherwise only a user holding `root`.
    pub fn check_admin(&self, user: Option<&str>) -> Result<(), AuthError> {
        if !self.enabled {
            return Ok(());
        }
        let name = user.ok_or(AuthError::UserEmpty)?;
        let user = self.users.get(name).ok_or(AuthError::UserNotFound)?;
        if user.roles.contains(ROOT_ROLE) {
            Ok(())
        } else {
            Err(AuthError::PermissionDenied)
        }
    }

    /// Whether `user` may do `needed` on `[key, range_end)` (etcd's range
    /// conventions): always while disabled; with `root`; or when the
    /// ranges the user's roles grant for `needed` cover it, together.
    pub fn check_range(
        &self,
        user: Option<&str>,
        key: &[u8],
        range_end: &[u8],
        needed: Permission,
    ) -> Result<(), AuthError> {
        if !self.enabled {
            return Ok(());
        }
        let name = user.ok_or(AuthError::UserEmpty)?;
        let user = self.users.get(name).ok_or(AuthError::PermissionDenied)?;
        if user.roles.contains(ROOT_ROLE) {
            return Ok(());
        }
        let mut granted: Vec<Interval> = user
            .roles
            .iter()
            .filter_map(|role| self.roles.get(role))
            .flatten()
            .filter(|p| p.kind.allows(needed))
            .map(|p| Interval::of(&p.key, &p.range_end))
            .collect();
        if Interval::of(key, range_end).is_covered_by(&mut granted) {
            Ok(())
        } else {
            Err(AuthError::PermissionDenied)
        }
    }

    /// Appends the state to a snapshot.
    pub(crate) fn encode(&self, out: &mut Encoder) {
        out.u8(u8::from(self.enabled));
        out.varint(self.revision);
        out.bytes(&self.secret);
        out.count(self.users.len());
        for (name, user) in &self.users {
            out.bytes(name.as_bytes());
            out.bytes(&user.password);
            out.varint(user.since);
            out.count(user.roles.len());
            for role in &user.roles {
                out.bytes(role.as_bytes());
            }
        }
        out.count(self.roles.len());
        for (name, perms) in &self.roles {
            out.bytes(name.as_bytes());
            out.count(perms.len());
            for perm in perms {
                out.u8(perm.kind.number() as u8);
                out.bytes(&perm.key);
                out.bytes(&perm.range_end);
            }
        }
    }

    /// Reads what [`encode`](Self::encode) wrote.
    pub(crate) fn decode(input: &mut Decoder) -> Result<AuthState, KvError> {
        let enabled = match input.u8()? {
            0 => false,
            1 => true,
            _ => return Err(input.corrupt("an auth flag that is neither 0 nor 1")),
        };
        let revision = input.varint()?;
        let secret = input.bytes()?;
        let users = decode_users(input)?;
        let roles = decode_roles(input)?;
        if enabled && secret.is_empty() {
            return Err(input.corrupt("auth enabled without a token secret"));
        }
        Ok(AuthState {
            enabled,
            revision,
            users,
            roles,
            secret,
        })
    }
}

/// Reads a user or role name, which must be UTF-8.
fn decode_name(input: &mut Decoder) -> Result<String, KvError> {
    String::from_utf8(input.bytes()?).map_err(|_| input.corrupt("a name that is not UTF-8"))
}

/// Reads the users of an encoded [`AuthState`] with their roles, refusing
/// more than the limits allow (of users, and of roles per user).
fn decode_users(input: &mut Decoder) -> Result<BTreeMap<String, User>, KvError> {
    let mut users = BTreeMap::new();
    let user_count = input.count(3)?;
    if user_count > AUTH_USERS_MAX {
        return Err(input.corrupt("too many users"));
    }
    for _ in 0..user_count {
        let user_name = decode_name(input)?;
        let password = input.bytes()?;
        let since = input.varint()?;
        let role_count = input.count(1)?;
        if role_count > USER_ROLES_MAX {
            return Err(input.corrupt("too many roles for a user"));
        }
        let mut roles = BTreeSet::new();
        for _ in 0..role_count {
            roles.insert(decode_name(input)?);
        }
        let user = User {
            password,
            roles,
            since,
        };
        users.insert(user_name, user);
    }
    Ok(users)
}

/// Reads the roles of an encoded [`AuthState`] with their permissions,
/// refusing more than the limits allow (of roles, and of permissions per
/// role) and unknown permission kinds.
fn decode_roles(input: &mut Decoder) -> Result<BTreeMap<String, Vec<KeyPermission>>, KvError> {
    let mut roles = BTreeMap::new();
    let role_count = input.count(2)?;
    if role_count > AUTH_ROLES_MAX {
        return Err(input.corrupt("too many roles"));
    }
    for _ in 0..role_count {
        let role_name = decode_name(input)?;
        let perm_count = input.count(3)?;
        if perm_count > ROLE_PERMISSIONS_MAX {
            return Err(input.corrupt("too many permissions for a role"));
        }
        let mut perms = Vec::with_capacity(perm_count);
        for _ in 0..perm_count {
            let kind = Permission::from_number(i32::from(input.u8()?))
                .ok_or_else(|| input.corrupt("unknown permission kind"))?;
            let key = input.bytes()?;
            let range_end = input.bytes()?;
            perms.push(KeyPermission {
                key,
                range_end,
                kind,
            });
        }
        roles.insert(role_name, perms);
    }
    Ok(roles)
}

/// A half-open key interval; `end == None` is unbounded.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Interval {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
}

impl Interval {
    /// `[key, range_end)` with etcd's conventions.
    fn of(key: &[u8], range_end: &[u8]) -> Interval {
        let end = match range_end {
            [] => {
                let mut next = key.to_vec();
                next.push(0);
                Some(next)
            }
            [0] => None,
            end => Some(end.to_vec()),
        };
        Interval {
            start: key.to_vec(),
            end,
        }
    }

    /// True when the union of `granted` contains `self`: walking the
    /// grants in order, the covered prefix grows until it reaches `self`'s
    /// end or a gap opens.
    fn is_covered_by(&self, granted: &mut [Interval]) -> bool {
        granted.sort();
        let mut covered_to = self.start.clone();
        for grant in granted.iter() {
            if grant.start > covered_to {
                return false;
            }
            match &grant.end {
                None => return true,
                Some(end) if *end > covered_to => covered_to = end.clone(),
                Some(_) => {}
            }
            if matches!(&self.end, Some(want) if covered_to >= *want) {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn perm(key: &str, end: &str, kind: Permission) -> KeyPermission {
        KeyPermission {
            key: key.into(),
            range_end: end.into(),
            kind,
        }
    }

    fn with_user(perms: &[KeyPermission]) -> AuthState {
        let mut auth = AuthState::default();
        auth.user_add(ROOT_USER, b"h".to_vec()).unwrap();
        auth.user_grant_role(ROOT_USER, ROOT_ROLE).unwrap();
        auth.user_add("alice", b"h".to_vec()).unwrap();
        auth.role_add("r").unwrap();
        for p in perms {
            auth.role_grant_permission("r", p.clone()).unwrap();
        }
        auth.user_grant_role("alice", "r").unwrap();
        auth.enable(vec![7; 32]).unwrap();
        auth
    }

    #[test]
    fn enable_needs_root_with_the_root_role_and_root_cannot_be_removed_while_on() {
        let mut auth = AuthState::default();
        assert_eq!(auth.enable(vec![1]), Err(AuthError::RootUserNotExist));
        auth.user_add(ROOT_USER, Vec::new()).unwrap();
        assert_eq!(auth.enable(vec![1]), Err(AuthError::RootRoleNotExist));
        auth.user_grant_role(ROOT_USER, ROOT_ROLE).unwrap();
        auth.enable(vec![1]).unwrap();
        assert_eq!(auth.user_delete(ROOT_USER), Err(AuthError::InvalidAuthMgmt));
        assert_eq!(
            auth.user_revoke_role(ROOT_USER, ROOT_ROLE),
            Err(AuthError::InvalidAuthMgmt)
        );
        auth.disable().unwrap();
        assert!(auth.secret().is_empty());
        auth.user_revoke_role(ROOT_USER, ROOT_ROLE).unwrap();
    }

    #[test]
    fn every_change_advances_the_revision_and_failures_do_not() {
        let mut auth = AuthState::default();
        auth.role_add("a").unwrap();
        assert_eq!(auth.revision(), 1);
        assert_eq!(auth.role_add("a"), Err(AuthError::RoleAlreadyExist));
        assert_eq!(auth.revision(), 1);
        assert_eq!(
            auth.user_grant_role("nobody", "a"),
            Err(AuthError::UserNotFound)
        );
        assert_eq!(auth.user_add("", Vec::new()), Err(AuthError::UserEmpty));
        assert_eq!(auth.role_add(""), Err(AuthError::RoleEmpty));
        assert_eq!(auth.revision(), 1);
    }

    #[test]
    fn permissions_cover_single_keys_prefixes_and_unions_of_ranges() {
        use Permission::*;
        let auth = with_user(&[
            perm("/a", "", Read),
            perm("/p/", "/p0", ReadWrite),
            perm("/m", "/n", Write),
            perm("/n", "/o", Write),
            perm("/z", "\0", Read),
        ]);
        let check = |key: &str, end: &str, kind| {
            auth.check_range(Some("alice"), key.as_bytes(), end.as_bytes(), kind)
        };
        assert_eq!(check("/a", "", Read), Ok(()));
        assert_eq!(check("/a", "", Write), Err(AuthError::PermissionDenied));
        assert_eq!(check("/ab", "", Read), Err(AuthError::PermissionDenied));
        assert_eq!(check("/p/x", "", Write), Ok(()));
        assert_eq!(check("/p/", "/p0", Read), Ok(()));
        assert_eq!(check("/", "0", Read), Err(AuthError::PermissionDenied));
        // Two touching grants cover a range that spans both.
        assert_eq!(check("/m1", "/n5", Write), Ok(()));
        assert_eq!(check("/m1", "/o1", Write), Err(AuthError::PermissionDenied));
        assert_eq!(check("/zz", "\0", Read), Ok(()));
        assert_eq!(check("/y", "\0", Read), Err(AuthError::PermissionDenied));
        assert_eq!(
            auth.check_range(None, b"/a", b"", Read),
            Err(AuthError::UserEmpty)
        );
        assert_eq!(auth.check_range(Some("root"), b"\0", b"\0", Write), Ok(()));
        assert_eq!(
            auth.check_admin(Some("alice")),
            Err(AuthError::PermissionDenied)
        );
        assert_eq!(auth.check_admin(Some("root")), Ok(()));
    }

    #[test]
    fn a_role_delete_revokes_it_from_users_and_a_regrant_replaces_the_kind() {
        let mut auth = with_user(&[perm("/a", "", Permission::Read)]);
        auth.role_grant_permission("r", perm("/a", "", Permission::ReadWrite))
            .unwrap();
        assert_eq!(auth.role("r").unwrap().len(), 1);
        assert_eq!(
            auth.check_range(Some("alice"), b"/a", b"", Permission::Write),
            Ok(())
        );
        auth.role_delete("r").unwrap();
        assert!(auth.user("alice").unwrap().roles.is_empty());
        assert_eq!(
            auth.check_range(Some("alice"), b"/a", b"", Permission::Read),
            Err(AuthError::PermissionDenied)
        );
    }

    #[test]
    fn the_state_survives_a_snapshot_round_trip() {
        let auth = with_user(&[perm("/p/", "/p0", Permission::ReadWrite)]);
        let mut out = Encoder::default();
        auth.encode(&mut out);
        let mut input = Decoder::new(&out.bytes);
        assert_eq!(AuthState::decode(&mut input).unwrap(), auth);
        assert!(input.is_done());
    }
}

/// The whole auth state but the token secret, as a backend file (etcd's
/// `auth`, `authUsers` and `authRoles` buckets) lists it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthImage {
    /// Whether permissions are checked.
    pub enabled: bool,
    /// The auth revision.
    pub revision: u64,
    /// Users by name; `since` is ignored on import (set to `revision`).
    pub users: BTreeMap<String, User>,
    /// Roles by name, with their permissions.
    pub roles: BTreeMap<String, Vec<KeyPermission>>,
}

impl AuthState {
    /// Everything but the secret (see [`AuthImage`]).
    pub fn image(&self) -> AuthImage {
        AuthImage {
            enabled: self.enabled,
            revision: self.revision,
            users: self.users.clone(),
            roles: self.roles.clone(),
        }
    }

    /// The state `image` describes, with `secret` to sign tokens if it is
    /// enabled. Refuses what no sequence of auth requests could have made:
    /// names past the bounds, a user holding a role that does not exist,
    /// auth enabled without the user `root` holding the role `root`.
    pub fn from_image(image: AuthImage, secret: Vec<u8>) -> Result<AuthState, String> {
        if image.users.len() > AUTH_USERS_MAX || image.roles.len() > AUTH_ROLES_MAX {
            return Err("more users or roles than a store holds".into());
        }
        for (name, perms) in &image.roles {
            check_name(name, AuthError::RoleEmpty).map_err(|e| format!("role {name:?}: {e}"))?;
            if perms.len() > ROLE_PERMISSIONS_MAX {
                return Err(format!("role {name:?} holds too many permissions"));
            }
        }
        let mut users = image.users;
        for (name, user) in &mut users {
            check_name(name, AuthError::UserEmpty).map_err(|e| format!("user {name:?}: {e}"))?;
            if user.roles.len() > USER_ROLES_MAX {
                return Err(format!("user {name:?} holds too many roles"));
            }
            if let Some(role) = user.roles.iter().find(|r| !image.roles.contains_key(*r)) {
                return Err(format!(
                    "user {name:?} holds role {role:?}, which does not exist"
                ));
            }
            user.since = image.revision;
        }
        let root_ready = users
            .get(ROOT_USER)
            .is_some_and(|root| root.roles.contains(ROOT_ROLE));
        if image.enabled && (!root_ready || secret.is_empty()) {
            return Err("auth is enabled without the user root holding the role root".into());
        }
        Ok(AuthState {
            enabled: image.enabled,
            revision: image.revision,
            users,
            roles: image.roles,
            secret: if image.enabled { secret } else { Vec::new() },
        })
    }
}
