//! Reading a bbolt file: the current meta page, then the root bucket's
//! tree, then any bucket's tree, checking every reference on the way.

use crate::layout::{
    u32_at, u64_at, PageHeader, BRANCH_ELEMENT_BYTES, BRANCH_PAGE, BUCKET_HEADER_BYTES,
    BUCKET_LEAF, LEAF_ELEMENT_BYTES, LEAF_PAGE, PAGE_HEADER_BYTES,
};
use crate::meta::Meta;
use crate::BoltError;
use std::collections::HashSet;

/// Deepest B+tree read: bbolt's trees are a handful of levels deep even
/// for billions of keys, so a deeper one is a cycle or damage.
const DEPTH_MAX: usize = 32;

/// One key of a bucket, borrowed from the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    /// The key.
    pub key: &'a [u8],
    /// The value (for a nested bucket, its header and inline page).
    pub value: &'a [u8],
    /// True when the entry is a nested bucket, not a value.
    pub nested_bucket: bool,
}

/// An opened bbolt file: the bytes and their current meta page.
#[derive(Debug)]
pub struct Database<'a> {
    bytes: &'a [u8],
    meta: Meta,
}

/// Where a bucket's tree starts.
enum Root<'a> {
    /// A page of the file.
    Page(u64),
    /// A leaf page inside the bucket's value (an inline bucket).
    Inline(&'a [u8]),
}

impl<'a> Database<'a> {
    /// Opens the database in `bytes` (a whole file, without anything
    /// appended): picks the valid meta page with the higher transaction
    /// id, as bbolt does.
    pub fn open(bytes: &'a [u8]) -> Result<Database<'a>, BoltError> {
        let first = Meta::read(bytes);
        // The second meta page is at one page size, which the first names;
        // if the first is damaged, try bbolt's usual 4 KiB.
        let page_size = first
            .as_ref()
            .map_or(crate::PAGE_SIZE, |m| m.page_size as usize);
        let second = bytes
            .get(page_size.min(bytes.len())..)
            .map_or(Err(BoltError::NotBolt), Meta::read);
        let meta = match (first, second) {
            (Ok(a), Ok(b)) => {
                if b.txid > a.txid {
                    b
                } else {
                    a
                }
            }
            (Ok(m), Err(_)) | (Err(_), Ok(m)) => m,
            // The first page's error says most (not bbolt, another version).
            (Err(e), Err(_)) => return Err(e),
        };
        let size = meta.page_size;
        if !size.is_power_of_two() || !(1024..=65536).contains(&size) {
            return Err(BoltError::PageSize(size));
        }
        let database = Database { bytes, meta };
        let file_pages = bytes.len() as u64 / u64::from(size);
        if meta.pages < 2 || meta.pages > file_pages {
            return Err(BoltError::Truncated {
                page: meta.pages.saturating_sub(1),
                end: meta.pages.saturating_mul(u64::from(size)),
                len: bytes.len() as u64,
            });
        }
        if meta.root < 2 || meta.root >= meta.pages {
            return Err(BoltError::Damaged {
                page: meta.root,
                what: "the root bucket's page is outside the file",
            });
        }
        Ok(database)
    }

    /// The file's page size.
    pub fn page_size(&self) -> usize {
        self.meta.page_size as usize
    }

    /// Pages in use (the file's size, as bbolt reports it, is this times
    /// the page size).
    pub fn pages(&self) -> u64 {
        self.meta.pages
    }

    /// The top-level buckets, in name order.
    pub fn buckets(&self) -> Result<Vec<Entry<'a>>, BoltError> {
        let entries = self.entries(Root::Page(self.meta.root))?;
        if entries.iter().any(|e| !e.nested_bucket) {
            return Err(BoltError::Damaged {
                page: self.meta.root,
                what: "the root bucket holds a value that is not a bucket",
            });
        }
        Ok(entries)
    }

