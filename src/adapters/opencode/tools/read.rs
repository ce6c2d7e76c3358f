//! `read {filePath, offset?, limit?}`: numbered lines (`N: text`) in `<path>/<type>/<content>`
//! framing, or a directory's entries; 2000 lines, 2000 characters a line and 50 KB at most;
//! instruction files (`AGENTS.md`…) of subdirectories come along as a `<system-reminder>`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use super::{invalid, string_param, Env, Produced};
use crate::adapters::opencode::js;
use crate::error::ExecError;
use crate::kit::ExecContext;

const TOOL: &str = "read";
const DEFAULT_LIMIT: usize = 2000;
const MAX_LINE: usize = 2000;
const MAX_BYTES: usize = 51200;
const SAMPLE: usize = 4096;
const INSTRUCTION_NAMES: [&str; 3] = ["AGENTS.md", "CLAUDE.md", "CONTEXT.md"];

/// Instruction files already shown to the model (earlier reads' `metadata.loaded`) and those
/// claimed by reads of the current model reply.
#[derive(Debug, Default, Clone)]
pub struct Instructions {
    pub loaded: HashSet<String>,
    pub claimed: HashSet<String>,
}

fn io(source: std::io::Error) -> ExecError {
    ExecError::Io {
        tool: TOOL.into(),
        source,
    }
}

pub(super) fn usize_param(input: &Value, key: &str) -> Result<Option<usize>, Produced> {
    match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_f64() {
            Some(x) if x.fract() != 0.0 => Err(invalid(
                TOOL,
                &format!(
                    "Expected an integer, got {}\n  at [\"{key}\"]",
                    js::number(n)
                ),
            )),
            Some(x) if x < 0.0 => Err(invalid(
                TOOL,
                &format!(
                    "Expected a value greater than or equal to 0, got {}\n  at [\"{key}\"]",
                    js::number(n)
                ),
            )),
            Some(x) => Ok(Some(x as usize)),
            None => Ok(None),
        },
        Some(v) => Err(invalid(
            TOOL,
            &format!(
                "Expected number, got {}\n  at [\"{key}\"]",
                js::stringify(v, 0)
            ),
        )),
    }
}

pub fn run(
    env: &Env,
    ctx: &ExecContext,
    input: &Value,
    ins: &mut Instructions,
) -> Result<Produced, ExecError> {
    let file_path = match string_param(TOOL, input, "filePath") {
        Ok(p) => p,
        Err(p) => return Ok(p),
    };
    let (offset, limit) = match (usize_param(input, "offset"), usize_param(input, "limit")) {
        (Ok(o), Ok(l)) => (
            o.filter(|&o| o > 0).unwrap_or(1),
            l.unwrap_or(DEFAULT_LIMIT),
        ),
        (Err(p), _) | (_, Err(p)) => return Ok(p),
    };
    let path = env.resolve(file_path);
    let title = env.title_of(&path);
    let Ok(meta) = std::fs::metadata(&path) else {
        return Ok(missing(&path));
    };
    let real = super::confined(ctx, &path)?;
    if meta.is_dir() {
        return directory(&path, &real, &title, offset, limit);
    }
    let sample = {
        use std::io::Read;
        let mut f = std::fs::File::open(&real).map_err(io)?;
        let mut buf = vec![0u8; SAMPLE.min(meta.len() as usize)];
        let mut n = 0;
        while n < buf.len() {
            match f.read(&mut buf[n..]).map_err(io)? {
                0 => break,
                k => n += k,
            }
        }
        buf.truncate(n);
        buf
    };
    if let Some(mime) = media_mime(&path, &sample) {
        let bytes = std::fs::read(&real).map_err(io)?;
        let text = if mime == "application/pdf" {
            "PDF read successfully"
        } else {
            "Image read successfully"
        };
        use base64::Engine;
        let mut p = Produced::ok(
            text,
            title,
            json!({"preview": text, "truncated": false, "loaded": []}),
        );
        p.metadata["attachments"] = json!([{
            "type": "file",
            "mime": mime,
            "url": format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes)),
        }]);
        return Ok(p);
    }
    if is_binary(&path, &sample) {
        return Ok(Produced::err(format!(
            "Cannot read binary file: {}",
            path.display()
        )));
    }
    let bytes = std::fs::read(&real).map_err(io)?;
    let text = String::from_utf8_lossy(&bytes);
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    let page = page(text, offset, limit);
    if page.count < offset && !(page.count == 0 && offset == 1) {
        return Ok(Produced::err(format!(
            "Offset {offset} is out of range for this file ({} lines)",
            page.count
        )));
    }
    let mut out = format!(
        "<path>{}</path>\n<type>file</type>\n<content>\n",
        path.display()
    );
    out.push_str(
        &page
            .raw
            .iter()
            .enumerate()
            .map(|(k, l)| format!("{}: {l}", k + offset))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let last = offset + page.raw.len() - 1;
    if page.cut {
        out.push_str(&format!(
            "\n\n(Output capped at 50 KB. Showing lines {offset}-{last}. Use offset={} to continue.)",
            last + 1
        ));
    } else if page.more {
        out.push_str(&format!(
            "\n\n(Showing lines {offset}-{last} of {}. Use offset={} to continue.)",
            page.count,
            last + 1
        ));
    } else {
        out.push_str(&format!("\n\n(End of file - total {} lines)", page.count));
    }
    out.push_str("\n</content>");
    let reminders = instructions(env, &path, ins);
    if !reminders.is_empty() {
        out.push_str(&format!(
            "\n\n<system-reminder>\n{}\n</system-reminder>",
            reminders
                .iter()
                .map(|(_, c)| c.as_str())
                .collect::<Vec<_>>()
                .join("\n\n")
        ));
    }
    let truncated = page.more || page.cut;
    let preview: Vec<&str> = page.raw.iter().take(20).map(String::as_str).collect();
    Ok(Produced::ok(
        out,
        title,
        json!({
            "preview": preview.join("\n"),
            "truncated": truncated,
            "loaded": reminders.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>(),
            "display": {
                "type": "file",
                "path": path.display().to_string(),
                "text": page.raw.join("\n"),
                "lineStart": offset,
                "lineEnd": last,
                "totalLines": page.count,
                "truncated": truncated,
            },
        }),
    ))
}

