//! The requests a ZooKeeper client sends after its handshake, decoded from
//! an operation code and the record that follows the request header.
//!
//! The same decoder reads a request off the socket and out of the log:
//! the log holds the bytes the client sent.

use crate::codes::{create_mode, op};
use crate::jute::{JuteError, JuteReader, JuteWriter};
use crate::stat::Acl;

/// A client's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// `create`, `create2`, `createContainer` or `createTTL` (`op` says
    /// which: it decides the answer's shape).
    Create(Create),
    /// `delete`.
    Delete {
        /// The node.
        path: String,
        /// The expected data version; -1: any.
        version: i32,
    },
    /// `exists`.
    Exists {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// `getData`.
    GetData {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
    },
    /// `setData`.
    SetData {
        /// The node.
        path: String,
        /// The new data; `None`: null (ZooKeeper keeps it apart from empty).
        data: Option<Vec<u8>>,
        /// The expected data version; -1: any.
        version: i32,
    },
    /// `getACL`.
    GetAcl {
        /// The node.
        path: String,
    },
    /// `setACL`.
    SetAcl {
        /// The node.
        path: String,
        /// The new ACL.
        acl: Vec<Acl>,
        /// The expected ACL version; -1: any.
        version: i32,
    },
    /// `getChildren` (`with_stat` false) or `getChildren2`.
    GetChildren {
        /// The node.
        path: String,
        /// Leave a watch.
        watch: bool,
        /// Answer the node's stat as well.
        with_stat: bool,
    },
    /// `sync`.
    Sync {
        /// The path named (ZooKeeper echoes it).
        path: String,
    },
    /// `check`, inside a multi.
    Check {
        /// The node.
        path: String,
        /// The expected data version; -1: any.
        version: i32,
    },
    /// `multi`: writes applied all or none.
    Multi(Vec<Request>),
    /// `multiRead`: reads answered one by one.
    MultiRead(Vec<Request>),
    /// `setWatches` or `setWatches2`: the watches a reconnecting client
    /// still holds.
    SetWatches(SetWatches),
    /// `addWatch`: a watch that stays after it fires.
    AddWatch {
        /// The node (it need not exist).
        path: String,
        /// 0: persistent; 1: persistent and recursive.
        mode: i32,
    },
    /// `checkWatches` (`remove` false) or `removeWatches`.
    RemoveWatches {
        /// The node.
        path: String,
        /// Which watches: 1 children, 2 data, 3 any, 4 persistent,
        /// 5 persistent recursive.
        kind: i32,
        /// Remove them; otherwise only say whether there are any.
        remove: bool,
    },
    /// `getAllChildrenNumber`.
    GetAllChildrenNumber {
        /// The node.
        path: String,
    },
    /// `getEphemerals`: the session's ephemeral nodes under a prefix.
    GetEphemerals {
        /// The path prefix.
        prefix: String,
    },
    /// `whoAmI`.
    WhoAmI,
    /// A ping.
    Ping,
    /// `closeSession`.
    CloseSession,
}

/// A create of any kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    /// The operation code it came with.
    pub op: i32,
    /// The node (for a sequential one, before its suffix).
    pub path: String,
    /// Its data; `None`: null (ZooKeeper keeps it apart from empty).
    pub data: Option<Vec<u8>>,
    /// Its ACL.
    pub acl: Vec<Acl>,
    /// The create mode.
    pub flags: i32,
    /// Milliseconds for a TTL node; 0 otherwise.
    pub ttl: i64,
}

impl Create {
    /// The node is ephemeral.
    pub fn ephemeral(&self) -> bool {
        matches!(
            self.flags,
            create_mode::EPHEMERAL | create_mode::EPHEMERAL_SEQUENTIAL
        )
    }

    /// The node's name gets a sequence suffix.
    pub fn sequential(&self) -> bool {
        matches!(
            self.flags,
            create_mode::PERSISTENT_SEQUENTIAL
                | create_mode::EPHEMERAL_SEQUENTIAL
                | create_mode::PERSISTENT_SEQUENTIAL_WITH_TTL
        )
    }
}

/// What a reconnecting client asks to watch again.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SetWatches {
    /// The last zxid the client saw.
    pub relative_zxid: i64,
    /// Data watches.
    pub data: Vec<String>,
    /// Exists watches.
    pub exist: Vec<String>,
    /// Child watches.
    pub child: Vec<String>,
    /// Persistent watches (`setWatches2`).
    pub persistent: Vec<String>,
    /// Persistent recursive watches (`setWatches2`).
    pub persistent_recursive: Vec<String>,
}

/// Why a request could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The record was malformed.
    Jute(JuteError),
    /// The operation code is not one this server implements.
    Unimplemented(i32),
}

impl From<JuteError> for RequestError {
    fn from(error: JuteError) -> Self {
        RequestError::Jute(error)
    }
}

impl Request {
    /// Decodes the record of operation `op`.
    pub fn decode(op: i32, body: &[u8]) -> Result<Request, RequestError> {
        let mut r = JuteReader::new(body);
        let request = Self::read(op, &mut r)?;
        Ok(request)
    }

