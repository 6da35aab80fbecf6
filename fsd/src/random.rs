//! Random bytes for ids (`getrandom`, else `/dev/urandom`; the clock and pid where neither
//! answers).

use std::io::Read;

pub fn bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    // One system call where opening, reading and closing `/dev/urandom` were three (a
    // process's start takes an id).
    // SAFETY: getrandom writes at most `N` bytes into the buffer of `N` it is given.
    let got = unsafe { nix::libc::getrandom(bytes.as_mut_ptr().cast(), N, 0) };
    if usize::try_from(got).ok() == Some(N) {
        return bytes;
    }
    let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let seed = nanos ^ u128::from(std::process::id()).rotate_left(80);
        for (index, byte) in bytes.iter_mut().enumerate() {
            *byte = (seed >> ((index % 16) * 8)) as u8 ^ index as u8;
        }
    }
    bytes
}

pub use fsd_api::hex::lower as hex;

/// A UUID version 4, as the reference's context ids.
pub fn uuid_v4() -> String {
    let mut b = bytes::<16>();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h = hex(&b);
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn uuids_have_the_version_4_shape() {
        let id = super::uuid_v4();
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12]
        );
        assert!(parts[2].starts_with('4'));
        assert!(matches!(&parts[3][..1], "8" | "9" | "a" | "b"));
        assert_ne!(id, super::uuid_v4());
    }
}
