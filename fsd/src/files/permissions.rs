//! Permissions: modes as `chmod` takes them (octal `755`, `4755`, or symbolic `u+x`,
//! `go-w`, `a=rX`, `u+s`, comma-separated), owners and groups by name or id, applied to a
//! path and, when asked, everything below it (symlinks neither followed nor changed).

use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use fsd_search::{Refused, Within};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FchmodatFlags, FileStat, Mode, SFlag, fchmodat, fstatat};
use nix::unistd::{Gid, Group, Uid, User, fchownat};

use super::error::FileError;
use super::listing::{kind_of, names_at};
use crate::paths::PathError;

/// A mode change, ready to apply to a file's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeSpec {
    Octal(u32),
    Symbolic(Vec<Clause>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// The permission bits the clause's `who` covers (`a` when none is given).
    who: u32,
    op: char,
    perms: String,
}

/// Why a mode does not parse (the message says what is wrong).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModeError(pub String);

impl From<ModeError> for FileError {
    fn from(ModeError(reason): ModeError) -> Self {
        FileError::InvalidPermission {
            field: "mode",
            reason,
        }
    }
}

const USER: u32 = 0o4700;
const GROUP: u32 = 0o2070;
const OTHER: u32 = 0o1007;

impl ModeSpec {
    pub fn parse(text: &str) -> Result<ModeSpec, ModeError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(ModeError("must not be empty".into()));
        }
        if text.bytes().all(|byte| byte.is_ascii_digit()) {
            return match u32::from_str_radix(text, 8) {
                Ok(mode) if mode <= 0o7777 && text.len() <= 5 => Ok(ModeSpec::Octal(mode)),
                _ => Err(ModeError(format!(
                    "{text:?} is not an octal mode up to 7777"
                ))),
            };
        }
        let mut clauses = Vec::new();
        for clause in text.split(',') {
            let at = clause
                .find(['+', '-', '='])
                .ok_or_else(|| ModeError(format!("{clause:?} has no +, - or =")))?;
            let (who_text, rest) = clause.split_at(at);
            let mut who = 0;
            for letter in who_text.chars() {
                who |= match letter {
                    'u' => USER,
                    'g' => GROUP,
                    'o' => OTHER,
                    'a' => USER | GROUP | OTHER,
                    other => return Err(ModeError(format!("{other:?} is not one of u, g, o, a"))),
                };
            }
            if who == 0 {
                who = USER | GROUP | OTHER;
            }
            let op = rest.chars().next().unwrap_or('=');
            let perms = rest[1..].to_string();
            if let Some(bad) = perms.chars().find(|c| !"rwxXst".contains(*c)) {
                return Err(ModeError(format!("{bad:?} is not one of r, w, x, X, s, t")));
            }
            clauses.push(Clause { who, op, perms });
        }
        Ok(ModeSpec::Symbolic(clauses))
    }

    /// The mode a file of mode `current` (permission bits) gets; `is_dir` for `X`.
    pub fn apply(&self, current: u32, is_dir: bool) -> u32 {
        let mut mode = current & 0o7777;
        let clauses = match self {
            ModeSpec::Octal(mode) => return *mode,
            ModeSpec::Symbolic(clauses) => clauses,
        };
        for clause in clauses {
            let mut bits = 0;
            for perm in clause.perms.chars() {
                bits |= match perm {
                    'r' => 0o444,
                    'w' => 0o222,
                    'x' => 0o111,
                    'X' if is_dir || mode & 0o111 != 0 => 0o111,
                    's' => 0o6000,
                    't' => 0o1000,
                    _ => 0,
                };
            }
            let bits = bits & clause.who;
            match clause.op {
                '+' => mode |= bits,
                '-' => mode &= !bits,
                _ => mode = (mode & !(clause.who & 0o7777)) | bits,
            }
        }
        mode
    }
}

/// A request's optional `mode`, its mistakes named `mode`.
pub fn parsed_mode(mode: Option<&str>) -> Result<Option<ModeSpec>, FileError> {
    Ok(mode.map(ModeSpec::parse).transpose()?)
}

