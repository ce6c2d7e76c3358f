//! Comparing a fresh observation with the original one (per call, journaled as
//! `observation_compared`; the diff goes to the blob store).

use crate::kit::Observation;

/// How a fresh observation compares with the original.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comparison {
    /// Byte-identical text and the same error flag.
    pub equal: bool,
    /// Equal once the adapter's dynamic fields (wall times, chunk ids…) are masked.
    pub equal_masked: bool,
    /// A unified diff (original → replayed), when not equal.
    pub diff: Option<String>,
}

/// Compare `fresh` with `original`; `mask` hides the agent's dynamic fields; `interleaved`
/// says that the text is two streams merged as they arrived, so that their lines may
/// interleave in another order ([`super::interleave::two_streams`]).
pub fn compare(
    original: &Observation,
    fresh: &Observation,
    mask: impl Fn(&str) -> String,
    interleaved: bool,
) -> Comparison {
    let same_flag = original.is_error == fresh.is_error;
    let equal = original.text == fresh.text && same_flag;
    let equal_masked = equal
        || (same_flag && {
            let (a, b) = (mask(&original.text), mask(&fresh.text));
            a == b || (interleaved && super::interleave::two_streams(&a, &b))
        });
    let diff = (!equal).then(|| {
        let mut d = similar::TextDiff::from_lines(&original.text, &fresh.text)
            .unified_diff()
            .header("original", "replayed")
            .to_string();
        if !same_flag {
            d.push_str(&format!(
                "is_error: {} -> {}\n",
                original.is_error, fresh.is_error
            ));
        }
        d
    });
    Comparison {
        equal,
        equal_masked,
        diff,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t: &str, e: bool) -> Observation {
        Observation {
            text: t.into(),
            is_error: e,
            native: None,
        }
    }

    #[test]
    fn equal_masked_and_different() {
        let id = |s: &str| s.to_string();
        assert!(compare(&obs("a", false), &obs("a", false), id, false).equal);
        let c = compare(
            &obs("t=1\nx", false),
            &obs("t=2\nx", false),
            |s: &str| s.replace(['1', '2'], "N"),
            false,
        );
        assert!(!c.equal && c.equal_masked);
        assert!(c.diff.unwrap().contains("-t=1\n+t=2"));
        let c = compare(&obs("a", false), &obs("a", true), id, false);
        assert!(!c.equal && !c.equal_masked);
        assert!(c.diff.unwrap().contains("is_error: false -> true"));
    }

    #[test]
    fn two_streams_in_another_order_are_equal_only_where_declared() {
        let id = |s: &str| s.to_string();
        let (a, b) = (obs("out\nerr", true), obs("err\nout", true));
        assert!(!compare(&a, &b, id, false).equal_masked);
        let c = compare(&a, &b, id, true);
        assert!(!c.equal && c.equal_masked && c.diff.is_some());
        let reversed = obs("3\n2\n1", false);
        assert!(!compare(&obs("1\n2\n3", false), &reversed, id, true).equal_masked);
    }
}
