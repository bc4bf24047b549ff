//! Writing a fresh bbolt file: each bucket's entries packed into full leaf
//! pages, branch pages above them, the root bucket last, an empty freelist
//! and two meta pages.
//!
//! The layout is the simplest bbolt accepts and keeps using: every page is
//! reachable exactly once, nothing is free, and each branch key is its
//! child's first key, as bbolt itself keeps them. bbolt splits pages at
//! half full when it writes; packing them full is as valid to read and to
//! change, and makes the file smaller.

use crate::layout::{
    PageHeader, BRANCH_ELEMENT_BYTES, BRANCH_PAGE, BUCKET_HEADER_BYTES, BUCKET_LEAF, FREELIST_PAGE,
    LEAF_ELEMENT_BYTES, LEAF_PAGE, PAGE_HEADER_BYTES,
};
use crate::meta::Meta;
use crate::PAGE_SIZE;

/// A top-level bucket to write.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Its name.
    pub name: Vec<u8>,
    /// Its keys and values, in strictly ascending key order.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
}

/// One element about to be placed on a page.
struct Element<'a> {
    key: &'a [u8],
    /// A leaf's value; empty for a branch.
    value: &'a [u8],
    /// A leaf's flags, or a branch's child page.
    flags_or_child: u64,
}

/// The file being laid out, page by page.
struct Pages {
    bytes: Vec<u8>,
}

impl Pages {
    /// The id the next page gets.
    fn next_id(&self) -> u64 {
        (self.bytes.len() / PAGE_SIZE) as u64
    }

    /// Writes one node (a leaf or a branch) as the next page, with
    /// overflow pages if it needs them, and returns its id.
    fn node(&mut self, flags: u16, elements: &[Element]) -> u64 {
        let id = self.next_id();
        let element_bytes = if flags == BRANCH_PAGE {
            BRANCH_ELEMENT_BYTES
        } else {
            LEAF_ELEMENT_BYTES
        };
        let size = node_bytes(element_bytes, elements);
        let span = size.div_ceil(PAGE_SIZE).max(1);
        let start = self.bytes.len();
        self.bytes.resize(start + span * PAGE_SIZE, 0);
        let page = &mut self.bytes[start..];
        PageHeader {
            id,
            flags,
            count: u16::try_from(elements.len()).expect("a node holds under 64Ki elements"),
            overflow: u32::try_from(span - 1).expect("a node spans under 4Gi pages"),
        }
        .write(page);
        let mut data = PAGE_HEADER_BYTES + elements.len() * element_bytes;
        for (i, element) in elements.iter().enumerate() {
            let at = PAGE_HEADER_BYTES + i * element_bytes;
            let pos = u32::try_from(data - at).expect("a node is under 4 GiB");
            let key_size = u32::try_from(element.key.len()).expect("a key is under 4 GiB");
            if flags == BRANCH_PAGE {
                page[at..at + 4].copy_from_slice(&pos.to_le_bytes());
                page[at + 4..at + 8].copy_from_slice(&key_size.to_le_bytes());
                page[at + 8..at + 16].copy_from_slice(&element.flags_or_child.to_le_bytes());
            } else {
                let flags = u32::try_from(element.flags_or_child).expect("leaf flags fit");
                let value_size =
                    u32::try_from(element.value.len()).expect("a value is under 4 GiB");
                page[at..at + 4].copy_from_slice(&flags.to_le_bytes());
                page[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
                page[at + 8..at + 12].copy_from_slice(&key_size.to_le_bytes());
                page[at + 12..at + 16].copy_from_slice(&value_size.to_le_bytes());
            }
            page[data..data + element.key.len()].copy_from_slice(element.key);
            data += element.key.len();
            page[data..data + element.value.len()].copy_from_slice(element.value);
            data += element.value.len();
        }
        assert_eq!(data, size, "a node's bytes are as measured");
        id
    }

    /// Writes a B+tree of `elements` (leaf elements in key order) and
    /// returns its root page.
    fn tree(&mut self, elements: &[Element]) -> u64 {
        let mut level: Vec<(Vec<u8>, u64)> = Vec::new();
        for group in pack(LEAF_ELEMENT_BYTES, elements) {
            let first = group.first().map_or(Vec::new(), |e| e.key.to_vec());
            level.push((first, self.node(LEAF_PAGE, group)));
        }
        while level.len() > 1 {
            let children: Vec<Element> = level
                .iter()
                .map(|(key, child)| Element {
                    key,
                    value: &[],
                    flags_or_child: *child,
                })
                .collect();
            let mut up = Vec::new();
            for group in pack(BRANCH_ELEMENT_BYTES, &children) {
                up.push((group[0].key.to_vec(), self.node(BRANCH_PAGE, group)));
            }
            level = up;
        }
        level[0].1
    }
}

/// A node's size in bytes: header, elements, keys and values.
fn node_bytes(element_bytes: usize, elements: &[Element]) -> usize {
    PAGE_HEADER_BYTES
        + elements
            .iter()
            .map(|e| element_bytes + e.key.len() + e.value.len())
            .sum::<usize>()
}

/// Splits `elements` into runs that each fill at most one page; an element
/// too big for a page gets a run (and overflow pages) of its own. At least
/// one run, empty for no elements.
fn pack<'e, 'a>(element_bytes: usize, elements: &'e [Element<'a>]) -> Vec<&'e [Element<'a>]> {
    let mut runs = Vec::new();
    let mut start = 0;
    let mut size = PAGE_HEADER_BYTES;
    for (i, element) in elements.iter().enumerate() {
        let bytes = element_bytes + element.key.len() + element.value.len();
        if i > start && size + bytes > PAGE_SIZE {
            runs.push(&elements[start..i]);
            start = i;
            size = PAGE_HEADER_BYTES;
        }
        size += bytes;
    }
    runs.push(&elements[start..]);
    runs
}

