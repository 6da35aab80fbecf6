//! Where a confined daemon may open files, enforced by the kernel: each allowed root is held
//! open as a directory descriptor, and a file is opened only relative to the root its real
//! location lies in, with `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`. A link that
//! leads out, or a directory swapped for one between a look and the open, makes the open
//! fail instead of reaching outside. Kernels without `openat2` (before 5.6, or a seccomp
//! profile that refuses it with `ENOSYS`) get a component-by-component walk that refuses
//! any link on the way. The search walk was its first user (it lives here for that); the
//! daemon's file reads and writes open through it too, and mounts (restores, buckets) are
//! attached to and detached from directories by descriptor here.

use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, open, openat, openat2};
use nix::mount::MntFlags;
use nix::sys::stat::{Mode, mkdirat};

/// Why a file was not opened.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// Its real location is outside every root, or it moved out while being opened.
    #[error("outside the allowed roots")]
    Outside,
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// Whether `error` is a confined open refused as outside the roots (carried as an
/// `io::Error`).
pub fn is_outside(error: &io::Error) -> bool {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<Refused>())
        .is_some_and(|refused| matches!(refused, Refused::Outside))
}

impl From<Errno> for Refused {
    fn from(errno: Errno) -> Self {
        Refused::Io(errno.into())
    }
}

impl From<Refused> for io::Error {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::Outside => io::Error::new(io::ErrorKind::PermissionDenied, Refused::Outside),
            Refused::Io(err) => err,
        }
    }
}

/// The allowed roots, held open.
pub struct Within {
    roots: Vec<(PathBuf, OwnedFd)>,
}

impl std::fmt::Debug for Within {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roots: Vec<&PathBuf> = self.roots.iter().map(|(path, _)| path).collect();
        f.debug_struct("Within").field("roots", &roots).finish()
    }
}

/// Whether this kernel confines opens itself (`openat2`), rather than by the walk.
pub fn kernel_confines() -> bool {
    static PROBED: OnceLock<bool> = OnceLock::new();
    *PROBED.get_or_init(|| {
        let how = OpenHow::new()
            .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
            .resolve(ResolveFlag::RESOLVE_BENEATH);
        !matches!(openat2(nix::fcntl::AT_FDCWD, ".", how), Err(Errno::ENOSYS))
    })
}

