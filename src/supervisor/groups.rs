//! No orphans: every process group a run starts (tool commands, shell sessions, companion
//! runners, the agent CLI) is listed in the run's state dir while it runs
//! (`<state>/processes/<pgid>`, holding the leader's start time), and its leader dies with
//! pvisor ([`die_with_parent`]: `PR_SET_PDEATHSIG`). What a killed pvisor cannot end itself —
//! the rest of a group whose leader died with it (`sleep 100 &`, a command a shell was
//! running) — the next attempt ends first ([`end_left_over`]), before anything runs again, so
//! a resumed call never runs beside the interrupted one.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

/// The folder of a run's listed process groups.
pub fn dir_of(state_dir: &Path) -> PathBuf {
    state_dir.join("processes")
}

/// The start time of process `pid` (clock ticks since boot, `/proc/<pid>/stat` field 22).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Arm `cmd` so that its process gets SIGKILL when the thread that starts it (pvisor's) dies.
pub fn die_with_parent(cmd: &mut std::process::Command) {
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

/// List the group `pgid` (its leader's pid) as running.
pub fn register(dir: &Path, pgid: u32) {
    let _ = std::fs::create_dir_all(dir);
    if let Some(t) = start_time(pgid as i32) {
        let _ = std::fs::write(dir.join(pgid.to_string()), t.to_string());
    }
}

/// The group `pgid` has ended (or was ended): no longer listed.
pub fn unregister(dir: &Path, pgid: u32) {
    let _ = std::fs::remove_file(dir.join(pgid.to_string()));
}

/// The processes of group `pgid` that started no earlier than `since`.
fn members(pgid: i32, since: u64) -> Vec<i32> {
    let mut out = vec![];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // After the command: state ppid pgrp … starttime (index 19).
        let pgrp = f.get(2).and_then(|x| x.parse::<i32>().ok());
        let start = f.get(19).and_then(|x| x.parse::<u64>().ok());
        if pgrp == Some(pgid) && start.is_some_and(|s| s >= since) && f.first() != Some(&"Z") {
            out.push(pid);
        }
    }
    out
}

/// End every listed group an earlier process of this run left running, and unlist it.
/// A group whose id was reused by another leader since (a live leader with another start
/// time) is left alone. Returns the groups ended.
pub fn end_left_over(dir: &Path) -> Vec<u32> {
    let mut ended = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = e.path();
        let Some(pgid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let since: Option<u64> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse().ok());
        let _ = std::fs::remove_file(&path);
        let Some(since) = since else { continue };
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
        let mut leader = Command::new("/bin/sh")
            .args(["-c", "sleep 60 & echo $!; wait"])
            .process_group(0)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let pgid = leader.id();
        register(&dir, pgid);
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(leader.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let job: i32 = line.trim().parse().unwrap();
        // The leader dies (as PDEATHSIG kills it with pvisor); its job lives on.
        leader.kill().unwrap();
        leader.wait().unwrap();
        assert!(std::path::Path::new(&format!("/proc/{job}")).exists());
        assert_eq!(end_left_over(&dir), vec![pgid]);
        for _ in 0..100 {
            let gone = std::fs::read_to_string(format!("/proc/{job}/stat"))
                .map(|s| s.contains(") Z "))
                .unwrap_or(true);
            if gone {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let gone = std::fs::read_to_string(format!("/proc/{job}/stat"))
            .map(|s| s.contains(") Z "))
            .unwrap_or(true);
        assert!(gone, "the background job of the dead leader still runs");
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        // Nothing listed: nothing to do.
        assert!(end_left_over(&dir).is_empty());
    }
}