/// Who a file should belong to: a user and a group, each a name or a numeric id.
pub fn owner_ids(
    owner: Option<&str>,
    group: Option<&str>,
) -> Result<(Option<Uid>, Option<Gid>), FileError> {
    if owner.is_none() && group.is_none() {
        return Err(FileError::InvalidPermission {
            field: "owner",
            reason: "give an owner, a group or both".into(),
        });
    }
    let uid = owner
        .map(|name| {
            id_of(
                "owner",
                "user",
                name,
                |name| User::from_name(name).ok().flatten().map(|u| u.uid),
                Uid::from_raw,
            )
        })
        .transpose()?;
    let gid = group
        .map(|name| {
            id_of(
                "group",
                "group",
                name,
                |name| Group::from_name(name).ok().flatten().map(|g| g.gid),
                Gid::from_raw,
            )
        })
        .transpose()?;
    Ok((uid, gid))
}

/// A numeric id as it is, or a name looked up by `by_name`; `field` names the mistake.
fn id_of<T>(
    field: &'static str,
    what: &str,
    text: &str,
    by_name: impl FnOnce(&str) -> Option<T>,
    from_raw: impl FnOnce(u32) -> T,
) -> Result<T, FileError> {
    if !text.is_empty()
        && text.bytes().all(|byte| byte.is_ascii_digit())
        && let Ok(id) = text.parse()
    {
        return Ok(from_raw(id));
    }
    by_name(text).ok_or_else(|| FileError::InvalidPermission {
        field,
        reason: format!("no {what} {text:?}"),
    })
}

/// `path` and, when `recursive`, everything below it (symlinks are not followed, and their
/// own modes are not changed: Linux has none).
fn targets(
    op: &'static str,
    path: &Path,
    recursive: bool,
) -> impl Iterator<Item = Result<PathBuf, FileError>> {
    let depth = if recursive { usize::MAX } else { 0 };
    let raw = path.to_path_buf();
    walkdir::WalkDir::new(path)
        .max_depth(depth)
        .into_iter()
        .filter_map(move |entry| match entry {
            Ok(entry) if entry.depth() > 0 && entry.path_is_symlink() => None,
            Ok(entry) => Some(Ok(entry.into_path())),
            Err(error) => {
                let source = error
                    .into_io_error()
                    .unwrap_or_else(|| std::io::Error::other("a loop in the tree"));
                Some(Err(FileError::io(op, &raw)(source)))
            }
        })
}

/// What a confined change does to one entry: given the directory that holds it (opened
/// beneath an allowed root), its name there and what `fstatat` says of it.
type Visit<'a> = dyn FnMut(BorrowedFd<'_>, &OsStr, &FileStat) -> nix::Result<()> + 'a;

/// Visits `path` (its links followed to where it really is, as chmod and chown act on what
/// a link names) and, when `recursive`, everything below it, every step relative to a
/// descriptor opened beneath an allowed root: a directory swapped for a link out while
/// this runs leads nowhere. Links below the top are neither followed nor changed.
fn visit_beneath(
    within: &Within,
    path: &Path,
    recursive: bool,
    op: &'static str,
    visit: &mut Visit<'_>,
) -> Result<(), FileError> {
    let failed = |errno: Errno| match errno {
        // The top became a link after its real place was taken: swapped in by someone
        // else, refused as the confinement refuses links out.
        Errno::ELOOP => FileError::Path(PathError::OutsideRoots {
            path: path.display().to_string(),
        }),
        other => FileError::io(op, path)(std::io::Error::from(other)),
    };
    let real = std::fs::canonicalize(path).map_err(FileError::io(op, path))?;
    let (dir, name) = within.parent_of(&real).map_err(|refused| match refused {
        Refused::Outside => FileError::Path(PathError::OutsideRoots {
            path: path.display().to_string(),
        }),
        Refused::Io(err) => FileError::io(op, path)(err),
    })?;
    let stat = fstatat(&dir, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW).map_err(failed)?;
    if kind_of(&stat) == SFlag::S_IFLNK {
        return Err(failed(Errno::ELOOP));
    }
    visit_at(dir.as_fd(), &name, &stat, recursive, visit).map_err(failed)
}

