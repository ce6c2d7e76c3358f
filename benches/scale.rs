//! How `pvisor replay` scales with the trajectory: `--prepare-only` of synthetic Codex 0.149.0
//! rollouts of 2,000 to 1,000,000 one-call batches (time per MB and peak memory, which must
//! stay flat), and `--replay-only` of 200 and 1,000 `true` batches. Each run is the release
//! CLI as a user runs it; peak memory is the child's maximum resident set (`wait4`).
//!
//! Side by side: with `PVISOR_PEER_REPLAY` naming another implementation's `pvisor-replay`
//! (same flags; `scripts/side-by-side.sh` installs pvisor-sandbox 0.3.1 in a venv under
//! `.cache/` and runs this bench with it), both run on the same files, alternately, and the
//! ratios are printed from the same run. Without it, our own figures.
//!
//!   cargo bench --bench scale                          # 2k, 20k, 60k; replay 200, 1000
//!   PVISOR_SCALE_SIZES=2000,20000,200000,1000000 cargo bench --bench scale
//!
//! (Prepare-only reads the rollout once, line by line, and spills the plan to a temporary file;
//! what grows in memory, mostly the parse's integrity cross-check, is about 0.43 KB per batch
//! here: 1,000,000 batches, 3.6 GB, about 0.45 GiB; docs/performance.md.)
//!   PVISOR_SCALE_REPLAY=200,1000,4000 PVISOR_SCALE_RUNS=5 cargo bench --bench scale
//!
//! The replay-only runs take the Codex CLI installed by `pvisor agents install codex` (in
//! `.cache/agents/`), or `PVISOR_SCALE_CODEX`.
//!
//! The rollouts are the genuine session of `tests/fixtures/codex/genuine/` (its header: session
//! meta, instructions, environment, user message) followed by N copies of its first batch
//! (reasoning, assistant message, `exec_command` of `true`, the command's item and output,
//! token count) with fresh ids and ordinals: about 3.1 KB per batch.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

const PVISOR: &str = env!("CARGO_BIN_EXE_pvisor");
const RECORDED_CWD: &str = "/tmp/realagent-codex.BU6ewi/work";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/codex/genuine/rollout-final.jsonl")
}

/// Write a rollout of `batches` one-call batches whose session ran in `cwd`; its size in bytes.
fn synthetic_rollout(path: &Path, batches: usize, cwd: &Path) -> u64 {
    let text = std::fs::read_to_string(fixture()).expect("the genuine Codex rollout");
    let lines: Vec<&str> = text.lines().collect();
    let cwd = cwd.display().to_string();
    // Lines 1–8: meta, task start, developer and environment messages, world state, turn
    // context, the user's message and its item. Lines 9–16: the first batch.
    let header: Vec<String> = lines[..8]
        .iter()
        .map(|l| l.replace(RECORDED_CWD, &cwd))
        .collect();
    let batch: Vec<String> = lines[8..16]
        .iter()
        .map(|l| {
            l.replace(RECORDED_CWD, &cwd)
                .replace("echo hi > a.txt && ls", "true")
                .replace(r#"a.txt\n"#, "")
                .replace("Original token count: 2", "Original token count: 0")
        })
        .collect();
    let mut out = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).unwrap());
    let mut ordinal = 0u64;
    let mut put = |out: &mut std::io::BufWriter<std::fs::File>, line: &str| {
        let mut v: Value = serde_json::from_str(line).unwrap();
        if v.get("ordinal").is_some() {
            v["ordinal"] = ordinal.into();
        }
        ordinal += 1;
        serde_json::to_writer(&mut *out, &v).unwrap();
        out.write_all(b"\n").unwrap();
    };
    for l in &header {
        put(&mut out, l);
    }
    for i in 0..batches {
        let tag = format!("_b{i:07}");
        for l in &batch {
            put(&mut out, &l.replace("_t000", &tag));
        }
    }
    out.flush().unwrap();
    drop(out);
    std::fs::metadata(path).unwrap().len()
}

