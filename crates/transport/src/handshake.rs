//! The first frame on every peer connection: who dials whom, in which
//! cluster, with which settings. The acceptor answers with one byte: 0
//! accepted, or a refusal code. A node of another cluster, an id that is
//! not a member, or a node whose settings differ (another algorithm, winner
//! rule or member list) is refused with a clear log line and a metric.

use bellwether_storage::codec::{put_u64, put_u8, Malformed, Reader};

/// Magic at the start of a handshake: "BWHS", version 2 (version 2 added
/// the fingerprint).
const MAGIC: &[u8; 4] = b"BWHS";
const VERSION: u8 = 2;

/// A checksum of the settings every node of a group must share, given as
/// text (for example `"bully;lowest;1,2,3"`). Two nodes whose
/// fingerprints differ refuse each other. Not a security measure: it turns
/// a misconfiguration into a clear error instead of a silent split.
pub fn fingerprint(settings: &str) -> u32 {
    crc32c::crc32c(settings.as_bytes()).max(1)
}

/// A dialer's introduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Cluster name of the dialer.
    pub cluster: String,
    /// The dialer's id.
    pub from: u64,
    /// The id it believes it is calling.
    pub to: u64,
    /// Its settings' [`fingerprint`], or 0 when it has none to check.
    pub fingerprint: u32,
}

/// Why a connection was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The dialer belongs to another cluster.
    ForeignCluster = 1,
    /// The dialer's id is not a member here.
    UnknownMember = 2,
    /// The dialer called another id at this address.
    WrongNode = 3,
    /// The handshake could not be read.
    Malformed = 4,
    /// The dialer's settings (algorithm, winner rule, member list) differ.
    SettingsDiffer = 5,
    /// The dialer was a member and has been removed for good: it should
    /// stop, not keep calling.
    Removed = 6,
}

impl Refusal {
    /// Metric label and log word.
    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::ForeignCluster => "foreign_cluster",
            Refusal::UnknownMember => "unknown_member",
            Refusal::WrongNode => "wrong_node",
            Refusal::Malformed => "malformed_handshake",
            Refusal::SettingsDiffer => "settings_differ",
            Refusal::Removed => "removed_member",
        }
    }

    /// From the byte on the wire.
    pub fn from_code(code: u8) -> Option<Refusal> {
        [
            Refusal::ForeignCluster,
            Refusal::UnknownMember,
            Refusal::WrongNode,
            Refusal::Malformed,
            Refusal::SettingsDiffer,
            Refusal::Removed,
        ]
        .into_iter()
        .find(|r| *r as u8 == code)
    }
}

impl Hello {
    /// The handshake payload.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32 + self.cluster.len());
        out.extend_from_slice(MAGIC);
        put_u8(&mut out, VERSION);
        put_u8(&mut out, self.cluster.len() as u8);
        out.extend_from_slice(self.cluster.as_bytes());
        put_u64(&mut out, self.from);
        put_u64(&mut out, self.to);
        out.extend_from_slice(&self.fingerprint.to_le_bytes());
        out
    }

    /// Parses a handshake payload.
    pub fn decode(bytes: &[u8]) -> Result<Hello, Malformed> {
        let mut r = Reader::new(bytes);
        if r.take(4, "magic")? != MAGIC {
            return Err(Malformed("not a bellwether peer (bad magic)".into()));
        }
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(Malformed(format!(
                "peer protocol version {version}, this node speaks {VERSION}"
            )));
        }
        let length = r.u8("cluster length")? as usize;
        let cluster = String::from_utf8(r.take(length, "cluster")?.to_vec())
            .map_err(|_| Malformed("cluster name is not UTF-8".into()))?;
        let hello = Hello {
            cluster,
            from: r.u64("from")?,
            to: r.u64("to")?,
            fingerprint: r.u32("fingerprint")?,
        };
        r.finish("handshake")?;
        Ok(hello)
    }

    /// Decides whether node `me` of `cluster` with `members` and settings
    /// `fingerprint` accepts it. A dialer outside `members` that is in
    /// `removed` (members removed for good) is told so. A fingerprint of 0
    /// on either side is not checked.
    pub fn check(
        &self,
        cluster: &str,
        me: u64,
        members: &[u64],
        removed: &[u64],
        fingerprint: u32,
    ) -> Result<(), Refusal> {
        if self.cluster != cluster {
            return Err(Refusal::ForeignCluster);
        }
        if !members.contains(&self.from) || self.from == me {
            if removed.contains(&self.from) && self.from != me {
                return Err(Refusal::Removed);
            }
            return Err(Refusal::UnknownMember);
        }
        if self.to != me {
            return Err(Refusal::WrongNode);
        }
        if self.fingerprint != 0 && fingerprint != 0 && self.fingerprint != fingerprint {
            return Err(Refusal::SettingsDiffer);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips_and_is_checked() {
        let hello = Hello {
            cluster: "prod".into(),
            from: 2,
            to: 1,
            fingerprint: fingerprint("bully;lowest;1,2,3"),
        };
        let ours = hello.fingerprint;
        assert_eq!(Hello::decode(&hello.encode()).unwrap(), hello);
        assert_eq!(hello.check("prod", 1, &[1, 2, 3], &[], ours), Ok(()));
        assert_eq!(
            hello.check("test", 1, &[1, 2, 3], &[], ours),
            Err(Refusal::ForeignCluster)
        );
        assert_eq!(
            hello.check("prod", 1, &[1, 3], &[], ours),
            Err(Refusal::UnknownMember)
        );
        assert_eq!(
            hello.check("prod", 1, &[1, 3], &[2], ours),
            Err(Refusal::Removed)
        );
        // One still in the configuration is accepted, whatever the record.
        assert_eq!(hello.check("prod", 1, &[1, 2, 3], &[2], ours), Ok(()));
        assert_eq!(
            Refusal::from_code(Refusal::Removed as u8),
            Some(Refusal::Removed)
        );
        assert_eq!(
            hello.check("prod", 3, &[1, 2, 3], &[], ours),
            Err(Refusal::WrongNode)
        );
        let other = fingerprint("bully;highest;1,2,3");
        assert_ne!(other, ours);
        assert_eq!(
            hello.check("prod", 1, &[1, 2, 3], &[], other),
            Err(Refusal::SettingsDiffer)
        );
        assert_eq!(
            hello.check("prod", 1, &[1, 2, 3], &[], 0),
            Ok(()),
            "0: unchecked"
        );
        for code in 1..=5 {
            assert_eq!(Refusal::from_code(code).map(|r| r as u8), Some(code));
        }
        assert!(Hello::decode(b"HTTP/1.1 200").is_err());
    }
}
