//! Store-level crash and corruption tests over the in-memory backend and real files.

use journal_format::event::*;
use journal_format::Event;
use pvisor::fold::{self, derive};
use pvisor::journal::{Durability, Journal, JournalError, MemStorage, Opened, StoredEvent};
use std::path::PathBuf;

fn vectors() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("journal-format/vectors")
}

fn clock() -> u64 {
    1_764_460_800_000
}

fn open_mem(img: Vec<u8>) -> Result<(Journal<MemStorage>, Vec<StoredEvent>, Opened), JournalError> {
    Journal::open_with(
        MemStorage::from_image(img),
        "<memory>".into(),
        PathBuf::new(),
        clock,
    )
}

fn record_offsets(bytes: &[u8]) -> Vec<u64> {
    let mut rr = journal_format::RecordReader::open(bytes).unwrap();
    let mut v = vec![];
    while let Ok(Some(r)) = rr.next_record() {
        v.push(r.offset);
    }
    v
}

fn without_recovery(evs: &[StoredEvent]) -> Vec<Event> {
    evs.iter()
        .filter(|e| !matches!(e.event, Event::Recovered(_)))
        .map(|e| e.event.clone())
        .collect()
}

#[test]
fn complete_vector_folds_to_the_committed_result() {
    let bytes = std::fs::read(vectors().join("complete.pvj")).unwrap();
    let (_, evs, opened) = open_mem(bytes).unwrap();
    assert_eq!(opened, Opened::Intact);
    let state = fold::fold(&evs).unwrap();
    let result = serde_json::to_value(derive(&state)).unwrap();
    let p = vectors().join("complete.fold.json");
    if std::env::var("PVISOR_BLESS").is_ok() {
        std::fs::write(&p, serde_json::to_string_pretty(&result).unwrap() + "\n").unwrap();
    }
    let expect: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
    assert_eq!(result, expect);
    assert_eq!(result["phase"], "continued");
    assert_eq!(result["agent_status"], "max_steps");
    assert_eq!(result["continued_steps"], 2);
    assert_eq!(result["replayed_tool_calls"], 3);
}

/// The 1.2 vector (a call restored and run again) folds to the complete vector's result,
/// apart from the resume count; its checkpoints and restore are in the state.
#[test]
fn the_1_2_vector_with_a_restored_call_folds_like_the_uninterrupted_run() {
    let fold_of = |name: &str| {
        let bytes = std::fs::read(vectors().join(name)).unwrap();
        let (_, evs, opened) = open_mem(bytes).unwrap();
        assert_eq!(opened, Opened::Intact, "{name}");
        fold::fold(&evs).unwrap()
    };
    let whole = fold_of("complete.pvj");
    let restored = fold_of("complete-1.2.pvj");
    assert_eq!(restored.checkpoints.len(), 2);
    assert_eq!(restored.restores.len(), 1);
    assert_eq!(
        restored.calls[&(1, 0)].in_doubt_decisions,
        vec![journal_format::event::InDoubtDecision::RerunRestored]
    );
    assert_eq!(restored.calls[&(1, 0)].starts, 2);
    let strip = |s: &pvisor::fold::ReplayState| {
        let mut v = serde_json::to_value(derive(s)).unwrap();
        v["metadata"]["journal"] = serde_json::Value::Null;
        v
    };
    assert_eq!(strip(&restored), strip(&whole));
}

#[test]
fn truncation_at_every_offset_of_the_last_record_recovers_the_rest() {
    let bytes = std::fs::read(vectors().join("complete.pvj")).unwrap();
    let offs = record_offsets(&bytes);
    let last = *offs.last().unwrap() as usize;
    let (_, full, _) = open_mem(bytes.clone()).unwrap();
    let expect_state = fold::fold(&full[..full.len() - 1]).unwrap();
    for cut in last..bytes.len() {
        let (j, evs, opened) = open_mem(bytes[..cut].to_vec()).unwrap();
        if cut == last {
            assert_eq!(opened, Opened::Intact);
        } else {
            assert!(
                matches!(opened, Opened::Recovered { offset, length, .. } if offset == last as u64 && length == (cut - last) as u64),
                "cut {cut}: {opened:?}"
            );
        }
        assert_eq!(
            without_recovery(&evs),
            without_recovery(&full[..full.len() - 1]),
            "cut {cut}"
        );
        let mut st = fold::fold(&evs).unwrap();
        st.recoveries.clear();
        let mut exp = expect_state.clone();
        exp.recoveries.clear();
        assert_eq!(st.phase, exp.phase, "cut {cut}");
        assert_eq!(derive(&st).phase, derive(&exp).phase);
        // the journal is writable again, continuing the chain
        let img = j.into_storage().written;
        let (_, evs2, opened2) = open_mem(img).unwrap();
        assert_eq!(opened2, Opened::Intact, "cut {cut}: reopen after recovery");
        assert_eq!(evs2.len(), evs.len());
    }
}