/// Visits `name` in `dir` (not a link), then what is below it when `recursive`.
fn visit_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    stat: &FileStat,
    recursive: bool,
    visit: &mut Visit<'_>,
) -> nix::Result<()> {
    visit(dir, name, stat)?;
    if !recursive || kind_of(stat) != SFlag::S_IFDIR {
        return Ok(());
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let inner = openat(dir, name, flags, Mode::empty())?;
    for child in names_at(&inner)? {
        let stat = match fstatat(&inner, child.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(stat) => stat,
            // Gone since the listing.
            Err(Errno::ENOENT) => continue,
            Err(errno) => return Err(errno),
        };
        if kind_of(&stat) != SFlag::S_IFLNK {
            visit_at(inner.as_fd(), &child, &stat, true, visit)?;
        }
    }
    Ok(())
}

/// Applies `spec` to `path` (and below it); answers how many files changed. Confined
/// (`beneath`), every change is made relative to a descriptor opened beneath the roots.
pub fn chmod(
    path: &Path,
    spec: &ModeSpec,
    recursive: bool,
    beneath: Option<&Within>,
) -> Result<u64, FileError> {
    let mut changed = 0;
    if let Some(within) = beneath {
        visit_beneath(within, path, recursive, "chmod", &mut |dir, name, stat| {
            let current = stat.st_mode & 0o7777;
            let mode = spec.apply(current, kind_of(stat) == SFlag::S_IFDIR);
            if mode != current {
                fchmodat(
                    dir,
                    name,
                    Mode::from_bits_truncate(mode),
                    FchmodatFlags::NoFollowSymlink,
                )?;
                changed += 1;
            }
            Ok(())
        })?;
        return Ok(changed);
    }
    for target in targets("chmod", path, recursive) {
        let target = target?;
        let meta = std::fs::metadata(&target).map_err(FileError::io("chmod", &target))?;
        let mode = spec.apply(meta.permissions().mode(), meta.is_dir());
        if mode != meta.permissions().mode() & 0o7777 {
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode))
                .map_err(FileError::io("chmod", &target))?;
            changed += 1;
        }
    }
    Ok(changed)
}

/// Gives `path` (and what is below it) to `uid`/`gid`; answers how many files it touched.
pub fn chown(
    path: &Path,
    uid: Option<Uid>,
    gid: Option<Gid>,
    recursive: bool,
    beneath: Option<&Within>,
) -> Result<u64, FileError> {
    let mut changed = 0;
    if let Some(within) = beneath {
        visit_beneath(within, path, recursive, "chown", &mut |dir, name, _| {
            fchownat(dir, name, uid, gid, AtFlags::AT_SYMLINK_NOFOLLOW)?;
            changed += 1;
            Ok(())
        })?;
        return Ok(changed);
    }
    for target in targets("chown", path, recursive) {
        let target = target?;
        nix::unistd::chown(&target, uid, gid)
            .map_err(|errno| FileError::io("chown", &target)(std::io::Error::from(errno)))?;
        changed += 1;
    }
    Ok(changed)
}

/// The mode, owner and group `path` has now (looked at beneath the roots when confined).
pub fn described(path: &Path, beneath: Option<&Within>) -> Result<(String, u32, u32), FileError> {
    if let Some(within) = beneath {
        let mut found = None;
        visit_beneath(within, path, false, "stat", &mut |_, _, stat| {
            found = Some((stat.st_mode & 0o7777, stat.st_uid, stat.st_gid));
            Ok(())
        })?;
        let (mode, uid, gid) = found.ok_or_else(|| {
            FileError::io("stat", path)(std::io::Error::from(std::io::ErrorKind::NotFound))
        })?;
        return Ok((format!("{mode:04o}"), uid, gid));
    }
    let meta = std::fs::metadata(path).map_err(FileError::io("stat", path))?;
    Ok((
        format!("{:04o}", meta.permissions().mode() & 0o7777),
        meta.uid(),
        meta.gid(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn octal_and_symbolic_modes_as_chmod() {
        let apply = |spec: &str, from: u32| ModeSpec::parse(spec).unwrap().apply(from, false);
        assert_eq!(apply("755", 0o600), 0o755);
        assert_eq!(apply("4755", 0o600), 0o4755);
        assert_eq!(apply("u+x", 0o644), 0o744);
        assert_eq!(apply("go-w", 0o666), 0o644);
        assert_eq!(apply("a=r", 0o777), 0o444);
        assert_eq!(apply("u=rw,go=", 0o777), 0o600);
        assert_eq!(apply("+x", 0o644), 0o755);
        assert_eq!(apply("a+X", 0o644), 0o644, "X on a file without x");
        assert_eq!(ModeSpec::parse("a+X").unwrap().apply(0o644, true), 0o755);
        assert_eq!(apply("u+s", 0o755), 0o4755);
        for bad in ["", "8", "77777", "u+q", "z+x", "rwx"] {
            assert!(ModeSpec::parse(bad).is_err(), "{bad}");
        }
    }
}
