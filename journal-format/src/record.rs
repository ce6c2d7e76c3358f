//! Record framing.
//!
//! ```text
//! offset    size field
//!      0       4 len         u32 LE, payload length; must be <= MAX_PAYLOAD
//!      4       2 kind        u16 LE, event kind (see event.rs)
//!      6       2 flags       u16 LE, must be 0 in format 1.0
//!      8       8 seq         u64 LE, 1 for the first record, +1 for each next one
//!     16       8 at_ms       u64 LE, Unix time in milliseconds when the event was appended
//!     24       4 header_crc  CRC-32C of bytes 0..24, seeded with the journal id
//!     28     len payload     MessagePack (rmp-serde, named fields) of the event body
//!  28+len     32 chain       BLAKE3("pvisor-journal/chain/v1" || prev_chain || bytes 0..28+len)
//!  60+len      4 record_crc  CRC-32C of bytes 0..60+len, seeded with the journal id
//! ```
//! Total framed size: `64 + len`. The chain of the first record uses as `prev_chain` the
//! anchor `BLAKE3("pvisor-journal/anchor/v1" || the 48 header bytes)`.
//!
//! "Seeded with the journal id" means: start from `crc32c(journal_id)` and append the bytes
//! (`crc32c_append(seed, bytes)`). The header CRC exists so that a damaged length can never
//! drive an allocation or a misclassification before the payload is checked.

use crate::error::DecodeError;
use crate::header::{FileHeader, HEADER_LEN};

pub const FRAME_HEADER_LEN: usize = 28;
pub const CHAIN_LEN: usize = 32;
pub const TRAILER_LEN: usize = CHAIN_LEN + 4;
/// Framing bytes around a payload.
pub const OVERHEAD: usize = FRAME_HEADER_LEN + TRAILER_LEN;

const CHAIN_DOMAIN: &[u8] = b"pvisor-journal/chain/v1";
const ANCHOR_DOMAIN: &[u8] = b"pvisor-journal/anchor/v1";

/// A link of the BLAKE3 hash chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChainHash(pub [u8; 32]);

impl ChainHash {
    /// The chain anchor for a journal: the hash of its header bytes.
    pub fn anchor(header: &FileHeader) -> Self {
        let mut h = blake3::Hasher::new();
        h.update(ANCHOR_DOMAIN);
        h.update(&header.encode()[..HEADER_LEN]);
        ChainHash(*h.finalize().as_bytes())
    }
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The decoded fixed part of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    pub len: u32,
    pub kind: u16,
    pub flags: u16,
    pub seq: u64,
    pub at_ms: u64,
}

impl FrameHeader {
    pub fn framed_len(&self) -> u64 {
        self.len as u64 + OVERHEAD as u64
    }
}

/// Why a frame header does not validate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFault {
    Checksum,
    TooLarge(u32),
    Flags(u16),
}

impl std::fmt::Display for FrameFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameFault::Checksum => write!(f, "record header checksum mismatch"),
            FrameFault::TooLarge(n) => write!(
                f,
                "record length {n} exceeds the cap of {}",
                crate::MAX_PAYLOAD
            ),
            FrameFault::Flags(x) => write!(f, "unknown record flags {x:#06x}"),
        }
    }
}

fn crc_seeded(seed: u32, bytes: &[u8]) -> u32 {
    crc32c::crc32c_append(seed, bytes)
}

