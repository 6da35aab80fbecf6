//! Preview URLs: which ports may be exposed, the tokens that guard them, the URL a port
//! gets, how a request's host names a sandbox, port and token, and whether a preview
//! request may be forwarded now. The reference's rules (docs/api.md, Preview URLs), in
//! plain Rust: the gateway and the Worker decide the same way.
//!
//! Nothing here does I/O or draws randomness: a generated token is made from bytes the
//! caller supplies.

use std::collections::BTreeMap;

/// Ids a preview host may not name (case-insensitive), as the reference.
const RESERVED_IDS: [&str; 7] = [
    "www",
    "api",
    "admin",
    "root",
    "system",
    "cloudflare",
    "workers",
];
/// Longest custom token.
pub const MAX_CUSTOM_TOKEN: usize = 16;
/// Longest token a preview host may carry (one DNS label).
const MAX_HOST_TOKEN: usize = 63;
/// Longest sandbox id a preview host may carry (one DNS label).
const MAX_HOST_ID: usize = 63;

/// Why an exposure or a URL is refused. Messages are the reference's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreviewError {
    #[error(
        "Invalid port number: {port}. Must be 1024-65535, excluding {control} (sandbox control plane)."
    )]
    InvalidPort { port: u32, control: u16 },
    #[error("Custom token must be 1-16 characters of a-z, 0-9 and _")]
    InvalidToken,
    #[error("Token '{token}' is already in use by port {port}")]
    TokenInUse { token: String, port: u16 },
    /// `*.workers.dev` cannot carry wildcard preview hosts (`CUSTOM_DOMAIN_REQUIRED`).
    #[error("Preview URLs need a custom domain; {hostname} is a workers.dev hostname")]
    CustomDomainRequired { hostname: String },
    #[error("Invalid sandbox id {id:?}")]
    InvalidSandboxId { id: String },
}

/// A port a preview URL may reach: 1024–65535, not the daemon's own (`control`).
pub fn validate_port(port: u32, control: u16) -> Result<u16, PreviewError> {
    match u16::try_from(port) {
        Ok(valid) if valid >= 1024 && valid != control => Ok(valid),
        _ => Err(PreviewError::InvalidPort { port, control }),
    }
}

/// A custom token: 1–16 characters of `[a-z0-9_]`.
pub fn validate_custom_token(token: &str) -> Result<(), PreviewError> {
    let valid = (1..=MAX_CUSTOM_TOKEN).contains(&token.len()) && token.bytes().all(token_byte);
    if valid {
        Ok(())
    } else {
        Err(PreviewError::InvalidToken)
    }
}

fn token_byte(byte: u8) -> bool {
    byte.is_ascii_lowercase() || byte.is_ascii_digit() || byte == b'_'
}

/// A generated token from 12 random bytes, as the reference makes one: standard base64
/// (16 characters, no padding), `+` and `/` turned into `_`, lowercased.
pub fn generated_token(random: [u8; 12]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .encode(random)
        .replace(['+', '/'], "_")
        .to_ascii_lowercase()
}

/// Compares without stopping at the first difference, so timing does not tell the token.
pub fn tokens_match(presented: &str, stored: &str) -> bool {
    let (a, b) = (presented.as_bytes(), stored.as_bytes());
    let mut difference = a.len() ^ b.len();
    for (index, byte) in b.iter().enumerate() {
        difference |= usize::from(a.get(index).copied().unwrap_or(0) ^ byte);
    }
    difference == 0
}

/// One exposed port's authorization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposure {
    pub token: String,
    pub name: Option<String>,
}

/// The exposed ports of one sandbox and their tokens: one token per port, a token for one
/// port only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PortTokens {
    ports: BTreeMap<u16, Exposure>,
}

impl PortTokens {
    /// Exposes `port` (already validated) and returns its token: `token` when given (it
    /// must be valid and not another port's), else the port's stored token, else one
    /// generated from `random()`.
    pub fn expose(
        &mut self,
        port: u16,
        token: Option<&str>,
        name: Option<String>,
        random: impl FnOnce() -> [u8; 12],
    ) -> Result<String, PreviewError> {
        let token = match token {
            Some(token) => {
                validate_custom_token(token)?;
                token.to_string()
            }
            None => match self.ports.get(&port) {
                Some(stored) => stored.token.clone(),
                None => generated_token(random()),
            },
        };
        if let Some((&other, _)) = self
            .ports
            .iter()
            .find(|(other, exposure)| **other != port && exposure.token == token)
        {
            return Err(PreviewError::TokenInUse { token, port: other });
        }
        self.ports.insert(
            port,
            Exposure {
                token: token.clone(),
                name,
            },
        );
        Ok(token)
    }

