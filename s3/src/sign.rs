//! SigV4 signing and the percent-encoding of keys and query values, as S3 reads them.

use std::time::SystemTime;

use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningSettings,
    UriPathNormalizationMode, sign,
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
    let identity: Identity = Credentials::new(
        &upstream.access_key,
        &upstream.secret_key,
        None,
        None,
        "fsd-proxy",
    )
    .into();
    let mut settings = SigningSettings::default();
    settings.percent_encoding_mode = PercentEncodingMode::Single;
    settings.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    settings.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    let params = v4::SigningParams::builder()
        .identity(&identity)
        .region(&upstream.region)
        .name("s3")
        .time(SystemTime::now())
        .settings(settings)
        .build()
        .map_err(|e| e.to_string())?
        .into();
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
    let host = match (parsed.host_str(), parsed.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => return Err(format!("{url}: no host")),
    };
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
    fn decodes_and_encodes() {
        assert_eq!(percent_decode("/b/a%20b%2Fc"), "/b/a b/c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("team-a/"), "team-a%2F");
    }
}
