//! Where the commands that act as clients find the cluster.
//!
//! `--endpoints` wins, then `BELLWETHER_ENDPOINTS`, then
//! `ETCDCTL_ENDPOINTS` (so a shell set up for etcdctl works unchanged),
//! then the cluster `bellwether up` starts by default.

/// The client endpoints of the cluster `bellwether up` starts by default.
pub const UP_DEFAULT: &str = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203";

/// The endpoints to use, as a list, from the flag or the environment.
pub fn resolve(flag: Option<&str>) -> Vec<String> {
    let chosen = flag
        .map(str::to_string)
        .or_else(|| std::env::var("BELLWETHER_ENDPOINTS").ok())
        .or_else(|| std::env::var("ETCDCTL_ENDPOINTS").ok())
        .filter(|list| !list.trim().is_empty())
        .unwrap_or_else(|| UP_DEFAULT.to_string());
    chosen
        .split(',')
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}