    /// Ends a port's exposure; exposing nothing is fine.
    pub fn unexpose(&mut self, port: u16) {
        self.ports.remove(&port);
    }

    pub fn get(&self, port: u16) -> Option<&Exposure> {
        self.ports.get(&port)
    }

    /// The exposed ports, in order.
    pub fn ports(&self) -> impl Iterator<Item = (u16, &Exposure)> {
        self.ports.iter().map(|(&port, exposure)| (port, exposure))
    }

    /// Whether `token` opens `port`.
    pub fn authorizes(&self, port: u16, token: &str) -> bool {
        self.ports
            .get(&port)
            .is_some_and(|exposure| tokens_match(token, &exposure.token))
    }
}

/// Whether `hostname` (with or without `:port`) is a local one: `localhost`, `127.0.0.1`,
/// `0.0.0.0` or `[::1]`.
fn is_local(hostname: &str) -> bool {
    let host = match hostname.strip_prefix('[') {
        Some(rest) => rest.split(']').next().map(|inner| format!("[{inner}]")),
        None => hostname.split(':').next().map(str::to_string),
    };
    matches!(
        host.as_deref(),
        Some("localhost" | "127.0.0.1" | "0.0.0.0" | "[::1]")
    )
}

/// The preview URL of `port` in sandbox `sandbox_id` behind `hostname`:
/// `https://<port>-<id>-<token>.<hostname>/`, or `http://…` for a local hostname (whose
/// own `:port`, if any, is kept). The id is lowercased.
pub fn preview_url(
    port: u16,
    sandbox_id: &str,
    token: &str,
    hostname: &str,
) -> Result<String, PreviewError> {
    let bare = hostname.split(':').next().unwrap_or(hostname);
    if bare.to_ascii_lowercase().ends_with(".workers.dev") {
        return Err(PreviewError::CustomDomainRequired {
            hostname: hostname.to_string(),
        });
    }
    let id = sandbox_id.to_ascii_lowercase();
    if !valid_host_id(&id) {
        return Err(PreviewError::InvalidSandboxId {
            id: sandbox_id.to_string(),
        });
    }
    let scheme = if is_local(hostname) { "http" } else { "https" };
    Ok(format!("{scheme}://{port}-{id}-{token}.{hostname}/"))
}

/// What a preview request's host names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreviewTarget {
    pub port: u16,
    pub sandbox_id: String,
    pub token: String,
}

/// Reads a request's `Host` as a preview host (§6.3): the first DNS label is
/// `<port>-<sandboxId>-<token>`, split at the first and the last `-`. `None` when the host
/// is not a preview host (the caller serves it some other way).
pub fn parse_preview_host(host: &str, control: u16) -> Option<PreviewTarget> {
    let (label, _) = host.split_once('.')?;
    let (port, rest) = label.split_once('-')?;
    if !(4..=5).contains(&port.len()) || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port = validate_port(port.parse().ok()?, control).ok()?;
    let (sandbox_id, token) = rest.rsplit_once('-')?;
    let token_ok = (1..=MAX_HOST_TOKEN).contains(&token.len()) && token.bytes().all(token_byte);
    if !token_ok || !valid_host_id(sandbox_id) {
        return None;
    }
    Some(PreviewTarget {
        port,
        sandbox_id: sandbox_id.to_string(),
        token: token.to_string(),
    })
}

/// A sandbox id a preview host may carry: 1–63 characters, no `-` at either end, not
/// reserved.
pub(crate) fn valid_host_id(id: &str) -> bool {
    (1..=MAX_HOST_ID).contains(&id.len())
        && !id.starts_with('-')
        && !id.ends_with('-')
        && !RESERVED_IDS.iter().any(|r| r.eq_ignore_ascii_case(id))
}

/// An exposure made in one run of the sandbox: preview URLs forward only while that run
/// lives (after a restart they are stale until the port is exposed again).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Activation {
    pub runtime_id: String,
    pub token: String,
}