#[test]
fn every_single_bit_flip_before_the_last_record_is_detected_with_its_seq() {
    let bytes = std::fs::read(vectors().join("complete.pvj")).unwrap();
    let offs = record_offsets(&bytes);
    let last = *offs.last().unwrap() as usize;
    for bit in 0..last * 8 {
        let mut b = bytes.clone();
        b[bit / 8] ^= 1 << (bit % 8);
        let byte = bit / 8;
        match open_mem(b) {
            Ok(_) => panic!("flip of bit {bit} (byte {byte}) not detected"),
            Err(_) if byte < 48 => {}
            Err(JournalError::Damaged { source, .. }) => {
                let seq = offs.iter().rposition(|&o| o as usize <= byte).unwrap() as u64 + 1;
                assert_eq!(source.seq(), Some(seq), "bit {bit}: {source}");
                assert_eq!(
                    source.offset(),
                    Some(offs[seq as usize - 1]),
                    "bit {bit}: {source}"
                );
            }
            Err(JournalError::TooNew { .. }) => assert!(byte < 48, "byte {byte}"),
            Err(e) => assert!(byte < 48, "bit {bit} (byte {byte}) outside the header: {e}"),
        }
    }
}

fn sample_events(n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            Event::ContinuationStep(ContinuationStep {
                n: i as u64 + 1,
                action_digest: format!("blake3:{i:064x}"),
                tools: vec!["Bash".into(); i % 3],
            })
        })
        .collect()
}

#[test]
fn a_crash_at_every_sync_point_keeps_every_acknowledged_event() {
    let (mut j, _, _) = open_mem(vec![]).unwrap();
    let evs = sample_events(12);
    for e in &evs {
        j.append(e.clone(), Durability::Sync).unwrap();
    }
    let mem = j.into_storage();
    // history[0] is the header sync, history[i] holds i acknowledged events.
    assert_eq!(mem.history.len(), evs.len() + 1);
    for (i, durable) in mem.history.iter().enumerate() {
        let next_end = mem
            .history
            .get(i + 1)
            .map(|h| h.len())
            .unwrap_or(durable.len());
        // crash images: the durable bytes plus any prefix of the next, unsynced write
        for extra in [
            0,
            1,
            27,
            28,
            29,
            (next_end - durable.len()) / 2,
            (next_end - durable.len()).saturating_sub(1),
        ] {
            let extra = extra.min(next_end - durable.len());
            let img = mem.written[..durable.len() + extra].to_vec();
            let (_, got, _) = open_mem(img).unwrap();
            let got = without_recovery(&got);
            assert!(
                got.len() >= i,
                "sync point {i}, extra {extra}: lost acknowledged events"
            );
            assert_eq!(&got[..i], &evs[..i]);
        }
    }
}

#[test]
fn group_commit_is_durable_only_at_commit() {
    let (mut j, _, _) = open_mem(vec![]).unwrap();
    for e in sample_events(5) {
        j.append(e, Durability::Buffered).unwrap();
    }
    assert_eq!(
        j.storage().history.len(),
        1,
        "buffered appends must not sync"
    );
    let before = j.storage().durable.clone();
    j.commit().unwrap();
    assert_eq!(j.storage().history.len(), 2, "one sync for the group");
    let (_, a, _) = open_mem(before).unwrap();
    assert_eq!(a.len(), 0);
    let (_, b, _) = open_mem(j.storage().durable.clone()).unwrap();
    assert_eq!(b.len(), 5);
}

