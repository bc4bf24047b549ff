//! Round trips through the writer and the reader, and damaged files.

use crate::layout::{PageHeader, BUCKET_LEAF, LEAF_PAGE};
use crate::{write_database, BoltError, Bucket, Database, PAGE_SIZE};

/// A small deterministic generator (xorshift64*), so failures repeat.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn bucket(name: &str, entries: impl IntoIterator<Item = (Vec<u8>, Vec<u8>)>) -> Bucket {
    let mut entries: Vec<_> = entries.into_iter().collect();
    entries.sort();
    entries.dedup_by(|a, b| a.0 == b.0);
    Bucket {
        name: name.as_bytes().to_vec(),
        entries,
    }
}

fn read_all(bytes: &[u8]) -> Result<Vec<Bucket>, BoltError> {
    let db = Database::open(bytes)?;
    let mut out = Vec::new();
    for b in db.buckets()? {
        let mut entries = Vec::new();
        for e in db.nested(&b)? {
            if e.nested_bucket {
                return Err(BoltError::Damaged {
                    page: 0,
                    what: "a nested bucket where none was written",
                });
            }
            entries.push((e.key.to_vec(), e.value.to_vec()));
        }
        out.push(Bucket {
            name: b.key.to_vec(),
            entries,
        });
    }
    Ok(out)
}

fn sample() -> Vec<Bucket> {
    let mut rng = Rng(7);
    let many = (0..20_000u32).map(|i| {
        let value = vec![b'v'; rng.below(300) as usize];
        (format!("key/{i:08}").into_bytes(), value)
    });
    let big = (0..5u8).map(|i| (vec![i], vec![i; 3 * PAGE_SIZE + 17 * usize::from(i)]));
    vec![
        bucket("key", many),
        bucket("big", big),
        bucket("empty", []),
        bucket("meta", [(b"a".to_vec(), b"1".to_vec())]),
    ]
}

#[test]
fn what_is_written_reads_back_whole_and_in_order() {
    let buckets = sample();
    let bytes = write_database(&buckets);
    assert_eq!(bytes.len() % PAGE_SIZE, 0);
    let mut expected = buckets.clone();
    expected.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(read_all(&bytes).unwrap(), expected);
    let db = Database::open(&bytes).unwrap();
    assert_eq!(db.pages() as usize * PAGE_SIZE, bytes.len());
    assert!(db.bucket(b"missing").unwrap().is_none());
    assert_eq!(db.bucket(b"meta").unwrap().unwrap().len(), 1);
}

#[test]
fn a_database_of_many_buckets_needs_a_branch_at_the_root() {
    let buckets: Vec<Bucket> = (0..600)
        .map(|i| bucket(&format!("bucket{i:04}"), [(vec![1], vec![2])]))
        .collect();
    let bytes = write_database(&buckets);
    assert_eq!(read_all(&bytes).unwrap(), buckets);
}

#[test]
fn every_page_is_used_once_and_none_is_free() {
    // bbolt's tx.Check: every page below the high-water mark is reachable
    // (meta, freelist, or a tree page with its overflow) exactly once.
    let bytes = write_database(&sample());
    let pages = bytes.len() / PAGE_SIZE;
    let mut covered = vec![0u32; pages];
    let mut id = 0;
    while id < pages {
        let header = PageHeader::read(&bytes[id * PAGE_SIZE..]).unwrap();
        assert_eq!(header.id as usize, id, "page {id} names itself");
        for cover in &mut covered[id..=id + header.overflow as usize] {
            *cover += 1;
        }
        id += header.overflow as usize + 1;
    }
    assert!(covered.iter().all(|c| *c == 1));
}