/// What to do with a preview request (§6.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Forward it to the port.
    Forward,
    /// 404 `INVALID_TOKEN`: no such exposure, or the wrong token.
    InvalidToken,
    /// 410 `STALE_PREVIEW_URL`: authorized, but not exposed in the sandbox's current run.
    Stale,
}

impl Admission {
    /// The status and JSON body the reference answers with, for the refusals.
    pub fn refusal(self) -> Option<(u16, &'static str)> {
        match self {
            Admission::Forward => None,
            Admission::InvalidToken => Some((
                404,
                r#"{"error":"Access denied: Invalid token or port not exposed","code":"INVALID_TOKEN"}"#,
            )),
            Admission::Stale => Some((
                410,
                r#"{"error":"Preview URL is stale because the sandbox runtime is not active","code":"STALE_PREVIEW_URL"}"#,
            )),
        }
    }
}

/// Decides a preview request for `target`: the stored exposures, the activation of the
/// target's port (if any), and the id of the sandbox's run now (`None`: not running).
pub fn admit(
    target: &PreviewTarget,
    tokens: &PortTokens,
    activation: Option<&Activation>,
    current_runtime: Option<&str>,
) -> Admission {
    if !tokens.authorizes(target.port, &target.token) {
        return Admission::InvalidToken;
    }
    let active = match (activation, current_runtime) {
        (Some(activation), Some(runtime)) => {
            activation.runtime_id == runtime && tokens_match(&target.token, &activation.token)
        }
        _ => false,
    };
    if active {
        Admission::Forward
    } else {
        Admission::Stale
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_1024_to_65535_but_not_the_daemons() {
        assert_eq!(validate_port(1024, 3000), Ok(1024));
        assert_eq!(validate_port(65535, 3000), Ok(65535));
        for bad in [0, 80, 1023, 3000, 65536, 100_000] {
            let error = validate_port(bad, 3000).unwrap_err();
            assert_eq!(
                error.to_string(),
                format!(
                    "Invalid port number: {bad}. Must be 1024-65535, excluding 3000 (sandbox control plane)."
                )
            );
        }
        // The daemon's own port is what is excluded.
        assert_eq!(validate_port(3000, 8080), Ok(3000));
        assert!(validate_port(8080, 8080).is_err());
    }

    #[test]
    fn custom_tokens_are_1_to_16_of_lowercase_digits_and_underscore() {
        for good in ["a", "my_token_1", "abcdefghijklmnop"] {
            assert_eq!(validate_custom_token(good), Ok(()), "{good}");
        }
        for bad in ["", "abcdefghijklmnopq", "Upper", "dash-ed", "sp ace", "é"] {
            assert_eq!(
                validate_custom_token(bad),
                Err(PreviewError::InvalidToken),
                "{bad}"
            );
        }
    }

    #[test]
    fn generated_tokens_are_16_of_the_token_alphabet() {
        let token = generated_token([0xfb, 0xff, 0xbf, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        assert_eq!(token.len(), 16);
        assert!(token.bytes().all(token_byte), "{token}");
        assert!(token.contains('_'), "+ and / become _: {token}");
        assert_eq!(validate_custom_token(&token), Ok(()));
    }

    #[test]
    fn one_token_per_port_and_a_token_for_one_port() {
        let mut tokens = PortTokens::default();
        let first = tokens.expose(8080, None, None, || [7; 12]).unwrap();
        // Re-exposing keeps the stored token unless a new one is given.
        assert_eq!(tokens.expose(8080, None, None, || [9; 12]).unwrap(), first);
        assert_eq!(
            tokens.expose(8080, Some("mine"), None, || [9; 12]).unwrap(),
            "mine"
        );
        assert_eq!(
            tokens.expose(9090, Some("mine"), None, || [9; 12]),
            Err(PreviewError::TokenInUse {
                token: "mine".into(),
                port: 8080
            })
        );
        assert_eq!(
            tokens.expose(9090, Some("Bad-Token"), None, || [9; 12]),
            Err(PreviewError::InvalidToken)
        );
        assert!(tokens.authorizes(8080, "mine"));
        assert!(!tokens.authorizes(8080, "mina"));
        assert!(!tokens.authorizes(9090, "mine"));
        tokens.unexpose(8080);
        tokens.unexpose(8080);
        assert!(!tokens.authorizes(8080, "mine"));
    }

    #[test]
    fn urls_are_https_on_a_domain_and_http_on_localhost() {
        assert_eq!(
            preview_url(8080, "My-Box", "tok", "example.com").unwrap(),
            "https://8080-my-box-tok.example.com/"
        );
        assert_eq!(
            preview_url(8080, "box", "tok", "localhost:8787").unwrap(),
            "http://8080-box-tok.localhost:8787/"
        );
        for local in ["localhost", "127.0.0.1", "0.0.0.0:3000", "[::1]:8787"] {
            assert!(
                preview_url(5173, "b", "t", local)
                    .unwrap()
                    .starts_with("http://"),
                "{local}"
            );
        }
        assert!(matches!(
            preview_url(8080, "box", "tok", "me.workers.dev"),
            Err(PreviewError::CustomDomainRequired { .. })
        ));
        assert!(matches!(
            preview_url(8080, "admin", "tok", "example.com"),
            Err(PreviewError::InvalidSandboxId { .. })
        ));
    }

    #[test]
    fn preview_hosts_split_at_the_first_and_last_dash() {
        let uuid = "8080-123e4567-e89b-12d3-a456-426614174000-my_tok.example.com";
        assert_eq!(
            parse_preview_host(uuid, 3000),
            Some(PreviewTarget {
                port: 8080,
                sandbox_id: "123e4567-e89b-12d3-a456-426614174000".into(),
                token: "my_tok".into()
            })
        );
        let local = parse_preview_host("5173-box-t.localhost:8787", 3000).unwrap();
        assert_eq!((local.port, local.sandbox_id.as_str()), (5173, "box"));
        for not_preview in [
            "example.com",
            "localhost",
            "80-box-tok.example.com",
            "123456-box-tok.example.com",
            "3000-box-tok.example.com",
            "8080-box.example.com",
            "8080-box-.example.com",
            "8080--tok.example.com",
            "8080-box-TOK.example.com",
            "8080--box-tok.example.com",
            "8080-box--tok.example.com",
            "8080-www-tok.example.com",
            "8080-Workers-tok.example.com",
            "abcd-box-tok.example.com",
        ] {
            assert_eq!(parse_preview_host(not_preview, 3000), None, "{not_preview}");
        }
        let long_token = format!("8080-box-{}.example.com", "a".repeat(64));
        assert_eq!(parse_preview_host(&long_token, 3000), None);
        let long_id = format!("8080-{}-tok.example.com", "b".repeat(64));
        assert_eq!(parse_preview_host(&long_id, 3000), None);
    }

    #[test]
    fn requests_forward_only_for_the_current_run() {
        let mut tokens = PortTokens::default();
        tokens.expose(8080, Some("tok"), None, || [0; 12]).unwrap();
        let target = |token: &str| PreviewTarget {
            port: 8080,
            sandbox_id: "box".into(),
            token: token.into(),
        };
        let activation = Activation {
            runtime_id: "run-1".into(),
            token: "tok".into(),
        };
        let now = Some("run-1");
        assert_eq!(
            admit(&target("tok"), &tokens, Some(&activation), now),
            Admission::Forward
        );
        assert_eq!(
            admit(&target("bad"), &tokens, Some(&activation), now),
            Admission::InvalidToken
        );
        let other_port = PreviewTarget {
            port: 9090,
            ..target("tok")
        };
        assert_eq!(
            admit(&other_port, &tokens, Some(&activation), now),
            Admission::InvalidToken
        );
        // Restarted, not running, never activated, or activated with an older token.
        assert_eq!(
            admit(&target("tok"), &tokens, Some(&activation), Some("run-2")),
            Admission::Stale
        );
        assert_eq!(
            admit(&target("tok"), &tokens, Some(&activation), None),
            Admission::Stale
        );
        assert_eq!(admit(&target("tok"), &tokens, None, now), Admission::Stale);
        let old = Activation {
            token: "old".into(),
            ..activation
        };
        assert_eq!(
            admit(&target("tok"), &tokens, Some(&old), now),
            Admission::Stale
        );
        assert_eq!(
            Admission::Stale.refusal().map(|(status, _)| status),
            Some(410)
        );
        let (status, body) = Admission::InvalidToken.refusal().unwrap();
        assert_eq!(status, 404);
        assert!(body.contains("INVALID_TOKEN"));
    }
}
