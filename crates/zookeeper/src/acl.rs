//! ZooKeeper's access control: who a connection is (its auth ids) and what
//! a node's ACL lets them do.
//!
//! A connection's ids are not replicated state: they belong to the
//! connection, as in ZooKeeper. A write carries them in its log entry, so
//! that every member checks it against the same ids at the same point of
//! the log; a read is checked where it is answered.

use crate::codes::ErrorCode;
use crate::stat::Acl;

/// Permission bits.
pub mod perms {
    /// Read data and list children.
    pub const READ: i32 = 1;
    /// Set data.
    pub const WRITE: i32 = 2;
    /// Create children.
    pub const CREATE: i32 = 4;
    /// Delete children.
    pub const DELETE: i32 = 8;
    /// Set the ACL.
    pub const ADMIN: i32 = 16;
    /// Everything.
    pub const ALL: i32 = 31;
}

/// One identity a connection has proven: `ip` for its address, `digest`
/// for a user that sent `addauth digest user:password`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct AuthId {
    /// The scheme.
    #[prost(string, tag = "1")]
    pub scheme: String,
    /// The identity, as the scheme writes it (`user:base64(sha1)` for digest).
    #[prost(string, tag = "2")]
    pub id: String,
}

/// Whether `ids` may do `perm` on a node with `acl`.
pub fn allowed(acl: &[Acl], perm: i32, ids: &[AuthId]) -> bool {
    acl.iter()
        .filter(|entry| entry.perms & perm != 0)
        .any(|entry| match entry.scheme.as_str() {
            "world" => entry.id == "anyone",
            "ip" => ids
                .iter()
                .any(|id| id.scheme == "ip" && ip_matches(&entry.id, &id.id)),
            scheme => ids
                .iter()
                .any(|id| id.scheme == scheme && id.id == entry.id),
        })
}

/// `address` is the `ip` ACL entry `pattern`: an address, or one with a
/// prefix length (`10.0.0.0/8`).
fn ip_matches(pattern: &str, address: &str) -> bool {
    let (base, bits) = match pattern.split_once('/') {
        Some((base, bits)) => (base, bits.parse::<u32>().ok()),
        None => (pattern, None),
    };
    let (Ok(base), Ok(address)) = (
        base.parse::<std::net::IpAddr>(),
        address.parse::<std::net::IpAddr>(),
    ) else {
        return false;
    };
    match (base, address) {
        (std::net::IpAddr::V4(b), std::net::IpAddr::V4(a)) => {
            let bits = bits.unwrap_or(32).min(32);
            let mask = if bits == 0 {
                0
            } else {
                u32::MAX << (32 - bits)
            };
            u32::from(b) & mask == u32::from(a) & mask
        }
        (std::net::IpAddr::V6(b), std::net::IpAddr::V6(a)) => {
            let bits = bits.unwrap_or(128).min(128);
            let mask = if bits == 0 {
                0
            } else {
                u128::MAX << (128 - bits)
            };
            u128::from(b) & mask == u128::from(a) & mask
        }
        _ => false,
    }
}

/// The ACL a create or setACL stores, as ZooKeeper fixes it up: each
/// `auth` entry becomes one entry per authenticated id of the caller (not
/// its address), and every entry must be valid for its scheme.
pub fn fix_acl(acl: &[Acl], ids: &[AuthId]) -> Result<Vec<Acl>, ErrorCode> {
    if acl.is_empty() {
        return Err(ErrorCode::InvalidAcl);
    }
    let mut fixed = Vec::with_capacity(acl.len());
    for entry in acl {
        match entry.scheme.as_str() {
            "auth" => {
                let mut any = false;
                for id in ids.iter().filter(|id| id.scheme != "ip") {
                    any = true;
                    fixed.push(Acl {
                        perms: entry.perms,
                        scheme: id.scheme.clone(),
                        id: id.id.clone(),
                    });
                }
                if !any {
                    return Err(ErrorCode::InvalidAcl);
                }
            }
            "world" if entry.id == "anyone" => fixed.push(entry.clone()),
            "digest" if entry.id.contains(':') => fixed.push(entry.clone()),
            "ip" if valid_ip_pattern(&entry.id) => fixed.push(entry.clone()),
            _ => return Err(ErrorCode::InvalidAcl),
        }
    }
    fixed.dedup();
    Ok(fixed)
}

fn valid_ip_pattern(pattern: &str) -> bool {
    let (base, bits) = match pattern.split_once('/') {
        Some((base, bits)) => (base, Some(bits)),
        None => (pattern, None),
    };
    let Ok(base) = base.parse::<std::net::IpAddr>() else {
        return false;
    };
    let most = if base.is_ipv4() { 32 } else { 128 };
    bits.is_none_or(|bits| bits.parse::<u32>().is_ok_and(|b| b <= most))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(scheme: &str, id: &str) -> AuthId {
        AuthId {
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    fn acl(perms: i32, scheme: &str, id: &str) -> Acl {
        Acl {
            perms,
            scheme: scheme.into(),
            id: id.into(),
        }
    }

    #[test]
    fn world_lets_anyone_and_digest_only_its_user() {
        let ids = [id("ip", "127.0.0.1"), id("digest", "bob:h")];
        assert!(allowed(&[Acl::open()], perms::WRITE, &[]));
        assert!(allowed(
            &[acl(perms::READ, "digest", "bob:h")],
            perms::READ,
            &ids
        ));
        assert!(!allowed(
            &[acl(perms::READ, "digest", "bob:h")],
            perms::WRITE,
            &ids
        ));
        assert!(!allowed(
            &[acl(perms::ALL, "digest", "eve:h")],
            perms::READ,
            &ids
        ));
        assert!(allowed(
            &[acl(perms::ALL, "ip", "127.0.0.0/8")],
            perms::READ,
            &ids
        ));
        assert!(!allowed(
            &[acl(perms::ALL, "ip", "10.0.0.0/8")],
            perms::READ,
            &ids
        ));
    }

    #[test]
    fn auth_becomes_the_callers_ids_and_bad_entries_are_refused() {
        let ids = [id("ip", "127.0.0.1"), id("digest", "bob:h")];
        assert_eq!(
            fix_acl(&[acl(perms::ALL, "auth", "")], &ids),
            Ok(vec![acl(perms::ALL, "digest", "bob:h")])
        );
        assert_eq!(
            fix_acl(&[acl(perms::ALL, "auth", "")], &ids[..1]),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(fix_acl(&[], &ids), Err(ErrorCode::InvalidAcl));
        assert_eq!(
            fix_acl(&[acl(perms::ALL, "world", "someone")], &ids),
            Err(ErrorCode::InvalidAcl)
        );
        assert_eq!(
            fix_acl(&[acl(perms::ALL, "nope", "x")], &ids),
            Err(ErrorCode::InvalidAcl)
        );
    }
}