#[test]
fn a_failed_fsync_poisons_the_journal() {
    let mut mem = MemStorage::new();
    mem.fail_sync_at = Some(3);
    let (mut j, _, _) = Journal::open_with(mem, "<memory>".into(), PathBuf::new(), clock).unwrap();
    let evs = sample_events(4);
    j.append(evs[0].clone(), Durability::Sync).unwrap();
    j.append(evs[1].clone(), Durability::Sync).unwrap();
    assert!(matches!(
        j.append(evs[2].clone(), Durability::Sync),
        Err(JournalError::SyncFailed { .. })
    ));
    assert!(matches!(
        j.append(evs[3].clone(), Durability::Sync),
        Err(JournalError::Poisoned { .. })
    ));
    assert!(matches!(j.commit(), Err(JournalError::Poisoned { .. })));
}

#[test]
fn a_second_writer_fails_fast_naming_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let (mut j, _, opened) = Journal::open_dir(dir.path()).unwrap();
    assert_eq!(opened, Opened::Created);
    j.append(sample_events(1).remove(0), Durability::Sync)
        .unwrap();
    let t = std::time::Instant::now();
    match Journal::open_dir(dir.path()) {
        Err(e @ JournalError::Locked { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("journal.pvj"), "{msg}");
            assert!(
                msg.contains(&format!("pid {}", std::process::id())),
                "{msg}"
            );
        }
        other => panic!("expected Locked, got {:?}", other.map(|x| x.2)),
    }
    assert!(t.elapsed().as_secs() < 2);
    drop(j);
    let (_, evs, opened) = Journal::open_dir(dir.path()).unwrap();
    assert_eq!(opened, Opened::Intact);
    assert_eq!(evs.len(), 1);
}

#[test]
fn a_torn_file_tail_is_quarantined_on_disk() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(vectors().join("torn-tail.pvj")).unwrap();
    std::fs::write(dir.path().join("journal.pvj"), &bytes).unwrap();
    let (_, evs, opened) = Journal::open_dir(dir.path()).unwrap();
    let Opened::Recovered {
        offset,
        length,
        quarantine,
    } = opened
    else {
        panic!("{opened:?}")
    };
    assert_eq!(
        std::fs::read(&quarantine).unwrap(),
        bytes[offset as usize..].to_vec()
    );
    assert_eq!(length as usize, bytes.len() - offset as usize);
    assert_eq!(evs.len(), 27, "26 intact events + recovered");
    assert!(matches!(evs.last().unwrap().event, Event::Recovered(_)));
    // the journal on disk now verifies clean
    let rep = pvisor::journal::read_events(&dir.path().join("journal.pvj"), |_| Ok(())).unwrap();
    assert!(matches!(rep.tail, journal_format::TailState::Clean { .. }));
    assert_eq!(rep.last_seq, 27);
}

#[test]
fn a_newer_minor_is_read_but_not_appended_to() {
    let mut h = journal_format::FileHeader::new(journal_format::JournalId([9; 16]), 0);
    h.minor = journal_format::FORMAT_MINOR + 1;
    let img = h.encode().to_vec();
    assert!(matches!(
        open_mem(img),
        Err(JournalError::NotWritable { .. })
    ));
}

#[test]
fn illegal_transitions_name_the_sequence_number() {
    let bytes = std::fs::read(vectors().join("complete.pvj")).unwrap();
    let (_, mut evs, _) = open_mem(bytes).unwrap();
    evs.swap(4, 5); // tool call started before its batch
    let err = fold::fold(&evs).unwrap_err();
    assert_eq!(err.seq, evs[4].seq);
    assert!(err.to_string().contains("illegal transition"));
}

mod arbitrary_images {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        /// Opening any bytes (raw, or behind a valid header, or a valid journal with random
        /// bytes spliced in) never panics; folding whatever opens never panics.
        #[test]
        fn opening_arbitrary_images_never_panics(data in prop::collection::vec(any::<u8>(), 0..2048), at in 0usize..6000, mode in 0u8..3) {
            let img = match mode {
                0 => data.clone(),
                1 => { let mut v = journal_format::FileHeader::new(journal_format::JournalId([5; 16]), 0).encode().to_vec(); v.extend(&data); v }
                _ => {
                    let mut v = std::fs::read(vectors().join("complete.pvj")).unwrap();
                    let at = at.min(v.len());
                    v.splice(at..(at + data.len().min(64)).min(v.len()), data.iter().copied().take(64));
                    v
                }
            };
            if let Ok((_, evs, _)) = open_mem(img) {
                let _ = fold::fold(&evs).map(|s| derive(&s));
            }
        }
    }
}
