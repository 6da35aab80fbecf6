//! Random batches of what agents and tools do to a workspace, for the mirror property test:
//! creates, appends, truncates, `mkdir -p` chains, renames of files and directories across
//! levels (over existing files too), swaps, deletes, directories deleted and made again (the
//! watched root included), and writes through the API. Deterministic for a seed.

use std::path::{Path, PathBuf};

/// xorshift64*: enough randomness for a workload, and a seed replays it exactly.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    pub fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        (!items.is_empty()).then(|| &items[self.below(items.len())])
    }
}

/// Names are few, so operations collide with what is there.
const NAMES: &[&str] = &["a", "b", "c", "d.txt", "e.rs", ".h", "f g"];
/// The file each batch ends with, so the test knows the journal has seen the batch.
pub const BARRIER: &str = ".barrier";

/// The watched directory and a way to write through the API.
pub struct Workload {
    /// The watched directory (absolute).
    pub root: PathBuf,
    /// Its path relative to the workspace, as the API takes it.
    pub remote: String,
}

/// What `Workload::local` does for a roll, for reports of operations that failed.
fn kind(roll: usize) -> &'static str {
    match roll {
        0..=14 => "write",
        15..=24 => "append",
        25..=27 => "truncate",
        28..=36 => "mkdir -p",
        37..=50 => "mv file",
        51..=60 => "mv dir",
        61..=63 => "swap",
        64..=72 => "rm",
        73..=77 => "rm -r",
        78..=82 => "rm -r && mkdir",
        _ => "rm -r ROOT && mkdir ROOT",
    }
}

/// A write through the API.
pub enum Api {
    /// Write these bytes to this workspace path through `POST /api/write`.
    Json(String, Vec<u8>),
    /// The same through `PUT /api/files/raw`.
    Raw(String, Vec<u8>),
}

