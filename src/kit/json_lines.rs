//! The line of a field inside one (pretty-printed) JSON document, for errors that name the
//! line and the field of a trajectory stored as a single JSON value (`opencode export`,
//! trajectory files). serde_json keeps no positions, so this walks the text once more along
//! the field's path.
//!
//! A field is written as the errors write it: `messages[3].parts[2].state.input`.

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

fn steps(field: &str) -> Vec<Step> {
    let mut out = Vec::new();
    for piece in field.split('.') {
        let (key, mut rest) = match piece.find('[') {
            Some(i) => (&piece[..i], &piece[i..]),
            None => (piece, ""),
        };
        if !key.is_empty() {
            out.push(Step::Key(key.to_string()));
        }
        while let Some(stripped) = rest.strip_prefix('[') {
            let Some(end) = stripped.find(']') else { break };
            match stripped[..end].parse() {
                Ok(n) => out.push(Step::Index(n)),
                Err(_) => return out,
            }
            rest = &stripped[end + 1..];
        }
    }
    out
}

struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn ws(&mut self) {
        while self.i < self.b.len() && matches!(self.b[self.i], b' ' | b'\t' | b'\n' | b'\r') {
            self.i += 1;
        }
    }
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    /// A string at the cursor (cursor on its opening quote); its raw bytes, unescaped only
    /// enough to compare keys (`\"` and `\\`).
    fn string(&mut self) -> Option<String> {
        if self.peek()? != b'"' {
            return None;
        }
        self.i += 1;
        let mut s = Vec::new();
        while let Some(c) = self.peek() {
            self.i += 1;
            match c {
                b'"' => return Some(String::from_utf8_lossy(&s).into_owned()),
                b'\\' => {
                    let e = self.peek()?;
                    self.i += 1;
                    s.push(if e == b'"' || e == b'\\' { e } else { b'?' });
                }
                _ => s.push(c),
            }
        }
        None
    }
    /// Skips one value (cursor on its first byte).
    fn skip(&mut self, depth: usize) -> Option<()> {
        if depth > 512 {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' | b'[' => {
                let close = if self.peek()? == b'{' { b'}' } else { b']' };
                self.i += 1;
                loop {
                    self.ws();
                    match self.peek()? {
                        c if c == close => {
                            self.i += 1;
                            return Some(());
                        }
                        b',' | b':' => self.i += 1,
                        _ => self.skip(depth + 1)?,
                    }
                }
            }
            _ => {
                while let Some(c) = self.peek() {
                    if matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                        break;
                    }
                    self.i += 1;
                }
                Some(())
            }
        }
    }
    fn line(&self, at: usize) -> usize {
        self.b[..at.min(self.b.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
            + 1
    }
}

/// The 1-based line where `field` is written in `text`: the line of its key (of its first
/// byte for an array element). When the field itself is absent, the line of the deepest
/// value on its path that exists. `None` when not even the first step exists.
pub fn line_of_field(text: &str, field: &str) -> Option<usize> {
    let mut c = Cursor {
        b: text.as_bytes(),
        i: 0,
    };
    let mut found = None;
    c.ws();
    for step in steps(field) {
        c.ws();
        match (step, c.peek()?) {
            (Step::Key(k), b'{') => {
                c.i += 1;
                loop {
                    c.ws();
                    if c.peek()? == b'}' {
                        return found;
                    }
                    let at = c.i;
                    let key = c.string()?;
                    c.ws();
                    if c.peek()? != b':' {
                        return found;
                    }
                    c.i += 1;
                    c.ws();
                    if key == k {
                        found = Some(c.line(at));
                        break;
                    }
                    c.skip(0)?;
                    c.ws();
                    if c.peek()? == b',' {
                        c.i += 1;
                    }
                }
            }
            (Step::Index(n), b'[') => {
                c.i += 1;
                let mut k = 0;
                loop {
                    c.ws();
                    if c.peek()? == b']' {
                        return found;
                    }
                    if k == n {
                        found = Some(c.line(c.i));
                        break;
                    }
                    c.skip(0)?;
                    c.ws();
                    if c.peek()? == b',' {
                        c.i += 1;
                    }
                    k += 1;
                }
            }
            _ => return found,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "{\n  \"info\": {\"id\": \"s\"},\n  \"messages\": [\n    {\n      \"info\": {\"id\": \"m\"},\n      \"parts\": [\n        {\"type\": \"text\"},\n        {\n          \"type\": \"tool\",\n          \"say \\\"x\\\"\": [1, {\"a\": \"]}\"}],\n          \"callID\": 7\n        }\n      ]\n    }\n  ]\n}\n";

    #[test]
    fn finds_keys_and_elements_by_path() {
        assert_eq!(line_of_field(DOC, "info.id"), Some(2));
        assert_eq!(line_of_field(DOC, "messages[0].parts[1].callID"), Some(11));
        assert_eq!(line_of_field(DOC, "messages[0].parts[1]"), Some(8));
        assert_eq!(line_of_field(DOC, "messages[0].parts[0].type"), Some(7));
        // Absent: the deepest existing value on the path.
        assert_eq!(
            line_of_field(DOC, "messages[0].parts[1].state.input"),
            Some(8)
        );
        assert_eq!(line_of_field(DOC, "messages[4]"), Some(3));
        assert_eq!(line_of_field(DOC, "nothing"), None);
    }

    #[test]
    fn never_panics_on_broken_text() {
        for cut in 0..DOC.len() {
            let _ = line_of_field(&DOC[..cut], "messages[0].parts[1].callID");
        }
        let _ = line_of_field("[[[[", "a[0][0]");
        let _ = line_of_field("{\"a\"", "a.b");
    }
}
