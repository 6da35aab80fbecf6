//! The lines of `/proc/self/mountinfo` (`proc(5)`), parsed for what fsd reads of them: the
//! watch engines (a mount made or taken away in a watched tree), restores and bucket mounts
//! (what is mounted where). Text only: the caller reads the file.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// The source a workspace fork's overlays are mounted with (`fsd_backup::fork`), by which
/// the watch engines know them in the table.
pub const FORK_SOURCE: &str = "fsd-fork";

/// One mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountLine {
    /// The mount's id: unique while it is mounted, and given again once it is not.
    pub id: u64,
    /// The filesystem's device (`major:minor`; an anonymous one, a tmpfs's or an overlay's,
    /// is given again too once it is free).
    pub device: String,
    /// Where it is mounted.
    pub target: PathBuf,
    /// `overlay`, `squashfs`, `fuse.fsd-bucket`, …
    pub fstype: String,
    pub source: String,
    /// The filesystem's own options (an overlay's `lowerdir=…,upperdir=…`), as written:
    /// an overlay escapes `,`, `:` and `\` in its paths with a backslash.
    pub options: String,
}

/// Every well-formed line of the table's text: the first field is the id, the fifth the
/// mount point, and after the `-` separator come the type and the source.
pub fn parse(text: &[u8]) -> Vec<MountLine> {
    text.split(|&b| b == b'\n')
        .filter_map(|line| {
            let fields: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
            let id = std::str::from_utf8(fields.first()?).ok()?.parse().ok()?;
            let device = String::from_utf8_lossy(fields.get(2)?).into_owned();
            let target = PathBuf::from(OsString::from_vec(unescape(fields.get(4)?)));
            let dash = fields.iter().position(|f| *f == b"-")?;
            let text = |field: &[u8]| String::from_utf8_lossy(&unescape(field)).into_owned();
            Some(MountLine {
                id,
                device,
                target,
                fstype: text(fields.get(dash + 1)?),
                source: text(fields.get(dash + 2)?),
                options: fields.get(dash + 3).map(|f| text(f)).unwrap_or_default(),
            })
        })
        .collect()
}

/// The table writes space, tab, newline and backslash as octal escapes (`\040`).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|digits| field[i] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d)));
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(value as u8);
                i += 4;
            }
            None => {
                out.push(field[i]);
                i += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_with_their_escapes() {
        let text = b"22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
            68 22 0:40 / /work/a\\040dir rw shared:22 - overlay fsd-restore rw,lowerdir=x\n\
            70 68 0:43 / /work/a\\040dir/back\\134slash rw - tmpfs none\\011x rw\n\
            not a line\n";
        let lines = parse(text);
        let targets: Vec<&str> = lines.iter().map(|l| l.target.to_str().unwrap()).collect();
        assert_eq!(targets, ["/", "/work/a dir", "/work/a dir/back\\slash"]);
        assert_eq!(lines.iter().map(|l| l.id).collect::<Vec<_>>(), [22, 68, 70]);
        assert_eq!(lines[1].device, "0:40");
        assert_eq!(lines[1].fstype, "overlay");
        assert_eq!(lines[1].source, "fsd-restore");
        assert_eq!(lines[2].source, "none\tx");
        assert_eq!(lines[1].options, "rw,lowerdir=x");
    }
}
