//! Pure record encoder: turns events into framed bytes, tracking the sequence number and the
//! hash chain. The store in the `pvisor` crate writes what it returns.

use crate::error::DecodeError;
use crate::event::Event;
use crate::header::FileHeader;
use crate::record::{encode_record, ChainHash};

#[derive(Debug, Clone)]
pub struct Encoder {
    seed: u32,
    prev: ChainHash,
    next_seq: u64,
}

impl Encoder {
    /// An encoder for a new journal with this header.
    pub fn new(header: &FileHeader) -> Self {
        Encoder {
            seed: header.journal_id.crc_seed(),
            prev: ChainHash::anchor(header),
            next_seq: 1,
        }
    }
    /// An encoder continuing after the last valid record (`last_seq`, `head`).
    pub fn resume(header: &FileHeader, last_seq: u64, head: ChainHash) -> Self {
        Encoder {
            seed: header.journal_id.crc_seed(),
            prev: head,
            next_seq: last_seq + 1,
        }
    }
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }
    pub fn head(&self) -> ChainHash {
        self.prev
    }
    /// Encode one event; advances the sequence and chain only on success.
    pub fn encode(&mut self, event: &Event, at_ms: u64) -> Result<Vec<u8>, DecodeError> {
        let payload = event.encode_payload();
        let (bytes, chain) = encode_record(
            self.seed,
            &self.prev,
            self.next_seq,
            event.kind(),
            at_ms,
            &payload,
        )?;
        self.prev = chain;
        self.next_seq += 1;
        Ok(bytes)
    }
}
