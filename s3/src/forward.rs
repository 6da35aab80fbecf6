//! One credential-proxy request decided without I/O, so that the native proxy
//! ([`crate::proxy`]) and the Cloudflare Worker's (which runs in wasm, with no runtime) let
//! through, drop and rewrite exactly the same things.
//!
//! A proxy URL is `<proxy>/<token>`: the token is the mount's secret, the first path segment
//! of every request, so a process that can reach the proxy but was not handed the mount
//! cannot use it. Past the token a request is path-style S3 (`/<bucket>/<key>?<query>`); it
//! is checked against the mount's [`Scope`], stripped of any authentication it carries
//! (headers outside [`PASSED_HEADERS`], presigning parameters) and rewritten for the real
//! endpoint, where the caller signs and sends it.

use fsd_control::{Scope, ScopeDenied};

use crate::sign::{encode, percent_decode};

/// Headers a client may send that are passed on (and signed); everything else is dropped,
/// authentication first of all. Entries ending in `-` are prefixes.
pub const PASSED_HEADERS: &[&str] = &[
    "content-type",
    "content-length",
    "content-md5",
    "content-encoding",
    "content-disposition",
    "cache-control",
    "expires",
    "range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
    "x-amz-copy-source",
    "x-amz-copy-source-range",
    "x-amz-metadata-directive",
    "x-amz-meta-",
];

/// Response headers that belong to one hop and are not passed back.
pub const HOP_HEADERS: &[&str] = &["connection", "transfer-encoding", "keep-alive"];

/// A request let through: where it goes and the headers to sign and send with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forward {
    pub url: String,
    pub headers: Vec<(String, String)>,
}

/// Why a request was not let through; each becomes an S3 error answer ([`Refusal::answer`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The path does not start with the mount's token.
    UnknownMount,
    /// Outside the mount's scope.
    Denied(ScopeDenied),
}

impl Refusal {
    /// The HTTP status and S3 error XML to answer with; `resource` is the request's path.
    pub fn answer(&self, resource: &str) -> (u16, String) {
        let message = match self {
            Self::UnknownMount => "no mount is served at this path".to_string(),
            Self::Denied(denied) => denied.to_string(),
        };
        (403, error_xml("AccessDenied", &message, resource))
    }
}

/// The token path segment's answer: the rest of `raw_path` after `/<token>`, if it starts
/// with exactly that segment. Compared in constant time: the token is a secret.
pub fn strip_token<'a>(raw_path: &'a str, token: &str) -> Option<&'a str> {
    let rest = raw_path.strip_prefix('/')?;
    let (first, rest) = match rest.find('/') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, ""),
    };
    if token.is_empty() || !fsd_control::preview::tokens_match(first, token) {
        return None;
    }
    Some(if rest.is_empty() { "/" } else { rest })
}

/// Decides one request: `raw_path` (after the token, still percent-encoded) and
/// `raw_query` as received, `headers` as received (names lower-case). `endpoint` is the real
/// store's, without a trailing `/`.
pub fn plan<'h>(
    scope: &Scope,
    endpoint: &str,
    method: &str,
    raw_path: &str,
    raw_query: Option<&str>,
    headers: impl IntoIterator<Item = (&'h str, &'h str)>,
) -> Result<Forward, ScopeDenied> {
    let path = percent_decode(raw_path);
    // Presigned-URL parameters are authentication too: dropped.
    let query: Vec<(String, String)> = raw_query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .filter(|(k, _)| !k.to_ascii_lowercase().starts_with("x-amz-"))
        .collect();
    let headers: Vec<(String, String)> = headers
        .into_iter()
        .filter(|(name, _)| passed(name))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    let copy_source = headers
        .iter()
        .find(|(name, _)| name == "x-amz-copy-source")
        .map(|(_, value)| percent_decode(value));
    scope.check(method, &path, &query, copy_source.as_deref())?;
    let mut url = format!("{}{raw_path}", endpoint.trim_end_matches('/'));
    let query_string = query
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&");
    if !query_string.is_empty() {
        url.push('?');
        url.push_str(&query_string);
    }
    Ok(Forward { url, headers })
}

fn passed(name: &str) -> bool {
    PASSED_HEADERS.iter().any(|passed| {
        if passed.ends_with('-') {
            name.starts_with(passed)
        } else {
            name == *passed
        }
    })
}

/// An S3-style XML error body.
pub fn error_xml(code: &str, message: &str, resource: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>{}</Message><Resource>{}</Resource></Error>",
        fsd_control::xml::escape(message),
        fsd_control::xml::escape(resource)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope() -> Scope {
        Scope {
            bucket: "b".into(),
            prefix: "team/".into(),
            read_only: false,
        }
    }

    #[test]
    fn the_token_is_the_whole_first_segment() {
        assert_eq!(strip_token("/tok/b/team/x", "tok"), Some("/b/team/x"));
        assert_eq!(strip_token("/tok", "tok"), Some("/"));
        assert_eq!(strip_token("/tok/", "tok"), Some("/"));
        for refused in ["/tokx/b/team/x", "/to/b", "/b/team/x", "tok/b", "", "/"] {
            assert_eq!(strip_token(refused, "tok"), None, "{refused}");
        }
        assert_eq!(strip_token("//b", ""), None, "an empty token opens nothing");
    }

    #[test]
    fn authentication_is_dropped_and_the_rest_passed_on() {
        let forward = plan(
            &scope(),
            "https://store.example/",
            "PUT",
            "/b/team/a%20b.txt",
            Some("X-Amz-Signature=abc&x-amz-credential=k&partNumber=2&uploadId=u%2B1"),
            [
                ("authorization", "AWS4-HMAC-SHA256 Credential=x:x"),
                ("x-amz-date", "20260101T000000Z"),
                ("x-amz-security-token", "t"),
                ("content-type", "text/plain"),
                ("content-length", "5"),
                ("x-amz-meta-mode", "644"),
                ("cookie", "c"),
            ],
        )
        .expect("in scope");
        assert_eq!(
            forward.url,
            "https://store.example/b/team/a%20b.txt?partNumber=2&uploadId=u%2B1"
        );
        assert_eq!(
            forward.headers,
            [
                ("content-type".to_string(), "text/plain".to_string()),
                ("content-length".into(), "5".into()),
                ("x-amz-meta-mode".into(), "644".into()),
            ]
        );
    }

    #[test]
    fn the_scope_decides_with_decoded_paths_and_copy_sources() {
        let outside = plan(&scope(), "http://s", "GET", "/b/other%2Fx", None, []);
        assert!(
            outside.is_err(),
            "an encoded slash is still a key outside the prefix"
        );
        let copy_out = plan(
            &scope(),
            "http://s",
            "PUT",
            "/b/team/copy",
            None,
            [("x-amz-copy-source", "/b/secret%2Fkey")],
        );
        assert!(copy_out.is_err());
        let copy_in = plan(
            &scope(),
            "http://s",
            "PUT",
            "/b/team/copy",
            None,
            [("x-amz-copy-source", "/b/team/src")],
        );
        assert!(copy_in.is_ok());
    }

    #[test]
    fn refusals_answer_s3_access_denied() {
        let (status, body) = Refusal::UnknownMount.answer("/x/<y>");
        assert_eq!(status, 403);
        assert!(body.contains("<Code>AccessDenied</Code>"), "{body}");
        assert!(body.contains("<Resource>/x/&lt;y&gt;</Resource>"), "{body}");
    }
}