/// One run of `exe` with `args`: its wall time and peak resident set (bytes).
fn measure(exe: &str, args: &[String], home: &Path) -> (Duration, u64) {
    let t = Instant::now();
    // Reaped below with wait4, which also gives its peak memory.
    #[allow(clippy::zombie_processes)]
    let child = std::process::Command::new(exe)
        .args(args)
        .env("HOME", home)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{exe}: {e}"));
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.expect("piped");
    let mut err = String::new();
    let reader = std::thread::spawn(move || {
        use std::io::Read;
        let _ = stderr.read_to_string(&mut err);
        err
    });
    let mut status = 0;
    // SAFETY: plain wait4 on our own child; rusage is written by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = t.elapsed();
    let err = reader.join().unwrap();
    assert_eq!(r, pid, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{exe} {args:?} failed ({status}): {}",
        &err[err.len().saturating_sub(2000)..]
    );
    (wall, usage.ru_maxrss as u64 * 1024)
}

fn median<T: Ord + Copy>(mut v: Vec<T>) -> T {
    v.sort();
    v[v.len() / 2]
}

fn env_list(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(s) => s
            .split(',')
            .filter(|x| !x.trim().is_empty())
            .map(|x| x.trim().replace('_', "").parse().expect(name))
            .collect(),
        Err(_) => default.to_vec(),
    }
}

struct Side {
    wall: Duration,
    peak: u64,
}

/// A command line to measure: ours is `pvisor replay <args>`, the peer's `pvisor-replay <args>`.
struct Tool<'a> {
    exe: &'a str,
    prefix: &'a [&'a str],
}

/// `runs` runs of each tool on the same arguments, alternately; the medians of each.
fn compare(
    runs: usize,
    tools: &[Tool],
    args: &dyn Fn(&Path, usize) -> Vec<String>,
    dir: &Path,
) -> Vec<Side> {
    let home = dir.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut got: Vec<(Vec<Duration>, Vec<u64>)> = tools.iter().map(|_| (vec![], vec![])).collect();
    for k in 0..runs {
        for (i, t) in tools.iter().enumerate() {
            let mut a: Vec<String> = t.prefix.iter().map(|s| s.to_string()).collect();
            a.extend(args(&dir.join(format!("{i}-{k}")), k));
            let (w, p) = measure(t.exe, &a, &home);
            got[i].0.push(w);
            got[i].1.push(p);
            let _ = std::fs::remove_dir_all(dir.join(format!("{i}-{k}")));
        }
    }
    got.into_iter()
        .map(|(w, p)| Side {
            wall: median(w),
            peak: median(p),
        })
        .collect()
}

/// The arguments both tools take: a Codex rollout replayed through batch `n` with the mode
/// flags `mode`, in the workspace `work`, with state and output under `d`.
fn replay_args(
    file: &Path,
    n: usize,
    mode: &[&str],
    work: &Path,
    d: &Path,
    run_id: &str,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--agent".into(),
        "codex".into(),
        "--trajectory".into(),
        file.display().to_string(),
        "--after-step".into(),
        n.to_string(),
    ];
    a.extend(mode.iter().map(|m| m.to_string()));
    for (flag, path) in [
        ("--workspace", work.to_path_buf()),
        ("--state-dir", d.join("state")),
        ("--output-dir", d.join("out")),
    ] {
        a.push(flag.into());
        a.push(path.display().to_string());
    }
    a.push("--run-id".into());
    a.push(run_id.into());
    a
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

