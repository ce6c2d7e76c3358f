//! NotebookEdit (`I7e` in `chunk-bqhgd24a.js`: `validateInput`, `call`, `NUn`, and its
//! `mapToolResultToToolResultBlockParam`).
//!
//! Texts: `Updated cell <cell_id> with <new_source>`, `Inserted cell <id> with <new_source>`
//! (`Inserted a new cell with …` for notebooks without cell ids), `Deleted cell <cell_id>`.
//!
//! Refusals (`<tool_use_error>`): not a `.ipynb` path, `insert` without `cell_type`, the
//! notebook not read first (always enforced for notebooks), modified since read, missing
//! notebook, invalid JSON or cells, unknown cell id / index.
//!
//! The notebook is written back as `JSON.stringify(nb, null, 1)` (plus the original final
//! newline). Inserting into an nbformat ≥ 4.5 notebook gives the new cell a random id that
//! is part of the result text: refused as not reproducible.

use super::write::{normalize, read_existing, write_text, MODIFIED_SINCE_READ, NOT_READ_YET};
use super::{io_error, mtime_ms, opt_str, req_str, Cx, FileReadState, Output};
use crate::error::ExecError;
use serde::Serialize;
use serde_json::{Map, Value};

const TOOL: &str = "NotebookEdit";
const INVALID: &str =
    "Notebook file is not a valid Jupyter notebook (top-level \"cells\" must be an array of cell objects, each with a string or string-array \"source\").";

fn valid_cells(nb: &Value) -> bool {
    nb.get("cells")
        .and_then(Value::as_array)
        .is_some_and(|cells| {
            cells.iter().all(|c| {
                c.is_object()
                    && match c.get("source") {
                        Some(Value::String(_)) => true,
                        Some(Value::Array(a)) => a.iter().all(Value::is_string),
                        _ => false,
                    }
            })
        })
}

/// `NUn`: the index to act on, or the refusal.
fn cell_index(cells: &[Value], cell_id: Option<&str>, insert: bool) -> Result<usize, String> {
    let Some(id) = cell_id else {
        return if insert {
            Ok(0)
        } else {
            Err("Cell ID must be specified when not inserting a new cell.".into())
        };
    };
    let idx = match cells
        .iter()
        .position(|c| c.get("id").and_then(Value::as_str) == Some(id))
    {
        Some(i) => i,
        None => {
            let Some(n) = id
                .strip_prefix("cell-")
                .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit()))
            else {
                return Err(format!("Cell with ID \"{id}\" not found in notebook."));
            };
            let i: usize = n
                .parse()
                .map_err(|_| format!("Cell with ID \"{id}\" not found in notebook."))?;
            if i >= cells.len() {
                return Err(format!("Cell with index {i} does not exist in notebook."));
            }
            i
        }
    };
    Ok(if insert { idx + 1 } else { idx })
}

/// `JSON.stringify(v, null, 1)`.
fn stringify_1(v: &Value) -> String {
    let mut buf = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
    let _ = v.serialize(&mut ser);
    String::from_utf8(buf).unwrap_or_default()
}

