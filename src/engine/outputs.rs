//! Materialize the output directory from the journal: plan, journal export, observation
//! comparison, result. Idempotent: a resumed or re-run finished journal rewrites the same
//! files, so a crash between the last event and these files loses nothing.

use std::path::Path;

use super::recorder::Recorder;
use crate::fold::result::files;
use crate::fold::ReplayResult;
use crate::journal::blobs::write_atomic;
use crate::kit::Observation;
use crate::report::export::write_export_line;

fn io(p: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", p.display())
}

pub fn write_all(
    rec: &Recorder,
    adapter: Option<&dyn crate::kit::Adapter>,
    req: &crate::request::ReplayRequest,
    result: &ReplayResult,
) -> Result<(), String> {
    let out: &Path = &req.output_dir;
    std::fs::create_dir_all(out).map_err(|e| io(out, e))?;
    if let (Some(a), false) = (adapter, rec.state.steps.is_empty()) {
        let continued = rec
            .state
            .sessions
            .get("continued")
            .map(|w| std::path::PathBuf::from(&w.path));
        // The source is parsed again here (the run's plan is gone after a failure).
        let plan = a.parse_path(&req.trajectory).ok().map(|(p, _)| p);
        let (orig, live) = match &plan {
            Some(plan) => a.next_actions(plan, req.after_step as usize, continued.as_deref()),
            None => (None, None),
        };
        let v = crate::compare::next_action::compare(
            orig.as_ref(),
            live.as_ref(),
            rec.state.bridge.injections > 0,
        );
        let p = out.join(files::NEXT_ACTION);
        write_atomic(
            &p,
            serde_json::to_string_pretty(&v)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|e| io(&p, e))?;
    }
    if let Some(p) = &rec.state.parsed {
        // Copied as it is read: a long trajectory's plan is never held whole.
        if let Ok(mut plan) = std::fs::File::open(rec.blobs.path_of(&p.plan_blob)) {
            crate::journal::blobs::write_atomic_with(&out.join(files::PLAN), |w| {
                std::io::copy(&mut plan, w).map(drop)
            })
            .map_err(|e| io(out, e))?;
        }
    }
    // journal export
    let path = out.join(files::JOURNAL_EXPORT);
    let journal = rec.journal.path();
    let mut read = Ok(());
    crate::journal::blobs::write_atomic_with(&path, |w| {
        let (mut line, mut written) = (Vec::new(), Ok(()));
        read = crate::journal::read_events(journal, |e| {
            if written.is_ok() {
                line.clear();
                let _ = write_export_line(&mut line, &e);
                written = w.write_all(&line);
            }
            Ok(())
        })
        .map(drop);
        // A journal that cannot be read to its end leaves no export in place.
        if let Err(e) = &read {
            return Err(std::io::Error::other(e.to_string()));
        }
        written
    })
    .map_err(|e| io(&path, e))?;
    read.map_err(|e| e.to_string())?;
    // observation comparison
    if !rec.state.calls.is_empty() {
        let mut rows = vec![];
        for c in rec.state.calls.values() {
            let fresh: Option<Observation> = c
                .finished
                .as_ref()
                .and_then(|f| rec.blobs.get(&f.observation_blob).ok())
                .and_then(|b| serde_json::from_slice(&b).ok());
            let diff = c
                .compared
                .as_ref()
                .and_then(|x| x.diff_blob.as_ref())
                .and_then(|b| rec.blobs.get(b).ok())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            rows.push(serde_json::json!({
                "batch": c.batch, "call": c.call, "call_id": c.call_id, "tool": c.tool,
                "equal": c.compared.as_ref().map(|x| x.equal),
                "equal_except_dynamic": c.compared.as_ref().map(|x| x.equal || x.equal_masked),
                "stale": c.finished.as_ref().map(|f| f.stale),
                "replayed_is_error": fresh.as_ref().map(|o| o.is_error),
                "exit_code": c.finished.as_ref().and_then(|f| f.exit_code),
                "observation_digest": c.finished.as_ref().map(|f| f.observation_digest.clone()),
                "diff": diff,
            }));
        }
        let v = serde_json::json!({ "schema_version": "pvisor.observation-comparison/v1", "calls": rows });
        let p = out.join(files::OBSERVATIONS);
        write_atomic(
            &p,
            serde_json::to_string_pretty(&v)
                .unwrap_or_default()
                .as_bytes(),
        )
        .map_err(|e| io(&p, e))?;
    }
    let p = out.join(files::RESULT);
    write_atomic(
        &p,
        (serde_json::to_string_pretty(result).unwrap_or_default() + "\n").as_bytes(),
    )
    .map_err(|e| io(&p, e))?;
    Ok(())
}
