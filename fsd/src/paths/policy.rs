//! Turning a caller's path string into a filesystem path: validation, resolution against the
//! workspace, and (under `--confine`) refusal of anything that escapes the allowed roots.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use fsd_search::Within;

use fsd_api::MAX_PATH_BYTES;

use super::error::PathError;
use super::remote::off_worker;

/// Whether the last component is followed if it is a symlink.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Follow {
    /// The operation acts on what the link points to (read, write, list, mkdir).
    Final,
    /// The operation acts on the link itself (delete, rename, stat without following).
    Parent,
}

#[derive(Debug, Clone)]
pub struct PathPolicy {
    workspace: PathBuf,
    roots: Vec<PathBuf>,
    /// Under `--confine` (and only then): the roots held open, so what is opened is opened beneath them by
    /// the kernel, whatever a link swapped in since the check says.
    beneath: Option<Arc<Within>>,
}

impl PathPolicy {
    /// `workspace` and `extra_roots` must already be canonical (and, confined, open).
    pub fn new(
        workspace: PathBuf,
        confine: bool,
        extra_roots: Vec<PathBuf>,
    ) -> std::io::Result<Self> {
        let mut roots = vec![workspace.clone()];
        roots.extend(extra_roots);
        let beneath = match confine {
            true => Some(Arc::new(Within::new(&roots)?)),
            false => None,
        };
        Ok(Self {
            workspace,
            roots,
            beneath,
        })
    }

    /// The opener of a confined daemon (`None` unconfined): files it opens stay beneath
    /// the roots.
    pub fn beneath(&self) -> Option<&Arc<Within>> {
        self.beneath.as_ref()
    }