    /// Every entry of the top-level bucket `name`, in key order; `None`
    /// when there is no such bucket.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Vec<Entry<'a>>>, BoltError> {
        let buckets = self.buckets()?;
        let Some(bucket) = buckets.iter().find(|b| b.key == name) else {
            return Ok(None);
        };
        self.nested(bucket).map(Some)
    }

    /// Every entry of the nested bucket `entry`, in key order.
    pub fn nested(&self, entry: &Entry<'a>) -> Result<Vec<Entry<'a>>, BoltError> {
        let damaged = |what| BoltError::Damaged {
            page: self.meta.root,
            what,
        };
        if !entry.nested_bucket || entry.value.len() < BUCKET_HEADER_BYTES {
            return Err(damaged("a bucket's header is missing"));
        }
        let root = u64_at(entry.value, 0);
        if root == 0 {
            self.entries(Root::Inline(&entry.value[BUCKET_HEADER_BYTES..]))
        } else {
            self.entries(Root::Page(root))
        }
    }

    /// Every leaf entry under `root`, in key order, checked to ascend.
    fn entries(&self, root: Root<'a>) -> Result<Vec<Entry<'a>>, BoltError> {
        let mut out = Vec::new();
        let mut seen = HashSet::new();
        match root {
            Root::Inline(page) => {
                let header = PageHeader::read(page).ok_or(BoltError::Damaged {
                    page: 0,
                    what: "an inline bucket's page is cut short",
                })?;
                if header.flags & LEAF_PAGE == 0 {
                    return Err(BoltError::Damaged {
                        page: 0,
                        what: "an inline bucket's page is not a leaf",
                    });
                }
                leaf_entries(page, header, 0, &mut out)?;
            }
            Root::Page(id) => self.walk(id, 0, &mut seen, &mut out)?,
        }
        for pair in out.windows(2) {
            if pair[0].key >= pair[1].key {
                return Err(BoltError::Damaged {
                    page: 0,
                    what: "a bucket's keys are out of order or repeated",
                });
            }
        }
        Ok(out)
    }

    /// Appends the entries of page `id`'s subtree to `out`.
    fn walk(
        &self,
        id: u64,
        depth: usize,
        seen: &mut HashSet<u64>,
        out: &mut Vec<Entry<'a>>,
    ) -> Result<(), BoltError> {
        let damaged = |what| BoltError::Damaged { page: id, what };
        if depth > DEPTH_MAX {
            return Err(damaged("the tree is deeper than any bbolt writes"));
        }
        if id < 2 || id >= self.meta.pages {
            return Err(damaged("a page reference outside the pages in use"));
        }
        if !seen.insert(id) {
            return Err(damaged("a page referenced twice"));
        }
        let (page, header) = self.page(id)?;
        if header.flags & BRANCH_PAGE != 0 {
            let count = usize::from(header.count);
            if count == 0 {
                return Err(damaged("an empty branch page"));
            }
            for i in 0..count {
                let at = PAGE_HEADER_BYTES + i * BRANCH_ELEMENT_BYTES;
                let element = page
                    .get(at..at + BRANCH_ELEMENT_BYTES)
                    .ok_or(damaged("branch elements run past the page"))?;
                let child = u64_at(element, 8);
                self.walk(child, depth + 1, seen, out)?;
            }
            Ok(())
        } else if header.flags & LEAF_PAGE != 0 {
            leaf_entries(page, header, id, out)
        } else {
            Err(damaged("a bucket's page is neither a branch nor a leaf"))
        }
    }

    /// Page `id` with its overflow pages, and its header.
    fn page(&self, id: u64) -> Result<(&'a [u8], PageHeader), BoltError> {
        let size = u64::from(self.meta.page_size);
        let start = id * size;
        let first = self
            .bytes
            .get(start as usize..(start + size) as usize)
            .ok_or(BoltError::Truncated {
                page: id,
                end: start + size,
                len: self.bytes.len() as u64,
            })?;
        let header = PageHeader::read(first).expect("a page holds its header");
        if header.id != id {
            return Err(BoltError::Damaged {
                page: id,
                what: "the page's header names another page",
            });
        }
        let span = u64::from(header.overflow) + 1;
        if id + span > self.meta.pages {
            return Err(BoltError::Damaged {
                page: id,
                what: "overflow pages past the pages in use",
            });
        }
        let end = start + span * size;
        let page = self
            .bytes
            .get(start as usize..end as usize)
            .ok_or(BoltError::Truncated {
                page: id,
                end,
                len: self.bytes.len() as u64,
            })?;
        Ok((page, header))
    }
}

/// Appends a leaf page's entries to `out`; `page` is the page with its
/// overflow (or an inline bucket's bytes), `id` its page for errors.
fn leaf_entries<'a>(
    page: &'a [u8],
    header: PageHeader,
    id: u64,
    out: &mut Vec<Entry<'a>>,
) -> Result<(), BoltError> {
    let damaged = |what| BoltError::Damaged { page: id, what };
    for i in 0..usize::from(header.count) {
        let at = PAGE_HEADER_BYTES + i * LEAF_ELEMENT_BYTES;
        let element = page
            .get(at..at + LEAF_ELEMENT_BYTES)
            .ok_or(damaged("leaf elements run past the page"))?;
        let flags = u32_at(element, 0);
        let key_at = at as u64 + u64::from(u32_at(element, 4));
        let key_end = key_at + u64::from(u32_at(element, 8));
        let value_end = key_end + u64::from(u32_at(element, 12));
        if value_end > page.len() as u64 {
            return Err(damaged("a key or value runs past its page"));
        }
        let nested_bucket = flags & BUCKET_LEAF != 0;
        let value = &page[key_end as usize..value_end as usize];
        if nested_bucket && value.len() < BUCKET_HEADER_BYTES {
            return Err(damaged("a bucket's header is cut short"));
        }
        out.push(Entry {
            key: &page[key_at as usize..key_end as usize],
            value,
            nested_bucket,
        });
    }
    Ok(())
}
