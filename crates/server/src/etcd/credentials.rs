//! Password hashes and auth tokens, the secrets the kv crate stores as
//! opaque bytes (see `bellwether_kv::AuthState`).
//!
//! Passwords are hashed with a random salt by the member that receives the
//! request, before it reaches the log, so the log and snapshots never hold
//! a password. The hash is bcrypt at cost 10 in the `$2a$` form, exactly
//! what etcd stores, because snapshot files carry users between etcd and
//! bellwether both ways and a password must keep working after the move.
//! Hashes made by earlier builds (PBKDF2-HMAC-SHA256, a format byte first)
//! are still checked.
//!
//! Tokens are signed, not stored: `user.since.expiry.signature`, where the
//! signature is an HMAC-SHA256 over the rest with the secret chosen when
//! auth was enabled (it replicates through the log). Any member can check
//! any token without a log write, and holding a million tokens costs no
//! memory. Like etcd's JWT tokens, a token is valid until its fixed expiry
//! (`auth_token_ttl`), and clients authenticate again when it runs out. A
//! token dies early when auth is disabled (the secret changes), or when its
//! user is deleted or changes password (`since` no longer matches).

use bellwether_kv::AuthError;
use ring::rand::SecureRandom;
use std::num::NonZeroU32;

/// bcrypt's cost: etcd's default (`bcrypt.DefaultCost`).
const BCRYPT_COST: u32 = 10;

/// PBKDF2 rounds of the hashes earlier builds made.
const PBKDF2_ROUNDS: u32 = 100_000;

/// Salt and secret sizes, in bytes.
const SALT_BYTES: usize = 16;
const SECRET_BYTES: usize = 32;

/// The format byte of a PBKDF2 hash made by an earlier build.
const HASH_FORMAT_PBKDF2_SHA256: u8 = 1;

/// `count` random bytes from the operating system.
fn random_bytes(count: usize) -> Vec<u8> {
    let mut bytes = vec![0; count];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the operating system's random source works");
    bytes
}

/// A fresh token signing secret, for an auth enable.
pub fn new_secret() -> Vec<u8> {
    random_bytes(SECRET_BYTES)
}

fn rounds() -> NonZeroU32 {
    NonZeroU32::new(PBKDF2_ROUNDS).expect("a non-zero round count")
}

/// The stored form of `password`: a bcrypt hash, as etcd stores it.
pub fn hash_password(password: &str) -> Vec<u8> {
    let salt: [u8; SALT_BYTES] = random_bytes(SALT_BYTES)
        .try_into()
        .expect("16 random bytes");
    bcrypt::hash_with_salt(password, BCRYPT_COST, salt)
        .expect("cost 10 is a valid bcrypt cost")
        .format_for_version(bcrypt::Version::TwoA)
        .into_bytes()
}

/// True when `password` matches `stored` (in constant time). A user
/// without a password (empty `stored`) matches nothing.
pub fn password_matches(stored: &[u8], password: &str) -> bool {
    if stored.starts_with(b"$2") {
        let Ok(stored) = std::str::from_utf8(stored) else {
            return false;
        };
        return bcrypt::verify(password, stored).unwrap_or(false);
    }
    let Some((&HASH_FORMAT_PBKDF2_SHA256, rest)) = stored.split_first() else {
        return false;
    };
    if rest.len() != SALT_BYTES + 32 {
        return false;
    }
    let (salt, hash) = rest.split_at(SALT_BYTES);
    ring::pbkdf2::verify(
        ring::pbkdf2::PBKDF2_HMAC_SHA256,
        rounds(),
        salt,
        password.as_bytes(),
        hash,
    )
    .is_ok()
}

/// What a valid token says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenClaims {
    /// The user.
    pub user: String,
    /// The user's `since` when the token was issued.
    pub since: u64,
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn signing_key(secret: &[u8]) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret)
}