/// `File not found`, with up to three names of the directory that contain the base name
/// or are contained in it (case-insensitively), in directory order.
fn missing(path: &Path) -> Produced {
    let dir = path.parent().unwrap_or(Path::new("/"));
    let base = path
        .file_name()
        .map(|b| b.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let near: Vec<String> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let l = n.to_lowercase();
            (l.contains(&base) || base.contains(&l)).then(|| dir.join(&n).display().to_string())
        })
        .take(3)
        .collect();
    if near.is_empty() {
        Produced::err(format!("File not found: {}", path.display()))
    } else {
        Produced::err(format!(
            "File not found: {}\n\nDid you mean one of these?\n{}",
            path.display(),
            near.join("\n")
        ))
    }
}

fn directory(
    path: &Path,
    real: &Path,
    title: &str,
    offset: usize,
    limit: usize,
) -> Result<Produced, ExecError> {
    let mut entries: Vec<String> = std::fs::read_dir(real)
        .map_err(io)?
        .flatten()
        .map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let dir = match e.file_type() {
                Ok(t) if t.is_dir() => true,
                Ok(t) if t.is_symlink() => std::fs::metadata(e.path()).is_ok_and(|m| m.is_dir()),
                _ => false,
            };
            if dir {
                format!("{n}/")
            } else {
                n
            }
        })
        .collect();
    entries.sort_by(|a, b| super::super::collate::compare(a, b));
    let start = offset - 1;
    let shown: Vec<String> = entries.iter().skip(start).take(limit).cloned().collect();
    let more = start + shown.len() < entries.len();
    let tail = if more {
        format!(
            "\n(Showing {} of {} entries. Use 'offset' parameter to read beyond entry {})",
            shown.len(),
            entries.len(),
            offset + shown.len()
        )
    } else {
        format!("\n({} entries)", entries.len())
    };
    let out = [
        format!("<path>{}</path>", path.display()),
        "<type>directory</type>".into(),
        "<entries>".into(),
        shown.join("\n"),
        tail,
        "</entries>".into(),
    ]
    .join("\n");
    Ok(Produced::ok(
        out,
        title,
        json!({
            "preview": shown.iter().take(20).cloned().collect::<Vec<_>>().join("\n"),
            "truncated": more,
            "loaded": [],
            "display": {"type": "directory", "path": path.display().to_string(), "entries": shown,
                        "offset": offset, "totalEntries": entries.len(), "truncated": more},
        }),
    ))
}

/// The image/PDF MIME of a file OpenCode attaches instead of reading.
fn media_mime(path: &Path, sample: &[u8]) -> Option<&'static str> {
    let sniffed = if sample.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if sample.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if sample.starts_with(b"GIF87a") || sample.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if sample.starts_with(b"%PDF-") {
        Some("application/pdf")
    } else if sample.len() >= 12 && &sample[..4] == b"RIFF" && &sample[8..12] == b"WEBP" {
        Some("image/webp")
    } else if sample.starts_with(b"BM") {
        Some("image/bmp")
    } else {
        None
    };
    let by_ext = match path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .as_deref()
    {
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("webp") => Some("image/webp"),
        Some("pdf") => Some("application/pdf"),
        _ => None,
    };
    sniffed.or(by_ext).filter(|m| {
        matches!(
            *m,
            "image/png" | "image/jpeg" | "image/gif" | "image/webp" | "application/pdf"
        )
    })
}