impl Within {
    /// Holds `roots` (canonical directories) open. A root is opened following no link at
    /// all: one swapped in for the root or a directory above it since it was named (by a
    /// process that may write there) makes the open fail rather than hold the wrong tree.
    pub fn new(roots: &[PathBuf]) -> io::Result<Self> {
        let slash = open(
            "/",
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )?;
        let roots = roots
            .iter()
            .map(|root| {
                let rest = root.strip_prefix("/").map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "a root must be absolute")
                })?;
                let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
                let fd = resolved(&slash, rest, flags, ResolveFlag::RESOLVE_NO_SYMLINKS).map_err(
                    |errno| match errno {
                        Errno::ELOOP => io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("{} is or passes through a link", root.display()),
                        ),
                        other => other.into(),
                    },
                )?;
                Ok((root.clone(), fd))
            })
            .collect::<io::Result<_>>()?;
        Ok(Self { roots })
    }

    /// Whether `path`'s real location is inside a root.
    pub fn contains(&self, path: &Path) -> bool {
        std::fs::canonicalize(path).is_ok_and(|real| self.root_of(&real).is_some())
    }

    fn root_of<'a>(&'a self, real: &'a Path) -> Option<(&'a OwnedFd, &'a Path)> {
        self.roots.iter().find_map(|(root, fd)| {
            let rest = real.strip_prefix(root).ok()?;
            Some((fd, rest))
        })
    }

    /// Opens the file at `path` for reading (non-blocking, so a file swapped for a FIFO
    /// cannot hold the caller), beneath the root its real location is in.
    pub fn open(&self, path: &Path) -> Result<File, Refused> {
        self.open_with(
            path,
            OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK,
        )
    }

    /// Opens `path` (links followed) with `flags` (never `O_CREAT`), beneath the root its
    /// real location is in.
    pub fn open_with(&self, path: &Path, flags: OFlag) -> Result<File, Refused> {
        let real = self.real(path)?;
        let (root, rest) = self.root_of(&real).ok_or(Refused::Outside)?;
        beneath(root, rest, flags | OFlag::O_CLOEXEC).map(File::from)
    }

    /// `path`'s real location. A path that is not there, whose parent's real location is
    /// outside every root (a link out on the way), is refused as outside rather than
    /// reported missing.
    fn real(&self, path: &Path) -> Result<PathBuf, Refused> {
        match std::fs::canonicalize(path) {
            Ok(real) => Ok(real),
            Err(err) if err.kind() == io::ErrorKind::NotFound => {
                let parent_outside = path
                    .parent()
                    .and_then(|parent| std::fs::canonicalize(parent).ok())
                    .is_some_and(|parent| self.root_of(&parent).is_none());
                match parent_outside {
                    true => Err(Refused::Outside),
                    false => Err(err.into()),
                }
            }
            Err(err) => Err(err.into()),
        }
    }

    /// The directory that holds `path`'s last name, opened (`O_PATH`) beneath the root its
    /// real location is in, and that name. What is done to the name relative to it
    /// (`unlinkat`, `renameat`, `mkdirat`, `fstatat`, `fchownat`) cannot be led out by a
    /// link swapped in for a directory on the way; the name itself is not followed. A root
    /// itself has no parent inside: refused as outside.
    pub fn parent_of(&self, path: &Path) -> Result<(OwnedFd, OsString), Refused> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Refused::Outside);
        };
        let real = std::fs::canonicalize(parent)?;
        let (root, rest) = self.root_of(&real).ok_or(Refused::Outside)?;
        let dir = beneath(root, rest, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        Ok((dir, name.to_os_string()))
    }

    /// What `stat` says of `path` (links followed), of the object opened beneath the root
    /// its real location is in.
    pub fn metadata(&self, path: &Path) -> Result<std::fs::Metadata, Refused> {
        Ok(self.open_with(path, OFlag::O_PATH)?.metadata()?)
    }

    /// What `lstat` says of `path` (its last name not followed), looked up relative to its
    /// parent opened beneath the root the parent's real location is in.
    pub fn symlink_metadata(&self, path: &Path) -> Result<std::fs::Metadata, Refused> {
        let (dir, name) = self.parent_of(path)?;
        let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let entry = openat(&dir, name.as_os_str(), flags, Mode::empty())?;
        Ok(File::from(entry).metadata()?)
    }

    /// The target of the link at `path`, read relative to its parent opened beneath the
    /// root the parent's real location is in.
    pub fn read_link(&self, path: &Path) -> Result<PathBuf, Refused> {
        let (dir, name) = self.parent_of(path)?;
        let target = nix::fcntl::readlinkat(&dir, name.as_os_str())?;
        Ok(PathBuf::from(target))
    }

    /// Attaches the detached mount `tree` (from `fsmount` or `open_tree`) to the directory
    /// `target` opened beneath its root (`move_mount` to that descriptor): no link swapped
    /// in on the way can put it anywhere else. Answers its root, by which it is detached.
    pub fn attach(&self, tree: OwnedFd, target: &Path) -> Result<Attached, Refused> {
        use rustix::mount::{MoveMountFlags, move_mount};
        let dir = self.open_with(target, OFlag::O_PATH | OFlag::O_DIRECTORY)?;
        move_mount(
            &tree,
            "",
            &dir,
            "",
            MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
        )
        .map_err(|errno| Refused::Io(errno.into()))?;
        Ok(Attached(tree))
    }

    /// Unmounts what is mounted at `target` (`lazy`: detached even while in use), by its
    /// last name, not followed, relative to its parent opened beneath the roots, on a
    /// thread whose working directory is that parent: a link swapped in on the way cannot
    /// detach another mount.
    pub fn unmount(&self, target: &Path, lazy: bool) -> Result<(), Refused> {
        let (dir, name) = self.parent_of(target)?;
        let mut flags = MntFlags::UMOUNT_NOFOLLOW;
        if lazy {
            flags |= MntFlags::MNT_DETACH;
        }
        in_directory(&dir, || nix::mount::umount2(name.as_os_str(), flags)).map_err(Refused::from)
    }

    /// Removes the empty directory at `path`, by its last name relative to its parent
    /// opened beneath the roots.
    pub fn remove_dir(&self, path: &Path) -> Result<(), Refused> {
        let (dir, name) = self.parent_of(path)?;
        nix::unistd::unlinkat(
            &dir,
            name.as_os_str(),
            nix::unistd::UnlinkatFlags::RemoveDir,
        )
        .map_err(Refused::from)
    }

    /// Opens the directory `dir` beneath its root, making it and its missing parents
    /// first (as `mkdir -p`), each made relative to its parent's descriptor so none can be
    /// made outside.
    pub fn create_dir_all(&self, dir: &Path) -> Result<File, Refused> {
        let components: Vec<Component<'_>> = dir.components().collect();
        // The longest part that exists, by its real location; the rest is made below it.
        let mut split = components.len();
        let real = loop {
            let prefix: PathBuf = components[..split].iter().collect();
            match std::fs::canonicalize(&prefix) {
                Ok(real) => break real,
                Err(err) if err.kind() == io::ErrorKind::NotFound && split > 1 => split -= 1,
                Err(err) => return Err(err.into()),
            }
        };
        let (root, rest) = self.root_of(&real).ok_or(Refused::Outside)?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
        let mut fd = beneath(root, rest, flags)?;
        for component in &components[split..] {
            let Component::Normal(name) = component else {
                // `..` in what does not exist yet: not followed where it cannot be checked.
                return Err(Refused::Outside);
            };
            match mkdirat(&fd, *name, Mode::from_bits_truncate(0o777)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(errno) => return Err(errno.into()),
            }
            fd = openat(&fd, *name, flags | OFlag::O_NOFOLLOW, Mode::empty())?;
        }
        Ok(File::from(fd))
    }
}

