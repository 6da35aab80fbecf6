//! Credentials out of every string a clone reports: the userinfo of `http(s)://` URLs and
//! the values of secret query parameters (the reference's rules, applied here to the
//! success answer's `repoUrl` too).

/// Query parameters whose values are secrets.
const SECRET_PARAMS: &[&str] = &[
    "x-amz-credential",
    "x-amz-signature",
    "x-amz-security-token",
    "token",
    "secret",
    "password",
];

/// `text` with `https://user:pass@host` → `https://******@host` and `?token=…` →
/// `?token=REDACTED`.
pub fn redact(text: &str) -> String {
    redact_query(&redact_userinfo(text))
}

fn url_end(byte: u8) -> bool {
    byte.is_ascii_whitespace() || b"\"'`<>,;{}[]".contains(&byte)
}

fn redact_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_scheme(rest) {
        let (before, url) = rest.split_at(at);
        out.push_str(before);
        let scheme_len = url.find("://").map_or(0, |i| i + 3);
        let end = url.bytes().position(url_end).unwrap_or(url.len());
        let (whole, after) = url.split_at(end);
        let authority_end = whole[scheme_len..]
            .find('/')
            .map_or(whole.len(), |i| scheme_len + i);
        match whole[scheme_len..authority_end].rfind('@') {
            Some(at) => {
                out.push_str(&whole[..scheme_len]);
                out.push_str("******");
                out.push_str(&whole[scheme_len + at..]);
            }
            None => out.push_str(whole),
        }
        rest = after;
    }
    out.push_str(rest);
    out
}

fn find_scheme(text: &str) -> Option<usize> {
    let lower = text.to_ascii_lowercase();
    [lower.find("https://"), lower.find("http://")]
        .into_iter()
        .flatten()
        .min()
}

fn redact_query(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['?', '&']) {
        out.push_str(&rest[..=at]);
        rest = &rest[at + 1..];
        let Some(eq) = rest.find('=') else { continue };
        let name = &rest[..eq];
        if SECRET_PARAMS
            .iter()
            .any(|secret| name.eq_ignore_ascii_case(secret))
        {
            out.push_str(name);
            out.push_str("=REDACTED");
            let value_len = rest[eq + 1..]
                .bytes()
                .position(|b| b == b'&' || url_end(b))
                .unwrap_or(rest.len() - eq - 1);
            rest = &rest[eq + 1 + value_len..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn userinfo_and_secret_parameters_go() {
        assert_eq!(
            redact("fatal: could not read from 'https://user:p%40ss@github.com/o/r.git/': x"),
            "fatal: could not read from 'https://******@github.com/o/r.git/': x"
        );
        assert_eq!(
            redact("HTTPS://tok@host/r and http://a@b/c?token=s3cr3t&x=1 end"),
            "HTTPS://******@host/r and http://******@b/c?token=REDACTED&x=1 end"
        );
        assert_eq!(
            redact("https://h/o?X-Amz-Signature=abc&X-Amz-Credential=k%2F1 é"),
            "https://h/o?X-Amz-Signature=REDACTED&X-Amz-Credential=REDACTED é"
        );
    }

    #[test]
    fn what_has_no_secret_is_unchanged() {
        for text in [
            "git@github.com:o/r.git",
            "https://github.com/o/r.git",
            "file:///tmp/repo",
            "an email a@b.c outside a url",
            "https://h/p@q (an @ in the path)",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}