pub(crate) fn run(input: &Value, cx: &mut Cx<'_>) -> Result<Output, ExecError> {
    let notebook_path = req_str(TOOL, input, "notebook_path")?;
    let new_source = req_str(TOOL, input, "new_source")?;
    let cell_id = opt_str(TOOL, input, "cell_id")?;
    let cell_type = opt_str(TOOL, input, "cell_type")?;
    let edit_mode = opt_str(TOOL, input, "edit_mode")?.unwrap_or("replace");
    if !matches!(edit_mode, "replace" | "insert" | "delete") {
        return Err(super::bad_input(
            TOOL,
            format!("unknown edit_mode {edit_mode:?}"),
        ));
    }
    if let Some(out) = super::null_byte_check(TOOL, &[("notebook_path", Some(notebook_path))]) {
        return Ok(out);
    }
    let path = cx.confine_write(notebook_path)?;
    if path.extension().and_then(|e| e.to_str()) != Some("ipynb") {
        return Ok(Output::validation(
            "File must be a Jupyter notebook (.ipynb file). For editing other file types, use the FileEdit tool.",
        ));
    }
    if edit_mode == "insert" && cell_type.is_none() {
        return Ok(Output::validation(
            "Cell type is required when using edit_mode=insert.",
        ));
    }
    let Some(last) = cx.state.read_files.get(&path).cloned() else {
        return Ok(Output::validation(NOT_READ_YET));
    };
    match mtime_ms(&path) {
        Ok(t) if t > last.timestamp => return Ok(Output::validation(MODIFIED_SINCE_READ)),
        Ok(_) => {}
        Err(_) => return Ok(Output::validation("Notebook file does not exist.")),
    }
    let Some(existing) = read_existing(&path).map_err(|e| io_error(TOOL, e))? else {
        return Ok(Output::validation("Notebook file does not exist."));
    };
    if let Some(nt) = existing.not_text {
        return Ok(Output::validation(nt.write_refusal()));
    }
    let body = existing
        .raw
        .strip_prefix('\u{feff}')
        .unwrap_or(&existing.raw);
    let Ok(mut nb) = serde_json::from_str::<Value>(body) else {
        return Ok(Output::validation("Notebook is not valid JSON."));
    };
    if !valid_cells(&nb) {
        return Ok(Output::validation(INVALID));
    }
    let insert = edit_mode == "insert";
    let idx = {
        let cells = nb
            .get("cells")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        match cell_index(cells, cell_id, insert) {
            Ok(i) => i,
            Err(m) => return Ok(Output::validation(m)),
        }
    };
    let nbformat = nb.get("nbformat").and_then(Value::as_i64).unwrap_or(0);
    let minor = nb
        .get("nbformat_minor")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if insert && (nbformat > 4 || (nbformat == 4 && minor >= 5)) {
        return Err(ExecError::Unsupported {
            tool: TOOL.into(),
            reason: "inserting a cell gives it a random id that appears in the result".into(),
        });
    }
    let Some(cells) = nb.get_mut("cells").and_then(Value::as_array_mut) else {
        return Ok(Output::validation(INVALID));
    };
    match edit_mode {
        "delete" => {
            cells.remove(idx);
        }
        "insert" => {
            let mut c = Map::new();
            if cell_type == Some("markdown") {
                c.insert("cell_type".into(), "markdown".into());
                c.insert("source".into(), new_source.into());
                c.insert("metadata".into(), Value::Object(Map::new()));
            } else {
                c.insert("cell_type".into(), "code".into());
                c.insert("source".into(), new_source.into());
                c.insert("metadata".into(), Value::Object(Map::new()));
                c.insert("execution_count".into(), Value::Null);
                c.insert("outputs".into(), Value::Array(Vec::new()));
            }
            cells.insert(idx.min(cells.len()), Value::Object(c));
        }
        _ => {
            let Some(cell) = cells.get_mut(idx).and_then(Value::as_object_mut) else {
                return Ok(Output::validation(INVALID));
            };
            let has_attachments = cell
                .get("attachments")
                .is_some_and(|a| a.as_object().is_some_and(|o| !o.is_empty()));
            if cell_type == Some("code")
                && cell.get("cell_type").and_then(Value::as_str) != Some("code")
                && has_attachments
            {
                return Ok(Output::thrown("The notebook was not changed: this cell has attachments (such as pasted images), and a code cell cannot hold attachments. To add code after this cell, use edit_mode=insert with cell_type=code and the same cell_id. To edit this cell's text, leave out cell_type and keep any `attachment:` links in new_source. Deleting this cell loses the attachments, so do that only if the user agrees."));
            }
            cell.insert("source".into(), new_source.into());
            if let Some(t) = cell_type {
                cell.insert("cell_type".into(), t.into());
            }
            match cell.get("cell_type").and_then(Value::as_str) {
                Some("code") => {
                    cell.insert("execution_count".into(), Value::Null);
                    cell.insert("outputs".into(), Value::Array(Vec::new()));
                    if !has_attachments {
                        cell.remove("attachments");
                    }
                }
                Some("markdown") | Some("raw") => {
                    cell.remove("execution_count");
                    cell.remove("outputs");
                }
                _ => {}
            }
        }
    }
    let bom = if existing.raw.starts_with('\u{feff}') {
        "\u{feff}"
    } else {
        ""
    };
    let nl = if existing.raw.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    let text = format!("{bom}{}{nl}", stringify_1(&nb));
    let ts = write_text(&path, &text, existing.encoding, existing.crlf)
        .map_err(|e| io_error(TOOL, e))?;
    let seen = last.in_context() && last.content == normalize(&existing.raw);
    cx.state.remember(
        path.clone(),
        FileReadState {
            content: normalize(&text),
            timestamp: ts,
            offset: None,
            limit: None,
            is_partial_view: false,
            content_not_in_model_context: !seen,
        },
    );
    let msg = match edit_mode {
        "delete" => format!("Deleted cell {}", cell_id.unwrap_or("undefined")),
        "insert" => format!("Inserted a new cell with {new_source}"),
        _ => format!(
            "Updated cell {} with {new_source}",
            cell_id.unwrap_or("undefined")
        ),
    };
    let mut out = Output::ok(msg);
    out.touched.push(cx.relative(&path));
    Ok(out)
}
