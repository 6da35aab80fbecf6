//! Random bytes from the Workers runtime's Web Crypto (`crypto.getRandomValues`), for
//! generated preview and mount tokens.

use worker::js_sys::{Function, Reflect, Uint8Array, global};
use worker::wasm_bindgen::JsValue;

pub fn bytes<const N: usize>() -> worker::Result<[u8; N]> {
    let crypto = Reflect::get(&global(), &JsValue::from_str("crypto"))?;
    let fill: Function = Reflect::get(&crypto, &JsValue::from_str("getRandomValues"))?.into();
    let array = Uint8Array::new_with_length(N as u32);
    fill.call1(&crypto, &array)?;
    let mut bytes = [0u8; N];
    array.copy_to(&mut bytes);
    Ok(bytes)
}

/// `N` random bytes as lowercase hex (tokens and ids).
pub fn hex<const N: usize>() -> worker::Result<String> {
    Ok(fsd_api::hex::lower(&bytes::<N>()?))
}

/// A random (version 4) UUID, as backup ids are.
pub fn uuid() -> worker::Result<String> {
    let mut bytes = bytes::<16>()?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex = fsd_api::hex::lower(&bytes);
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}
