//! Kill loop: a child process appends a legal run to a journal and is SIGKILLed at random
//! instants, at least 100 times. After each kill the journal reopens (recovering any torn
//! tail), verifies, folds, and holds every event the child acknowledged.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use pvisor::fold;
use pvisor::journal::Journal;

fn kills() -> usize {
    std::env::var("PVISOR_KILL_LOOP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(120)
}

#[test]
fn sigkill_at_random_instants_loses_no_acknowledged_event() {
    let dir = tempfile::tempdir().unwrap();
    let bin = env!("CARGO_BIN_EXE_pvisor");
    let mut rng_state: u64 = 0x9E3779B97F4A7C15 ^ std::process::id() as u64;
    let mut rnd = move || {
        rng_state ^= rng_state << 13;
        rng_state ^= rng_state >> 7;
        rng_state ^= rng_state << 17;
        rng_state
    };
    let mut acked_total = 0u64;
    let mut recoveries = 0;
    let n = kills();
    for round in 0..n {
        let mut child = Command::new(bin)
            .args(["journal", "stress"])
            .arg(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut acks = vec![];
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(s) = line.strip_prefix("ack ") {
                    acks.push(s.parse::<u64>().unwrap());
                }
            }
            acks
        });
        std::thread::sleep(Duration::from_micros(rnd() % 25_000));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        let acks = reader.join().unwrap();
        let (j, events, opened) = Journal::open_dir(dir.path())
            .unwrap_or_else(|e| panic!("round {round}: reopen failed: {e}"));
        if matches!(opened, pvisor::journal::Opened::Recovered { .. }) {
            recoveries += 1;
        }
        let max_seq = events.last().map(|e| e.seq).unwrap_or(0);
        for a in &acks {
            assert!(
                *a <= max_seq,
                "round {round}: acknowledged seq {a} lost (journal ends at {max_seq})"
            );
            assert_eq!(events[*a as usize - 1].seq, *a);
        }
        fold::fold(&events).unwrap_or_else(|e| panic!("round {round}: fold failed: {e}"));
        acked_total += acks.len() as u64;
        drop(j);
    }
    // finish the run without interruption: the fold must reach `finished`
    let st = Command::new(bin)
        .args(["journal", "stress"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let (_, events, _) = Journal::open_dir(dir.path()).unwrap();
    let state = fold::fold(&events).unwrap();
    assert_eq!(state.phase, fold::Phase::Finished);
    assert!(
        acked_total > 0,
        "the child never acknowledged anything in {n} rounds"
    );
    eprintln!("kill loop: {n} SIGKILLs, {acked_total} acknowledged events, {recoveries} torn tails recovered, {} events total", events.len());
    let out = Command::new(bin)
        .args(["journal", "verify"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
