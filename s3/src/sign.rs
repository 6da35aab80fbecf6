//! SigV4 signing and the percent-encoding of keys and query values, as S3 reads them.

use std::time::{Duration, SystemTime};

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SignatureLocation,
    SigningSettings, UriPathNormalizationMode, sign,
};
use aws_sigv4::sign::v4;
use aws_smithy_runtime_api::client::identity::Identity;

use crate::upstream::Upstream;

/// SigV4 headers (`authorization`, `x-amz-date`, `x-amz-content-sha256`) for an unsigned
/// payload, so bodies stream through without being hashed first. `headers` are signed as
/// given, plus `host` (which the HTTP client sets from `url`).
pub fn sign_headers(
    upstream: &Upstream,
    method: &str,
    url: &str,
    headers: &[(String, String)],
) -> Result<Vec<(String, String)>, String> {
    sign_headers_at(upstream, method, url, headers, SystemTime::now())
}

/// [`sign_headers`] at a given time (the Workers runtime has no `SystemTime::now`).
pub fn sign_headers_at(
    upstream: &Upstream,
    method: &str,
    url: &str,
    headers: &[(String, String)],
    time: SystemTime,
) -> Result<Vec<(String, String)>, String> {
    let mut settings = s3_settings();
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let identity = identity(upstream);
    let params = params(upstream, &identity, settings, time)?;
    let host = host_of(url)?;
    let signable = SignableRequest::new(
        method,
        url,
        headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(std::iter::once(("host", host.as_str()))),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    Ok(instructions
        .headers()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect())
}

/// A presigned URL: `url` (path and query already encoded as S3 reads them) with the SigV4
/// query parameters that let anyone holding it make that one `method` request until
/// `expires` after `time`. The time is a parameter because the Workers runtime has no
/// `SystemTime::now`; the payload is unsigned, as S3's presigned URLs are.
pub fn presign(
    upstream: &Upstream,
    method: &str,
    url: &str,
    expires: Duration,
    time: SystemTime,
) -> Result<String, String> {
    let mut settings = s3_settings();
    settings.signature_location = SignatureLocation::QueryParams;
    settings.expires_in = Some(expires);
    let identity = identity(upstream);
    let params = params(upstream, &identity, settings, time)?;
    let host = host_of(url)?;
    let signable = SignableRequest::new(
        method,
        url,
        std::iter::once(("host", host.as_str())),
        SignableBody::UnsignedPayload,
    )
    .map_err(|e| e.to_string())?;
    let (instructions, _) = sign(signable, &params)
        .map_err(|e| e.to_string())?
        .into_parts();
    let mut presigned = url.to_string();
    let mut separator = if url.contains('?') { '&' } else { '?' };
    for (name, value) in instructions.params() {
        presigned.push(separator);
        presigned.push_str(&encode(name));
        presigned.push('=');
        presigned.push_str(&encode(value));
        separator = '&';
    }
    Ok(presigned)
}

/// Signing as S3 reads it: keys percent-encoded once, paths never normalised.
fn s3_settings() -> SigningSettings {
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings
}

fn identity(upstream: &Upstream) -> Identity {
    Credentials::new(
        &upstream.access_key,
        &upstream.secret_key,
        None,
        None,
        "fsd",
    )
    .into()
}

fn params<'a>(
    upstream: &'a Upstream,
    identity: &'a Identity,
    settings: SigningSettings,
    time: SystemTime,
) -> Result<aws_sigv4::http_request::SigningParams<'a>, String> {
    Ok(v4::SigningParams::builder()
        .identity(identity)
        .region(&upstream.region)
        .name("s3")
        .time(time)
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into())
}

/// `host[:port]` of an absolute URL, as the `host` header carries it.
fn host_of(url: &str) -> Result<String, String> {
    let rest = url
        .split_once("://")
        .map(|(_, rest)| rest)
        .ok_or_else(|| format!("{url}: not an absolute URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok(host.to_string())
}

/// A key as a URL path: each segment encoded once, the `/` between them kept.
pub fn encode_key(key: &str) -> String {
    key.split('/').map(encode).collect::<Vec<_>>().join("/")
}

/// The path-style URL of `key` in `bucket` at `endpoint` (the bucket itself when `key` is
/// empty), with `query` encoded and in a stable order: the URL the client sends and the
/// presigned URLs both sides hand out.
pub fn object_url(endpoint: &str, bucket: &str, key: &str, query: &[(&str, &str)]) -> String {
    let mut url = format!("{endpoint}/{bucket}");
    if !key.is_empty() {
        url.push('/');
        url.push_str(&encode_key(key));
    }
    if !query.is_empty() {
        let mut pairs: Vec<String> = query
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        pairs.sort();
        url.push('?');
        url.push_str(&pairs.join("&"));
    }
    url
}

/// RFC 3986 unreserved characters kept, everything else `%XX`.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `%XX` sequences to bytes (and `+` kept as is, as S3 paths do).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 3 <= bytes.len()
            && let Ok(value) = u8::from_str_radix(&text[i + 1..i + 3], 16)
        {
            out.push(value);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_read_as_the_host_header_carries_them() {
        assert_eq!(
            host_of("http://127.0.0.1:9000/b/k?x=1").as_deref(),
            Ok("127.0.0.1:9000")
        );
        assert_eq!(
            host_of("https://a.r2.cloudflarestorage.com").as_deref(),
            Ok("a.r2.cloudflarestorage.com")
        );
        assert!(host_of("/b/k").is_err());
        assert!(host_of("http:///b").is_err());
    }

    #[test]
    fn decodes_and_encodes() {
        assert_eq!(percent_decode("/b/a%20b%2Fc"), "/b/a b/c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("team-a/"), "team-a%2F");
    }
}
