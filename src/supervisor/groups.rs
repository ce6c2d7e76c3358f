//! No orphans: every process group a run starts (tool commands, shell sessions, companion
//! runners, the agent CLI) is listed in the run's state dir while it runs
//! (`<state>/processes/list`: each group with its leader's start time), and its leader dies with
//! pvisor (`PR_SET_PDEATHSIG`: [`die_with_parent`], or [`super::spawn`] for tool commands). Every such process also carries the run's
//! mark in its environment ([`MARK_VAR`]), which its descendants inherit even when they leave
//! the group and the session (Claude Code starts each Bash command with `setsid`). What a
//! killed pvisor cannot end itself — the rest of a group whose leader died with it
//! (`sleep 100 &`), a detached command the agent was running — the next attempt ends first
//! ([`end_left_over`]), before anything runs again, so a resumed call never runs beside the
//! interrupted one.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The folder of a run's listed process groups.
pub fn dir_of(state_dir: &Path) -> PathBuf {
    state_dir.join("processes")
}

/// The fields of `/proc/<pid>/stat` after the command name: state, ppid, pgrp, … (index 0 is
/// field 3 of proc(5)).
fn stat_fields(pid: i32) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// The start time of process `pid` (clock ticks since boot, `/proc/<pid>/stat` field 22).
fn start_time(pid: i32) -> Option<u64> {
    stat_fields(pid)?.get(19)?.parse().ok()
}

/// The process group of process `pid` (`/proc/<pid>/stat` field 5).
fn pgrp_of(pid: i32) -> Option<i32> {
    stat_fields(pid)?.get(2)?.parse().ok()
}

/// The environment variable that marks every process a run starts, and their descendants.
pub const MARK_VAR: &str = "PVISOR_RUN_MARK";

/// The mark of the run whose process list is `dir`: unique per state dir.
pub fn mark_of(dir: &Path) -> String {
    let h = blake3::hash(dir.as_os_str().as_encoded_bytes()).to_hex();
    format!("pvisor-{}", &h[..24])
}

/// Arm `cmd` so that its process gets SIGKILL when the thread that starts it (pvisor's) dies,
/// and, for a run's process (`run`: its process list, [`dir_of`]), mark it and its
/// descendants as the run's ([`MARK_VAR`]).
pub fn die_with_parent(cmd: &mut std::process::Command, run: Option<&Path>) {
    if let Some(dir) = run {
        cmd.env(MARK_VAR, mark_of(dir));
    }
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: prctl and getppid are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            );
            if libc::getppid() != parent {
                libc::_exit(1); // pvisor died before the signal was armed
            }
            Ok(())
        });
    }
}

/// The run's list of process groups in `dir` ([`dir_of`]): one line per start (`+<pgid>
/// <leader start time>`) and per end (`-<pgid>`), appended. One file for the whole run: a
/// file per group, created and deleted around every tool command, made each command's start
/// pay for the ones before it on a file system that scans recently deleted inodes (ext4
/// without a journal: 47% of pvisor's time at 1,000 commands).
fn list_of(dir: &Path) -> PathBuf {
    dir.join("list")
}

/// Append one line to the list (one `write`, so lines from several threads never mix).
fn append(dir: &Path, line: &str) {
    use std::io::Write;
    let _ = std::fs::create_dir_all(dir);
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(list_of(dir))
    {
        let _ = f.write_all(line.as_bytes());
    }
}

/// List the group `pgid` (its leader's pid) as running.
pub fn register(dir: &Path, pgid: u32) {
    if let Some(t) = start_time(pgid as i32) {
        append(dir, &format!("+{pgid} {t}\n"));
    }
}

/// The group `pgid` has ended (or was ended): no longer listed.
pub fn unregister(dir: &Path, pgid: u32) {
    append(dir, &format!("-{pgid}\n"));
}

/// The groups listed as running, with their leader's start time: the list's lines in order
/// (a torn or unreadable line is skipped), and the one-file-per-group entries (`<pgid>`
/// holding the start time) that earlier versions wrote, so that a run they left behind is
/// still cleaned up.
fn listed(dir: &Path) -> std::collections::BTreeMap<u32, u64> {
    let mut groups = std::collections::BTreeMap::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Some(pgid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let since = std::fs::read_to_string(e.path())
            .ok()
            .and_then(|t| t.trim().parse().ok());
        if let Some(since) = since {
            groups.insert(pgid, since);
        }
    }
    let text = std::fs::read_to_string(list_of(dir)).unwrap_or_default();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('+') {
            let mut f = rest.split(' ');
            if let (Some(Ok(pgid)), Some(Ok(since)), None) = (
                f.next().map(str::parse::<u32>),
                f.next().map(str::parse::<u64>),
                f.next(),
            ) {
                groups.insert(pgid, since);
            }
        } else if let Some(Ok(pgid)) = line.strip_prefix('-').map(str::parse::<u32>) {
            groups.remove(&pgid);
        }
    }
    groups
}

/// The processes of group `pgid` that started no earlier than `since`.
fn members(pgid: i32, since: u64) -> Vec<i32> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Some(f) = stat_fields(pid) else {
            continue;
        };
        let pgrp = f.get(2).and_then(|x| x.parse::<i32>().ok());
        let start = f.get(19).and_then(|x| x.parse::<u64>().ok());
        if pgrp == Some(pgid) && start.is_some_and(|s| s >= since) && f[0] != "Z" {
            out.push(pid);
        }
    }
    out
}

