//! Reading an encoded snapshot index field by field.

use crate::BackupError;

/// Reads an encoded index's fields in turn; running out is an error.
pub(crate) struct Cursor<'a>(pub &'a [u8]);

impl<'a> Cursor<'a> {
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], BackupError> {
        if self.0.len() < n {
            return Err(BackupError::Index("truncated".into()));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    pub fn u8(&mut self) -> Result<u8, BackupError> {
        Ok(self.bytes(1)?[0])
    }

    pub fn u32(&mut self) -> Result<u32, BackupError> {
        let b = self.bytes(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn u64(&mut self) -> Result<u64, BackupError> {
        Ok(u64::from_le_bytes(
            self.bytes(8)?.try_into().unwrap_or([0; 8]),
        ))
    }
}
