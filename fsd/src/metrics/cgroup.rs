//! The sandbox's cgroup, v2 or v1, as far as figures go: CPU time used and allowed, memory
//! used and allowed. A container is its own cgroup, so these are the sandbox's figures;
//! on a host without one the host's figures stand in (see `host`).

use std::path::{Path, PathBuf};

/// A v1 memory limit at or past this is "no limit" (the kernel's is a page short of 2^63).
const V1_UNLIMITED: u64 = 1 << 60;

/// Where the daemon's cgroup's files are. A hybrid host has both hierarchies, with each
/// controller in one of them, so every figure is looked for in the unified one first and
/// then in v1.
#[derive(Debug, Clone, Default)]
pub struct Cgroup {
    /// The unified hierarchy: the cgroup's directory and the mount it is under (limits are
    /// the lowest from the directory up to the mount).
    v2: Option<(PathBuf, PathBuf)>,
    /// The v1 cpuacct, cpu and memory directories found.
    cpuacct: Option<PathBuf>,
    cpu: Option<PathBuf>,
    memory: Option<PathBuf>,
}

impl Cgroup {
    /// The daemon's cgroup, from `/proc/self/cgroup`; `None` when there is none to read.
    pub fn of_self() -> Option<Cgroup> {
        let listing = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        Self::find(&listing, Path::new("/sys/fs/cgroup"))
    }

    /// The cgroup `listing` (as `/proc/<pid>/cgroup` has it) names, with the hierarchies
    /// mounted under `root`.
    fn find(listing: &str, root: &Path) -> Option<Cgroup> {
        let memberships = parse_memberships(listing);
        let v2 = memberships.unified.as_ref().and_then(|path| {
            [root.to_path_buf(), root.join("unified")]
                .into_iter()
                .find(|mount| mount.join("cgroup.controllers").exists())
                .map(|mount| (existing_below(&mount, path), mount))
        });
        let find = |controller: &str, probe: &str| {
            let (mount, path) = memberships.v1_dir(controller)?;
            let dir = existing_below(&root.join(mount), path);
            dir.join(probe).exists().then_some(dir)
        };
        let found = Cgroup {
            v2,
            cpuacct: find("cpuacct", "cpuacct.usage"),
            cpu: find("cpu", "cpu.cfs_quota_us"),
            memory: find("memory", "memory.usage_in_bytes"),
        };
        let none = found.v2.is_none()
            && found.cpuacct.is_none()
            && found.cpu.is_none()
            && found.memory.is_none();
        (!none).then_some(found)
    }

    /// The unified directory when it has `file`.
    fn v2_with(&self, file: &str) -> Option<(&Path, &Path)> {
        let (dir, mount) = self.v2.as_ref()?;
        dir.join(file)
            .exists()
            .then_some((dir.as_path(), mount.as_path()))
    }

    /// CPU time the cgroup has used, in seconds.
    pub fn cpu_seconds(&self) -> Option<f64> {
        if let Some((dir, _)) = self.v2_with("cpu.stat") {
            let stat = read(&dir.join("cpu.stat"))?;
            return Some(stat_value(&stat, "usage_usec")? as f64 / 1e6);
        }
        let nanos: u64 = read(&self.cpuacct.as_ref()?.join("cpuacct.usage"))?
            .trim()
            .parse()
            .ok()?;
        Some(nanos as f64 / 1e9)
    }

    /// Cores' worth of CPU time the quota allows, when one is set.
    pub fn cpu_limit_cores(&self) -> Option<f64> {
        if let Some((dir, mount)) = self.v2_with("cpu.max") {
            return ancestors(dir, mount)
                .filter_map(|dir| parse_cpu_max(&read(&dir.join("cpu.max"))?))
                .reduce(f64::min);
        }
        let cpu = self.cpu.as_ref()?;
        let quota: i64 = read(&cpu.join("cpu.cfs_quota_us"))?.trim().parse().ok()?;
        let period: i64 = read(&cpu.join("cpu.cfs_period_us"))?.trim().parse().ok()?;
        (quota > 0 && period > 0).then(|| quota as f64 / period as f64)
    }

    /// Memory in use, less the page cache the kernel may drop (`inactive_file`).
    pub fn memory_used(&self) -> Option<u64> {
        let (current, stat, inactive) = match self.v2_with("memory.current") {
            Some((dir, _)) => (
                dir.join("memory.current"),
                dir.join("memory.stat"),
                "inactive_file",
            ),
            None => {
                let dir = self.memory.as_ref()?;
                (
                    dir.join("memory.usage_in_bytes"),
                    dir.join("memory.stat"),
                    "total_inactive_file",
                )
            }
        };
        let used: u64 = read(&current)?.trim().parse().ok()?;
        let cache = read(&stat).and_then(|stat| stat_value(&stat, inactive));
        Some(used.saturating_sub(cache.unwrap_or(0)))
    }