/// Decode and check the 28-byte fixed part. The length cap is checked here, before the
/// caller allocates anything for the payload.
pub fn decode_frame_header(
    seed: u32,
    b: &[u8; FRAME_HEADER_LEN],
) -> Result<FrameHeader, FrameFault> {
    let stored = u32::from_le_bytes(b[24..28].try_into().unwrap());
    if crc_seeded(seed, &b[0..24]) != stored {
        return Err(FrameFault::Checksum);
    }
    let len = u32::from_le_bytes(b[0..4].try_into().unwrap());
    if len > crate::MAX_PAYLOAD {
        return Err(FrameFault::TooLarge(len));
    }
    let flags = u16::from_le_bytes([b[6], b[7]]);
    if flags != 0 {
        return Err(FrameFault::Flags(flags));
    }
    Ok(FrameHeader {
        len,
        kind: u16::from_le_bytes([b[4], b[5]]),
        flags,
        seq: u64::from_le_bytes(b[8..16].try_into().unwrap()),
        at_ms: u64::from_le_bytes(b[16..24].try_into().unwrap()),
    })
}

/// One complete, checksum-valid record. Holds the whole framed bytes (no copy of the
/// payload is made); [`RecordFrame::payload`] borrows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFrame {
    pub seq: u64,
    pub kind: u16,
    pub at_ms: u64,
    /// The chain hash stored in the record.
    pub chain: ChainHash,
    /// Byte offset of the record in the file.
    pub offset: u64,
    bytes: Vec<u8>,
}

impl RecordFrame {
    pub(crate) fn new(
        seq: u64,
        kind: u16,
        at_ms: u64,
        chain: ChainHash,
        offset: u64,
        bytes: Vec<u8>,
    ) -> Self {
        RecordFrame {
            seq,
            kind,
            at_ms,
            chain,
            offset,
            bytes,
        }
    }
    pub fn payload(&self) -> &[u8] {
        &self.bytes[FRAME_HEADER_LEN..self.bytes.len() - TRAILER_LEN]
    }
    /// The record exactly as framed on disk.
    pub fn framed(&self) -> &[u8] {
        &self.bytes
    }
    pub fn framed_len(&self) -> u64 {
        self.bytes.len() as u64
    }
}

/// The chain hash of a record, given the previous link and the record's bytes `0..28+len`.
pub fn chain_hash(prev: &ChainHash, head_and_payload: &[u8]) -> ChainHash {
    let mut h = blake3::Hasher::new();
    h.update(CHAIN_DOMAIN);
    h.update(&prev.0);
    h.update(head_and_payload);
    ChainHash(*h.finalize().as_bytes())
}

/// Encode one record. Returns the bytes and its chain hash (the `prev` of the next record).
pub fn encode_record(
    seed: u32,
    prev: &ChainHash,
    seq: u64,
    kind: u16,
    at_ms: u64,
    payload: &[u8],
) -> Result<(Vec<u8>, ChainHash), DecodeError> {
    let len: u32 = payload
        .len()
        .try_into()
        .map_err(|_| DecodeError::TooLarge { len: u32::MAX })?;
    if len > crate::MAX_PAYLOAD {
        return Err(DecodeError::TooLarge { len });
    }
    let mut b = Vec::with_capacity(payload.len() + OVERHEAD);
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(&kind.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&seq.to_le_bytes());
    b.extend_from_slice(&at_ms.to_le_bytes());
    let hcrc = crc_seeded(seed, &b[0..24]);
    b.extend_from_slice(&hcrc.to_le_bytes());
    b.extend_from_slice(payload);
    let chain = chain_hash(prev, &b);
    b.extend_from_slice(&chain.0);
    let rcrc = crc_seeded(seed, &b);
    b.extend_from_slice(&rcrc.to_le_bytes());
    Ok((b, chain))
}

/// Check the trailer of a full record buffer (`64 + len` bytes) whose header already
/// validated. Returns the stored chain hash when the record checksum matches.
pub fn check_record(seed: u32, full: &[u8]) -> Option<ChainHash> {
    let n = full.len();
    if n < OVERHEAD {
        return None;
    }
    let stored = u32::from_le_bytes(full[n - 4..].try_into().unwrap());
    if crc_seeded(seed, &full[..n - 4]) != stored {
        return None;
    }
    let mut c = [0u8; 32];
    c.copy_from_slice(&full[n - 4 - CHAIN_LEN..n - 4]);
    Some(ChainHash(c))
}
