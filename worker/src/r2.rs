//! R2 through its S3 API: the account's endpoint and keys (Worker secrets `R2_ACCOUNT_ID`,
//! `R2_ACCESS_KEY_ID`, `R2_SECRET_ACCESS_KEY`), and the Workers clock that signatures are
//! made at (the runtime has no `SystemTime::now`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fsd_s3::Upstream;
use worker::{Date, Env, Result};

/// R2's S3 endpoint for the account, with its keys.
pub fn upstream(env: &Env) -> Result<Upstream> {
    let secret = |name: &str| env.secret(name).map(|value| value.to_string());
    let account = secret("R2_ACCOUNT_ID")?;
    Ok(Upstream {
        endpoint: format!("https://{account}.r2.cloudflarestorage.com"),
        region: "auto".into(),
        access_key: secret("R2_ACCESS_KEY_ID")?,
        secret_key: secret("R2_SECRET_ACCESS_KEY")?,
    })
}

/// The Workers clock as a `SystemTime`, for signing.
pub fn now() -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(Date::now().as_millis())
}