    /// The memory limit in force, when there is one: the lowest of the cgroup's and its
    /// parents'.
    pub fn memory_limit(&self) -> Option<u64> {
        if let Some((dir, mount)) = self.v2_with("memory.current") {
            return ancestors(dir, mount)
                .filter_map(|dir| read(&dir.join("memory.max"))?.trim().parse::<u64>().ok())
                .min();
        }
        let stat = read(&self.memory.as_ref()?.join("memory.stat"))?;
        stat_value(&stat, "hierarchical_memory_limit").filter(|&limit| limit < V1_UNLIMITED)
    }
}

/// What `/proc/self/cgroup` says: the unified path, and each v1 hierarchy's controllers
/// and path.
#[derive(Debug, Default, PartialEq, Eq)]
struct Memberships {
    unified: Option<String>,
    v1: Vec<(String, String)>,
}

impl Memberships {
    /// The v1 hierarchy with `controller`: its mount's name (`cpu,cpuacct`) and the path.
    fn v1_dir(&self, controller: &str) -> Option<(&str, &str)> {
        self.v1
            .iter()
            .find(|(controllers, _)| controllers.split(',').any(|c| c == controller))
            .map(|(controllers, path)| (controllers.as_str(), path.as_str()))
    }
}

fn parse_memberships(listing: &str) -> Memberships {
    let mut memberships = Memberships::default();
    for line in listing.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if controllers.is_empty() {
            memberships.unified = Some(path.to_string());
        } else if !controllers.starts_with("name=") {
            memberships
                .v1
                .push((controllers.to_string(), path.to_string()));
        }
    }
    memberships
}

/// `mount` joined with `path` when that exists; else `mount` itself (a container whose
/// cgroup namespace shows its own cgroup at the mount's root, while `/proc` names the path
/// the host sees).
fn existing_below(mount: &Path, path: &str) -> PathBuf {
    let below = mount.join(path.trim_start_matches('/'));
    if below.is_dir() {
        below
    } else {
        mount.to_path_buf()
    }
}

/// `dir` and its parents up to `mount`, which is left out (the root has no limits).
fn ancestors<'a>(dir: &'a Path, mount: &'a Path) -> impl Iterator<Item = &'a Path> {
    dir.ancestors()
        .take_while(move |dir| dir.starts_with(mount) && *dir != mount)
}

/// `cpu.max`: `max 100000` (no quota) or `200000 100000` (two cores).
fn parse_cpu_max(text: &str) -> Option<f64> {
    let mut parts = text.split_whitespace();
    let quota: f64 = parts.next()?.parse().ok()?;
    let period: f64 = parts.next()?.parse().ok()?;
    (quota > 0.0 && period > 0.0).then_some(quota / period)
}

