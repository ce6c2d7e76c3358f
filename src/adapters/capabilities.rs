//! The per-agent capability table: pinned versions, which versions are accepted, and what
//! each adapter can do. Version decisions are made here and nowhere else.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub agent: &'static str,
    /// The version the adapter is proven against (the fixtures' version).
    pub pinned: &'static str,
    /// Version prefixes accepted (exact pinned version first).
    pub accepted: &'static [&'static str],
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
        accepted: &["2.1.332"],
        package: "npm:@anthropic-ai/claude-code",
        command: "claude",
        can_replay: true,
        can_continue: true,
    },
    Capability {
        agent: "codex",
        pinned: "0.149.0",
        accepted: &["0.149.0"],
        package: "npm:@openai/codex",
        command: "codex",
        can_replay: true,
        can_continue: true,
    },
    Capability {
        agent: "opencode",
        pinned: "1.17.11",
        accepted: &["1.17."],
        package: "npm:opencode-ai",
        command: "opencode",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "pi",
        pinned: "0.83.0",
        accepted: &["0.83.0"],
        package: "npm:@earendil-works/pi-coding-agent",
        command: "pi",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "mini-swe-agent",
        pinned: "2.4.6",
        accepted: &["2.4.", "1.17."],
        package: "pypi:mini-swe-agent",
        command: "mini",
        can_replay: false,
        can_continue: false,
    },
    Capability {
        agent: "openhands",
        pinned: "1.34.0",
        accepted: &["1.34."],
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
    /// Whether a probed or recorded version is supported.
    pub fn accepts(&self, version: &str) -> bool {
        // The first token that starts with a digit (`2.1.332 (Claude Code)`, `codex-cli 0.149.0`).
        let v = version
            .split_whitespace()
            .find(|t| t.starts_with(|c: char| c.is_ascii_digit()))
            .unwrap_or("");
        self.accepted.iter().any(|p| {
            if p.ends_with('.') {
                v.starts_with(p)
            } else {
                v == *p
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions() {
        let c = super::lookup("claude-code").unwrap();
        assert!(c.accepts("2.1.332 (Claude Code)"));
        assert!(!c.accepts("2.1.220"));
        assert!(super::lookup("opencode").unwrap().accepts("1.17.11"));
        assert!(super::lookup("codex").unwrap().accepts("codex-cli 0.149.0"));
        assert!(!super::lookup("codex").unwrap().accepts("codex-cli 0.148.0"));
    }
}
