//! Streaming reader: validates header, framing, checksums, sequence and hash chain while
//! holding at most one record in memory.
//!
//! Classification of damage (the rule `SPEC.md` §5 states): when the record at offset X does
//! not validate, the reader searches the bytes after X for any later valid frame header
//! (header CRC seeded with this journal's id, sequence number ≥ the expected one). If one
//! exists, the damage is in the middle of the journal: [`ScanError::Corrupt`]. If none
//! exists, the damage is a torn tail: [`TailState::Torn`], which opening for write recovers.
//! A record whose checksum validates but whose chain hash does not is never torn: it was
//! altered ([`ScanError::ChainBroken`]).

use std::io::Read;

use crate::error::ScanError;
use crate::header::{FileHeader, HEADER_LEN};
use crate::record::{
    chain_hash, check_record, decode_frame_header, ChainHash, RecordFrame, FRAME_HEADER_LEN,
    OVERHEAD,
};

/// How the journal ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailState {
    /// The last record ends exactly at the end of the file.
    Clean { end_offset: u64 },
    /// Bytes from `offset` to the end (`len` bytes) are an incomplete or damaged last write.
    Torn { offset: u64, len: u64 },
}

/// The outcome of a full scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanReport {
    pub header: FileHeader,
    pub records: u64,
    pub last_seq: u64,
    pub head: ChainHash,
    pub tail: TailState,
}

pub struct RecordReader<R: Read> {
    r: R,
    header: FileHeader,
    seed: u32,
    prev: ChainHash,
    next_seq: u64,
    offset: u64,
    records: u64,
    tail: Option<TailState>,
    failed: bool,
    /// The bytes of the last record read (reused by [`Self::scan`], moved into each
    /// [`RecordFrame`] by [`Self::next_record`]).
    buf: Vec<u8>,
}

/// What [`RecordReader`] learned of a valid record whose bytes are in its buffer.
struct Valid {
    seq: u64,
    kind: u16,
    at_ms: u64,
    chain: ChainHash,
    offset: u64,
}