/// The value of `key` in a `key value` per line file (`cpu.stat`, `memory.stat`).
fn stat_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok())?
    })
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The host's figures, for when no cgroup gives them.
pub mod host {
    /// CPU time all cores have spent busy since boot, in seconds (`/proc/stat`).
    pub fn cpu_seconds(ticks_per_second: u64) -> Option<f64> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let busy = busy_ticks(stat.lines().next()?)?;
        Some(busy as f64 / ticks_per_second as f64)
    }

    /// The busy ticks of the `cpu` line: everything but idle and iowait (guest time is
    /// already counted in user time).
    pub(super) fn busy_ticks(line: &str) -> Option<u64> {
        let values: Vec<u64> = line
            .strip_prefix("cpu ")?
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        let at = |i: usize| values.get(i).copied().unwrap_or(0);
        // user nice system idle iowait irq softirq steal
        Some(at(0) + at(1) + at(2) + at(5) + at(6) + at(7))
    }

    /// `(total, used)` memory: `MemTotal`, and `MemTotal - MemAvailable`.
    pub fn memory() -> Option<(u64, u64)> {
        let info = std::fs::read_to_string("/proc/meminfo").ok()?;
        let kib = |key: &str| {
            info.lines().find_map(|line| {
                let rest = line.strip_prefix(key)?.strip_prefix(':')?;
                rest.trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        };
        let total = kib("MemTotal")? * 1024;
        let available = kib("MemAvailable").map_or(0, |k| k * 1024);
        Some((total, total.saturating_sub(available)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memberships_of_both_versions() {
        let hybrid = "9:name=systemd:/\n4:memory:/box/a1\n2:cpu,cpuacct:/box/a1\n0::/\n";
        let memberships = parse_memberships(hybrid);
        assert_eq!(memberships.unified.as_deref(), Some("/"));
        assert_eq!(memberships.v1_dir("memory"), Some(("memory", "/box/a1")));
        assert_eq!(
            memberships.v1_dir("cpuacct"),
            Some(("cpu,cpuacct", "/box/a1"))
        );
        assert_eq!(memberships.v1_dir("pids"), None);
        let unified = parse_memberships("0::/system.slice/fsd.service\n");
        assert_eq!(
            unified.unified.as_deref(),
            Some("/system.slice/fsd.service")
        );
        assert!(unified.v1.is_empty());
    }

    #[test]
    fn reads_limits_and_stats() {
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cpu_max("150000 100000\n"), Some(1.5));
        let stat = "usage_usec 2500000\nuser_usec 2000000\n";
        assert_eq!(stat_value(stat, "usage_usec"), Some(2_500_000));
        assert_eq!(stat_value(stat, "usage"), None);
        assert_eq!(
            host::busy_ticks("cpu  100 5 50 1000 20 1 2 3 0 0"),
            Some(161)
        );
        let mount = Path::new("/sys/fs/cgroup");
        let dirs: Vec<&Path> = ancestors(Path::new("/sys/fs/cgroup/a/b"), mount).collect();
        assert_eq!(
            dirs,
            [
                Path::new("/sys/fs/cgroup/a/b"),
                Path::new("/sys/fs/cgroup/a")
            ]
        );
    }

    /// Writes `files` (path, content) under `root`.
    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (path, content) in files {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }
    }

    #[test]
    fn reads_a_v2_cgroup_and_the_lowest_limit_above_it() {
        let root = tempfile::tempdir().unwrap();
        tree(
            root.path(),
            &[
                ("cgroup.controllers", "cpu memory"),
                ("box/cpu.max", "200000 100000\n"),
                ("box/memory.max", "1073741824\n"),
                ("box/a/cpu.stat", "usage_usec 1500000\nuser_usec 1000000\n"),
                ("box/a/cpu.max", "max 100000\n"),
                ("box/a/memory.current", "300000000\n"),
                ("box/a/memory.max", "max\n"),
                ("box/a/memory.stat", "anon 1\ninactive_file 100000000\n"),
            ],
        );
        let cgroup = Cgroup::find("0::/box/a\n", root.path()).unwrap();
        assert_eq!(cgroup.cpu_seconds(), Some(1.5));
        assert_eq!(cgroup.cpu_limit_cores(), Some(2.0));
        assert_eq!(cgroup.memory_used(), Some(200_000_000));
        assert_eq!(cgroup.memory_limit(), Some(1_073_741_824));
    }

    #[test]
    fn reads_v1_hierarchies_beside_an_empty_unified_one() {
        let root = tempfile::tempdir().unwrap();
        tree(
            root.path(),
            &[
                ("unified/cgroup.controllers", ""),
                ("unified/cgroup.procs", ""),
                ("cpu,cpuacct/box/cpuacct.usage", "2500000000\n"),
                ("cpu,cpuacct/box/cpu.cfs_quota_us", "50000\n"),
                ("cpu,cpuacct/box/cpu.cfs_period_us", "100000\n"),
                ("memory/box/memory.usage_in_bytes", "5000\n"),
                (
                    "memory/box/memory.stat",
                    "hierarchical_memory_limit 9223372036854771712\ntotal_inactive_file 1000\n",
                ),
            ],
        );
        let listing = "4:memory:/box\n2:cpu,cpuacct:/box\n1:name=systemd:/\n0::/\n";
        let cgroup = Cgroup::find(listing, root.path()).unwrap();
        assert_eq!(cgroup.cpu_seconds(), Some(2.5));
        assert_eq!(cgroup.cpu_limit_cores(), Some(0.5));
        assert_eq!(cgroup.memory_used(), Some(4000));
        assert_eq!(cgroup.memory_limit(), None, "no limit is set");
        // A container whose namespace shows its own cgroup at the root: the path the host
        // names is not there, so the mount's root is the cgroup.
        tree(root.path(), &[("memory/memory.usage_in_bytes", "7\n")]);
        let cgroup = Cgroup::find("4:memory:/docker/abc\n", root.path()).unwrap();
        assert_eq!(cgroup.memory_used(), Some(7));
    }

    #[test]
    fn the_host_figures_read() {
        let (total, used) = host::memory().unwrap();
        assert!(total > 0 && used <= total);
        assert!(host::cpu_seconds(100).unwrap() > 0.0);
    }
}