/// A mount attached by descriptor: its root, held open. It is detached by that root
/// wherever its directory has moved since.
#[derive(Debug)]
pub struct Attached(OwnedFd);

impl Attached {
    /// Detaches (lazily) the mount this is the root of: `umount2(".")` on a thread whose
    /// working directory is that root. No path is looked up.
    pub fn detach(&self) -> io::Result<()> {
        in_directory(&self.0, || nix::mount::umount2(".", MntFlags::MNT_DETACH))
            .map_err(io::Error::from)
    }
}

/// Why [`Within::unmount_attached`] left a mount mounted.
#[derive(Debug)]
pub enum NotUnmounted {
    /// It is not at the path any more (its directory moved with a parent renamed since):
    /// its root, for a detach by root.
    Elsewhere(Attached),
    /// The unmount failed (busy, say); its root, taken again where it is.
    Failed(io::Error, Option<Attached>),
}

impl Within {
    /// Unmounts (not lazily) the mount `attached` is the root of, by `path`'s last name,
    /// not followed, beneath its parent's descriptor, once that name is seen to hold it:
    /// its root is let go first (held open, it would make the mount busy) and taken again
    /// from that same parent if the unmount fails.
    pub fn unmount_attached(&self, attached: Attached, path: &Path) -> Result<(), NotUnmounted> {
        use std::os::unix::fs::MetadataExt;
        let Ok((dir, name)) = self.parent_of(path) else {
            return Err(NotUnmounted::Elsewhere(attached));
        };
        let flags = OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let here = openat(&dir, name.as_os_str(), flags, Mode::empty())
            .ok()
            .and_then(|fd| File::from(fd).metadata().ok());
        let root = File::from(
            attached
                .0
                .try_clone()
                .map_err(|e| NotUnmounted::Failed(e, None))?,
        )
        .metadata();
        let holds = match (here, root) {
            (Some(here), Ok(root)) => here.dev() == root.dev() && here.ino() == root.ino(),
            _ => false,
        };
        if !holds {
            return Err(NotUnmounted::Elsewhere(attached));
        }
        drop(attached);
        let unmounted = in_directory(&dir, || {
            nix::mount::umount2(name.as_os_str(), MntFlags::UMOUNT_NOFOLLOW)
        });
        unmounted.map_err(|errno| {
            let again = openat(&dir, name.as_os_str(), flags, Mode::empty()).ok();
            NotUnmounted::Failed(errno.into(), again.map(Attached))
        })
    }
}

/// Runs `work` on a thread of its own whose working directory is `dir` (its filesystem
/// context unshared, so the daemon's other threads keep theirs).
fn in_directory(dir: &OwnedFd, work: impl FnOnce() -> nix::Result<()> + Send) -> nix::Result<()> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                nix::sched::unshare(nix::sched::CloneFlags::CLONE_FS)?;
                nix::unistd::fchdir(dir)?;
                work()
            })
            .join()
            .unwrap_or(Err(Errno::EINTR))
    })
}

