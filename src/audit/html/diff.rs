//! The character diff of a recorded and a regenerated observation: changed lines, with the
//! changed characters inside them marked (`similar`'s inline changes over a line diff, so a
//! long observation costs a line diff plus small character diffs, not one huge one).

use std::time::Duration;

use similar::{ChangeTag, TextDiff};

use super::page::esc;

/// Above this (bytes of either side) only the line diff is shown, without character marks.
const CHAR_DIFF_BYTES: usize = 512 * 1024;

/// The diff as HTML (`<pre class="diff">`). `dynamic`: the run found the two equal once its
/// declared dynamic fields were masked, so every difference is one of those fields: marked
/// `dyn` rather than as a change. Unchanged runs of more than 6 lines are folded.
pub fn render(recorded: &str, regenerated: &str, dynamic: bool) -> String {
    let diff = TextDiff::configure()
        .timeout(Duration::from_millis(500))
        .diff_lines(recorded, regenerated);
    let inline = recorded.len().max(regenerated.len()) <= CHAR_DIFF_BYTES;
    let (del, ins) = if dynamic {
        ("<span class=\"dyn\">", "<span class=\"dyn\">")
    } else {
        ("<del>", "<ins>")
    };
    let (del_end, ins_end) = if dynamic {
        ("</span>", "</span>")
    } else {
        ("</del>", "</ins>")
    };
    let mut out = String::from("<pre class=\"diff\">");
    for (gi, group) in diff.grouped_ops(3).iter().enumerate() {
        if gi > 0 {
            out.push_str("<span class=\"mut\">⋯</span>\n");
        }
        for op in group {
            for change in diff.iter_inline_changes(op) {
                let (sign, class, open, close) = match change.tag() {
                    ChangeTag::Equal => (' ', "", "", ""),
                    ChangeTag::Delete => ('-', "line-del", del, del_end),
                    ChangeTag::Insert => ('+', "line-ins", ins, ins_end),
                };
                if class.is_empty() {
                    out.push(sign);
                } else {
                    out.push_str(&format!("<span class=\"{class}\">{sign}"));
                }
                for (emph, s) in change.iter_strings_lossy() {
                    let s = s.strip_suffix('\n').unwrap_or(&s).to_string();
                    if emph && inline && !class.is_empty() {
                        out.push_str(open);
                        out.push_str(&esc(&s));
                        out.push_str(close);
                    } else {
                        out.push_str(&esc(&s));
                    }
                }
                if !class.is_empty() {
                    out.push_str("</span>");
                }
                out.push('\n');
                if change.missing_newline() {
                    out.push_str("<span class=\"mut\">\\ no newline at end</span>\n");
                }
            }
        }
    }
    out.push_str("</pre>");
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn changed_characters_are_marked_inside_changed_lines() {
        let h = super::render(
            "total 8\nold line\nsame\n",
            "total 12\nnew line\nsame\n",
            false,
        );
        assert!(
            h.contains("<span class=\"line-del\">-total <del>8</del></span>"),
            "{h}"
        );
        assert!(
            h.contains("<span class=\"line-ins\">+total <ins>12</ins></span>"),
            "{h}"
        );
        assert!(h.contains(" same\n"));
    }

    #[test]
    fn dynamic_differences_are_marked_as_such() {
        let h = super::render("took 12ms\n", "took 9ms\n", true);
        assert!(h.contains("class=\"dyn\"") && !h.contains("<del>"), "{h}");
    }

    #[test]
    fn text_is_escaped() {
        let h = super::render("<a>\n", "<b>\n", false);
        assert!(h.contains("&lt;") && !h.contains("<a>"));
    }
}
