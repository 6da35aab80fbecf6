//! What cloudflared prints: one line at a time, JSON (`--output json`) or text. The lines
//! fsd reads are the metrics server's address and, for a quick tunnel, its public URL.

use std::sync::LazyLock;

use regex::Regex;

static METRICS: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"metrics server on (127\.0\.0\.1:\d+)").ok());
static QUICK_URL: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"https://[a-z0-9-]+\.trycloudflare\.com").ok());

/// What one line said that matters.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Seen {
    /// `127.0.0.1:<port>` of the metrics server (its `/ready` tells readiness).
    pub metrics: Option<String>,
    /// The public URL of a quick tunnel.
    pub url: Option<String>,
}

/// Reads one output line: a JSON line's `message` if it has one, else the raw line.
pub fn read_line(line: &str) -> Seen {
    let message = serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|value| value.get("message")?.as_str().map(str::to_string))
        .unwrap_or_else(|| line.to_string());
    let found = |pattern: &Option<Regex>, group: usize| {
        pattern
            .as_ref()?
            .captures(&message)
            .and_then(|captures| captures.get(group))
            .map(|m| m.as_str().to_string())
    };
    Seen {
        metrics: found(&METRICS, 1),
        url: found(&QUICK_URL, 0),
    }
}

/// A token as logs may show it: its first 5 characters and `***` (`***` alone when it is
/// that short), as the reference masks it.
pub fn masked(token: &str) -> String {
    match token.char_indices().nth(5) {
        Some((cut, _)) => format!("{}***", &token[..cut]),
        None => "***".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_json_and_text_lines() {
        let json = r#"{"level":"info","time":"2026-01-01T00:00:00Z","message":"Starting metrics server on 127.0.0.1:41234/metrics"}"#;
        assert_eq!(read_line(json).metrics.as_deref(), Some("127.0.0.1:41234"));
        let url = r#"{"level":"info","message":"|  https://quiet-river-alpha-beta.trycloudflare.com  |"}"#;
        assert_eq!(
            read_line(url).url.as_deref(),
            Some("https://quiet-river-alpha-beta.trycloudflare.com")
        );
        let text = "2026-01-01T00:00:00Z INF Starting metrics server on 127.0.0.1:9999/metrics";
        assert_eq!(read_line(text).metrics.as_deref(), Some("127.0.0.1:9999"));
        assert_eq!(read_line("nothing to see").metrics, None);
        assert_eq!(read_line("https://example.com").url, None);
    }

    #[test]
    fn tokens_are_masked_to_five_characters() {
        assert_eq!(masked("eyJhIjoiYiJ9.secret"), "eyJhI***");
        assert_eq!(masked("12345"), "***");
        assert_eq!(masked(""), "***");
    }
}