/// The processes other than this one whose environment carries `mark` ([`MARK_VAR`]).
fn marked(mark: &str) -> Vec<i32> {
    let needle = format!("{MARK_VAR}={mark}");
    let me = std::process::id() as i32;
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|v| v == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// End every process an earlier attempt of this run left running: every listed group (a
/// group whose id was reused by another leader since, a live leader with another start time,
/// is left alone), and every process that carries the run's mark, wherever it moved (a
/// detached command). Returns the groups and processes ended.
pub fn end_left_over(dir: &Path) -> Vec<u32> {
    let mut ended = end_listed(dir);
    for pid in marked(&mark_of(dir)) {
        if pgrp_of(pid).is_some_and(|g| ended.contains(&(g as u32))) {
            continue; // ended with its listed group
        }
        // SAFETY: signalling a process of this run (its environment carries the mark).
        if unsafe { libc::kill(pid, libc::SIGKILL) } == 0 && !ended.contains(&(pid as u32)) {
            ended.push(pid as u32);
        }
    }
    ended
}

/// End the listed groups still running, and unlist them.
fn end_listed(dir: &Path) -> Vec<u32> {
    let mut ended = vec![];
    for (pgid, since) in listed(dir) {
        let pg = pgid as i32;
        if start_time(pg).is_some_and(|t| t != since) {
            continue; // the id belongs to another group now
        }
        if members(pg, since).is_empty() {
            continue;
        }
        // SAFETY: signalling a process group.
        unsafe {
            libc::killpg(pg, libc::SIGKILL);
        }
        ended.push(pgid);
    }
    // Every listed group is handled: the list starts again empty (an interrupted cleanup is
    // done again by the next attempt, which finds the same start times).
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_name()
            .to_str()
            .is_some_and(|n| n.parse::<u32>().is_ok())
        {
            let _ = std::fs::remove_file(e.path());
        }
    }
    if list_of(dir).exists() {
        let _ = std::fs::write(list_of(dir), "");
    }
    ended
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A group whose leader died (as with pvisor) but whose background job lives on is ended
    /// by the next attempt; one that ended by itself is just unlisted.
    #[test]
    fn the_rest_of_a_group_left_behind_is_ended() {
        let d = tempfile::tempdir().unwrap();
        let dir = dir_of(d.path());
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "sleep 60 & echo $!; wait"]);
        let (pgid, job) = leader_leaving(cmd, |pgid| register(&dir, pgid));
        assert!(std::path::Path::new(&format!("/proc/{job}")).exists());
        assert_eq!(end_left_over(&dir), vec![pgid]);
        assert!(
            ends(job),
            "the background job of the dead leader still runs"
        );
        assert!(listed(&dir).is_empty(), "the list still names a group");
        // Nothing listed: nothing to do.
        assert!(end_left_over(&dir).is_empty());
    }

    /// The list is read in order: an ended group is no longer listed, a reused id is listed
    /// with its new start time, a torn line is skipped, and a group an earlier version listed
    /// in a file of its own still counts.
    #[test]
    fn the_list_is_folded_in_order() {
        let d = tempfile::tempdir().unwrap();
        let dir = dir_of(d.path());
        append(&dir, "+10 100\n+11 110\n-10\n+12 120\n-12\n+12 121\n+13");
        std::fs::write(dir.join("14"), "140").unwrap();
        let got: Vec<(u32, u64)> = listed(&dir).into_iter().collect();
        assert_eq!(got, vec![(11, 110), (12, 121), (14, 140)]);
        append(&dir, "\n+15 x\n-11\n");
        let got: Vec<u32> = listed(&dir).into_keys().collect();
        assert_eq!(got, vec![12, 14]);
        // None of these ids runs with these start times: unlisted, nothing ended.
        assert!(end_left_over(&dir).is_empty());
        assert!(listed(&dir).is_empty());
        assert!(!dir.join("14").exists());
    }

    /// Start `cmd` (a shell that prints the pid of the job it starts) as a group leader,
    /// `started(pgid)`, then kill the leader as PDEATHSIG would: its job lives on.
    /// Returns the group and the job.
    fn leader_leaving(mut cmd: Command, started: impl FnOnce(u32)) -> (u32, i32) {
        let mut leader = cmd.process_group(0).stdout(Stdio::piped()).spawn().unwrap();
        started(leader.id());
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let job: i32 = line.trim().parse().unwrap();
        leader.kill().unwrap();
        leader.wait().unwrap();
        (leader.id(), job)
    }

    /// Whether process `pid` is gone (or a zombie) within two seconds.
    fn ends(pid: i32) -> bool {
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true)
        };
        for _ in 0..100 {
            if gone() {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        gone()
    }

    /// A command that left the run's group and session (as Claude Code starts its Bash
    /// commands) still carries the run's mark, and the next attempt ends it; another run's
    /// processes are left alone.
    #[test]
    fn a_detached_descendant_is_ended_by_its_mark() {
        let d = tempfile::tempdir().unwrap();
        let dir = dir_of(&d.path().join("a"));
        let other = dir_of(&d.path().join("b"));
        let spawn = |run: &Path| {
            let mut cmd = Command::new("/bin/sh");
            cmd.args(["-c", "setsid sleep 60 & echo $!; wait"]);
            die_with_parent(&mut cmd, Some(run));
            leader_leaving(cmd, |_| {}).1
        };
        let (job, foreign) = (spawn(&dir), spawn(&other));
        // field 6 of proc(5): the session (`setsid` may not have run yet when `$!` is read)
        let sid = || -> i32 { stat_fields(job).unwrap()[3].parse().unwrap() };
        for _ in 0..100 {
            if sid() == job {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(sid(), job, "the job leads its own session");
        assert_eq!(end_left_over(&dir), vec![job as u32]);
        assert!(ends(job), "the detached job of the run still runs");
        assert!(!ends(foreign), "another run's process was ended");
        assert_eq!(end_left_over(&other), vec![foreign as u32]);
        assert!(ends(foreign));
    }
}
