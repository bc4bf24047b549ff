//! A progress bar on stderr that redraws at most once per percent.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Width of the bar in characters.
const BAR_WIDTH: u64 = 40;

/// Prints `[#####.....] done/total` on stderr.
pub struct ProgressBar {
    /// False silences it (JSON output, --quiet).
    enabled: bool,
    /// Last percentage drawn, to avoid flooding logs.
    last_percent: AtomicU64,
}

impl ProgressBar {
    /// A bar that draws only when `enabled`.
    pub fn new(enabled: bool) -> Self {
        ProgressBar {
            enabled,
            last_percent: AtomicU64::new(u64::MAX),
        }
    }

    /// Reports progress; cheap when nothing needs redrawing.
    pub fn update(&self, done: u64, total: u64) {
        if !self.enabled || total == 0 {
            return;
        }
        let percent = done * 100 / total;
        if self.last_percent.swap(percent, Ordering::Relaxed) == percent {
            return;
        }
        let filled = done * BAR_WIDTH / total;
        let bar: String = (0..BAR_WIDTH)
            .map(|i| if i < filled { '#' } else { '.' })
            .collect();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r[{bar}] {done}/{total} ({percent}%)");
        let _ = err.flush();
    }

    /// Ends the line the bar was drawn on.
    pub fn finish(&self) {
        if self.enabled {
            eprintln!();
        }
    }
}
