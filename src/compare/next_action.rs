//! `next-action-comparison.json`: A(N+1) (the original's next model reply) vs A′(N+1) (the
//! continuation's first live reply). Replay does not promise they are equal; it measures how
//! they differ. With a boundary prompt injected the comparison is observational only: the
//! inputs differed by design.

use serde::{Deserialize, Serialize};

/// One model reply reduced to what is compared.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Action {
    pub text: String,
    pub reasoning: String,
    /// (tool name, arguments) in order.
    pub tools: Vec<(String, serde_json::Value)>,
}

pub const SCHEMA: &str = "pvisor.next-action-comparison/v1";

/// Similarity of two texts in [0, 1] (character-level diff ratio); 1 when both are empty.
pub fn similarity(a: &str, b: &str) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    similar::TextDiff::from_chars(a, b).ratio() as f64
}

pub fn compare(
    original: Option<&Action>,
    live: Option<&Action>,
    boundary_prompt_injected: bool,
) -> serde_json::Value {
    let input_condition = if boundary_prompt_injected {
        "boundary_user_prompt_appended"
    } else {
        "replayed_boundary_only"
    };
    let (Some(o), Some(l)) = (original, live) else {
        return serde_json::json!({
            "schema_version": SCHEMA,
            "input_condition": input_condition,
            "observational_only": boundary_prompt_injected,
            "comparable": false,
            "original_present": original.is_some(),
            "live_present": live.is_some(),
        });
    };
    let names = |a: &Action| a.tools.iter().map(|t| t.0.clone()).collect::<Vec<_>>();
    let per_tool: Vec<serde_json::Value> = o
        .tools
        .iter()
        .zip(l.tools.iter())
        .map(|(a, b)| serde_json::json!({ "original": a.0, "live": b.0, "name_equal": a.0 == b.0, "arguments_equal": crate::digest::canonical_json(&a.1) == crate::digest::canonical_json(&b.1) }))
        .collect();
    serde_json::json!({
        "schema_version": SCHEMA,
        "input_condition": input_condition,
        "observational_only": boundary_prompt_injected,
        "comparable": true,
        "text_similarity": similarity(&o.text, &l.text),
        "reasoning_similarity": similarity(&o.reasoning, &l.reasoning),
        "tool_count": { "original": o.tools.len(), "live": l.tools.len(), "equal": o.tools.len() == l.tools.len() },
        "tool_names_equal": names(o) == names(l),
        "tool_arguments_equal": o.tools.len() == l.tools.len() && per_tool.iter().all(|t| t["arguments_equal"] == true),
        "tools": per_tool,
        "original": o,
        "live": l,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn identical_and_different_actions() {
        let a = Action {
            text: "I'll edit the file.".into(),
            reasoning: String::new(),
            tools: vec![("Edit".into(), serde_json::json!({"a":1,"b":2}))],
        };
        let mut b = a.clone();
        b.tools[0].1 = serde_json::json!({"b":2,"a":1});
        let v = compare(Some(&a), Some(&b), false);
        assert_eq!(v["text_similarity"], 1.0);
        assert_eq!(v["tool_arguments_equal"], true);
        b.tools.push(("Bash".into(), serde_json::json!({})));
        b.text = "Let me run the tests.".into();
        let v = compare(Some(&a), Some(&b), true);
        assert_eq!(v["tool_count"]["equal"], false);
        assert_eq!(v["observational_only"], true);
        assert!(v["text_similarity"].as_f64().unwrap() < 0.7);
        assert_eq!(compare(None, Some(&b), false)["comparable"], false);
    }
}
