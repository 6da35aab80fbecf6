//! Mounting archives and overlays: kernel squashfs through a loop device and kernel
//! overlayfs when the daemon may mount, squashfuse and fuse-overlayfs otherwise.

use std::fs::{File, OpenOptions};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Command;

use fsd_search::Within;
use nix::mount::{MntFlags, MsFlags};

use crate::BackupError;

/// The `source` fsd gives its overlay mounts, so they can be told apart in mountinfo.
pub const OVERLAY_SOURCE: &str = "fsd-restore";

/// Whether a mount's `source` is a restore's overlay, by the kernel or by `fuse-overlayfs`
/// (which names its mounts itself).
pub fn is_restore(source: &str) -> bool {
    source == OVERLAY_SOURCE || source == "fuse-overlayfs"
}

/// How a restore is mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Driver {
    /// Kernel squashfs on a loop device, kernel overlayfs with `redirect_dir=on`.
    Kernel,
    /// squashfuse and fuse-overlayfs.
    Fuse,
}

impl Driver {
    pub fn as_str(self) -> &'static str {
        match self {
            Driver::Kernel => "kernel",
            Driver::Fuse => "fuse",
        }
    }
}

// <linux/loop.h>
const LOOP_CTL_GET_FREE: libc::c_ulong = 0x4C82;
const LOOP_CONFIGURE: libc::c_ulong = 0x4C0A;
const LO_FLAGS_READ_ONLY: u32 = 1;
const LO_FLAGS_AUTOCLEAR: u32 = 4;

#[repr(C)]
struct LoopInfo64 {
    lo_device: u64,
    lo_inode: u64,
    lo_rdevice: u64,
    lo_offset: u64,
    lo_sizelimit: u64,
    lo_number: u32,
    lo_encrypt_type: u32,
    lo_encrypt_key_size: u32,
    lo_flags: u32,
    lo_file_name: [u8; 64],
    lo_crypt_name: [u8; 64],
    lo_encrypt_key: [u8; 32],
    lo_init: [u64; 2],
}

#[repr(C)]
struct LoopConfig {
    fd: u32,
    block_size: u32,
    info: LoopInfo64,
    reserved: [u64; 8],
}

/// Attaches `image` read-only to a free loop device that detaches itself when unmounted.
/// The device is returned open: with autoclear, closing it before the mount detaches it.
fn attach_loop(image: &Path) -> Result<(PathBuf, File), String> {
    let control = OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/loop-control")
        .map_err(|e| format!("/dev/loop-control: {e}"))?;
    let backing = File::open(image).map_err(|e| format!("{}: {e}", image.display()))?;
    // Another process may take the device between GET_FREE and CONFIGURE: try again.
    for _ in 0..16 {
        // SAFETY: LOOP_CTL_GET_FREE takes no argument and returns a device number.
        let number = unsafe { libc::ioctl(control.as_raw_fd(), LOOP_CTL_GET_FREE) };
        if number < 0 {
            return Err(format!(
                "LOOP_CTL_GET_FREE: {}",
                std::io::Error::last_os_error()
            ));
        }
        let device = PathBuf::from(format!("/dev/loop{number}"));
        let loop_file = OpenOptions::new()
            .read(true)
            .open(&device)
            .map_err(|e| format!("{}: {e}", device.display()))?;
        // SAFETY: LoopConfig is plain old data; all-zero is its valid empty value.
        let mut config: LoopConfig = unsafe { std::mem::zeroed() };
        config.fd = backing.as_raw_fd() as u32;
        config.info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR;
        // SAFETY: the pointer is to a live LoopConfig laid out as the kernel expects.
        let rc = unsafe { libc::ioctl(loop_file.as_raw_fd(), LOOP_CONFIGURE, &config) };
        if rc == 0 {
            return Ok((device, loop_file));
        }
        let error = std::io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EBUSY) {
            return Err(format!("LOOP_CONFIGURE {}: {error}", device.display()));
        }
    }
    Err("no free loop device".into())
}

/// Mounts the squashfs `image` read-only at `target`.
pub fn mount_squashfs(image: &Path, target: &Path, driver: Driver) -> Result<(), BackupError> {
    let fail = |reason: String| BackupError::Mount {
        what: "squashfs",
        reason,
    };
    match driver {
        Driver::Kernel => {
            let (device, _open_until_mounted) = attach_loop(image).map_err(fail)?;
            let flags = MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOSUID;
            let result =
                nix::mount::mount(Some(&device), target, Some("squashfs"), flags, None::<&str>);
            // With AUTOCLEAR the device goes away with its last user: the mount, or now.
            result.map_err(|e| fail(format!("{}: {e}", image.display())))
        }
        Driver::Fuse => run(Command::new("squashfuse").arg(image).arg(target)).map_err(fail),
    }
}

