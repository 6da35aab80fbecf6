//! Lowercase hex without the formatter: `{:02x}` a byte made a string a byte, and a first
//! upload of 20,000 files wrote a hash of each.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Writes `bytes` as lowercase hex into `out`, two digits a byte, as far as `out` reaches.
pub fn write_lower(bytes: &[u8], out: &mut [u8]) {
    for (pair, byte) in out.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
}

/// `bytes` as lowercase hex.
pub fn lower(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0xf)]));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn bytes_are_written_as_two_lowercase_digits_each() {
        let bytes = [0x00, 0x0f, 0xa5, 0xff];
        assert_eq!(super::lower(&bytes), "000fa5ff");
        let mut out = [0u8; 8];
        super::write_lower(&bytes, &mut out);
        assert_eq!(&out, b"000fa5ff");
        let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(super::lower(&bytes), expected);
    }
}
