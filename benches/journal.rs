//! Journal benchmarks. Besides criterion's per-workload statistics, `ratios` measures every
//! workload in the same run and prints the figures and ratios the targets are stated in
//! (docs/performance.md): durable append vs SQLite (WAL, synchronous=FULL, one insert per
//! transaction), group commit vs durable append, verify MiB/s, open + fold of 10,000 events.

use criterion::{criterion_group, Criterion, Throughput};
use journal_format::event::*;
use journal_format::Event;
use pvisor::fold;
use pvisor::journal::{read_events, Durability, Journal};
use std::time::{Duration, Instant};

fn event(i: u64) -> Event {
    Event::ToolCallFinished(ToolCallFinished {
        batch: i / 4 + 1,
        call: i % 4,
        call_id: format!("toolu_{i:020}"),
        exit_code: Some(0),
        is_error: false,
        duration_ms: 42,
        observation_digest: format!("blake3:{:064x}", i),
        observation_blob: format!("{:064x}", i),
        observation_len: 1234,
        stale: false,
        touched: vec!["src/lib.rs".into()],
    })
}

fn payload_len() -> usize {
    event(0).encode_payload().len() + journal_format::record::OVERHEAD
}

fn append_rate(n: u64, group: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (mut j, _, _) = Journal::open_dir(dir.path()).unwrap();
    let t = Instant::now();
    for i in 0..n {
        if group <= 1 {
            j.append(event(i), Durability::Sync).unwrap();
        } else {
            j.append(event(i), Durability::Buffered).unwrap();
            if (i + 1) % group == 0 {
                j.commit().unwrap();
            }
        }
    }
    j.commit().unwrap();
    n as f64 / t.elapsed().as_secs_f64()
}

