//! Writing a prometheus-client registry for a `/metrics` endpoint, and the
//! content type to answer with.
//!
//! The text is OpenMetrics. A Prometheus server asks for it by name in its
//! `Accept` header and gets it labelled as such; anyone else (curl, a
//! browser, an older scraper) gets it as plain text, which a browser shows
//! instead of downloading.

use prometheus_client::registry::Registry;

/// OpenMetrics text, for a client that asked for it.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Plain text, for everyone else.
pub const PLAIN_CONTENT_TYPE: &str = "text/plain; charset=utf-8";

/// The content type to answer a request whose `Accept` header is `accept`.
pub fn content_type(accept: Option<&str>) -> &'static str {
    match accept {
        Some(accept) if accept.contains("application/openmetrics-text") => OPENMETRICS_CONTENT_TYPE,
        _ => PLAIN_CONTENT_TYPE,
    }
}

/// The registry's metrics as text, or why they could not be written (a
/// value the format cannot hold, such as a gauge past `i64::MAX`).
pub fn render(registry: &Registry) -> Result<String, std::fmt::Error> {
    let mut out = String::with_capacity(4096);
    prometheus_client::encoding::text::encode(&mut out, registry)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_client_that_asks_gets_openmetrics() {
        let prometheus =
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5";
        assert_eq!(content_type(Some(prometheus)), OPENMETRICS_CONTENT_TYPE);
        assert_eq!(content_type(Some("*/*")), PLAIN_CONTENT_TYPE);
        assert_eq!(content_type(None), PLAIN_CONTENT_TYPE);
    }
}
