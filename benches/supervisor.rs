//! What pvisor's process supervisor costs per tool command: a short command (`true`, and
//! `echo` with a little output) run through `supervisor::run` (own process group, output
//! captured and logged, leftovers killed) and through a `supervisor::session` (Codex's
//! unified exec: started, then waited for), against `std::process::Command::output` of the
//! same command in the same run. Prints the medians and the ratios, then criterion benches.
//!
//!   cargo bench --bench supervisor                 # ratios, then criterion
//!   cargo bench --bench supervisor -- --ratios-only

use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use pvisor::supervisor::{self, CommandSpec};

const RUNS: usize = 300;

fn spec(dir: &std::path::Path, script: &str) -> CommandSpec {
    let mut s = CommandSpec::new("/bin/sh", dir).arg("-c").arg(script);
    s.log_path = Some(dir.join("log"));
    s.timeout = Some(Duration::from_secs(10));
    s
}

fn direct(script: &str) {
    let o = std::process::Command::new("/bin/sh")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(o.status.success());
}

fn supervised(dir: &std::path::Path, script: &str) {
    let o = supervisor::run(&spec(dir, script)).unwrap();
    assert_eq!(o.code, Some(0));
}

fn session(dir: &std::path::Path, script: &str) {
    let mut s = supervisor::session::spawn(&spec(dir, script)).unwrap();
    let p = s.wait(Duration::from_secs(10));
    assert_eq!(p.exit, Some(0));
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Alternate the three ways, `RUNS` times each, and report medians.
fn ratios() {
    let dir = tempfile::tempdir().unwrap();
    for (label, script) in [("true", "true"), ("echo", "echo hello; echo world >&2")] {
        let (mut d, mut r, mut s) = (vec![], vec![], vec![]);
        for _ in 0..RUNS {
            let t = Instant::now();
            direct(script);
            d.push(t.elapsed());
            let t = Instant::now();
            supervised(dir.path(), script);
            r.push(t.elapsed());
            let t = Instant::now();
            session(dir.path(), script);
            s.push(t.elapsed());
        }
        let (d, r, s) = (median(d), median(r), median(s));
        println!(
            "supervisor `{label}`: Command::output {:.2} ms, supervisor::run {:.2} ms ({:.2}x), session wait {:.2} ms ({:.2}x)",
            d.as_secs_f64() * 1e3,
            r.as_secs_f64() * 1e3,
            r.as_secs_f64() / d.as_secs_f64(),
            s.as_secs_f64() * 1e3,
            s.as_secs_f64() / d.as_secs_f64(),
        );
    }
}

fn benches(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("supervisor");
    g.bench_function("command_output_true", |b| b.iter(|| direct("true")));
    g.bench_function("run_true", |b| b.iter(|| supervised(dir.path(), "true")));
    g.bench_function("session_true", |b| b.iter(|| session(dir.path(), "true")));
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
