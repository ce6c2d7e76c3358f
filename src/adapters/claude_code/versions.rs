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
pub const RANGE: crate::kit::registry::VersionRange =
    crate::kit::registry::VersionRange::new("2.1.220", "2.1.332");
/// The sessions a continuation can rebuild, and the CLIs it continues with. Before 2.1.285
/// Claude renders attachments (environment, date, agent and skill listings) at request time,
/// with today's date, instead of storing their `rendered` text: the prefix cannot be rebuilt
/// as recorded. 2.1.285 stores them, but its resume loses a batch whose parallel results
/// were written out of completion order (it walks up from a result of that batch instead of
/// the boundary; measured with its own session cut at the boundary); 2.1.286 fixed it.
/// Older sessions replay (`--replay-only`, `--prepare-only`) but are refused for a
/// continuation.
pub const CONTINUE_RANGE: crate::kit::registry::VersionRange =
    crate::kit::registry::VersionRange::new("2.1.286", "2.1.332");
/// The newest supported version (the pinned one, installed by `scripts/install-agents.sh`).
pub const HIGHEST: Version = (2, 1, 332);

/// From this release on, Edit omits its " (file state is current in your context …)" suffix
/// when the edited content is not in the model's context (the last look at the file was a
/// partial Read, or a shell command that printed only part of it): `mapToolResultToToolResultBlockParam`
/// of the Edit tool destructures `contentNotInModelContext` (absent in 2.1.280, present
/// in 2.1.281). Before it, every clean Edit ends with the suffix.
pub const EDIT_SUFFIX_TRACKS_CONTEXT: Version = (2, 1, 281);

/// From this release on Write may overwrite a file the model never read when the session's
/// permission mode allows the write (`bypassPermissions`, `acceptEdits`), as Edit already
/// does in 2.1.220; before it, Write's skip hangs on a GrowthBook flag
/// (`tengu_velvet_mallet`, off offline): its read guard always applies.
pub const WRITE_GUARD_FOLLOWS_PERMISSIONS: Version = (2, 1, 228);
/// From this release on Grep reads ripgrep's `--json` output line by line: before it, the
/// whole plain-text output is trimmed, split and emptied of blank lines (the first line
/// loses its leading white space), and a line's path (the text before its first `:`) is made
/// relative to the cwd, so context lines (`path-N-text`) keep their absolute path.
pub const GREP_JSON_LINES: Version = (2, 1, 251);
/// From this release on a missing Grep `path` / Glob directory is an error thrown by the
/// tool (bare text); before it, input validation refuses it (`<tool_use_error>…`).
pub const PATH_ERRORS_THROWN: Version = (2, 1, 260);
/// From this release on Write refuses a directory ("… is a directory, not a file …");
/// before it, an unread directory gets "File has not been read yet …".
pub const WRITE_DIRECTORY_CHECK: Version = (2, 1, 277);
/// From this release on Read's binary-extension refusal suggests a skill or a shell
/// command; before it: "Please use appropriate tools for binary file analysis."
pub const READ_BINARY_SKILL_HINT: Version = (2, 1, 290);
/// From this release on Read has `allow_large`, and its "exceeds maximum allowed size"
/// error says how to use it.
pub const READ_ALLOW_LARGE: Version = (2, 1, 296);
/// From this release on Read appends a note to files that are not valid UTF-8.
pub const READ_NOT_TEXT_NOTE: Version = (2, 1, 299);
/// From this release on Bash's "modified files you've previously read" note also follows
/// `sed -i` (the command pattern gained `\bg?sed\b.*\s-[a-zA-Z]*i`).
pub const BASH_SED_I_NOTE: Version = (2, 1, 309);
/// From this release on Grep sorts content groups and count lines by path; before it,
/// they come in ripgrep's own (parallel walk) order.
pub const GREP_SORTED: Version = (2, 1, 327);

/// Tool behaviour of one Claude Code version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Behaviour {
    /// See [`EDIT_SUFFIX_TRACKS_CONTEXT`].
    pub edit_suffix_tracks_context: bool,
    /// See [`WRITE_GUARD_FOLLOWS_PERMISSIONS`].
    pub write_guard_follows_permissions: bool,
    /// See [`GREP_JSON_LINES`].
    pub grep_json_lines: bool,
    /// See [`PATH_ERRORS_THROWN`].
    pub path_errors_thrown: bool,
    /// See [`WRITE_DIRECTORY_CHECK`].
    pub write_directory_check: bool,
    /// See [`READ_BINARY_SKILL_HINT`].
    pub read_binary_skill_hint: bool,
    /// See [`READ_ALLOW_LARGE`].
    pub read_allow_large: bool,
    /// See [`READ_NOT_TEXT_NOTE`].
    pub read_not_text_note: bool,
    /// See [`BASH_SED_I_NOTE`].
    pub bash_sed_i_note: bool,
    /// See [`GREP_SORTED`].
    pub grep_sorted: bool,
    /// `LS` and `MultiEdit` exist (versions before 2.1).
    pub legacy_tools: bool,
}

impl Behaviour {
    /// The behaviour of `version`; the newest one when the session records no version.
    pub fn of(version: Option<Version>) -> Behaviour {
        let v = version.unwrap_or(HIGHEST);
        Behaviour {
            edit_suffix_tracks_context: v >= EDIT_SUFFIX_TRACKS_CONTEXT,
            write_guard_follows_permissions: v >= WRITE_GUARD_FOLLOWS_PERMISSIONS,
            grep_json_lines: v >= GREP_JSON_LINES,
            path_errors_thrown: v >= PATH_ERRORS_THROWN,
            write_directory_check: v >= WRITE_DIRECTORY_CHECK,
            read_binary_skill_hint: v >= READ_BINARY_SKILL_HINT,
            read_allow_large: v >= READ_ALLOW_LARGE,
            read_not_text_note: v >= READ_NOT_TEXT_NOTE,
            bash_sed_i_note: v >= BASH_SED_I_NOTE,
            grep_sorted: v >= GREP_SORTED,
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
        let old = Behaviour::of(Some((2, 1, 220)));
        let new = Behaviour::of(Some((2, 1, 332)));
        assert!(!old.grep_sorted && !old.grep_json_lines && !old.path_errors_thrown);
        assert!(new.grep_sorted && new.grep_json_lines && new.path_errors_thrown);
        assert!(!Behaviour::of(Some((2, 1, 326))).grep_sorted);
        assert!(Behaviour::of(Some((2, 1, 327))).grep_sorted);
        assert!(!Behaviour::of(Some((2, 1, 308))).bash_sed_i_note);
        assert!(Behaviour::of(Some((2, 1, 309))).bash_sed_i_note);
        assert_eq!(parse("2.1.332 (Claude Code)"), Some((2, 1, 332)));
    }
}
