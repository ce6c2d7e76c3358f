//! The page around the report: escaping, the style sheet and the few lines of script (the
//! timeline filter), and blocks of text that collapse when large without losing anything.

/// Escape text for HTML element content and attribute values.
pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + s.len() / 16);
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// Above this many lines or bytes a block starts collapsed (its whole text is still there).
const COLLAPSE_LINES: usize = 24;
const COLLAPSE_BYTES: usize = 3000;
/// Above this a block shows its beginning and says so, with where the whole text is.
pub const SHOW_BYTES: usize = 1 << 20;

/// A block of preformatted text: collapsed behind a summary (line and byte counts) when
/// large, cut only above [`SHOW_BYTES`], and then with a visible note naming `whole` (where
/// the whole text is kept).
pub fn block(text: &str, class: &str, whole: Option<&str>) -> String {
    let lines = text.lines().count();
    let (shown, note) = if text.len() > SHOW_BYTES {
        let mut end = SHOW_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        (
            &text[..end],
            format!(
                "<p class=\"cut\">showing the first {} of {} bytes; the whole text: <code>{}</code></p>",
                end,
                text.len(),
                esc(whole.unwrap_or("the journal's blob store"))
            ),
        )
    } else {
        (text, String::new())
    };
    let pre = format!("<pre class=\"{class}\">{}</pre>{note}", esc(shown));
    if lines > COLLAPSE_LINES || text.len() > COLLAPSE_BYTES {
        format!(
            "<details class=\"big\"><summary>{lines} lines, {} bytes</summary>{pre}</details>",
            text.len()
        )
    } else {
        pre
    }
}

/// A short digest for display (`blake3:0123456789ab…`).
pub fn short(d: &str) -> String {
    match d.split_once(':') {
        Some((alg, hex)) if hex.len() > 12 => format!("{alg}:{}…", &hex[..12]),
        _ => d.to_string(),
    }
}

/// A status chip.
pub fn chip(text: &str, class: &str) -> String {
    format!("<span class=\"chip {class}\">{}</span>", esc(text))
}

pub const STYLE: &str = r#"
:root{--ok:#176d2c;--bad:#b00020;--warn:#9a6700;--mut:#57606a;--bg:#f6f8fa;--line:#d0d7de}
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1f2328;line-height:1.4}
header.top{padding:1em 2em;border-bottom:1px solid var(--line);background:#fff;position:sticky;top:0;z-index:2}
main{padding:0 2em 4em}
h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.15em;margin-top:2em;border-bottom:1px solid var(--line);padding-bottom:.2em}
h3{font-size:1em;margin:1.2em 0 .4em}
nav a{margin-right:1em;font-size:.9em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid var(--line);padding:.25em .55em;text-align:left;font-size:.88em;vertical-align:top}
th{background:var(--bg);font-weight:600}
.ok{color:var(--ok)}.bad{color:var(--bad)}.warn{color:var(--warn)}.mut{color:var(--mut)}
pre{background:var(--bg);padding:.5em .7em;overflow:auto;margin:.3em 0;font-size:.85em;white-space:pre-wrap;word-break:break-word;max-height:40em}
code{font-size:.88em}
summary{cursor:pointer}
.chip{display:inline-block;border-radius:1em;padding:0 .6em;font-size:.8em;border:1px solid currentColor;margin-right:.3em}
.verdict{font-size:1.05em;font-weight:700}
.kv{display:grid;grid-template-columns:max-content 1fr;gap:.15em 1em;font-size:.9em}
.kv dt{color:var(--mut)}.kv dd{margin:0}
.turn{border-left:3px solid var(--line);margin:1em 0;padding-left:1em}
.call{border:1px solid var(--line);border-radius:6px;margin:.6em 0;padding:.5em .8em;background:#fff}
.call.differs{border-color:var(--bad)}.call.in_doubt,.call.stale{border-color:var(--warn)}
.sbs{display:grid;grid-template-columns:1fr 1fr;gap:.6em}
.sbs h4{margin:.2em 0;font-size:.8em;color:var(--mut);font-weight:600}
.diff del{background:#ffd7d5;text-decoration:none}.diff ins{background:#ccffd8;text-decoration:none}
.diff .dyn{background:#fff1b8;outline:1px dashed var(--warn)}
.diff .line-del{background:#fff5f5}.diff .line-ins{background:#f0fff4}
#boundary{margin:2em 0;padding:.6em 1em;border:2px dashed #0969da;color:#0969da;font-weight:600;border-radius:6px}
.cut{color:var(--warn);font-size:.85em}
#timeline-controls{margin:.5em 0}#timeline-controls input{width:22em}
tr.hl{background:#fff8c5}
.refused{border:1px solid var(--bad);border-radius:6px;padding:.5em .8em;margin:.6em 0}
"#;

/// The timeline filter: by text and by event name; hash links to `#ev-N` open and mark the row.
pub const SCRIPT: &str = r#"
(function(){
  function rows(){return document.querySelectorAll('#timeline tbody tr');}
  function filter(){
    var q=document.getElementById('tl-q').value.toLowerCase();
    var k=document.getElementById('tl-kind').value;
    var n=0;
    rows().forEach(function(r){
      var show=(!k||r.getAttribute('data-event')===k)&&(!q||r.textContent.toLowerCase().indexOf(q)>=0);
      r.style.display=show?'':'none'; if(show){n++;}
    });
    document.getElementById('tl-count').textContent=n+' shown';
  }
  function mark(){
    var id=location.hash.slice(1); if(!id){return;}
    var el=document.getElementById(id); if(!el){return;}
    var d=el.closest('details'); while(d){d.open=true;d=d.parentElement.closest('details');}
    if(el.tagName==='TR'){el.classList.add('hl');}
  }
  document.addEventListener('DOMContentLoaded',function(){
    var q=document.getElementById('tl-q'),k=document.getElementById('tl-kind');
    if(q){q.addEventListener('input',filter);k.addEventListener('change',filter);filter();}
    mark();window.addEventListener('hashchange',mark);
  });
})();
"#;

/// The whole document around `body`.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>{}</title><style>{STYLE}</style><script>{SCRIPT}</script></head><body>{body}</body></html>\n",
        esc(title)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_collapses_without_losing_text() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        let small = block("one\ntwo", "obs", None);
        assert!(small.starts_with("<pre") && small.contains("one\ntwo"));
        let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let b = block(&long, "obs", None);
        assert!(b.starts_with("<details class=\"big\"><summary>100 lines"));
        assert!(b.contains("line 99"), "collapsed, not cut");
        let huge = "é".repeat(SHOW_BYTES);
        let b = block(&huge, "obs", Some("/s/blobs/x"));
        assert!(b.contains("showing the first") && b.contains("/s/blobs/x"));
    }

    #[test]
    fn short_digests() {
        assert_eq!(short("blake3:0123456789abcdef"), "blake3:0123456789ab…");
        assert_eq!(short("x"), "x");
    }
}
