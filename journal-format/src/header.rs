//! The 48-byte file header.
//!
//! ```text
//! offset size field
//!      0    8 magic          8A 50 56 4A 0D 0A 1A 0A  ("\x8APVJ\r\n\x1A\n")
//!      8    2 format_major   u16 little-endian
//!     10    2 format_minor   u16 little-endian
//!     12    1 checksum_algo  1 = CRC-32C (Castagnoli)
//!     13    1 hash_algo      1 = BLAKE3-256
//!     14    2 reserved       zero
//!     16   16 journal_id     random bytes, fixed for the life of the journal
//!     32    8 created_at_ms  u64 LE, Unix time in milliseconds
//!     40    4 reserved       zero
//!     44    4 header_crc     CRC-32C of bytes 0..44 (unseeded)
//! ```

use crate::error::DecodeError;

/// Magic bytes. The high-bit first byte catches 7-bit transfers, CR LF catches line-ending
/// conversion, 0x1A stops `type` on DOS, the final LF catches LF→CRLF (as PNG and redb do).
pub const MAGIC: [u8; 8] = [0x8A, b'P', b'V', b'J', 0x0D, 0x0A, 0x1A, 0x0A];
pub const HEADER_LEN: usize = 48;
pub const CHECKSUM_CRC32C: u8 = 1;
pub const HASH_BLAKE3: u8 = 1;

/// The random 16-byte identity of one journal. It seeds every record checksum, so bytes from
/// another journal (or zeroed bytes) never validate here.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct JournalId(pub [u8; 16]);

impl JournalId {
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
    /// The CRC-32C seed derived from this id.
    pub fn crc_seed(&self) -> u32 {
        crc32c::crc32c(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    pub major: u16,
    pub minor: u16,
    pub journal_id: JournalId,
    pub created_at_ms: u64,
}

impl FileHeader {
    pub fn new(journal_id: JournalId, created_at_ms: u64) -> Self {
        FileHeader {
            major: crate::FORMAT_MAJOR,
            minor: crate::FORMAT_MINOR,
            journal_id,
            created_at_ms,
        }
    }

    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..10].copy_from_slice(&self.major.to_le_bytes());
        b[10..12].copy_from_slice(&self.minor.to_le_bytes());
        b[12] = CHECKSUM_CRC32C;
        b[13] = HASH_BLAKE3;
        b[16..32].copy_from_slice(&self.journal_id.0);
        b[32..40].copy_from_slice(&self.created_at_ms.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..44]);
        b[44..48].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decode and check a header. A newer major is [`DecodeError::TooNew`]; a newer minor
    /// decodes (readers may read it) and writers check [`FileHeader::writable`].
    pub fn decode(b: &[u8]) -> Result<Self, DecodeError> {
        if b.len() < HEADER_LEN {
            if b.len() >= 8 && b[0..8] != MAGIC {
                return Err(DecodeError::BadMagic);
            }
            return Err(DecodeError::Short {
                need: HEADER_LEN,
                have: b.len(),
            });
        }
        if b[0..8] != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let stored = u32::from_le_bytes(b[44..48].try_into().unwrap());
        if crc32c::crc32c(&b[0..44]) != stored {
            return Err(DecodeError::HeaderChecksum);
        }
        let major = u16::from_le_bytes([b[8], b[9]]);
        let minor = u16::from_le_bytes([b[10], b[11]]);
        if major > crate::FORMAT_MAJOR {
            return Err(DecodeError::TooNew { major, minor });
        }
        if b[12] != CHECKSUM_CRC32C {
            return Err(DecodeError::UnknownChecksumAlgorithm(b[12]));
        }
        if b[13] != HASH_BLAKE3 {
            return Err(DecodeError::UnknownHashAlgorithm(b[13]));
        }
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[16..32]);
        let created_at_ms = u64::from_le_bytes(b[32..40].try_into().unwrap());
        Ok(FileHeader {
            major,
            minor,
            journal_id: JournalId(id),
            created_at_ms,
        })
    }

    /// Whether this version of the codec may append to a journal with this header.
    pub fn writable(&self) -> bool {
        self.major == crate::FORMAT_MAJOR && self.minor <= crate::FORMAT_MINOR
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip_and_damage() {
        let h = FileHeader::new(JournalId([7; 16]), 1_700_000_000_000);
        let b = h.encode();
        assert_eq!(FileHeader::decode(&b).unwrap(), h);
        for i in 0..HEADER_LEN * 8 {
            let mut d = b;
            d[i / 8] ^= 1 << (i % 8);
            assert!(FileHeader::decode(&d).is_err(), "bit {i} flip not detected");
        }
    }
    #[test]
    fn newer_major_refused() {
        let mut h = FileHeader::new(JournalId([1; 16]), 0);
        h.major = crate::FORMAT_MAJOR + 1;
        assert!(matches!(
            FileHeader::decode(&h.encode()),
            Err(DecodeError::TooNew { .. })
        ));
        let mut h = FileHeader::new(JournalId([1; 16]), 0);
        h.minor = crate::FORMAT_MINOR + 1;
        let d = FileHeader::decode(&h.encode()).unwrap();
        assert!(!d.writable());
    }
}