fn main() {
    let peer = std::env::var("PVISOR_PEER_REPLAY").ok();
    let peer = peer.as_deref();
    let sizes = env_list("PVISOR_SCALE_SIZES", &[2_000, 20_000, 60_000]);
    let replays = env_list("PVISOR_SCALE_REPLAY", &[200, 1_000]);
    let runs_default: usize = std::env::var("PVISOR_SCALE_RUNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let mut tools = vec![Tool {
        exe: PVISOR,
        prefix: &["replay"],
    }];
    if let Some(p) = peer {
        tools.push(Tool {
            exe: p,
            prefix: &[],
        });
    }
    let root = tempfile::tempdir().unwrap();
    let work = root.path().join("work");
    std::fs::create_dir_all(&work).unwrap();
    match peer {
        Some(p) => println!("side by side with {p} (same files, alternate runs, medians)"),
        None => println!("our figures (PVISOR_PEER_REPLAY unset: no side-by-side ratios)"),
    }
    println!("\nprepare-only (--after-step = every batch), synthetic Codex 0.149.0 rollouts");
    println!(
        "{:>9} {:>9} {:>10} {:>9} {:>10}{}",
        "batches",
        "MB",
        "wall",
        "ms/MB",
        "peak MiB",
        if peer.is_some() {
            "   peer wall  peer MiB  wall ratio  memory ratio"
        } else {
            ""
        }
    );
    for &n in &sizes {
        let case = root.path().join(format!("prepare-{n}"));
        std::fs::create_dir_all(&case).unwrap();
        let file = case.join("rollout.jsonl");
        let bytes = synthetic_rollout(&file, n, &work);
        let runs = if n > 200_000 { 1 } else { runs_default };
        let args = |d: &Path, k: usize| {
            replay_args(
                &file,
                n,
                &["--prepare-only"],
                &work,
                d,
                &format!("scale-{n}-{k}"),
            )
        };
        let mut sides = compare(runs, &tools, &args, &case).into_iter();
        let (ours, theirs) = (sides.next().unwrap(), sides.next());
        let mb = bytes as f64 / 1e6;
        let mut line = format!(
            "{n:>9} {mb:>9.1} {:>9.2}s {:>9.1} {:>10.1}",
            ours.wall.as_secs_f64(),
            ours.wall.as_secs_f64() * 1000.0 / mb,
            mib(ours.peak)
        );
        if let Some(t) = &theirs {
            line += &format!(
                "  {:>9.2}s {:>9.1}  {:>9.3}x  {:>11.3}x",
                t.wall.as_secs_f64(),
                mib(t.peak),
                ours.wall.as_secs_f64() / t.wall.as_secs_f64(),
                ours.peak as f64 / t.peak as f64
            );
        }
        println!("{line}");
        let _ = std::fs::remove_dir_all(&case);
    }
    // Replay-only takes the agent CLI (both tools check it before running anything).
    let codex = std::env::var_os("PVISOR_SCALE_CODEX")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join(".cache/agents/codex@0.149.0/node_modules/.bin/codex")
        });
    assert!(
        replays.is_empty() || codex.exists(),
        "{}: no Codex CLI for the replay-only runs; `pvisor agents install codex` (or set PVISOR_SCALE_CODEX)",
        codex.display()
    );
    println!("\nreplay-only of `true` batches (HOME empty)");
    for &n in &replays {
        let case = root.path().join(format!("replay-{n}"));
        std::fs::create_dir_all(&case).unwrap();
        let file = case.join("rollout.jsonl");
        synthetic_rollout(&file, n, &work);
        let entry = codex.display().to_string();
        let mode = ["--replay-only", "--agent-entrypoint", &entry];
        let args =
            |d: &Path, k: usize| replay_args(&file, n, &mode, &work, d, &format!("replay-{n}-{k}"));
        let mut sides = compare(runs_default, &tools, &args, &case).into_iter();
        let (ours, theirs) = (sides.next().unwrap(), sides.next());
        let mut line = format!(
            "{n:>9} batches: {:>8.2}s ({:.2} ms per call), peak {:.1} MiB",
            ours.wall.as_secs_f64(),
            ours.wall.as_secs_f64() * 1000.0 / n as f64,
            mib(ours.peak)
        );
        if let Some(t) = &theirs {
            line += &format!(
                "; peer {:.2}s, peak {:.1} MiB: wall ratio {:.3}x",
                t.wall.as_secs_f64(),
                mib(t.peak),
                ours.wall.as_secs_f64() / t.wall.as_secs_f64()
            );
        }
        println!("{line}");
        let _ = std::fs::remove_dir_all(&case);
    }
}
