//! Errors of decoding and scanning. Variants mirror recovery decisions: a torn tail is
//! recoverable by truncation (reported by [`crate::reader::TailState`], not as an error);
//! everything here is not.

/// A problem decoding one buffer (header, frame or payload).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("bad magic: not a pvisor journal (or damaged by a text-mode transfer)")]
    BadMagic,
    #[error("header checksum mismatch")]
    HeaderChecksum,
    #[error("unsupported checksum algorithm {0}")]
    UnknownChecksumAlgorithm(u8),
    #[error("unsupported hash algorithm {0}")]
    UnknownHashAlgorithm(u8),
    #[error(
        "format version {major}.{minor} is newer than this reader ({}.{})",
        crate::FORMAT_MAJOR,
        crate::FORMAT_MINOR
    )]
    TooNew { major: u16, minor: u16 },
    #[error(
        "payload of {len} bytes exceeds the cap of {} bytes",
        crate::MAX_PAYLOAD
    )]
    TooLarge { len: u32 },
    #[error("event kind {kind}: payload does not decode: {message}")]
    Payload { kind: u16, message: String },
    #[error("buffer too short: need {need} bytes, have {have}")]
    Short { need: usize, have: usize },
}

/// Why a journal could not be read to its end. Every variant names where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanError {
    #[error("i/o error at byte offset {offset}: {message}")]
    Io { offset: u64, message: String },
    #[error("journal header: {0}")]
    Header(DecodeError),
    #[error(
        "format version {major}.{minor} is newer than this reader ({}.{}); upgrade pvisor",
        crate::FORMAT_MAJOR,
        crate::FORMAT_MINOR
    )]
    TooNew { major: u16, minor: u16 },
    #[error("corrupt record at byte offset {offset} (expected sequence number {seq}): {reason}")]
    Corrupt {
        seq: u64,
        offset: u64,
        reason: String,
    },
    #[error("hash chain broken at sequence number {seq}, byte offset {offset}: the record was altered after it was written")]
    ChainBroken { seq: u64, offset: u64 },
    #[error("forked journal: sequence number {seq} appears again at byte offset {offset} with a different hash")]
    Forked { seq: u64, offset: u64 },
    #[error("sequence out of order at byte offset {offset}: expected {expected}, found {found}")]
    OutOfOrder {
        expected: u64,
        found: u64,
        offset: u64,
    },
}

impl ScanError {
    /// The byte offset the error names, when it names one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            ScanError::Io { offset, .. }
            | ScanError::Corrupt { offset, .. }
            | ScanError::ChainBroken { offset, .. }
            | ScanError::Forked { offset, .. }
            | ScanError::OutOfOrder { offset, .. } => Some(*offset),
            ScanError::Header(_) | ScanError::TooNew { .. } => Some(0),
        }
    }
    /// The sequence number the error names, when it names one.
    pub fn seq(&self) -> Option<u64> {
        match self {
            ScanError::Corrupt { seq, .. }
            | ScanError::ChainBroken { seq, .. }
            | ScanError::Forked { seq, .. } => Some(*seq),
            ScanError::OutOfOrder { expected, .. } => Some(*expected),
            _ => None,
        }
    }
}
