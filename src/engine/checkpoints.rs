//! Workspace checkpoints as the engine uses them (`crate::workspace::checkpoint`): one before
//! each mutating call of the prefix and before each live step's tool calls are released, and
//! a restore before an in-doubt call or step runs again, so its workspace effects apply once.

use std::path::PathBuf;

use journal_format::event::{WorkspaceCheckpointed, WorkspaceRestored};
use journal_format::Event;

use super::failure::RunError;
use super::recorder::Recorder;
use crate::request::ReplayRequest;
use crate::workspace::checkpoint::{self, Checkpointer};

pub struct Checkpoints {
    /// `--no-checkpoints`: take none (restores of journaled ones still work).
    off: bool,
    cp: Checkpointer,
    workspace: PathBuf,
    exclude: Vec<PathBuf>,
}

impl Checkpoints {
    /// For `req`'s workspace, knowing the files of the last journaled checkpoint.
    pub fn new(req: &ReplayRequest, rec: &Recorder) -> Self {
        let exclude = vec![req.state_dir.clone(), req.output_dir.clone()];
        let mut cp = Checkpointer::new(&req.workspace, &exclude);
        if let Some(last) = rec
            .state
            .checkpoints
            .values()
            .max_by_key(|c| (c.batch == 0, c.batch, c.call))
        {
            cp.seed(&rec.blobs, &last.manifest_blob);
        }
        Checkpoints {
            off: req.no_checkpoints,
            cp,
            workspace: req.workspace.clone(),
            exclude,
        }
    }

    /// Take and journal the checkpoint of (batch, call) unless the journal has one. A
    /// workspace that cannot be read is reported and the call goes on without one (an
    /// interruption then falls back to the in-doubt policy).
    pub fn before(&mut self, rec: &mut Recorder, batch: u64, call: u64) -> Result<(), RunError> {
        if self.off || rec.state.checkpoints.contains_key(&(batch, call)) {
            return Ok(());
        }
        match self.cp.take(&rec.blobs) {
            Ok(t) => {
                rec.record_deferred(Event::WorkspaceCheckpointed(WorkspaceCheckpointed {
                    batch,
                    call,
                    manifest_blob: t.manifest_blob,
                    entries: t.entries,
                    new_bytes: t.new_bytes,
                    unstored: t.unstored,
                }))?;
                Ok(())
            }
            Err(e) => {
                eprintln!("pvisor: warning: {e}; continuing without a checkpoint");
                Ok(())
            }
        }
    }

    /// Restore the workspace to the checkpoint of (batch, call) and journal it. `Ok(false)`
    /// when there is none or it cannot be restored (the reason is printed).
    pub fn restore(&mut self, rec: &mut Recorder, batch: u64, call: u64) -> Result<bool, RunError> {
        let Some(c) = rec.state.checkpoints.get(&(batch, call)).cloned() else {
            return Ok(false);
        };
        match checkpoint::restore(&self.workspace, &self.exclude, &rec.blobs, &c.manifest_blob) {
            Ok(r) => {
                rec.record(Event::WorkspaceRestored(WorkspaceRestored {
                    batch,
                    call,
                    manifest_blob: c.manifest_blob.clone(),
                    written: r.written,
                    removed: r.removed,
                }))?;
                // What is on disk now is what the manifest lists.
                self.cp.seed(&rec.blobs, &c.manifest_blob);
                Ok(true)
            }
            Err(e) => {
                eprintln!("pvisor: warning: {e}");
                Ok(false)
            }
        }
    }
}
