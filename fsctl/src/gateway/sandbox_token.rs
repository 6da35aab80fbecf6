//! One token per sandbox: each daemon's token is derived from its sandbox id under a key
//! only the gateway (the trusted side) holds, so a process that reads its own sandbox's
//! token reaches that sandbox's daemon and no other, while the gateway reaches them all
//! without a table of secrets. `fsctl sandbox-token ID` prints a sandbox's token for the
//! Secret its pod takes.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The variable the key is read from (`fsctl gateway`, `fsctl sandbox-token`).
pub const KEY_ENV: &str = "FSD_SANDBOX_TOKEN_KEY";

/// The daemon token of sandbox `sandbox_id` under `key`: HMAC-SHA256 of the id, in hex.
pub fn derive(key: &str, sandbox_id: &str) -> String {
    // HMAC takes a key of any length; `new_from_slice` cannot fail for it.
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key.as_bytes()) else {
        return String::new();
    };
    mac.update(b"fsd sandbox token\0");
    mac.update(sandbox_id.as_bytes());
    fsd_api::hex::lower(&mac.finalize().into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sandbox_gets_its_own_token_and_the_key_decides_it() {
        let demo = derive("key-1", "demo");
        assert_eq!(demo.len(), 64);
        assert_eq!(demo, derive("key-1", "demo"));
        assert_ne!(demo, derive("key-1", "other"));
        assert_ne!(demo, derive("key-2", "demo"));
    }
}
