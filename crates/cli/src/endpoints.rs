//! Where the commands that act as clients find the cluster.
//!
//! `--endpoints` wins, then `BELLWETHER_ENDPOINTS`, then
//! `ETCDCTL_ENDPOINTS` (so a shell set up for etcdctl works unchanged),
//! then the cluster `bellwether up` starts by default. An empty value
//! counts as unset.

/// The client endpoints of the cluster `bellwether up` starts by default.
pub const UP_DEFAULT: &str = "127.0.0.1:7201,127.0.0.1:7202,127.0.0.1:7203";

/// The endpoints to use, from the flag or the process's environment.
pub fn resolve(flag: Option<&str>) -> Vec<String> {
    resolve_with(flag, |name| std::env::var(name).ok())
}

/// [`resolve`] with the environment read through `env`.
fn resolve_with(flag: Option<&str>, env: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let set = |value: Option<String>| value.filter(|v| !v.trim().is_empty());
    let chosen = set(flag.map(str::to_string))
        .or_else(|| set(env("BELLWETHER_ENDPOINTS")))
        .or_else(|| set(env("ETCDCTL_ENDPOINTS")))
        .unwrap_or_else(|| UP_DEFAULT.to_string());
    chosen
        .split(',')
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn the_flag_then_bellwether_then_etcdctl_then_up_s_default() {
        let both = [
            ("BELLWETHER_ENDPOINTS", "b:1"),
            ("ETCDCTL_ENDPOINTS", "e:1"),
        ];
        assert_eq!(resolve_with(Some("f:1, f:2"), env(&both)), ["f:1", "f:2"]);
        assert_eq!(resolve_with(None, env(&both)), ["b:1"]);
        assert_eq!(resolve_with(None, env(&both[1..])), ["e:1"]);
        assert_eq!(resolve_with(None, env(&[])).len(), 3);
        assert_eq!(
            resolve_with(Some(""), env(&both)),
            ["b:1"],
            "empty is unset"
        );
    }
}
