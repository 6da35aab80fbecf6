//! A file open for writing lives in a local spill file until it is uploaded whole: on
//! close (flush) or fsync, so the writer learns of a failed upload from `close` itself.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use crate::fs::eager::EagerUpload;
use crate::fs::lock::lock;

#[derive(Debug, Default, Clone, Copy)]
struct State {
    size: u64,
    /// Bumped by every change, so an upload only marks clean what it actually sent.
    generation: u64,
    uploaded: u64,
    /// Handles that hold this spill.
    opens: u32,
    /// The name was removed: nothing may upload it again.
    unlinked: bool,
    /// Every write so far went to the end of a file that started empty: its parts can go
    /// up while it is written.
    appending: bool,
}

pub struct Spill {
    file: File,
    state: Mutex<State>,
    /// Parts uploaded while an appending file is written.
    eager: Mutex<Option<EagerUpload>>,
    /// One upload at a time per file.
    pub upload_lock: tokio::sync::Mutex<()>,
}

/// What an upload needs to know before it starts.
#[derive(Debug, Clone, Copy)]
pub struct Pending {
    pub size: u64,
    pub generation: u64,
}

impl Spill {
    /// An empty spill file in `dir` (unlinked at once: it goes away with the handle).
    pub fn new(dir: &Path, dirty: bool) -> io::Result<Spill> {
        let file = tempfile::tempfile_in(dir)?;
        let generation = u64::from(dirty);
        Ok(Spill {
            file,
            state: Mutex::new(State {
                generation,
                appending: dirty,
                ..State::default()
            }),
            eager: Mutex::new(None),
            upload_lock: tokio::sync::Mutex::new(()),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        lock(&self.state)
    }

    pub fn size(&self) -> u64 {
        self.state().size
    }

    pub fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<u64> {
        self.file.write_all_at(data, offset)?;
        let mut state = self.state();
        if offset != state.size {
            state.appending = false;
        }
        state.size = state.size.max(offset + data.len() as u64);
        state.generation += 1;
        Ok(state.size)
    }

    /// Fills the spill with the object's current bytes; not a change.
    pub fn fill_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.file.write_all_at(data, offset)?;
        let mut state = self.state();
        state.appending = false;
        state.size = state.size.max(offset + data.len() as u64);
        Ok(())
    }

    pub fn read_at(&self, offset: u64, len: u64) -> io::Result<Vec<u8>> {
        let size = self.size();
        let end = size.min(offset.saturating_add(len));
        let mut buffer = vec![0; end.saturating_sub(offset) as usize];
        self.file.read_exact_at(&mut buffer, offset)?;
        Ok(buffer)
    }

    pub fn set_len(&self, size: u64) -> io::Result<()> {
        self.file.set_len(size)?;
        let mut state = self.state();
        state.appending = false;
        state.size = size;
        state.generation += 1;
        Ok(())
    }

    /// `None` when there is nothing to upload.
    pub fn pending(&self) -> Option<Pending> {
        let state = self.state();
        (state.generation != state.uploaded && !state.unlinked).then_some(Pending {
            size: state.size,
            generation: state.generation,
        })
    }

    pub fn mark_uploaded(&self, pending: Pending) {
        let mut state = self.state();
        state.uploaded = state.uploaded.max(pending.generation);
    }

    pub fn mark_unlinked(&self) {
        self.state().unlinked = true;
    }

    pub fn opened(&self) {
        self.state().opens += 1;
    }

    pub fn appending(&self) -> bool {
        self.state().appending
    }

    /// Once uploaded, later writes wait for the next close.
    pub fn stop_appending(&self) {
        self.state().appending = false;
    }

    pub fn eager(&self) -> std::sync::MutexGuard<'_, Option<EagerUpload>> {
        lock(&self.eager)
    }

    pub fn opens(&self) -> u32 {
        self.state().opens
    }

    /// Returns the handles still holding the spill.
    pub fn closed(&self) -> u32 {
        let mut state = self.state();
        state.opens = state.opens.saturating_sub(1);
        state.opens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uploads_mark_clean_only_what_they_sent() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(dir.path(), true).unwrap();
        let first = spill.pending().expect("a new file is dirty");
        assert_eq!(first.size, 0);
        spill.write_at(0, b"hello").unwrap();
        let second = spill.pending().unwrap();
        spill.write_at(5, b" world").unwrap();
        spill.mark_uploaded(second);
        assert!(
            spill.pending().is_some(),
            "the later write still needs an upload"
        );
        assert_eq!(spill.read_at(0, 100).unwrap(), b"hello world");
        spill.mark_uploaded(spill.pending().unwrap());
        assert!(spill.pending().is_none());
    }

    #[test]
    fn filled_content_is_not_dirty_and_unlinked_never_uploads() {
        let dir = tempfile::tempdir().unwrap();
        let spill = Spill::new(dir.path(), false).unwrap();
        spill.fill_at(0, b"abc").unwrap();
        assert!(spill.pending().is_none());
        spill.set_len(1).unwrap();
        assert_eq!(spill.read_at(0, 10).unwrap(), b"a");
        spill.mark_unlinked();
        assert!(spill.pending().is_none());
    }
}
