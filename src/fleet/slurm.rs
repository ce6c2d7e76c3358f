//! The Slurm job array of a manifest: one array task per replay, each running
//! `pvisor replay --manifest M --index $SLURM_ARRAY_TASK_ID`. The script is written beside
//! the manifest (kept for inspection) and submitted with the real `sbatch`.

use std::path::{Path, PathBuf};

/// What `pvisor fleet submit` passes to Slurm.
#[derive(Debug, Clone, Default)]
pub struct ArrayOptions {
    pub partition: Option<String>,
    /// At most this many tasks at once (`--array=0-N%K`).
    pub max_parallel: Option<usize>,
    /// Per-task time limit (Slurm's format, e.g. `30:00`).
    pub time: Option<String>,
    /// Let Slurm requeue a task (preemption, node failure): it resumes from its journal.
    pub requeue: bool,
}

/// The sbatch script of an array over `tasks` tasks of `manifest`, run by `pvisor`.
pub fn script(pvisor: &Path, manifest: &Path, tasks: usize, o: &ArrayOptions) -> String {
    let dir = manifest.parent().unwrap_or(Path::new("."));
    let logs = dir.join("slurm-logs");
    let mut s = String::from("#!/bin/bash\n");
    s.push_str("#SBATCH --job-name=pvisor-fleet\n");
    let range = format!("0-{}", tasks.saturating_sub(1));
    match o.max_parallel {
        Some(k) => s.push_str(&format!("#SBATCH --array={range}%{k}\n")),
        None => s.push_str(&format!("#SBATCH --array={range}\n")),
    }
    s.push_str("#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n");
    s.push_str(&format!("#SBATCH --output={}/%A_%a.out\n", logs.display()));
    if let Some(p) = &o.partition {
        s.push_str(&format!("#SBATCH --partition={p}\n"));
    }
    if let Some(t) = &o.time {
        s.push_str(&format!("#SBATCH --time={t}\n"));
    }
    s.push_str(if o.requeue {
        "#SBATCH --requeue\n"
    } else {
        "#SBATCH --no-requeue\n"
    });
    s.push_str(
        "# Task i replays line i of the manifest; a retried or requeued task resumes from its\n\
         # journal, and a finished one prints its result and runs nothing (docs/fleet.md).\n",
    );
    s.push_str(&format!(
        "exec {} replay --manifest {} --index \"$SLURM_ARRAY_TASK_ID\"\n",
        shell_quote(&pvisor.display().to_string()),
        shell_quote(&manifest.display().to_string())
    ));
    s
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// Where the script of `manifest` is written.
pub fn script_path(manifest: &Path) -> PathBuf {
    let mut name = manifest.file_name().unwrap_or_default().to_os_string();
    name.push(".sbatch");
    manifest.with_file_name(name)
}

/// Write the script and submit it with `sbatch --parsable`; returns the job id.
pub fn submit(script_text: &str, manifest: &Path) -> Result<(PathBuf, String), String> {
    let path = script_path(manifest);
    std::fs::write(&path, script_text).map_err(|e| format!("{}: {e}", path.display()))?;
    let logs = manifest
        .parent()
        .unwrap_or(Path::new("."))
        .join("slurm-logs");
    std::fs::create_dir_all(&logs).map_err(|e| format!("{}: {e}", logs.display()))?;
    let out = std::process::Command::new("sbatch")
        .arg("--parsable")
        .arg(&path)
        .output()
        .map_err(|e| format!("cannot run sbatch: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "sbatch {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let id = String::from_utf8_lossy(&out.stdout)
        .trim()
        .split(';')
        .next()
        .unwrap_or("")
        .to_string();
    Ok((path, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_runs_one_task_per_line_with_the_options() {
        let s = script(
            Path::new("/opt/pvisor"),
            Path::new("/f/it's.jsonl"),
            50,
            &ArrayOptions {
                partition: Some("debug".into()),
                max_parallel: Some(4),
                time: Some("10:00".into()),
                requeue: true,
            },
        );
        assert!(s.contains("#SBATCH --array=0-49%4\n"), "{s}");
        assert!(s.contains("#SBATCH --partition=debug\n"));
        assert!(s.contains("#SBATCH --time=10:00\n"));
        assert!(s.contains("#SBATCH --requeue\n"));
        assert!(s.contains("--index \"$SLURM_ARRAY_TASK_ID\""));
        assert!(s.contains(r"'/f/it'\''s.jsonl'"), "{s}");
        assert_eq!(
            script_path(Path::new("/f/m.jsonl")),
            Path::new("/f/m.jsonl.sbatch")
        );
    }
}