/// The bytes of a fresh bbolt database holding `buckets` (top-level
/// buckets, with no nested ones). Panics if a bucket's keys do not
/// strictly ascend or two buckets share a name: the caller builds them
/// from sorted maps.
pub fn write_database(buckets: &[Bucket]) -> Vec<u8> {
    let mut pages = Pages {
        bytes: vec![0; 3 * PAGE_SIZE],
    };
    // Page 2: the freelist, empty.
    PageHeader {
        id: 2,
        flags: FREELIST_PAGE,
        count: 0,
        overflow: 0,
    }
    .write(&mut pages.bytes[2 * PAGE_SIZE..]);
    let mut sorted: Vec<&Bucket> = buckets.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let mut headers = Vec::new();
    for bucket in &sorted {
        assert!(
            bucket.entries.windows(2).all(|w| w[0].0 < w[1].0),
            "a bucket's keys ascend"
        );
        let elements: Vec<Element> = bucket
            .entries
            .iter()
            .map(|(key, value)| Element {
                key,
                value,
                flags_or_child: 0,
            })
            .collect();
        let root = pages.tree(&elements);
        let mut header = [0u8; BUCKET_HEADER_BYTES];
        header[0..8].copy_from_slice(&root.to_le_bytes());
        headers.push(header);
    }
    assert!(
        sorted.windows(2).all(|w| w[0].name < w[1].name),
        "bucket names are unique"
    );
    let roots: Vec<Element> = sorted
        .iter()
        .zip(&headers)
        .map(|(bucket, header)| Element {
            key: &bucket.name,
            value: header,
            flags_or_child: u64::from(BUCKET_LEAF),
        })
        .collect();
    let root = pages.tree(&roots);
    let count = pages.next_id();
    // Two metas naming the same tree; bbolt takes the higher txid and
    // writes its next meta to the other page (txid modulo 2).
    for (page, txid) in [(0u64, 2u64), (1, 1)] {
        let meta = Meta {
            page_size: PAGE_SIZE as u32,
            root,
            freelist: 2,
            pages: count,
            txid,
        };
        let start = page as usize * PAGE_SIZE;
        meta.write(page, &mut pages.bytes[start..start + PAGE_SIZE]);
    }
    pages.bytes
}
