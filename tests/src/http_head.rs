//! The parts of an HTTP request head the stand-ins and proxies here read (httparse's, owned).

/// A request's method, path and headers (names lowercased).
pub struct RequestHead {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    pub fn of(parsed: &httparse::Request<'_, '_>) -> RequestHead {
        RequestHead {
            method: parsed.method.unwrap_or_default().to_string(),
            path: parsed.path.unwrap_or_default().to_string(),
            headers: lowercase_headers(parsed.headers),
        }
    }

    /// The first value of the header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Headers as owned pairs, names lowercased.
pub fn lowercase_headers(headers: &[httparse::Header<'_>]) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|h| {
            let value = String::from_utf8_lossy(h.value).into_owned();
            (h.name.to_ascii_lowercase(), value)
        })
        .collect()
}