    /// The roots of a confined daemon (`None` unconfined).
    pub fn confined_roots(&self) -> Option<&[PathBuf]> {
        self.beneath.as_ref().map(|_| self.roots.as_slice())
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Validates `raw` (the value of request field `field`) and resolves it against the
    /// workspace.
    pub fn resolve(
        &self,
        field: &'static str,
        raw: &str,
        follow: Follow,
    ) -> Result<PathBuf, PathError> {
        self.resolve_in(field, raw, &self.workspace, follow)
    }

    /// [`resolve`](Self::resolve) with a relative `raw` taken from `base` (a session's
    /// directory). Routes reach it through [`Paths`](super::Paths), which picks the base.
    pub fn resolve_in(
        &self,
        field: &'static str,
        raw: &str,
        base: &Path,
        follow: Follow,
    ) -> Result<PathBuf, PathError> {
        validate(field, raw)?;
        // Rebuilding from components drops `.` and doubled slashes; `..` stays for the kernel.
        let path: PathBuf = base.join(raw).components().collect();
        if self.beneath.is_some() {
            let real = off_worker(&path, || real_path(&path, follow));
            if !self.roots.iter().any(|root| real.starts_with(root)) {
                return Err(PathError::OutsideRoots {
                    path: raw.to_string(),
                });
            }
        }
        if passes_through_daemon_proc(&path, follow) {
            return Err(PathError::DaemonProc {
                path: raw.to_string(),
            });
        }
        Ok(path)
    }
}

/// The reference's rules: a non-empty string, no NUL, at most 4096 bytes.
pub fn validate(field: &'static str, raw: &str) -> Result<(), PathError> {
    let reason = if raw.trim().is_empty() {
        "must not be empty".to_string()
    } else if raw.contains('\0') {
        "must not contain NUL bytes".to_string()
    } else if raw.len() > MAX_PATH_BYTES {
        format!("must be at most {MAX_PATH_BYTES} bytes, got {}", raw.len())
    } else {
        return Ok(());
    };
    Err(PathError::Invalid { field, reason })
}

/// Whether resolving `path` passes through one of the daemon's own `/proc` entries: its
/// pid's, a thread's, or `self`/`thread-self`, in any procfs mount, reached directly or
/// through symlinks. They hold the daemon's environment (tokens, keys), memory and open
/// descriptors, which commands are kept from. Symlinks are followed here one at a time
/// (not by `realpath`), because the magic links under `/proc/<pid>/fd` resolve to their
/// targets and would hide that the path went through the daemon's entry.
fn passes_through_daemon_proc(path: &Path, follow: Follow) -> bool {
    let mut pending: Vec<std::ffi::OsString> = components_reversed(path);
    let mut resolved = PathBuf::from("/");
    let mut hops = 0;
    while let Some(name) = pending.pop() {
        match name.to_str() {
            Some("/") => {
                resolved = PathBuf::from("/");
                continue;
            }
            Some("..") => {
                resolved.pop();
                continue;
            }
            Some(".") => continue,
            _ => {}
        }
        if is_daemon_entry(&resolved, &name) {
            return true;
        }
        let candidate = resolved.join(&name);
        let last = pending.is_empty();
        let followed = !last || follow == Follow::Final;
        match off_worker(&candidate, || std::fs::symlink_metadata(&candidate)) {
            Ok(meta) if followed && meta.file_type().is_symlink() => {
                hops += 1;
                let Ok(target) = off_worker(&candidate, || std::fs::read_link(&candidate)) else {
                    return false;
                };
                if hops > 40 {
                    return false;
                }
                pending.extend(components_reversed(&target));
            }
            Ok(_) => resolved = candidate,
            // What does not exist is not the daemon's; the rest is applied lexically.
            Err(_) => resolved = candidate,
        }
    }
    false
}

/// A path's components as names, last first (so `pop` yields them in order); a leading
/// `/` is kept as the name "/".
fn components_reversed(path: &Path) -> Vec<std::ffi::OsString> {
    let mut names: Vec<std::ffi::OsString> = path
        .components()
        .map(|component| component.as_os_str().to_os_string())
        .collect();
    names.reverse();
    names
}

/// Whether `dir/name` is the daemon's own entry in a procfs root.
fn is_daemon_entry(dir: &Path, name: &std::ffi::OsStr) -> bool {
    use nix::sys::statfs::{PROC_SUPER_MAGIC, statfs};
    let own = match name.to_str() {
        Some("self" | "thread-self") => true,
        Some(name) => name.parse::<u32>().is_ok_and(|pid| {
            pid == std::process::id() || Path::new("/proc/self/task").join(name).exists()
        }),
        None => false,
    };
    let on_procfs =
        |path: &Path| statfs(path).is_ok_and(|fs| fs.filesystem_type() == PROC_SUPER_MAGIC);
    // The root of a procfs mount: on procfs, and its parent is not.
    own && on_procfs(dir) && dir.parent().is_none_or(|parent| !on_procfs(parent))
}

/// Where `path` really lands: the longest existing prefix canonicalized by the kernel (so
/// `link/..` means what the kernel makes of it), then the components that do not exist yet
/// applied lexically. The final component is resolved only with [`Follow::Final`].
fn real_path(path: &Path, follow: Follow) -> PathBuf {
    let (dir, last) = match (follow, path.components().next_back(), path.parent()) {
        (Follow::Parent, Some(Component::Normal(name)), Some(parent)) => (parent, Some(name)),
        _ => (path, None),
    };
    let components: Vec<Component<'_>> = dir.components().collect();
    let mut resolved = PathBuf::from("/");
    let mut rest: &[Component<'_>] = &components;
    for split in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..split].iter().collect();
        if let Ok(real) = std::fs::canonicalize(&prefix) {
            resolved = real;
            rest = &components[split..];
            break;
        }
    }
    for component in rest {
        match component {
            Component::ParentDir => {
                resolved.pop();
            }
            Component::Normal(name) => resolved.push(name),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    if let Some(name) = last {
        resolved.push(name);
    }
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(dir: &Path) -> PathPolicy {
        PathPolicy::new(std::fs::canonicalize(dir).unwrap(), true, vec![]).unwrap()
    }

    #[test]
    fn rejects_empty_nul_and_long_paths() {
        assert!(validate("path", "").is_err());
        assert!(validate("path", "  ").is_err());
        assert!(validate("path", "a\0b").is_err());
        assert!(validate("path", &"a".repeat(4097)).is_err());
        assert!(validate("path", &"a".repeat(4096)).is_ok());
    }

    #[test]
    fn relative_paths_resolve_against_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let policy = policy(dir.path());
        let resolved = policy.resolve("path", "a/b.txt", Follow::Final).unwrap();
        assert_eq!(resolved, policy.workspace.join("a/b.txt"));
    }

    #[test]
    fn the_daemons_own_proc_entries_are_refused() {
        let policy = PathPolicy::new(PathBuf::from("/"), false, vec![]).unwrap();
        let own = std::process::id();
        for path in [
            "/proc/self/environ".to_string(),
            "/proc/self".to_string(),
            "/proc/thread-self/comm".to_string(),
            format!("/proc/{own}/mem"),
            format!("/proc/{own}/fd/0"),
            "/proc/self/root/proc/self/environ".to_string(),
        ] {
            assert!(
                matches!(
                    policy.resolve("path", &path, Follow::Final),
                    Err(PathError::DaemonProc { .. })
                ),
                "{path}"
            );
        }
        // Other processes' entries and procfs's own files stay readable.
        assert!(
            policy
                .resolve("path", "/proc/1/status", Follow::Final)
                .is_ok()
        );
        assert!(
            policy
                .resolve("path", "/proc/cpuinfo", Follow::Final)
                .is_ok()
        );
        // A link in a workspace that points at the daemon's entries is refused too.
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink("/proc/self/environ", dir.path().join("env")).unwrap();
        std::os::unix::fs::symlink("/proc", dir.path().join("p")).unwrap();
        let policy = PathPolicy::new(dir.path().to_path_buf(), false, vec![]).unwrap();
        assert!(policy.resolve("path", "env", Follow::Final).is_err());
        assert!(
            policy
                .resolve("path", "p/self/fd/1", Follow::Final)
                .is_err()
        );
        // Deleting the link itself does not touch the daemon's entries.
        assert!(policy.resolve("path", "env", Follow::Parent).is_ok());
    }

    #[test]
    fn confinement_refuses_dotdot_and_symlink_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("out")).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", ws.join("file-out")).unwrap();
        let policy = policy(&ws);
        assert!(policy.resolve("path", "../x", Follow::Final).is_err());
        assert!(
            policy
                .resolve("path", "/etc/passwd", Follow::Final)
                .is_err()
        );
        assert!(policy.resolve("path", "out/passwd", Follow::Final).is_err());
        assert!(
            policy
                .resolve("path", "out/new/deeper", Follow::Final)
                .is_err()
        );
        assert!(policy.resolve("path", "file-out", Follow::Final).is_err());
        // The link itself lives in the workspace: deleting it is allowed.
        assert!(policy.resolve("path", "file-out", Follow::Parent).is_ok());
        assert!(policy.resolve("path", "a/../b/./c", Follow::Final).is_ok());
        // `out/..` is /etc's parent, not the workspace: the kernel's reading wins.
        assert!(
            policy
                .resolve("path", "out/../etc/passwd", Follow::Final)
                .is_err()
        );
        std::fs::create_dir(ws.join("sub")).unwrap();
        assert!(
            policy
                .resolve("path", "sub/../inside.txt", Follow::Final)
                .is_ok()
        );
        let inside = policy.workspace.join("x").display().to_string();
        assert!(policy.resolve("path", &inside, Follow::Final).is_ok());
    }
}
