//! An incremental Server-Sent-Events scanner: fed the response bytes as they stream through,
//! it reports the `data:` payloads of complete events. The bridge uses it only to learn the
//! tool names of a reply and when a tool call starts; the bytes themselves pass through
//! untouched.

use serde_json::Value;

#[derive(Debug, Default)]
pub struct SseScanner {
    buf: Vec<u8>,
    data: String,
}

impl SseScanner {
    /// Feed bytes; returns the JSON payloads of the events completed by them.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<Value> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(nl) = self.buf.iter().position(|&b| b == b'\n') {
            let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
            line.pop();
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            if line.is_empty() {
                if !self.data.is_empty() {
                    if let Ok(v) = serde_json::from_str::<Value>(&self.data) {
                        out.push(v);
                    }
                    self.data.clear();
                }
                continue;
            }
            let line = String::from_utf8_lossy(&line);
            if let Some(d) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        out
    }
}

/// The tool name if `event` starts an Anthropic `tool_use` (or server tool) content block.
pub fn anthropic_tool_start(event: &Value) -> Option<String> {
    if event.get("type").and_then(Value::as_str) != Some("content_block_start") {
        return None;
    }
    let block = event.get("content_block")?;
    match block.get("type").and_then(Value::as_str) {
        Some("tool_use") | Some("server_tool_use") => Some(
            block
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        _ => None,
    }
}

/// Tool names of a non-streamed Anthropic message.
pub fn anthropic_message_tools(message: &Value) -> Vec<String> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|b| {
            matches!(
                b.get("type").and_then(Value::as_str),
                Some("tool_use") | Some("server_tool_use")
            )
        })
        .map(|b| {
            b.get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_events() {
        let mut s = SseScanner::default();
        let a = s.feed(
            b"event: content_block_start\r\ndata: {\"type\":\"content_block_start\",\"content_block\":{\"type\":\"tool_use\",\"name\":\"Ba",
        );
        assert!(a.is_empty());
        let b = s.feed(b"sh\"}}\r\n\r\nevent: ping\ndata: {\"type\":\"ping\"}\n\n");
        assert_eq!(b.len(), 2);
        assert_eq!(anthropic_tool_start(&b[0]).as_deref(), Some("Bash"));
        assert_eq!(anthropic_tool_start(&b[1]), None);
    }
}