impl Workload {
    /// The files and directories under the root (relative), leaving out the barrier.
    fn tree(&self) -> (Vec<PathBuf>, Vec<PathBuf>) {
        let (mut files, mut dirs) = (Vec::new(), vec![PathBuf::new()]);
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                let relative = path.strip_prefix(&self.root).unwrap().to_path_buf();
                if relative == Path::new(BARRIER) {
                    continue;
                }
                // Links are entries of their own, never followed.
                if std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir()) {
                    dirs.push(relative);
                    pending.push(path);
                } else {
                    files.push(relative);
                }
            }
        }
        files.sort();
        dirs.sort();
        (files, dirs)
    }

    fn content(rng: &mut Rng) -> Vec<u8> {
        let len = if rng.percent(10) {
            rng.below(8192)
        } else {
            rng.below(48)
        };
        (0..len).map(|_| rng.next() as u8).collect()
    }

    fn fresh(rng: &mut Rng, dirs: &[PathBuf]) -> PathBuf {
        let dir = rng.pick(dirs).cloned().unwrap_or_default();
        dir.join(NAMES[rng.below(NAMES.len())])
    }

    /// Runs one random operation; returns what it did and, for a write through the API,
    /// the request to send (the caller holds the client).
    pub fn step(&self, rng: &mut Rng) -> (String, Option<Api>) {
        let (files, dirs) = self.tree();
        let roll = rng.below(100);
        if roll >= 84 {
            let path = match rng.pick(&files) {
                Some(file) if rng.percent(50) => file.clone(),
                _ => Self::fresh(rng, &dirs),
            };
            let remote = format!("{}/{}", self.remote, path.display());
            let content = Self::content(rng);
            return if rng.percent(70) {
                (
                    format!("api write {}", path.display()),
                    Some(Api::Json(remote, content)),
                )
            } else {
                (
                    format!("api put {}", path.display()),
                    Some(Api::Raw(remote, content)),
                )
            };
        }
        match self.local(rng, roll, &files, &dirs) {
            Ok(done) => (done, None),
            Err(err) => (format!("({} failed: {err})", kind(roll)), None),
        }
    }

    /// An operation done directly on the tree, as a tool in the sandbox would.
    fn local(
        &self,
        rng: &mut Rng,
        roll: usize,
        files: &[PathBuf],
        dirs: &[PathBuf],
    ) -> std::io::Result<String> {
        let at = |p: &Path| self.root.join(p);
        let crowded = files.len() > 60;
        let file = |rng: &mut Rng| rng.pick(files).cloned();
        let dir = |rng: &mut Rng| rng.pick(&dirs[1..]).cloned();
        Ok(match roll {
            0..=14 if !crowded => {
                let path = Self::fresh(rng, dirs);
                std::fs::write(at(&path), Self::content(rng))?;
                format!("write {}", path.display())
            }
            15..=24 => {
                let Some(path) = file(rng) else {
                    return Ok("append: no file".into());
                };
                use std::io::Write;
                let mut handle = std::fs::OpenOptions::new().append(true).open(at(&path))?;
                handle.write_all(&Self::content(rng))?;
                format!("append {}", path.display())
            }
            25..=27 => {
                let Some(path) = file(rng) else {
                    return Ok("truncate: no file".into());
                };
                std::fs::File::create(at(&path))?;
                format!("truncate {}", path.display())
            }
            28..=36 if !crowded => {
                let mut path = rng.pick(dirs).cloned().unwrap_or_default();
                for _ in 0..=rng.below(3) {
                    path.push(NAMES[rng.below(NAMES.len())]);
                }
                std::fs::create_dir_all(at(&path))?;
                if rng.percent(60) {
                    std::fs::write(at(&path.join("q")), Self::content(rng))?;
                }
                format!("mkdir -p {}", path.display())
            }
            37..=50 => {
                let Some(from) = file(rng) else {
                    return Ok("mv file: no file".into());
                };
                let to = Self::fresh(rng, dirs);
                std::fs::rename(at(&from), at(&to))?;
                format!("mv {} {}", from.display(), to.display())
            }
            51..=60 => {
                let Some(from) = dir(rng) else {
                    return Ok("mv dir: no dir".into());
                };
                let to = Self::fresh(rng, dirs);
                std::fs::rename(at(&from), at(&to))?;
                format!("mv {}/ {}", from.display(), to.display())
            }
            61..=63 => {
                let (Some(a), Some(b)) = (file(rng), file(rng)) else {
                    return Ok("swap: no files".into());
                };
                let temp = at(Path::new("swap.tmp"));
                std::fs::rename(at(&a), &temp)?;
                std::fs::rename(at(&b), at(&a))?;
                std::fs::rename(&temp, at(&b))?;
                format!("swap {} {}", a.display(), b.display())
            }
            64..=72 => {
                let Some(path) = file(rng) else {
                    return Ok("rm: no file".into());
                };
                std::fs::remove_file(at(&path))?;
                format!("rm {}", path.display())
            }
            73..=77 => {
                let Some(path) = dir(rng) else {
                    return Ok("rm -r: no dir".into());
                };
                std::fs::remove_dir_all(at(&path))?;
                format!("rm -r {}", path.display())
            }
            78..=82 => {
                let Some(path) = dir(rng) else {
                    return Ok("rm -r && mkdir: no dir".into());
                };
                std::fs::remove_dir_all(at(&path))?;
                std::fs::create_dir(at(&path))?;
                if rng.percent(50) {
                    std::fs::write(at(&path.join("r")), Self::content(rng))?;
                }
                format!("rm -r {0} && mkdir {0}", path.display())
            }
            83 if rng.percent(30) => {
                std::fs::remove_dir_all(&self.root)?;
                std::fs::create_dir(&self.root)?;
                std::fs::write(self.root.join("after-root"), Self::content(rng))?;
                "rm -r ROOT && mkdir ROOT".into()
            }
            83 => {
                // A symlink (to a name in its directory, dangling or not), or a mode.
                if rng.percent(50) {
                    let path = Self::fresh(rng, dirs);
                    let target = NAMES[rng.below(NAMES.len())];
                    std::os::unix::fs::symlink(target, at(&path))?;
                    format!("ln -s {target} {}", path.display())
                } else {
                    use std::os::unix::fs::PermissionsExt;
                    let Some(path) = file(rng).or_else(|| dir(rng)) else {
                        return Ok("chmod: nothing".into());
                    };
                    if std::fs::symlink_metadata(at(&path))?
                        .file_type()
                        .is_symlink()
                    {
                        return Ok("chmod: a link".into());
                    }
                    let mode = [0o755, 0o644, 0o700, 0o600][rng.below(4)];
                    std::fs::set_permissions(at(&path), std::fs::Permissions::from_mode(mode))?;
                    format!("chmod {mode:o} {}", path.display())
                }
            }
            _ => "nothing".into(),
        })
    }

    /// Many files at once in a new directory: more than a change list may hold.
    pub fn burst(&self, count: usize) -> std::io::Result<String> {
        let dir = self.root.join("burst");
        std::fs::create_dir_all(&dir)?;
        for i in 0..count {
            std::fs::write(dir.join(format!("f{i}")), i.to_string())?;
        }
        Ok(format!("burst of {count}"))
    }
}
