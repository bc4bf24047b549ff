//! Times a snapshot of a store with many keys (a measurement, not a test):
//! `cargo run --release -p bellwether-kv --example snapshot_cost -- 1000000`.
use bellwether_kv::{KvStore, PutRequest};
use std::time::Instant;

fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace()
        .nth(1)
        .unwrap()
        .parse::<u64>()
        .unwrap()
        / 1024
}

fn main() {
    let keys: usize = std::env::args()
        .nth(1)
        .map_or(1_000_000, |a| a.parse().unwrap());
    let mut store = KvStore::new();
    let value = vec![b'v'; 256];
    let start = Instant::now();
    for i in 0..keys {
        store
            .put(&PutRequest::new(
                format!("/registry/key/{i:012}"),
                value.clone(),
            ))
            .unwrap();
    }
    println!(
        "loaded {keys} keys in {:?}, rss {} MiB",
        start.elapsed(),
        rss_mib()
    );
    let start = Instant::now();
    let pending = store.snapshot_pending();
    println!(
        "snapshot_pending {:?}, rss {} MiB",
        start.elapsed(),
        rss_mib()
    );
    let start = Instant::now();
    let bytes = pending.encode();
    println!(
        "encode {:?}, {} MiB, rss {} MiB",
        start.elapsed(),
        bytes.len() >> 20,
        rss_mib()
    );
    // The Snapshot RPC's image (etcd's backend file): the part taken
    // under the store's lock, then the image built from it.
    let start = Instant::now();
    let image_pending = store.image_pending();
    println!("image_pending {:?}", start.elapsed());
    let start = Instant::now();
    let image = image_pending.image();
    println!(
        "image {:?}, {} writes, rss {} MiB",
        start.elapsed(),
        image.writes.len(),
        rss_mib()
    );
    drop(image);
    let start = Instant::now();
    let restored = KvStore::restore(&bytes).unwrap();
    println!("restore {:?}, rss {} MiB", start.elapsed(), rss_mib());
    assert_eq!(restored.revision(), store.revision());
    // What a follower that installs a snapshot pays to free the store it
    // replaces.
    let start = Instant::now();
    drop(restored);
    println!("drop a restored store {:?}", start.elapsed());
    // Updates spread over the keys, without and then with a snapshot
    // pending: what copying the shared nodes costs the applies.
    for pending in [false, true] {
        let held = pending.then(|| store.snapshot_pending());
        let start = Instant::now();
        let updates = keys / 5;
        for i in 0..updates {
            let key = (i as u64 * 1_000_000_007 % keys as u64) as usize;
            store
                .put(&PutRequest::new(
                    format!("/registry/key/{key:012}"),
                    value.clone(),
                ))
                .unwrap();
        }
        println!(
            "{updates} spread updates with a snapshot pending: {pending}: {:?}, rss {} MiB",
            start.elapsed(),
            rss_mib()
        );
        drop(held);
    }
}