/// Opens `rest` (from a real path: no links unless one was swapped in since) beneath
/// `root`, by the kernel's `openat2` or else the walk.
fn beneath(root: &OwnedFd, rest: &Path, flags: OFlag) -> Result<OwnedFd, Refused> {
    match resolved(root, rest, flags, ResolveFlag::RESOLVE_NO_MAGICLINKS) {
        Ok(fd) => Ok(fd),
        // Out of the root through a link, or a link where the real path had none.
        Err(Errno::EXDEV | Errno::ELOOP) => Err(Refused::Outside),
        Err(errno) => Err(errno.into()),
    }
}

/// Opens `rest` beneath `root` by `openat2` (`RESOLVE_BENEATH` and `resolve`), or on a
/// kernel without it by the walk, which refuses every link.
pub fn resolved(
    root: &OwnedFd,
    rest: &Path,
    flags: OFlag,
    resolve: ResolveFlag,
) -> nix::Result<OwnedFd> {
    let rest = nonempty(rest);
    if kernel_confines() {
        let how = OpenHow::new()
            .flags(flags)
            .resolve(ResolveFlag::RESOLVE_BENEATH | resolve);
        openat2(root, rest, how)
    } else {
        walk(root, rest, flags)
    }
}

/// `rest`, or `.` for the directory itself.
fn nonempty(rest: &Path) -> &Path {
    if rest.as_os_str().is_empty() {
        Path::new(".")
    } else {
        rest
    }
}

/// Opens `rest` (a path with no links, as `canonicalize` gave it) below `root` one
/// component at a time, refusing a link at any of them (`ELOOP`).
fn walk(root: &OwnedFd, rest: &Path, flags: OFlag) -> nix::Result<OwnedFd> {
    let names: Vec<&std::ffi::OsStr> = rest
        .components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    let Some((last, dirs)) = names.split_last() else {
        return openat(root, ".", flags, Mode::empty());
    };
    let mut dir: Option<OwnedFd> = None;
    for name in dirs {
        let at = dir.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
        // A link there is `ENOTDIR` with `O_DIRECTORY`: the path changed since it was
        // taken, and is refused as a link.
        let next = openat(
            at,
            *name,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|errno| match errno {
            Errno::ENOTDIR => Errno::ELOOP,
            other => other,
        })?;
        dir = Some(next);
    }
    let at = dir.as_ref().map_or(root.as_fd(), |fd| fd.as_fd());
    openat(at, *last, flags | OFlag::O_NOFOLLOW, Mode::empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_out_and_swaps_are_refused_both_ways() {
        let inside = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(inside.path()).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("d/f"), "f").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("out")).unwrap();
        std::os::unix::fs::symlink(root.join("d"), root.join("in")).unwrap();
        let within = Within::new(std::slice::from_ref(&root)).unwrap();
        assert!(within.open(&root.join("d/f")).is_ok());
        assert!(within.open(&root.join("in/f")).is_ok());
        assert!(matches!(
            within.open(&root.join("out/secret")),
            Err(Refused::Outside)
        ));
        // What the kernel refuses when a directory became a link after the real path was
        // taken: both ways of opening.
        let (fd, _) = within.root_of(&root).unwrap();
        let flags = OFlag::O_RDONLY | OFlag::O_CLOEXEC;
        assert_eq!(
            walk(fd, Path::new("out/secret"), flags).err(),
            Some(Errno::ELOOP)
        );
        if kernel_confines() {
            let how = OpenHow::new()
                .flags(flags)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_MAGICLINKS);
            assert_eq!(openat2(fd, "out/secret", how).err(), Some(Errno::EXDEV));
        }
        assert!(walk(fd, Path::new("d/f"), flags).is_ok());
        // The parent of a name under a link out is outside; under a link inside, it is the
        // directory the link leads to.
        assert!(matches!(
            within.parent_of(&root.join("out/secret")),
            Err(Refused::Outside)
        ));
        let (_, name) = within.parent_of(&root.join("in/f")).unwrap();
        assert_eq!(name, "f");
        assert!(matches!(within.parent_of(&root), Err(Refused::Outside)));
    }
}
