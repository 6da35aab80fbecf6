//! fsd's scratch names: every file the daemon writes through a temporary name before renaming
//! it into place (atomic JSON writes, raw uploads, archives being created, backup downloads)
//! is called `.<target>.fsd-<pid>-<n>.<kind>.tmp`, beside its target.
//!
//! One convention, so that every part can recognise them: watches never report them (an
//! atomic write shows as the `create` or `modify` of its target), listings leave them out,
//! and a daemon that starts removes those whose writer (`pid`) is gone.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a scratch file becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScratchKind {
    /// An atomic write of a file that did not exist: a `create` of the target.
    New,
    /// An atomic write over an existing file: a `modify` of the target.
    Replace,
    /// An archive being written.
    Partial,
    /// A download being fetched.
    Download,
}

impl ScratchKind {
    fn tag(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Replace => "rpl",
            Self::Partial => "part",
            Self::Download => "dl",
        }
    }

    fn from_tag(tag: &str) -> Option<Self> {
        Some(match tag {
            "new" => Self::New,
            "rpl" => Self::Replace,
            "part" => Self::Partial,
            "dl" => Self::Download,
            _ => return None,
        })
    }
}

/// A scratch name, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch<'a> {
    /// The file name it becomes.
    pub target: &'a str,
    /// The process writing it.
    pub pid: u32,
    pub kind: ScratchKind,
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh scratch path for `target`, unique within this process.
pub fn scratch_path(target: &Path, kind: ScratchKind) -> PathBuf {
    let name = target
        .file_name()
        .map(|name| name.to_string_lossy())
        .unwrap_or_default();
    let scratch = format!(
        ".{name}.fsd-{}-{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        kind.tag()
    );
    match target.parent() {
        Some(parent) => parent.join(scratch),
        None => PathBuf::from(scratch),
    }
}

/// `name` taken apart, if it is a scratch name.
pub fn parse(name: &str) -> Option<Scratch<'_>> {
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, tag) = rest.rsplit_once('.')?;
    let kind = ScratchKind::from_tag(tag)?;
    let (rest, counter) = rest.rsplit_once('-')?;
    let (target, pid) = rest.rsplit_once(".fsd-")?;
    if target.is_empty() || counter.is_empty() || !counter.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Scratch {
        target,
        pid: pid.parse().ok()?,
        kind,
    })
}

/// Whether the last component of `path` is a scratch name.
pub fn is_scratch(path: &Path) -> bool {
    path.file_name()
        .and_then(|name| name.to_str())
        .is_some_and(|name| parse(name).is_some())
}

/// Whether a file created with `mode` has it whole: no bit above the permissions, none the
/// umask cuts (a file without its `chmod` is one event less for every watch of it, and one
/// system call less).
pub fn made_with_mode(mode: u32) -> bool {
    static UMASK: std::sync::LazyLock<Option<u32>> = std::sync::LazyLock::new(|| {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let value = status
            .lines()
            .find_map(|line| line.strip_prefix("Umask:"))?;
        u32::from_str_radix(value.trim(), 8).ok()
    });
    UMASK.is_some_and(|umask| mode & 0o7777 == mode & 0o777 & !umask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for kind in [
            ScratchKind::New,
            ScratchKind::Replace,
            ScratchKind::Partial,
            ScratchKind::Download,
        ] {
            let path = scratch_path(Path::new("/w/dir/notes.v2.txt"), kind);
            assert_eq!(path.parent(), Some(Path::new("/w/dir")));
            let name = path.file_name().unwrap().to_str().unwrap();
            let parsed = parse(name).unwrap();
            assert_eq!(parsed.target, "notes.v2.txt");
            assert_eq!(parsed.pid, std::process::id());
            assert_eq!(parsed.kind, kind);
            assert!(is_scratch(&path));
        }
        assert_ne!(
            scratch_path(Path::new("a"), ScratchKind::New),
            scratch_path(Path::new("a"), ScratchKind::New)
        );
    }

    #[test]
    fn other_names_are_not_scratch() {
        for name in [
            "notes.txt",
            ".notes.txt.tmp",
            ".x.fsd-12-3.tmp",
            ".x.fsd-12-3.zip.tmp",
            "x.fsd-12-3.new.tmp",
            "..fsd-12-3.new.tmp",
            ".x.fsd-ab-3.new.tmp",
            ".x.fsd-12-.new.tmp",
        ] {
            assert_eq!(parse(name), None, "{name}");
        }
    }
}
