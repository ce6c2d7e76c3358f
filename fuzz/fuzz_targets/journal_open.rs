//! Open arbitrary bytes as a journal: decoding, classification and torn-tail recovery must
//! never panic nor allocate past the record cap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use pvisor::journal::{Journal, MemStorage};

fuzz_target!(|data: &[u8]| {
    // 1. the pure reader over raw bytes
    if let Ok(mut rr) = journal_format::RecordReader::open(data) {
        while let Ok(Some(r)) = rr.next_record() {
            let _ = journal_format::Event::decode(r.kind, r.payload());
        }
    }
    // 2. the same bytes behind a valid header, through the store's open + recovery + fold
    let mut img = journal_format::FileHeader::new(journal_format::JournalId([7; 16]), 0).encode().to_vec();
    img.extend_from_slice(data);
    for image in [data.to_vec(), img] {
        if let Ok((_, events, _)) = Journal::open_with(MemStorage::from_image(image), "<memory>".into(), Default::default(), || 0) {
            let _ = pvisor::fold::fold(&events).map(|s| pvisor::fold::derive(&s));
        }
    }
});