/// Mounts an overlay of `lowers` (topmost first) with `upper`/`work` at `target`, with
/// `source` as its name in the mount table (a restore's or a fork's).
/// Confined (`within`), the kernel's overlay is made detached and attached to `target`
/// opened beneath the roots (`move_mount` to its descriptor), so no link swapped in on the
/// way can put it elsewhere; kernels without the new mount API (before 5.2) and the FUSE
/// driver mount at the path.
pub fn mount_overlay(
    lowers: &[PathBuf],
    upper: &Path,
    work: &Path,
    target: &Path,
    source: &str,
    driver: Driver,
    within: Option<&Within>,
) -> Result<Option<fsd_search::Attached>, BackupError> {
    let fail = |reason: String| BackupError::Mount {
        what: "overlayfs",
        reason,
    };
    let lowerdir = lowerdir(lowers);
    let options = format!(
        "lowerdir={lowerdir},upperdir={},workdir={}",
        escape(upper),
        escape(work)
    );
    match driver {
        Driver::Kernel if let Some(within) = within => {
            let settings = [
                ("lowerdir", lowerdir.clone()),
                ("upperdir", escape(upper)),
                ("workdir", escape(work)),
            ];
            let made = made_overlay(source, &settings, true)
                .or_else(|_| made_overlay(source, &settings, false));
            match made {
                Err(error) if error == rustix::io::Errno::NOSYS => {
                    mount_overlay(lowers, upper, work, target, source, driver, None)
                }
                Err(error) => Err(fail(error.to_string())),
                Ok(tree) => within
                    .attach(tree, target)
                    .map(Some)
                    .map_err(|refused| BackupError::io(target, refused.into())),
            }
        }
        Driver::Kernel => {
            // redirect_dir=on lets directories from the backup be renamed.
            let with_redirect = format!("{options},redirect_dir=on");
            let mount = |data: &str| {
                nix::mount::mount(
                    Some(source),
                    target,
                    Some("overlay"),
                    MsFlags::empty(),
                    Some(data),
                )
            };
            mount(&with_redirect)
                .or_else(|e| {
                    tracing::warn!(error = %e, "overlay with redirect_dir=on refused; mounting without");
                    mount(&options)
                })
                .map(|()| None)
                .map_err(|e| fail(e.to_string()))
        }
        Driver::Fuse => run(Command::new("fuse-overlayfs")
            .arg("-o")
            .arg(&options)
            .arg(target))
        .map(|()| None)
        .map_err(fail),
    }
}

/// Makes an overlay with `settings` (and `redirect_dir=on` when `redirect`: directories
/// from the backup can then be renamed), detached: attached where it goes by descriptor.
fn made_overlay(
    source: &str,
    settings: &[(&str, String)],
    redirect: bool,
) -> rustix::io::Result<OwnedFd> {
    use rustix::mount::{
        FsMountFlags, FsOpenFlags, MountAttrFlags, fsconfig_create, fsconfig_set_string, fsmount,
        fsopen,
    };
    let context = fsopen("overlay", FsOpenFlags::FSOPEN_CLOEXEC)?;
    fsconfig_set_string(&context, "source", source)?;
    for (key, value) in settings {
        fsconfig_set_string(&context, *key, value.as_str())?;
    }
    if redirect {
        fsconfig_set_string(&context, "redirect_dir", "on")?;
    }
    fsconfig_create(&context)?;
    fsmount(
        &context,
        FsMountFlags::FSMOUNT_CLOEXEC,
        MountAttrFlags::empty(),
    )
}

/// Unmounts `target` (lazily, so a shell sitting in it does not block the release).
/// Confined (`within`), by its last name beneath its parent's descriptor, not followed (see
/// [`Within::unmount`]).
pub fn unmount(target: &Path, driver: Driver, within: Option<&Within>) -> Result<(), BackupError> {
    let result = match driver {
        Driver::Kernel if let Some(within) = within => {
            return within
                .unmount(target, true)
                .map_err(|refused| BackupError::io(target, refused.into()));
        }
        Driver::Kernel => {
            nix::mount::umount2(target, MntFlags::MNT_DETACH).map_err(|e| e.to_string())
        }
        Driver::Fuse => run(Command::new("fusermount3").arg("-uz").arg(target)),
    };
    result.map_err(|reason| BackupError::Unmount {
        path: target.to_path_buf(),
        reason,
    })
}

/// Whether the kernel path is usable here: root with a loop device and both filesystems.
pub fn kernel_available() -> bool {
    let filesystems = std::fs::read_to_string("/proc/filesystems").unwrap_or_default();
    nix::unistd::geteuid().is_root()
        && Path::new("/dev/loop-control").exists()
        && filesystems.contains("squashfs")
        && filesystems.contains("overlay")
}

/// Whether the FUSE fallback is installed.
pub fn fuse_available() -> bool {
    Path::new("/dev/fuse").exists()
        && ["squashfuse", "fuse-overlayfs", "fusermount3"]
            .iter()
            .all(|tool| on_path(tool))
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .unwrap_or(false)
}

/// The `lowerdir` option's value: `lowers`, topmost first, escaped and joined.
pub(crate) fn lowerdir(lowers: &[PathBuf]) -> String {
    lowers
        .iter()
        .map(|p| escape(p))
        .collect::<Vec<_>>()
        .join(":")
}

/// Mount paths in overlay options escape `\`, `,` and `:`.
fn escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, '\\' | ',' | ':') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn run(command: &mut Command) -> Result<(), String> {
    let output = command
        .output()
        .map_err(|e| format!("{:?}: {e}", command.get_program()))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
    }
}

/// Mount points listed in /proc/self/mountinfo, with their sources.
pub fn mounts() -> Vec<(PathBuf, String)> {
    mount_table()
        .into_iter()
        .map(|entry| (entry.target, entry.source))
        .collect()
}

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    pub target: PathBuf,
    /// `overlay`, `squashfs`, `fuse.fsd-bucket`, …
    pub fstype: String,
    pub source: String,
}

/// This process's mount table.
pub fn mount_table() -> Vec<MountEntry> {
    let info = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    fsd_api::mountinfo::parse(&info)
        .into_iter()
        .map(|line| MountEntry {
            target: line.target,
            fstype: line.fstype,
            source: line.source,
        })
        .collect()
}

/// Makes mounts under `/` shared, so restores made later reach the mount namespaces of
/// command sessions (which are slaves of the daemon's).
pub fn share_mounts() -> Result<(), String> {
    nix::mount::mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_SHARED,
        None::<&str>,
    )
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_overlay_option_paths() {
        assert_eq!(escape(Path::new("/a,b:c\\d")), "/a\\,b\\:c\\\\d");
    }
}