fn read_full<R: Read>(r: &mut R, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> RecordReader<R> {
    /// Read and check the file header.
    pub fn open(mut r: R) -> Result<Self, ScanError> {
        let mut hb = [0u8; HEADER_LEN];
        let n = read_full(&mut r, &mut hb).map_err(|e| ScanError::Io {
            offset: 0,
            message: e.to_string(),
        })?;
        let header = FileHeader::decode(&hb[..n]).map_err(|e| match e {
            crate::DecodeError::TooNew { major, minor } => ScanError::TooNew { major, minor },
            other => ScanError::Header(other),
        })?;
        Ok(RecordReader {
            r,
            seed: header.journal_id.crc_seed(),
            prev: ChainHash::anchor(&header),
            header,
            next_seq: 1,
            offset: HEADER_LEN as u64,
            records: 0,
            tail: None,
            failed: false,
            buf: Vec::new(),
        })
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }
    /// The chain hash of the last valid record (the anchor before any record).
    pub fn head(&self) -> ChainHash {
        self.prev
    }
    pub fn records(&self) -> u64 {
        self.records
    }
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }
    /// Set once the reader returned `Ok(None)`.
    pub fn tail(&self) -> Option<TailState> {
        self.tail
    }

    fn io(&self, e: std::io::Error) -> ScanError {
        ScanError::Io {
            offset: self.offset,
            message: e.to_string(),
        }
    }

    /// The next valid record, `Ok(None)` at the end (see [`Self::tail`]), or the error that
    /// stops the scan. After an error the reader yields nothing more.
    pub fn next_record(&mut self) -> Result<Option<RecordFrame>, ScanError> {
        if self.tail.is_some() || self.failed {
            return Ok(None);
        }
        match self.next_inner() {
            Ok(Some(v)) => Ok(Some(RecordFrame::new(
                v.seq,
                v.kind,
                v.at_ms,
                v.chain,
                v.offset,
                std::mem::take(&mut self.buf),
            ))),
            Ok(None) => Ok(None),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Check the next record, leaving its bytes in `self.buf`.
    fn next_inner(&mut self) -> Result<Option<Valid>, ScanError> {
        let start = self.offset;
        let mut hb = [0u8; FRAME_HEADER_LEN];
        let n = read_full(&mut self.r, &mut hb).map_err(|e| self.io(e))?;
        if n == 0 {
            self.tail = Some(TailState::Clean { end_offset: start });
            return Ok(None);
        }
        if n < FRAME_HEADER_LEN {
            self.tail = Some(TailState::Torn {
                offset: start,
                len: n as u64,
            });
            return Ok(None);
        }
        let fh = match decode_frame_header(self.seed, &hb) {
            Ok(fh) => fh,
            Err(fault) => return self.damaged(start, hb.to_vec(), fault.to_string()),
        };
        let mut full = std::mem::take(&mut self.buf);
        full.clear();
        full.resize(fh.len as usize + OVERHEAD, 0);
        full[..FRAME_HEADER_LEN].copy_from_slice(&hb);
        let m = read_full(&mut self.r, &mut full[FRAME_HEADER_LEN..]).map_err(|e| self.io(e))?;
        if m < full.len() - FRAME_HEADER_LEN {
            // The frame promises more bytes than the file holds: only a torn tail can do that,
            // since nothing can follow an incomplete record.
            self.tail = Some(TailState::Torn {
                offset: start,
                len: (FRAME_HEADER_LEN + m) as u64,
            });
            return Ok(None);
        }
        let stored_chain = match check_record(self.seed, &full) {
            Some(c) => c,
            None => return self.damaged(start, full, "record checksum mismatch".into()),
        };
        // A checksum-valid record: from here on, problems are never a torn tail.
        if fh.seq != self.next_seq {
            self.offset += full.len() as u64;
            if fh.seq < self.next_seq {
                return Err(ScanError::Forked {
                    seq: fh.seq,
                    offset: start,
                });
            }
            return Err(ScanError::OutOfOrder {
                expected: self.next_seq,
                found: fh.seq,
                offset: start,
            });
        }
        let body_end = full.len() - crate::record::TRAILER_LEN;
        let computed = chain_hash(&self.prev, &full[..body_end]);
        if computed != stored_chain {
            return Err(ScanError::ChainBroken {
                seq: fh.seq,
                offset: start,
            });
        }
        self.prev = computed;
        self.next_seq += 1;
        self.records += 1;
        self.offset += full.len() as u64;
        self.buf = full;
        Ok(Some(Valid {
            seq: fh.seq,
            kind: fh.kind,
            at_ms: fh.at_ms,
            chain: computed,
            offset: start,
        }))
    }

    /// The record at `start` did not validate; `have` holds the bytes already read from it.
    /// Decide between a torn tail and mid-file corruption by looking for any later valid
    /// frame header, reading the rest of the file in bounded chunks.
    fn damaged(
        &mut self,
        start: u64,
        have: Vec<u8>,
        reason: String,
    ) -> Result<Option<Valid>, ScanError> {
        const CHUNK: usize = 64 * 1024;
        let mut window = have;
        let mut window_off = start; // file offset of window[0]
        let mut total = start + window.len() as u64;
        let mut chunk = vec![0u8; CHUNK];
        let mut first = true;
        loop {
            // candidate offsets in the window, skipping the damaged record's own start
            let from = if first { 1 } else { 0 };
            first = false;
            if window.len() >= FRAME_HEADER_LEN {
                for p in from..=window.len() - FRAME_HEADER_LEN {
                    let cand: &[u8; FRAME_HEADER_LEN] =
                        window[p..p + FRAME_HEADER_LEN].try_into().unwrap();
                    if let Ok(fh) = decode_frame_header(self.seed, cand) {
                        if fh.seq >= self.next_seq {
                            let _ = window_off;
                            return Err(ScanError::Corrupt {
                                seq: self.next_seq,
                                offset: start,
                                reason,
                            });
                        }
                    }
                }
            }
            let k = read_full(&mut self.r, &mut chunk).map_err(|e| self.io(e))?;
            if k == 0 {
                break;
            }
            total += k as u64;
            // keep the last FRAME_HEADER_LEN-1 bytes so headers straddling chunks are seen
            let keep = window.len().min(FRAME_HEADER_LEN - 1);
            let drop = window.len() - keep;
            window.drain(..drop);
            window_off += drop as u64;
            window.extend_from_slice(&chunk[..k]);
            // positions 0..keep were already tested as starts only if they had 28 bytes then;
            // re-testing them is harmless.
        }
        self.tail = Some(TailState::Torn {
            offset: start,
            len: total - start,
        });
        Ok(None)
    }

    /// Read to the end and report. Drops the payloads.
    pub fn scan(mut self) -> Result<ScanReport, ScanError> {
        while !(self.tail.is_some() || self.failed) {
            match self.next_inner() {
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(e) => {
                    self.failed = true;
                    return Err(e);
                }
            }
        }
        Ok(ScanReport {
            header: self.header,
            records: self.records,
            last_seq: self.last_seq(),
            head: self.prev,
            tail: self.tail.expect("set at end"),
        })
    }
}