    fn read(code: i32, r: &mut JuteReader<'_>) -> Result<Request, RequestError> {
        Ok(match code {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                let path = r.text()?;
                let data = r.buffer()?;
                let acl = Acl::read_list(r)?;
                let flags = r.int()?;
                let ttl = if code == op::CREATE_TTL { r.long()? } else { 0 };
                Request::Create(Create {
                    op: code,
                    path,
                    data,
                    acl,
                    flags,
                    ttl,
                })
            }
            op::DELETE => Request::Delete {
                path: r.text()?,
                version: r.int()?,
            },
            op::EXISTS => Request::Exists {
                path: r.text()?,
                watch: r.bool()?,
            },
            op::GET_DATA => Request::GetData {
                path: r.text()?,
                watch: r.bool()?,
            },
            op::SET_DATA => Request::SetData {
                path: r.text()?,
                data: r.buffer()?,
                version: r.int()?,
            },
            op::GET_ACL => Request::GetAcl { path: r.text()? },
            op::SET_ACL => Request::SetAcl {
                path: r.text()?,
                acl: Acl::read_list(r)?,
                version: r.int()?,
            },
            op::GET_CHILDREN | op::GET_CHILDREN2 => Request::GetChildren {
                path: r.text()?,
                watch: r.bool()?,
                with_stat: code == op::GET_CHILDREN2,
            },
            op::SYNC => Request::Sync { path: r.text()? },
            op::CHECK => Request::Check {
                path: r.text()?,
                version: r.int()?,
            },
            op::MULTI | op::MULTI_READ => {
                let mut ops = Vec::new();
                loop {
                    let kind = r.int()?;
                    let done = r.bool()?;
                    let _err = r.int()?;
                    if done {
                        break;
                    }
                    // No multi inside a multi: ZooKeeper has none, and
                    // nesting would let a packet recurse as deep as it
                    // is long.
                    if kind == op::MULTI || kind == op::MULTI_READ {
                        return Err(JuteError::BadValue.into());
                    }
                    ops.push(Self::read(kind, r)?);
                }
                if code == op::MULTI {
                    Request::Multi(ops)
                } else {
                    Request::MultiRead(ops)
                }
            }
            op::SET_WATCHES | op::SET_WATCHES2 => {
                let mut set = SetWatches {
                    relative_zxid: r.long()?,
                    data: r.strings()?,
                    exist: r.strings()?,
                    child: r.strings()?,
                    ..SetWatches::default()
                };
                if code == op::SET_WATCHES2 {
                    set.persistent = r.strings()?;
                    set.persistent_recursive = r.strings()?;
                }
                Request::SetWatches(set)
            }
            op::ADD_WATCH => Request::AddWatch {
                path: r.text()?,
                mode: r.int()?,
            },
            op::CHECK_WATCHES | op::REMOVE_WATCHES => Request::RemoveWatches {
                path: r.text()?,
                kind: r.int()?,
                remove: code == op::REMOVE_WATCHES,
            },
            op::GET_ALL_CHILDREN_NUMBER => Request::GetAllChildrenNumber { path: r.text()? },
            op::GET_EPHEMERALS => Request::GetEphemerals { prefix: r.text()? },
            op::WHO_AM_I => Request::WhoAmI,
            op::PING => Request::Ping,
            op::CLOSE_SESSION => Request::CloseSession,
            other => return Err(RequestError::Unimplemented(other)),
        })
    }

    /// The operation code this request is sent with.
    pub fn op(&self) -> i32 {
        match self {
            Request::Create(c) => c.op,
            Request::Delete { .. } => op::DELETE,
            Request::Exists { .. } => op::EXISTS,
            Request::GetData { .. } => op::GET_DATA,
            Request::SetData { .. } => op::SET_DATA,
            Request::GetAcl { .. } => op::GET_ACL,
            Request::SetAcl { .. } => op::SET_ACL,
            Request::GetChildren {
                with_stat: false, ..
            } => op::GET_CHILDREN,
            Request::GetChildren {
                with_stat: true, ..
            } => op::GET_CHILDREN2,
            Request::Sync { .. } => op::SYNC,
            Request::Check { .. } => op::CHECK,
            Request::Multi(_) => op::MULTI,
            Request::MultiRead(_) => op::MULTI_READ,
            Request::SetWatches(s)
                if s.persistent.is_empty() && s.persistent_recursive.is_empty() =>
            {
                op::SET_WATCHES
            }
            Request::SetWatches(_) => op::SET_WATCHES2,
            Request::AddWatch { .. } => op::ADD_WATCH,
            Request::RemoveWatches { remove: false, .. } => op::CHECK_WATCHES,
            Request::RemoveWatches { remove: true, .. } => op::REMOVE_WATCHES,
            Request::GetAllChildrenNumber { .. } => op::GET_ALL_CHILDREN_NUMBER,
            Request::GetEphemerals { .. } => op::GET_EPHEMERALS,
            Request::WhoAmI => op::WHO_AM_I,
            Request::Ping => op::PING,
            Request::CloseSession => op::CLOSE_SESSION,
        }
    }

    /// True for requests that change the tree: they go through the log.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            Request::Create(_)
                | Request::Delete { .. }
                | Request::SetData { .. }
                | Request::SetAcl { .. }
                | Request::Check { .. }
                | Request::Multi(_)
                | Request::CloseSession
        )
    }

    /// The record of this request, as a client sends it after the header.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = JuteWriter::new();
        self.write(&mut w);
        w.into_bytes()
    }

    fn write(&self, w: &mut JuteWriter) {
        match self {
            Request::Create(c) => {
                w.string(&c.path).buffer_or_null(c.data.as_deref());
                Acl::write_list(&c.acl, w);
                w.int(c.flags);
                if c.op == op::CREATE_TTL {
                    w.long(c.ttl);
                }
            }
            Request::Delete { path, version } | Request::Check { path, version } => {
                w.string(path).int(*version);
            }
            Request::Exists { path, watch } | Request::GetData { path, watch } => {
                w.string(path).bool(*watch);
            }
            Request::GetChildren { path, watch, .. } => {
                w.string(path).bool(*watch);
            }
            Request::SetData {
                path,
                data,
                version,
            } => {
                w.string(path).buffer_or_null(data.as_deref()).int(*version);
            }
            Request::GetAcl { path }
            | Request::Sync { path }
            | Request::GetAllChildrenNumber { path } => {
                w.string(path);
            }
            Request::GetEphemerals { prefix } => {
                w.string(prefix);
            }
            Request::SetAcl { path, acl, version } => {
                w.string(path);
                Acl::write_list(acl, w);
                w.int(*version);
            }
            Request::Multi(ops) | Request::MultiRead(ops) => {
                for request in ops {
                    w.int(request.op()).bool(false).int(-1);
                    request.write(w);
                }
                w.int(-1).bool(true).int(-1);
            }
            Request::SetWatches(s) => {
                w.long(s.relative_zxid)
                    .strings(&s.data)
                    .strings(&s.exist)
                    .strings(&s.child);
                if self.op() == op::SET_WATCHES2 {
                    w.strings(&s.persistent).strings(&s.persistent_recursive);
                }
            }
            Request::AddWatch { path, mode } => {
                w.string(path).int(*mode);
            }
            Request::RemoveWatches { path, kind, .. } => {
                w.string(path).int(*kind);
            }
            Request::WhoAmI | Request::Ping | Request::CloseSession => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(request: Request) {
        let bytes = request.encode();
        assert_eq!(Request::decode(request.op(), &bytes), Ok(request));
    }

    #[test]
    fn requests_read_back_as_written() {
        round_trip(Request::Create(Create {
            op: op::CREATE2,
            path: "/a".into(),
            data: Some(b"x".to_vec()),
            acl: vec![Acl::open()],
            flags: create_mode::EPHEMERAL_SEQUENTIAL,
            ttl: 0,
        }));
        round_trip(Request::Create(Create {
            op: op::CREATE_TTL,
            path: "/t".into(),
            data: None,
            acl: vec![Acl::open()],
            flags: create_mode::PERSISTENT_WITH_TTL,
            ttl: 5000,
        }));
        round_trip(Request::SetData {
            path: "/a".into(),
            data: Some(vec![1, 2]),
            version: -1,
        });
        round_trip(Request::Multi(vec![
            Request::Check {
                path: "/a".into(),
                version: 3,
            },
            Request::Delete {
                path: "/a".into(),
                version: -1,
            },
        ]));
        round_trip(Request::SetWatches(SetWatches {
            relative_zxid: 9,
            data: vec!["/a".into()],
            exist: vec![],
            child: vec!["/".into()],
            ..SetWatches::default()
        }));
        round_trip(Request::SetWatches(SetWatches {
            relative_zxid: 9,
            persistent_recursive: vec!["/r".into()],
            ..SetWatches::default()
        }));
        round_trip(Request::AddWatch {
            path: "/a".into(),
            mode: 1,
        });
        round_trip(Request::RemoveWatches {
            path: "/a".into(),
            kind: 3,
            remove: true,
        });
        round_trip(Request::GetChildren {
            path: "/".into(),
            watch: true,
            with_stat: true,
        });
    }

    #[test]
    fn a_multi_inside_a_multi_is_refused() {
        let mut nested = Vec::new();
        for _ in 0..10_000 {
            nested.extend_from_slice(&op::MULTI.to_be_bytes());
            nested.extend_from_slice(&[0, 255, 255, 255, 255]);
        }
        assert_eq!(
            Request::decode(op::MULTI, &nested),
            Err(RequestError::Jute(JuteError::BadValue))
        );
    }

    #[test]
    fn unknown_operations_and_short_records_are_errors() {
        assert_eq!(
            Request::decode(999, &[]),
            Err(RequestError::Unimplemented(999))
        );
        assert_eq!(
            Request::decode(op::DELETE, &[0, 0, 0, 1, b'/']),
            Err(RequestError::Jute(JuteError::Truncated))
        );
    }
}