/// A token for `user`, valid until `expires_unix_ms`.
pub fn issue_token(secret: &[u8], user: &str, since: u64, expires_unix_ms: u64) -> String {
    assert!(
        !secret.is_empty(),
        "tokens are issued only while auth is on"
    );
    let body = format!("{}.{since}.{expires_unix_ms}", hex(user.as_bytes()));
    let signature = hex(ring::hmac::sign(&signing_key(secret), body.as_bytes()).as_ref());
    format!("{body}.{signature}")
}

/// Checks a token's signature and expiry (the caller checks `since`
/// against the user's).
pub fn verify_token(
    secret: &[u8],
    token: &str,
    now_unix_ms: u64,
) -> Result<TokenClaims, AuthError> {
    let invalid = AuthError::InvalidToken;
    if secret.is_empty() {
        return Err(invalid);
    }
    let (body, signature_hex) = token.rsplit_once('.').ok_or(invalid)?;
    let given = unhex(signature_hex).ok_or(invalid)?;
    // ring compares in constant time: a forger learns nothing from how
    // long a refusal took.
    ring::hmac::verify(&signing_key(secret), body.as_bytes(), &given).map_err(|_| invalid)?;
    let mut parts = body.split('.');
    let (Some(user), Some(since), Some(expires), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(invalid);
    };
    let user = String::from_utf8(unhex(user).ok_or(invalid)?).map_err(|_| invalid)?;
    let since = since.parse().map_err(|_| invalid)?;
    let expires: u64 = expires.parse().map_err(|_| invalid)?;
    if now_unix_ms >= expires {
        return Err(invalid);
    }
    Ok(TokenClaims { user, since })
}

/// Milliseconds since the Unix epoch, for token expiry.
pub fn now_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_matches_its_hash_only() {
        let stored = hash_password("s3cret");
        assert!(password_matches(&stored, "s3cret"));
        assert!(!password_matches(&stored, "s3cret "));
        assert!(!password_matches(&[], ""));
        // Two hashes of one password differ (random salt).
        assert_ne!(hash_password("s3cret"), stored);
        assert!(stored.starts_with(b"$2a$10$"), "etcd's form");
    }

    #[test]
    fn a_hash_made_by_an_earlier_build_still_matches() {
        let salt = [7u8; SALT_BYTES];
        let mut hash = [0u8; 32];
        ring::pbkdf2::derive(
            ring::pbkdf2::PBKDF2_HMAC_SHA256,
            rounds(),
            &salt,
            b"old",
            &mut hash,
        );
        let stored = [&[HASH_FORMAT_PBKDF2_SHA256][..], &salt, &hash].concat();
        assert!(password_matches(&stored, "old"));
        assert!(!password_matches(&stored, "new"));
    }

    #[test]
    fn a_token_checks_out_until_it_expires_and_cannot_be_forged() {
        let secret = new_secret();
        let token = issue_token(&secret, "alice.b", 7, 2_000);
        let claims = verify_token(&secret, &token, 1_999).unwrap();
        assert_eq!((claims.user.as_str(), claims.since), ("alice.b", 7));
        assert_eq!(
            verify_token(&secret, &token, 2_000),
            Err(AuthError::InvalidToken)
        );
        assert_eq!(
            verify_token(&new_secret(), &token, 0),
            Err(AuthError::InvalidToken)
        );
        // Changing the user or the expiry breaks the signature.
        let forged = token.replacen(&hex(b"alice.b"), &hex(b"root"), 1);
        assert_eq!(
            verify_token(&secret, &forged, 0),
            Err(AuthError::InvalidToken)
        );
        let later = token.replacen(".2000.", ".9999.", 1);
        assert_eq!(
            verify_token(&secret, &later, 0),
            Err(AuthError::InvalidToken)
        );
        for garbage in ["", ".", "a.b.c.d", "zz.1.2.00", &token[..token.len() - 1]] {
            assert_eq!(
                verify_token(&secret, garbage, 0),
                Err(AuthError::InvalidToken)
            );
        }
    }
}
