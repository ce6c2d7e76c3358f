//! The capability table: what each mini-swe-agent version writes and how its runner drives
//! it. Every version-dependent choice of the adapter is read from here, never from scattered
//! version checks.

use crate::kit::registry::VersionRange;

/// The two trajectory formats in the wild.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// 1.x: `"mini-swe-agent-1"`: one fenced action per assistant reply, observations (and
    /// format errors, timeouts, the submission) as `user` messages, a `timestamp` on every
    /// message; only `role` and `content` reach the model; no tools offered.
    V1,
    /// 2.x: `"mini-swe-agent-1.1"`: the `bash` tool, several calls per reply, one `tool`
    /// message per call (JSON observation), format errors as `user` messages, a final `exit`
    /// message; messages reach the model without `extra` and without null fields.
    V1_1,
}

impl Format {
    /// The `trajectory_format` value.
    pub fn name(self) -> &'static str {
        match self {
            Format::V1 => "mini-swe-agent-1",
            Format::V1_1 => "mini-swe-agent-1.1",
        }
    }

    pub fn from_name(s: &str) -> Option<Format> {
        [Format::V1, Format::V1_1]
            .into_iter()
            .find(|f| f.name() == s)
    }
}

/// One proven version and what it writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capability {
    pub versions: VersionRange,
    pub format: Format,
}

/// The table: each row proven with sessions written by the real CLI (tests/fixtures/mini-swe-agent).
pub const TABLE: &[Capability] = &[
    Capability {
        versions: VersionRange::exactly("1.17.5"),
        format: Format::V1,
    },
    Capability {
        versions: VersionRange::exactly("2.4.6"),
        format: Format::V1_1,
    },
];

/// The proven versions (replay and continue), as the registry lists them.
pub const PROVEN: &[VersionRange] = &[
    VersionRange::exactly("1.17.5"),
    VersionRange::exactly("2.4.6"),
];

/// The row of `version`, if proven.
pub fn capability(version: &str) -> Option<&'static Capability> {
    TABLE.iter().find(|c| c.versions.contains(version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_covers_the_registry_and_formats_match_majors() {
        for r in PROVEN {
            let c = capability(r.low).expect("every proven version has a row");
            let major = crate::kit::registry::numbers(r.low).unwrap()[0];
            assert_eq!(c.format == Format::V1, major < 2, "{r}");
        }
        assert!(capability("2.4.5").is_none());
        assert_eq!(Format::from_name("mini-swe-agent-1.1"), Some(Format::V1_1));
        assert_eq!(Format::from_name("mini-swe-agent-2"), None);
    }
}
