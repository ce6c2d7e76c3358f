//! One module per agent. Each has the same parts: `parse`, `tools`, `rebuild`, `continue`.

pub mod claude_code;
