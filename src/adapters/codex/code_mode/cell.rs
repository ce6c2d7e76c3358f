//! One code-mode cell as Codex 0.149.0 frames it: the optional `// @exec:` pragma, and the
//! output items (`Script completed\nWall time X seconds\nOutput:\n`, the `text()`/`image()`
//! items, `Script error:\n…`). Facts: `docs/agents/codex.md` § Code mode.

use serde_json::{json, Value};
use std::time::Duration;

/// `exec`'s default yield time in 0.149.0 (its tool description: "Defaults to 30000 ms").
pub const DEFAULT_EXEC_YIELD_MS: u64 = 30_000;
/// `wait`'s default yield time.
pub const DEFAULT_WAIT_YIELD_MS: u64 = 10_000;

const PRAGMA: &str = "// @exec:";
const EMPTY: &str = "exec expects raw JavaScript source text (non-empty). Provide JS only, optionally with first-line `// @exec: {\"yield_time_ms\": 10000, \"max_output_tokens\": 1000}`.";

/// A cell's source once its pragma is taken off.
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub yield_ms: u64,
    pub max_output_tokens: Option<usize>,
    /// The JavaScript the module is compiled from (line 1 is the line after the pragma).
    pub js: String,
}

/// Parse an `exec` input. `Err` is the plain-string output Codex gives before a cell starts
/// (no header, no cell id used).
pub fn parse_source(input: &str) -> Result<Source, String> {
    if input.trim().is_empty() {
        return Err(EMPTY.into());
    }
    let (first, rest) = input.split_once('\n').unwrap_or((input, ""));
    let Some(pragma) = first.trim_start().strip_prefix(PRAGMA) else {
        return Ok(Source {
            yield_ms: DEFAULT_EXEC_YIELD_MS,
            max_output_tokens: None,
            js: input.to_string(),
        });
    };
    if rest.trim().is_empty() {
        return Err("exec pragma must be followed by JavaScript source on subsequent lines".into());
    }
    let v: Value = serde_json::from_str(pragma.trim()).map_err(|e| {
        format!("exec pragma must be valid JSON with supported fields `yield_time_ms` and `max_output_tokens`: {e}")
    })?;
    let Value::Object(m) = v else {
        return Err("exec pragma must be valid JSON with supported fields `yield_time_ms` and `max_output_tokens`: expected an object".into());
    };
    if let Some(k) = m
        .keys()
        .find(|k| *k != "yield_time_ms" && *k != "max_output_tokens")
    {
        return Err(format!(
            "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `{k}`"
        ));
    }
    let int = |k: &str| -> Result<Option<u64>, String> {
        match m.get(k) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| *n < (1u64 << 53))
                .map(Some)
                .ok_or_else(|| {
                    format!("exec pragma fields `yield_time_ms` and `max_output_tokens` must be non-negative safe integers: `{k}` is {v}")
                }),
        }
    };
    Ok(Source {
        yield_ms: int("yield_time_ms")?.unwrap_or(DEFAULT_EXEC_YIELD_MS),
        max_output_tokens: int("max_output_tokens")?.map(|n| n as usize),
        js: rest.to_string(),
    })
}

/// How a cell answered an `exec` or `wait`.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Completed,
    Failed(String),
    /// Still running after the yield time: `Script running with cell ID <id>`.
    Yielded,
    Terminated,
    /// `wait` on a cell that does not exist (or already ended and was reported).
    Missing,
}

/// The output of one `exec` / `wait` call: Codex's `output` value (a plain string when the
/// header is the only item, otherwise the item list).
pub fn output(
    cell_id: &str,
    status: &Status,
    mut items: Vec<Value>,
    wall: Duration,
    max_output_tokens: Option<usize>,
) -> Value {
    let head = match status {
        Status::Yielded => format!("Script running with cell ID {cell_id}"),
        Status::Terminated => "Script terminated".into(),
        Status::Completed => "Script completed".into(),
        Status::Failed(_) | Status::Missing => "Script failed".into(),
    };
    match status {
        Status::Failed(e) => items.push(json!({"type": "input_text", "text": format!("Script error:\n{e}")})),
        Status::Missing => items.push(json!({"type": "input_text", "text": format!("Script error:\nexec cell {cell_id} not found")})),
        _ => {}
    }
    items = truncate_items(
        items,
        max_output_tokens.unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS),
    );
    // Codex rounds the f32 seconds to one decimal and always prints one.
    let secs = ((wall.as_secs_f32()) * 10.0).round() / 10.0;
    items.insert(
        0,
        json!({"type": "input_text", "text": format!("{head}\nWall time {secs:.1} seconds\nOutput:\n")}),
    );
    if items.len() == 1 {
        return items.remove(0)["text"].clone();
    }
    Value::Array(items)
}

