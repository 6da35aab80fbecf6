//! Descriptors the daemon inherited from whoever started it (a shell, a test harness, a
//! runtime that leaves one open) belong to that parent, not to the sandbox: they are marked
//! close-on-exec at start, so no user command, supervisor or shell receives them.

/// Marks every inherited descriptor above stderr close-on-exec. Runs before the daemon
/// starts a thread or opens anything of its own (its own are close-on-exec already).
pub fn keep_inherited_from_commands() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    // Listed first: the listing's own descriptor is among them and closed once it ends
    // (setting a flag on it then just fails).
    let inherited: Vec<i32> = entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in inherited {
        // SAFETY: F_SETFD takes no pointer; on a descriptor that is not open it fails with
        // EBADF and changes nothing.
        unsafe { nix::libc::fcntl(fd, nix::libc::F_SETFD, nix::libc::FD_CLOEXEC) };
    }
}
