//! MIME type and text/binary detection for reads.
//!
//! The extension decides first (with fixes where the common table is wrong for source code);
//! for unknown extensions the content is sniffed: magic numbers, then "valid UTF-8 without
//! NUL means text/plain", as `file --mime-type` would answer.

/// How many leading bytes are sniffed.
pub const SNIFF_BYTES: usize = 8192;

/// Source-code extensions the common table maps to non-text types (`.ts` is not video here).
const EXTENSION_FIXES: &[(&str, &str)] = &[
    ("ts", "application/typescript"),
    ("mts", "application/typescript"),
    ("cts", "application/typescript"),
    ("tsx", "application/typescript"),
    ("jsx", "text/jsx"),
    ("rs", "text/x-rust"),
    ("go", "text/x-go"),
    ("py", "text/x-python"),
    ("sh", "application/x-sh"),
    ("toml", "application/toml"),
    ("yaml", "application/yaml"),
    ("yml", "application/yaml"),
    ("md", "text/markdown"),
];

/// Types outside `text/*` that are text all the same (the reference's list).
const TEXT_APPLICATION_TYPES: &[&str] = &[
    "application/ecmascript",
    "application/javascript",
    "application/json",
    "application/json-seq",
    "application/rtf",
    "application/sql",
    "application/toml",
    "application/typescript",
    "application/x-empty",
    "application/x-httpd-php",
    "application/x-javascript",
    "application/x-sh",
    "application/x-shellscript",
    "application/x-typescript",
    "application/x-yaml",
    "application/xml",
    "application/xml-dtd",
    "application/xml-external-parsed-entity",
    "application/yaml",
    "inode/x-empty",
];

/// The MIME type of a file named `name` whose first bytes are `head` (empty for an empty file).
pub fn detect(name: &std::path::Path, head: &[u8]) -> String {
    if let Some(ext) = name.extension().and_then(|ext| ext.to_str()) {
        let ext = ext.to_ascii_lowercase();
        if let Some((_, mime)) = EXTENSION_FIXES.iter().find(|(known, _)| *known == ext) {
            return (*mime).to_string();
        }
        if let Some(mime) = mime_guess::from_ext(&ext).first_raw()
            && mime != "application/octet-stream"
        {
            return mime.to_string();
        }
    }
    sniff(head)
}

fn sniff(head: &[u8]) -> String {
    if head.is_empty() {
        return "inode/x-empty".to_string();
    }
    if let Some(kind) = infer::get(head) {
        return kind.mime_type().to_string();
    }
    if looks_like_utf8_text(head) {
        "text/plain".to_string()
    } else {
        "application/octet-stream".to_string()
    }
}

/// Valid UTF-8 without NUL, allowing a character cut off at the end of the sample.
pub fn looks_like_utf8_text(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return false;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => true,
        Err(err) => err.error_len().is_none() && bytes.len() - err.valid_up_to() < 4,
    }
}

/// Whether content of this type travels as UTF-8 text.
pub fn is_text(mime: &str) -> bool {
    mime.starts_with("text/")
        || mime.ends_with("+json")
        || mime.ends_with("+xml")
        || TEXT_APPLICATION_TYPES.contains(&mime)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const PNG_HEAD: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn extension_decides_first() {
        assert_eq!(detect(Path::new("a.txt"), b""), "text/plain");
        assert_eq!(detect(Path::new("a.json"), b"{}"), "application/json");
        assert_eq!(detect(Path::new("a.png"), PNG_HEAD), "image/png");
        assert_eq!(
            detect(Path::new("a.ts"), b"let x = 1"),
            "application/typescript"
        );
    }

    #[test]
    fn unknown_extensions_are_sniffed() {
        assert_eq!(detect(Path::new("noext"), PNG_HEAD), "image/png");
        assert_eq!(
            detect(Path::new("noext"), "héllo\n".as_bytes()),
            "text/plain"
        );
        assert_eq!(
            detect(Path::new("noext"), b"\x00\x01\x02"),
            "application/octet-stream"
        );
        assert_eq!(detect(Path::new("empty"), b""), "inode/x-empty");
    }

    #[test]
    fn a_character_cut_by_the_sample_is_still_text() {
        let bytes = "aé".as_bytes();
        assert!(looks_like_utf8_text(&bytes[..2]));
        assert!(!looks_like_utf8_text(b"\xff\xfe"));
    }

    #[test]
    fn text_types() {
        for mime in [
            "text/plain",
            "application/json",
            "image/svg+xml",
            "inode/x-empty",
        ] {
            assert!(is_text(mime), "{mime}");
        }
        for mime in ["image/png", "application/octet-stream", "application/pdf"] {
            assert!(!is_text(mime), "{mime}");
        }
    }
}
