//! A znode's `Stat` and `ACL`, as ZooKeeper writes them.

use crate::jute::{JuteError, JuteReader, JuteWriter};

/// A znode's metadata, in ZooKeeper's field order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// The zxid that created the node.
    pub czxid: i64,
    /// The zxid that last changed its data.
    pub mzxid: i64,
    /// Creation time, ms since the epoch.
    pub ctime: i64,
    /// Last data change time, ms since the epoch.
    pub mtime: i64,
    /// Data changes.
    pub version: i32,
    /// Child changes.
    pub cversion: i32,
    /// ACL changes.
    pub aversion: i32,
    /// The owning session of an ephemeral node; 0 otherwise.
    pub ephemeral_owner: i64,
    /// Bytes of data.
    pub data_length: i32,
    /// Children.
    pub num_children: i32,
    /// The zxid that last changed its children.
    pub pzxid: i64,
}

impl Stat {
    /// Bytes a stat takes on the wire.
    pub const WIRE_BYTES: usize = 68;

    /// Writes the stat.
    pub fn write(&self, w: &mut JuteWriter) {
        w.long(self.czxid)
            .long(self.mzxid)
            .long(self.ctime)
            .long(self.mtime)
            .int(self.version)
            .int(self.cversion)
            .int(self.aversion)
            .long(self.ephemeral_owner)
            .int(self.data_length)
            .int(self.num_children)
            .long(self.pzxid);
    }

    /// Reads a stat.
    pub fn read(r: &mut JuteReader<'_>) -> Result<Stat, JuteError> {
        Ok(Stat {
            czxid: r.long()?,
            mzxid: r.long()?,
            ctime: r.long()?,
            mtime: r.long()?,
            version: r.int()?,
            cversion: r.int()?,
            aversion: r.int()?,
            ephemeral_owner: r.long()?,
            data_length: r.int()?,
            num_children: r.int()?,
            pzxid: r.long()?,
        })
    }
}

/// One ACL entry: permissions for an identity.
#[derive(Clone, PartialEq, Eq, prost::Message)]
pub struct Acl {
    /// Permission bits (READ 1, WRITE 2, CREATE 4, DELETE 8, ADMIN 16).
    #[prost(int32, tag = "1")]
    pub perms: i32,
    /// The identity's scheme ("world", "digest", ...).
    #[prost(string, tag = "2")]
    pub scheme: String,
    /// The identity ("anyone", "user:hash", ...).
    #[prost(string, tag = "3")]
    pub id: String,
}

impl Acl {
    /// Every permission for anyone: ZooKeeper's OPEN_ACL_UNSAFE.
    pub fn open() -> Acl {
        Acl {
            perms: 31,
            scheme: "world".to_string(),
            id: "anyone".to_string(),
        }
    }

    /// Reads a vector of ACL entries; null reads as empty.
    pub fn read_list(r: &mut JuteReader<'_>) -> Result<Vec<Acl>, JuteError> {
        let n = r.count(12)?.unwrap_or(0);
        (0..n)
            .map(|_| {
                Ok(Acl {
                    perms: r.int()?,
                    scheme: r.text()?,
                    id: r.text()?,
                })
            })
            .collect()
    }

    /// Writes a vector of ACL entries.
    pub fn write_list(acl: &[Acl], w: &mut JuteWriter) {
        w.count(acl.len());
        for entry in acl {
            w.int(entry.perms).string(&entry.scheme).string(&entry.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_is_68_bytes_and_reads_back() {
        let stat = Stat {
            czxid: 1,
            mzxid: 2,
            ctime: 3,
            mtime: 4,
            version: 5,
            cversion: 6,
            aversion: 7,
            ephemeral_owner: 8,
            data_length: 9,
            num_children: 10,
            pzxid: 11,
        };
        let mut w = JuteWriter::new();
        stat.write(&mut w);
        let bytes = w.into_bytes();
        assert_eq!(bytes.len(), Stat::WIRE_BYTES);
        assert_eq!(Stat::read(&mut JuteReader::new(&bytes)), Ok(stat));
    }
}
