//! The Claude Code versions this adapter supports, and what differs between them. Every
//! version decision of the adapter is made here, from the version a session records.
//!
//! Range: [`RANGE`], both ends proven with the real CLI (sessions recorded
//! by each end replay byte for byte and continue through the bridge; see
//! `tests/claude_code_recorded.rs`, `tests/e2e_claude_versions.rs`). Behaviour that changed
//! inside the range is located by the first release whose bundled JavaScript has the new
//! code (read in the npm package `@anthropic-ai/claude-code-linux-x64@<version>`).

/// `(major, minor, patch)`.
pub type Version = (u32, u32, u32);

/// The supported range, as the capability table lists it.
pub const RANGE: crate::adapters::capabilities::VersionRange =
    crate::adapters::capabilities::VersionRange::new("2.1.220", "2.1.332");
/// The sessions a continuation can rebuild, and the CLIs it continues with. Before 2.1.285
/// Claude renders attachments (environment, date, agent and skill listings) at request time,
/// with today's date, instead of storing their `rendered` text: the prefix cannot be rebuilt
/// as recorded. 2.1.285 stores them, but its resume loses a batch whose parallel results
/// were written out of completion order (it walks up from a result of that batch instead of
/// the boundary; measured with its own session cut at the boundary); 2.1.286 fixed it.
/// Older sessions replay (`--replay-only`, `--prepare-only`) but are refused for a
/// continuation.
pub const CONTINUE_RANGE: crate::adapters::capabilities::VersionRange =
    crate::adapters::capabilities::VersionRange::new("2.1.286", "2.1.332");
/// The newest supported version (the pinned one, installed by `scripts/install-agents.sh`).
pub const HIGHEST: Version = (2, 1, 332);

/// From this release on, Edit omits its " (file state is current in your context …)" suffix
/// when the edited content is not in the model's context (the last look at the file was a
/// partial Read, or a shell command that printed only part of it): `mapToolResultToToolResultBlockParam`
/// of the Edit tool destructures `contentNotInModelContext` (absent in 2.1.280, present
/// in 2.1.281). Before it, every clean Edit ends with the suffix.
pub const EDIT_SUFFIX_TRACKS_CONTEXT: Version = (2, 1, 281);

/// Tool behaviour of one Claude Code version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behaviour {
    /// See [`EDIT_SUFFIX_TRACKS_CONTEXT`].
    pub edit_suffix_tracks_context: bool,
    /// `LS` and `MultiEdit` exist (versions before 2.1).
    pub legacy_tools: bool,
}

impl Behaviour {
    /// The behaviour of `version`; the newest one when the session records no version.
    pub fn of(version: Option<Version>) -> Behaviour {
        let v = version.unwrap_or(HIGHEST);
        Behaviour {
            edit_suffix_tracks_context: v >= EDIT_SUFFIX_TRACKS_CONTEXT,
            legacy_tools: v < (2, 1, 0),
        }
    }
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour::of(None)
    }
}

/// "2.1.332" (or "2.1.332 (Claude Code)") → (2, 1, 332).
pub fn parse(v: &str) -> Option<Version> {
    let mut it = v
        .split_whitespace()
        .next()?
        .split('.')
        .map(|p| p.parse::<u32>().ok());
    Some((it.next()??, it.next()??, it.next().flatten().unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behaviour_by_version() {
        assert!(!Behaviour::of(Some((2, 1, 220))).edit_suffix_tracks_context);
        assert!(!Behaviour::of(Some((2, 1, 280))).edit_suffix_tracks_context);
        assert!(Behaviour::of(Some((2, 1, 281))).edit_suffix_tracks_context);
        assert!(Behaviour::of(None).edit_suffix_tracks_context);
        assert!(Behaviour::of(Some((2, 0, 77))).legacy_tools);
        assert_eq!(parse("2.1.332 (Claude Code)"), Some((2, 1, 332)));
    }
}
