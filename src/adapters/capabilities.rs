//! The per-agent capability table: pinned versions, which versions are accepted, and what
//! each adapter can do. Version decisions are made here and nowhere else.

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
fn numbers(version: &str) -> Option<Vec<u64>> {
    let t = version
        .split_whitespace()
        .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))?;
    t.split('.').map(|p| p.parse().ok()).collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub agent: &'static str,
    /// The version `scripts/install-agents.sh` installs (the newest proven one).
    pub pinned: &'static str,
    /// Versions whose sessions the adapter replays (parse, tools, observations); each
    /// range's ends are proven with sessions recorded by the real CLI.
    pub versions: &'static [VersionRange],
    /// Versions whose sessions the adapter rebuilds for a continuation, and whose CLI it
    /// continues with (a subset of `versions`); each range's ends are proven with the real
    /// CLI of that version.
    pub continue_versions: &'static [VersionRange],
    /// npm or PyPI package that `scripts/install-agents.sh` installs.
    pub package: &'static str,
    /// The executable looked up on PATH when `--agent-entrypoint` is not given.
    pub command: &'static str,
    pub can_replay: bool,
    pub can_continue: bool,
}

pub const TABLE: &[Capability] = &[
    Capability {
        agent: "claude-code",
        pinned: "2.1.332",
        versions: &[super::claude_code::versions::RANGE],
        continue_versions: &[super::claude_code::versions::CONTINUE_RANGE],
        package: "npm:@anthropic-ai/claude-code",
        command: "claude",
        can_replay: true,
        can_continue: true,
    },
    Capability {
        agent: "codex",
        pinned: "0.149.0",
        versions: &[VersionRange::exactly("0.149.0")],
        continue_versions: &[VersionRange::exactly("0.149.0")],
        package: "npm:@openai/codex",
        command: "codex",
        can_replay: true,
        can_continue: true,
    },
    Capability {
        agent: "opencode",
        pinned: "1.17.11",
        versions: &[VersionRange::exactly("1.17.11")],
        continue_versions: &[VersionRange::exactly("1.17.11")],
        package: "npm:opencode-ai",
        command: "opencode",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "pi",
        pinned: "0.83.0",
        versions: &[VersionRange::exactly("0.83.0")],
        continue_versions: &[VersionRange::exactly("0.83.0")],
        package: "npm:@earendil-works/pi-coding-agent",
        command: "pi",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "mini-swe-agent",
        pinned: "2.4.6",
        versions: &[
            VersionRange::exactly("1.17.5"),
            VersionRange::exactly("2.4.6"),
        ],
        continue_versions: &[
            VersionRange::exactly("1.17.5"),
            VersionRange::exactly("2.4.6"),
        ],
        package: "pypi:mini-swe-agent",
        command: "mini",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "openhands",
        pinned: "1.34.0",
        versions: &[VersionRange::exactly("1.34.0")],
        continue_versions: &[VersionRange::exactly("1.34.0")],
        package: "pypi:openhands-sdk",
        command: "openhands",
        can_replay: false,
        can_continue: false,
    },
];

pub fn lookup(agent: &str) -> Option<&'static Capability> {
    TABLE.iter().find(|c| c.agent == agent)
}

impl Capability {
    /// Whether sessions recorded by `version` can be replayed.
    pub fn accepts(&self, version: &str) -> bool {
        self.versions.iter().any(|r| r.contains(version))
    }
    /// Whether sessions of `version` can be continued, and its CLI can continue.
    pub fn continues(&self, version: &str) -> bool {
        self.continue_versions.iter().any(|r| r.contains(version))
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

fn ranges_text(r: &[VersionRange]) -> String {
    r.iter()
        .map(|r| r.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions() {
        let c = super::lookup("claude-code").unwrap();
        assert!(c.accepts("2.1.332 (Claude Code)"));
        assert!(c.accepts("2.1.220 (Claude Code)"));
        assert!(c.accepts("2.1.281"));
        assert!(!c.accepts("2.1.219"));
        assert!(!c.accepts("2.1.333"));
        assert!(!c.accepts("2.2.0"));
        assert!(!c.accepts("garbage"));
        assert_eq!(c.versions_text(), "2.1.220 to 2.1.332");
        assert!(c.continues("2.1.286") && c.continues("2.1.332") && !c.continues("2.1.284"));
        assert_eq!(c.continue_versions_text(), "2.1.286 to 2.1.332");
        assert!(super::lookup("codex").unwrap().accepts("codex-cli 0.149.0"));
        assert!(!super::lookup("codex").unwrap().accepts("codex-cli 0.148.0"));
        let m = super::lookup("mini-swe-agent").unwrap();
        assert!(m.accepts("1.17.5") && m.accepts("2.4.6") && !m.accepts("2.0.0"));
    }
}