const BINARY_EXT: &[&str] = &[
    "zip", "tar", "gz", "exe", "dll", "so", "class", "jar", "war", "7z", "doc", "docx", "xls",
    "xlsx", "ppt", "pptx", "odt", "ods", "odp", "bin", "dat", "obj", "o", "a", "lib", "wasm",
    "pyc", "pyo",
];

fn is_binary(path: &Path, sample: &[u8]) -> bool {
    if let Some(e) = path.extension() {
        if BINARY_EXT.contains(&e.to_string_lossy().to_lowercase().as_str()) {
            return true;
        }
    }
    if sample.is_empty() {
        return false;
    }
    if sample.contains(&0) {
        return true;
    }
    let odd = sample
        .iter()
        .filter(|&&b| b < 9 || (b > 13 && b < 32))
        .count();
    odd as f64 / sample.len() as f64 > 0.3
}

struct Page {
    raw: Vec<String>,
    count: usize,
    cut: bool,
    more: bool,
}

/// Lines split on `\n`, `\r\n` and a lone `\r`; a final terminator ends the last line.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = text.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'\n' => {
                out.push(&text[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                out.push(&text[start..i]);
                i += if b.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                start = i;
            }
            _ => i += 1,
        }
    }
    if start < b.len() {
        out.push(&text[start..]);
    }
    out
}

fn page(text: &str, offset: usize, limit: usize) -> Page {
    let skip = offset - 1;
    let mut p = Page {
        raw: Vec::new(),
        count: 0,
        cut: false,
        more: false,
    };
    let mut bytes = 0usize;
    for line in split_lines(text) {
        p.count += 1;
        if p.count <= skip {
            continue;
        }
        if p.raw.len() >= limit {
            p.more = true;
            continue;
        }
        let shown = if js::len16(line) > MAX_LINE {
            format!(
                "{}... (line truncated to {MAX_LINE} chars)",
                js::prefix16(line, MAX_LINE)
            )
        } else {
            line.to_string()
        };
        let cost = shown.len() + usize::from(!p.raw.is_empty());
        if bytes + cost <= MAX_BYTES {
            p.raw.push(shown);
            bytes += cost;
            continue;
        }
        p.cut = true;
        p.more = true;
        break;
    }
    p
}

/// `Instruction.resolve`: instruction files of the directories between the file and the
/// instance directory that the model has not seen yet.
fn instructions(env: &Env, file: &Path, ins: &mut Instructions) -> Vec<(String, String)> {
    let system = system_instructions(env);
    let root = env.directory.display().to_string();
    let file_s = file.display().to_string();
    let mut out = Vec::new();
    let mut dir: PathBuf = file.parent().map(Path::to_path_buf).unwrap_or_default();
    loop {
        let d = dir.display().to_string();
        if !d.starts_with(&root) || d == root {
            break;
        }
        if let Some(found) = INSTRUCTION_NAMES
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.exists())
        {
            let f = found.display().to_string();
            if f != file_s
                && !system.contains(&f)
                && !ins.loaded.contains(&f)
                && ins.claimed.insert(f.clone())
            {
                let content = std::fs::read_to_string(&found).unwrap_or_default();
                if !content.is_empty() {
                    out.push((f.clone(), format!("Instructions from: {f}\n{content}")));
                }
            }
        }
        match dir.parent() {
            Some(p) => dir = p.to_path_buf(),
            None => break,
        }
    }
    ins.loaded.extend(out.iter().map(|(p, _)| p.clone()));
    out
}

/// The instruction files of the system prompt: the first of the global ones, then the
/// first name found walking up from the directory to the worktree (every file of it).
fn system_instructions(env: &Env) -> HashSet<String> {
    let mut s = HashSet::new();
    for g in [
        env.home.join(".config/opencode/AGENTS.md"),
        env.home.join(".claude/CLAUDE.md"),
    ] {
        if g.exists() {
            s.insert(g.display().to_string());
            break;
        }
    }
    for name in INSTRUCTION_NAMES {
        let mut found = Vec::new();
        let mut d = Some(env.directory.as_path());
        while let Some(x) = d {
            if x.join(name).exists() {
                found.push(x.join(name).display().to_string());
            }
            if x == env.worktree {
                break;
            }
            d = x.parent();
        }
        if !found.is_empty() {
            s.extend(found);
            break;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_like_effect_stream() {
        assert_eq!(split_lines("a\rb\nc\n\n"), ["a", "b", "c", ""]);
        assert_eq!(split_lines("x"), ["x"]);
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(
            split_lines("crlf one\r\ncrlf two\r\n"),
            ["crlf one", "crlf two"]
        );
    }

    #[test]
    fn pages_stop_at_the_byte_cap() {
        let text: String = (0..1500).map(|_| format!("{}\n", "y".repeat(49))).collect();
        let p = page(&text, 1, 2000);
        assert!(p.cut);
        assert_eq!(p.raw.len(), 1024);
        let p = page("1\n2\n3\n", 2, 1);
        assert_eq!((p.raw.len(), p.count, p.more), (1, 3, true));
    }
}
