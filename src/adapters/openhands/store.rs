//! The conversation store as one canonical byte form: line 1 is `base_state.json`, then one
//! line per event file in index order (`event-00000-<id>.json`, `event-00001-…`), each the
//! file's own bytes (the SDK writes compact one-line JSON; a file with line breaks is
//! written compactly). The SDK reads events by index and stops at the first gap: so does
//! this. The path may name the conversation folder or a persistence folder holding exactly
//! one conversation. A file (such a bundle written before) is read as it is.

use std::path::{Path, PathBuf};

/// The file name of event `idx` with id `id`, as the SDK writes it.
pub fn event_file_name(idx: usize, id: &str) -> String {
    format!("event-{idx:05}-{id}.json")
}

/// `(index, file)` of an event file name (`^event-(\d{5,})-([0-9a-fA-F-]{8,})\.json$`).
pub fn event_index(name: &str) -> Option<usize> {
    let rest = name.strip_prefix("event-")?.strip_suffix(".json")?;
    let (idx, id) = rest.split_once('-')?;
    let ok = idx.len() >= 5
        && idx.bytes().all(|b| b.is_ascii_digit())
        && id.len() >= 8
        && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
    ok.then(|| idx.parse::<usize>().ok()).flatten()
}

/// The conversation folder `path` names (itself, or its only child holding a store).
pub fn conversation_dir(path: &Path) -> std::io::Result<PathBuf> {
    if path.join("base_state.json").is_file() {
        return Ok(path.to_path_buf());
    }
    let children: Vec<PathBuf> = std::fs::read_dir(path)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("base_state.json").is_file())
        .collect();
    match children.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(std::io::Error::other(format!(
            "{} holds no OpenHands conversation (no base_state.json)",
            path.display()
        ))),
        _ => Err(std::io::Error::other(format!(
            "{} holds {} conversations: name one of them",
            path.display(),
            children.len()
        ))),
    }
}

/// The event files of a conversation folder in index order, up to the first gap.
pub fn event_files(conv: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<(usize, PathBuf)> = std::fs::read_dir(conv.join("events"))?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            event_index(&name).map(|i| (i, e.path()))
        })
        .collect();
    files.sort();
    let mut out = vec![];
    for (k, (i, p)) in files.into_iter().enumerate() {
        if i != k {
            break; // the SDK stops at the first gap (a duplicate index keeps the first)
        }
        out.push(p);
    }
    Ok(out)
}

fn one_line(bytes: Vec<u8>) -> Vec<u8> {
    if !bytes.contains(&b'\n') {
        return bytes;
    }
    match serde_json::from_slice::<serde_json::Value>(&bytes) {
        Ok(v) => serde_json::to_vec(&v).unwrap_or(bytes),
        Err(_) => bytes,
    }
}

/// The canonical bytes of the store at `path` (or the file `path`).
pub fn read(path: &Path) -> std::io::Result<Vec<u8>> {
    if !path.is_dir() {
        return std::fs::read(path);
    }
    let conv = conversation_dir(path)?;
    let mut out = one_line(std::fs::read(conv.join("base_state.json"))?);
    out.push(b'\n');
    for f in event_files(&conv)? {
        out.extend(one_line(std::fs::read(f)?));
        out.push(b'\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_and_the_canonical_form() {
        assert_eq!(event_index("event-00012-a6f2c3bd-6c58-43f8.json"), Some(12));
        assert_eq!(event_index(".eventlog.lock"), None);
        assert_eq!(event_index("event-0001-a6f2c3bd.json"), None);
        assert_eq!(event_file_name(3, "ab-cd"), "event-00003-ab-cd.json");
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/openhands/genuine/native-run1");
        let bundle = read(&root).unwrap();
        let lines: Vec<&[u8]> = bundle
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        assert_eq!(lines.len(), 1 + 14);
        let conv = conversation_dir(&root).unwrap();
        assert_eq!(
            lines[0],
            &std::fs::read(conv.join("base_state.json")).unwrap()[..]
        );
        let files = event_files(&conv).unwrap();
        assert_eq!(lines[14], &std::fs::read(&files[13]).unwrap()[..]);
        // A gap ends the events, as in the SDK.
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("events")).unwrap();
        std::fs::copy(
            conv.join("base_state.json"),
            d.path().join("base_state.json"),
        )
        .unwrap();
        for f in &files {
            std::fs::copy(f, d.path().join("events").join(f.file_name().unwrap())).unwrap();
        }
        std::fs::remove_file(d.path().join("events").join(files[5].file_name().unwrap())).unwrap();
        assert_eq!(event_files(d.path()).unwrap().len(), 5);
    }
}