/// Codex's budget of an `exec`/`wait` result when none is given (its `exec` description:
/// "Defaults to 10000 tokens").
pub const DEFAULT_MAX_OUTPUT_TOKENS: usize = 10_000;

/// Codex's `truncate_code_mode_result` for text items: within the budget (4 bytes a token)
/// nothing changes; over it, the texts joined by newlines become one item, Codex's notice
/// and the middle-truncated text, followed by the images.
fn truncate_items(items: Vec<Value>, max: usize) -> Vec<Value> {
    let is_text = |it: &Value| it.get("type").and_then(Value::as_str) == Some("input_text");
    let texts: Vec<&str> = items
        .iter()
        .filter(|it| is_text(it))
        .map(|it| it["text"].as_str().unwrap_or(""))
        .collect();
    if texts.is_empty() {
        return items;
    }
    let combined = texts.join("\n");
    if combined.len() <= max.saturating_mul(4) {
        return items;
    }
    let cut = super::super::tools::truncated_block(&combined, max);
    let mut out = vec![json!({"type": "input_text", "text": cut})];
    out.extend(items.into_iter().filter(|it| !is_text(it)));
    out
}

/// The cell id a recorded output names (`Script running with cell ID <n>`).
pub fn recorded_cell_id(text: &str) -> Option<String> {
    let rest = text.split("Script running with cell ID ").nth(1)?;
    let id: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    (!id.is_empty()).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pragma_and_errors() {
        let s = parse_source("// @exec: {\"yield_time_ms\": 10000}\ntext(1)\n").unwrap();
        assert_eq!((s.yield_ms, s.js.as_str()), (10_000, "text(1)\n"));
        assert_eq!(
            parse_source("text(1)").unwrap().yield_ms,
            DEFAULT_EXEC_YIELD_MS
        );
        assert_eq!(parse_source("  \n").unwrap_err(), EMPTY);
        assert_eq!(
            parse_source("// @exec: {\"bogus\": 1}\nx").unwrap_err(),
            "exec pragma only supports `yield_time_ms` and `max_output_tokens`; got `bogus`"
        );
        assert!(parse_source("// @exec: {\"yield_time_ms\": 1}\n \n")
            .unwrap_err()
            .contains("followed by JavaScript"));
        assert!(parse_source("// @exec: {\"yield_time_ms\": -1}\nx")
            .unwrap_err()
            .contains("non-negative safe integers"));
    }

    #[test]
    fn framing_as_codex_writes_it() {
        let w = Duration::from_millis(140);
        assert_eq!(
            output("1", &Status::Completed, vec![], w, None),
            json!("Script completed\nWall time 0.1 seconds\nOutput:\n")
        );
        let items = vec![json!({"type":"input_text","text":"before"})];
        assert_eq!(
            output(
                "3",
                &Status::Failed("Error: boom\n    at exec_main.mjs:2:7".into()),
                items,
                Duration::ZERO,
                None
            ),
            json!([{"type":"input_text","text":"Script failed\nWall time 0.0 seconds\nOutput:\n"},
                   {"type":"input_text","text":"before"},
                   {"type":"input_text","text":"Script error:\nError: boom\n    at exec_main.mjs:2:7"}])
        );
        assert_eq!(
            output(
                "11",
                &Status::Yielded,
                vec![],
                Duration::from_millis(1000),
                None
            ),
            json!("Script running with cell ID 11\nWall time 1.0 seconds\nOutput:\n")
        );
        assert_eq!(
            output("999", &Status::Missing, vec![], Duration::ZERO, None)[1]["text"],
            json!("Script error:\nexec cell 999 not found")
        );
        let long = vec![json!({"type":"input_text","text":"x".repeat(2000)})];
        let t = output("1", &Status::Completed, long, Duration::ZERO, Some(10))[1]["text"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(t.starts_with("Warning: truncated output (original token count: 500)\nTotal output lines: 1\n\nxxxxxxxxxxxxxxxxxxxx…490 tokens truncated…"), "{t}");
        assert_eq!(
            recorded_cell_id("Script running with cell ID 11\nWall"),
            Some("11".into())
        );
    }
}