#[test]
fn an_inline_bucket_is_read() {
    // bbolt stores a small bucket inside its parent's leaf: a header with
    // root 0, then a leaf page's bytes. Build one by hand.
    let mut inline = vec![0u8; 16];
    let mut page = vec![0u8; 16 + 2 * 16];
    PageHeader {
        id: 0,
        flags: LEAF_PAGE,
        count: 2,
        overflow: 0,
    }
    .write(&mut page);
    let items: [(&[u8], &[u8]); 2] = [(b"k1", b"value1"), (b"k2", b"")];
    let mut data = Vec::new();
    for (i, (key, value)) in items.iter().enumerate() {
        let at = 16 + i * 16;
        let pos = (page.len() + data.len() - at) as u32;
        page[at + 4..at + 8].copy_from_slice(&pos.to_le_bytes());
        page[at + 8..at + 12].copy_from_slice(&(key.len() as u32).to_le_bytes());
        page[at + 12..at + 16].copy_from_slice(&(value.len() as u32).to_le_bytes());
        data.extend_from_slice(key);
        data.extend_from_slice(value);
    }
    page.extend_from_slice(&data);
    inline.extend_from_slice(&page);
    // Put that value into a written file's root bucket, by writing the
    // inline bucket as a plain value and then flagging it a bucket.
    let bytes = write_database(&[Bucket {
        name: b"inline".to_vec(),
        entries: vec![],
    }]);
    let db = Database::open(&bytes).unwrap();
    let root = db.buckets().unwrap()[0];
    let entry = crate::Entry {
        key: root.key,
        value: &inline,
        nested_bucket: true,
    };
    let entries = db.nested(&entry).unwrap();
    let got: Vec<(&[u8], &[u8])> = entries.iter().map(|e| (e.key, e.value)).collect();
    assert_eq!(got, items.to_vec());
    assert_eq!(BUCKET_LEAF, 1);
}

#[test]
fn a_file_that_is_not_bolt_or_of_another_version_is_named() {
    assert_eq!(Database::open(b"hello").unwrap_err(), BoltError::NotBolt);
    assert_eq!(
        Database::open(&vec![0; 3 * PAGE_SIZE]).unwrap_err(),
        BoltError::NotBolt
    );
    let mut bytes = write_database(&sample());
    for meta in [0, PAGE_SIZE] {
        bytes[meta + 20] = 3; // the version's low byte
    }
    assert_eq!(Database::open(&bytes).unwrap_err(), BoltError::Version(3));
}

#[test]
fn one_damaged_meta_falls_back_to_the_other_and_two_are_refused() {
    let mut bytes = write_database(&sample());
    bytes[16 + 40] ^= 1; // meta 0's page count, under its checksum
    assert!(read_all(&bytes).is_ok(), "meta 1 still names the tree");
    bytes[PAGE_SIZE + 16 + 40] ^= 1;
    assert_eq!(Database::open(&bytes).unwrap_err(), BoltError::MetaChecksum);
}

#[test]
fn a_truncated_file_is_refused() {
    let bytes = write_database(&sample());
    for cut in [
        PAGE_SIZE,
        3 * PAGE_SIZE,
        bytes.len() - PAGE_SIZE,
        bytes.len() - 1,
    ] {
        assert!(
            matches!(
                Database::open(&bytes[..cut]),
                Err(BoltError::Truncated { .. })
            ),
            "cut at {cut}"
        );
    }
}

#[test]
fn random_damage_is_an_error_or_a_readable_file_never_a_panic() {
    let clean = write_database(&sample());
    let mut rng = Rng(99);
    let mut refused = 0;
    for _ in 0..3_000 {
        let mut bytes = clean.clone();
        for _ in 0..1 + rng.below(4) {
            // Aim at page headers and element arrays half the time.
            let page = rng.below((bytes.len() / PAGE_SIZE) as u64) as usize;
            let at = if rng.below(2) == 0 {
                page * PAGE_SIZE + rng.below(64) as usize
            } else {
                rng.below(bytes.len() as u64) as usize
            };
            bytes[at] ^= 1 << rng.below(8);
        }
        if read_all(&bytes).is_err() {
            refused += 1;
        }
    }
    assert!(refused > 100, "damage to headers is noticed ({refused})");
}
