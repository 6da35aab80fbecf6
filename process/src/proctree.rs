//! Process trees from /proc: who a process's children are, and signalling a whole tree.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Direct children of `pid` (all threads' children lists).
pub fn children(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(list) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// `pid` and everything below it, parents before children.
pub fn tree(pid: u32) -> Vec<u32> {
    let mut out = vec![pid];
    let mut index = 0;
    while index < out.len() {
        out.extend(children(out[index]));
        index += 1;
    }
    out
}

/// The parent of `pid`, from `/proc/<pid>/stat` (the field after the parenthesized name).
pub fn parent(pid: u32) -> Option<u32> {
    after_name(pid)?.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `pid` is alive (a zombie counts as dead).
pub fn alive(pid: u32) -> bool {
    after_name(pid).is_some_and(|stat| {
        stat.split_whitespace()
            .next()
            .is_some_and(|state| state != "Z" && state != "X")
    })
}

/// Whether `pid` is stopped (by a signal or a tracer).
pub fn stopped(pid: u32) -> bool {
    after_name(pid).is_some_and(|stat| {
        stat.split_whitespace()
            .next()
            .is_some_and(|state| state == "T" || state == "t")
    })
}

/// The host pid of the process that has pid `ns_pid` in its own (innermost) PID namespace,
/// searched among `root` and its descendants. Without a namespace the two are the same.
pub fn host_pid(ns_pid: u32, root: u32) -> Option<u32> {
    tree(root)
        .into_iter()
        .find(|&pid| innermost_pid(pid) == Some(ns_pid))
}

/// The pid a process the daemon knows as `pid` has in its own (innermost) PID namespace:
/// the last `NSpid` entry of `/proc/<pid>/status`.
pub fn innermost_pid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with("NSpid:"))?;
    line.split_whitespace().last()?.parse().ok()
}

/// Everything below `root`, parents before children (not `root` itself).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut all = tree(root);
    all.remove(0);
    all
}

/// The living processes below `root` (zombies count as dead).
pub fn living_below(root: u32) -> Vec<u32> {
    descendants(root)
        .into_iter()
        .filter(|&p| alive(p))
        .collect()
}

/// What a process tree uses: CPU time and resident memory.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub rss_bytes: u64,
}

/// What the tree below `root` uses now: the CPU time of every living process and of the
/// children each has waited for, `root`'s waited-for children included (`root` itself, a
/// supervisor, is left out), and their resident memory.
pub fn usage_below(root: u32) -> Usage {
    let (ticks, page) = (clock_ticks(), page_bytes());
    let mut used_ticks = 0u64;
    let mut rss_pages = 0u64;
    for pid in tree(root) {
        let Some(stat) = after_name(pid) else {
            continue;
        };
        let fields: Vec<&str> = stat.split_whitespace().collect();
        // After the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17, rss 24.
        let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        let waited = field(16).unwrap_or(0) + field(17).unwrap_or(0);
        if pid == root {
            used_ticks += waited;
            continue;
        }
        used_ticks += field(14).unwrap_or(0) + field(15).unwrap_or(0) + waited;
        rss_pages += field(24).unwrap_or(0);
    }
    Usage {
        cpu_seconds: used_ticks as f64 / ticks as f64,
        rss_bytes: rss_pages * page,
    }
}

/// `/proc/<pid>/stat` after the parenthesized name (which may hold spaces and parentheses):
/// the fields from the state on.
fn after_name(pid: u32) -> Option<String> {
    let mut stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let name_end = stat.rfind(')')? + 1;
    stat.drain(..name_end);
    Some(stat)
}

/// Clock ticks per second, which `/proc` counts CPU time in.
pub fn clock_ticks() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks as u64,
        _ => 100,
    }
}

fn page_bytes() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    match sysconf(SysconfVar::PAGE_SIZE) {
        Ok(Some(bytes)) if bytes > 0 => bytes as u64,
        _ => 4096,
    }
}

/// Sends `signal` to each of `pids` (never 0 or 1).
pub fn signal_all(pids: &[u32], signal: Signal) {
    for &pid in pids {
        if pid > 1
            && let Ok(raw) = i32::try_from(pid)
        {
            let _ = kill(Pid::from_raw(raw), signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_kills_a_tree() {
        let mut child = std::process::Command::new("bash")
            .args(["-c", "sleep 30 & sleep 30 & wait"])
            .spawn()
            .unwrap();
        let pid = child.id();
        let mut kids = Vec::new();
        for _ in 0..100 {
            kids = children(pid);
            if kids.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(kids.len(), 2, "{kids:?}");
        assert_eq!(parent(kids[0]), Some(pid));
        assert_eq!(tree(pid).len(), 3);
        // A child seen right as it execs `sleep` has no page of its new image resident
        // yet (its RSS is 0 for that moment): looked at again until it has.
        let mut usage = usage_below(pid);
        for _ in 0..100 {
            if usage.rss_bytes > 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            usage = usage_below(pid);
        }
        assert!(usage.rss_bytes > 0, "{usage:?}");
        signal_all(&tree(pid), Signal::SIGKILL);
        child.wait().unwrap();
        for kid in kids {
            for _ in 0..100 {
                if !alive(kid) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            assert!(!alive(kid));
        }
    }
}