fn buffered_rate(n: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let (mut j, _, _) = Journal::open_dir(dir.path()).unwrap();
    let t = Instant::now();
    for i in 0..n {
        j.append(event(i), Durability::Buffered).unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

fn sqlite_rate(n: u64) -> f64 {
    let dir = tempfile::tempdir().unwrap();
    let db = rusqlite::Connection::open(dir.path().join("b.db")).unwrap();
    db.pragma_update(None, "journal_mode", "WAL").unwrap();
    db.pragma_update(None, "synchronous", "FULL").unwrap();
    db.execute(
        "CREATE TABLE ev (seq INTEGER PRIMARY KEY, kind INTEGER, at INTEGER, payload BLOB)",
        [],
    )
    .unwrap();
    let t = Instant::now();
    for i in 0..n {
        let p = event(i).encode_payload();
        db.execute(
            "INSERT INTO ev (seq, kind, at, payload) VALUES (?1, ?2, ?3, ?4)",
            rusqlite::params![i as i64, 6, 0, p],
        )
        .unwrap();
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// A state dir holding a journal of exactly `n` events forming a legal run (the synthetic
/// replay of `pvisor journal stress`, with enough batches that `n` events do not end it).
fn legal_journal(n: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_pvisor"))
        .args(["journal", "stress", "--max-events", &n.to_string()])
        .args(["--batches", &(n / 4 + 1).to_string()])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(st.success(), "pvisor journal stress failed");
    let (_, events, _) = Journal::open_dir(dir.path()).unwrap();
    assert_eq!(
        events.len() as u64,
        n,
        "the bench's journal holds what its name says"
    );
    dir
}

fn big_journal(bytes: u64) -> (tempfile::TempDir, u64) {
    let dir = tempfile::tempdir().unwrap();
    let (mut j, _, _) = Journal::open_dir(dir.path()).unwrap();
    let n = bytes / payload_len() as u64;
    for i in 0..n {
        j.append(event(i), Durability::Buffered).unwrap();
    }
    j.commit().unwrap();
    let len = std::fs::metadata(dir.path().join("journal.pvj"))
        .unwrap()
        .len();
    (dir, len)
}

/// Integrity verification: header, framing, checksums, sequence and hash chain.
fn verify_mib_s(path: &std::path::Path, len: u64) -> f64 {
    let t = Instant::now();
    let f = std::io::BufReader::with_capacity(256 * 1024, std::fs::File::open(path).unwrap());
    let rep = journal_format::RecordReader::open(f)
        .unwrap()
        .scan()
        .unwrap();
    std::hint::black_box(rep);
    len as f64 / (1024.0 * 1024.0) / t.elapsed().as_secs_f64()
}

/// Verification plus decoding every event (what `journal export` pays).
fn decode_mib_s(path: &std::path::Path, len: u64) -> f64 {
    let t = Instant::now();
    read_events(path, |_| Ok(())).unwrap();
    len as f64 / (1024.0 * 1024.0) / t.elapsed().as_secs_f64()
}

fn open_fold_ms(dir: &std::path::Path) -> f64 {
    let t = Instant::now();
    let (_j, evs, _) = Journal::open_dir(dir).unwrap();
    let st = fold::fold(&evs).unwrap();
    std::hint::black_box(st);
    t.elapsed().as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn ratios() {
    let n = 300;
    let durable = median((0..3).map(|_| append_rate(n, 1)).collect());
    let sqlite = median((0..3).map(|_| sqlite_rate(n)).collect());
    let group = median((0..3).map(|_| append_rate(n * 10, 64)).collect());
    let buffered = median((0..3).map(|_| buffered_rate(50_000)).collect());
    let (big, len) = big_journal(64 * 1024 * 1024);
    let verify = median(
        (0..3)
            .map(|_| verify_mib_s(&big.path().join("journal.pvj"), len))
            .collect(),
    );
    let decode = median(
        (0..3)
            .map(|_| decode_mib_s(&big.path().join("journal.pvj"), len))
            .collect(),
    );
    let tenk = legal_journal(10_000);
    let openfold = median((0..5).map(|_| open_fold_ms(tenk.path())).collect());
    let rec = payload_len() as f64;
    println!("\n== pvisor journal: figures measured in this run ==");
    println!("record size                     {rec:.0} bytes");
    println!("durable append (fsync/event)    {durable:>10.0} events/s   vs SQLite {sqlite:.0}/s  ratio {:.2}x  (target >= 1.0x)", durable / sqlite);
    println!("group commit (64/fsync)         {group:>10.0} events/s   vs durable        ratio {:.1}x  (target >= 10x)", group / durable);
    println!(
        "buffered append                 {buffered:>10.0} events/s   ({:.0} MiB/s)",
        buffered * rec / 1048576.0
    );
    println!("verify (checksums + chain)      {verify:>10.0} MiB/s      (target >= 300)");
    println!("verify + decode every event     {decode:>10.0} MiB/s");
    println!("open + fold, 10,000 events      {openfold:>10.2} ms         (target < 50)");
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("append");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(3))
        .throughput(Throughput::Elements(50));
    g.bench_function("fsync_per_event_x50", |b| b.iter(|| append_rate(50, 1)));
    g.bench_function("sqlite_wal_full_x50", |b| b.iter(|| sqlite_rate(50)));
    g.bench_function("group_commit_64_x50", |b| b.iter(|| append_rate(50, 64)));
    g.finish();
    let (big, len) = big_journal(16 * 1024 * 1024);
    let mut g = c.benchmark_group("read");
    g.sample_size(10).throughput(Throughput::Bytes(len));
    g.bench_function("verify_16MiB", |b| {
        b.iter(|| read_events(&big.path().join("journal.pvj"), |_| Ok(())).unwrap())
    });
    let tenk = legal_journal(10_000);
    g.throughput(Throughput::Elements(10_000));
    g.bench_function("open_fold_10k", |b| b.iter(|| open_fold_ms(tenk.path())));
    g.finish();
}

criterion_group!(group, benches);

fn main() {
    ratios();
    if std::env::args().any(|a| a == "--ratios-only") {
        return;
    }
    group();
    Criterion::default().configure_from_args().final_summary();
}
