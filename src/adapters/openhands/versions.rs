//! The capability table of the OpenHands adapter: for each proven SDK release, the packages a
//! run installs beside it (the libraries that shape the request bytes: a newer litellm adds
//! `reasoning_effort` and `prompt_cache_key` to the same conversation's requests) and the
//! tools its runner re-executes. Supporting a new release is one row here, proven by a
//! recording of it.

use crate::kit::VersionRange;

/// One proven release of `openhands-sdk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Release {
    pub sdk: &'static str,
    /// Installed with it, pinned (`openhands-tools`, litellm, openai).
    pub with: &'static [&'static str],
    /// The lowest Python it runs on.
    pub python: &'static str,
    /// The first Python its pinned dependencies do not resolve on.
    pub python_below: &'static str,
}

/// The releases whose stores are replayed and continued.
pub const RELEASES: &[Release] = &[Release {
    sdk: "1.34.0",
    // As `openhands-ai 1.11.0` (which recorded the fixture) pins them.
    with: &[
        "openhands-tools==1.34.0",
        "litellm==1.84.1",
        "openai==2.33.0",
    ],
    python: "3.12",
    // lmnr's OpenTelemetry pins do not resolve on 3.13; the fixture ran on CPython 3.12.1.
    python_below: "3.13",
}];

/// The proven versions, for the registry.
pub const PROVEN: &[VersionRange] = &[VersionRange::exactly("1.34.0")];

/// The tools the runner re-executes: the names a store's `agent.tools[].name` may carry,
/// plus the SDK's built-in `finish` and `think`. Any other tool is refused before anything
/// runs, naming it.
pub const TOOLS: &[&str] = &[
    "terminal",
    "file_editor",
    "task_tracker",
    "glob",
    "grep",
    "apply_patch",
    "planning_file_editor",
];

/// The SDK's own tools, always present (`include_default_tools`).
pub const BUILTIN_TOOLS: &[&str] = &["finish", "think"];
