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
        // Complete lines are read in place and dropped from the buffer once, at the end.
        let mut start = 0;
        while let Some(nl) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let mut line = &self.buf[start..start + nl];
            start += nl + 1;
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
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
            if let Some(d) = line.strip_prefix(b"data:") {
                let d = String::from_utf8_lossy(d.strip_prefix(b" ").unwrap_or(d));
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(&d);
            }
        }
        self.buf.drain(..start);
        out
    }
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
        assert_eq!(
            crate::protocol::anthropic::tool_start(&b[0]).as_deref(),
            Some("Bash")
        );
        assert_eq!(crate::protocol::anthropic::tool_start(&b[1]), None);
    }
}
