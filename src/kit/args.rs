//! The argument types of an agent's tools, checked when the trajectory is parsed.
//!
//! A call whose arguments do not have the types the agent's tool takes was either sent so by
//! the model — and then the agent answered with its own argument error without running
//! anything (Claude Code's `InputValidationError`, Codex's `failed to parse function
//! arguments`), which is what the trajectory records — or the trajectory was changed after
//! the fact. The first is replayed by answering the recorded error (nothing runs); the second
//! is a trajectory error naming the line and the field, before anything runs.

use serde_json::Value;

/// The JSON type of an argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    Str,
    Num,
    /// A whole number (Codex's `u64`/`i64` fields).
    Int,
    Bool,
    /// An array of strings.
    Strs,
    Array,
    Object,
}

impl Ty {
    fn holds(self, v: &Value) -> bool {
        match self {
            Ty::Str => v.is_string(),
            Ty::Num => v.is_number(),
            Ty::Int => v.is_i64() || v.is_u64(),
            Ty::Bool => v.is_boolean(),
            Ty::Strs => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            Ty::Array => v.is_array(),
            Ty::Object => v.is_object(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Ty::Str => "a string",
            Ty::Num => "a number",
            Ty::Int => "a whole number",
            Ty::Bool => "a boolean",
            Ty::Strs => "an array of strings",
            Ty::Array => "an array",
            Ty::Object => "an object",
        }
    }
}

/// One argument: its name, type, and whether the tool requires it.
pub type Arg = (&'static str, Ty, bool);

/// Why arguments do not fit: the argument's name and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Misfit {
    pub field: String,
    pub message: String,
}

/// Check `input` against `args`. Arguments the list does not name are not checked; `null`
/// for an optional argument is its absence.
pub fn check(input: &Value, args: &[Arg]) -> Result<(), Misfit> {
    let Some(obj) = input.as_object() else {
        return Err(Misfit {
            field: String::new(),
            message: "the arguments are not an object".into(),
        });
    };
    for &(name, ty, required) in args {
        match obj.get(name) {
            None | Some(Value::Null) if !required => {}
            None => {
                return Err(Misfit {
                    field: name.into(),
                    message: format!("the required argument `{name}` is missing"),
                })
            }
            Some(v) if !ty.holds(v) => {
                return Err(Misfit {
                    field: name.into(),
                    message: format!("`{name}` must be {}, not {v}", ty.name()),
                })
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// An agent's argument rules: the types of a tool's arguments (`None`: not checked), and
/// whether a recorded observation is the agent's own answer to arguments that do not fit.
pub struct Rules {
    pub types: fn(&str) -> Option<&'static [Arg]>,
    pub is_answer: fn(&str, &crate::kit::Observation) -> bool,
}

impl Rules {
    /// The first call whose arguments do not fit its tool and whose recorded observation is
    /// not the agent's answer to that: a changed trajectory (the parse refuses it).
    pub fn unanswered<'a>(
        &self,
        calls: impl IntoIterator<Item = &'a crate::kit::ToolCall>,
    ) -> Option<(&'a crate::kit::ToolCall, Misfit)> {
        calls.into_iter().find_map(|c| {
            let m = check(&c.input, (self.types)(&c.tool)?).err()?;
            let answered = c
                .original
                .as_ref()
                .is_some_and(|o| (self.is_answer)(&c.tool, o));
            (!answered).then_some((c, m))
        })
    }

    /// The agent's recorded answer to a call whose arguments do not fit its tool: what the
    /// replay answers, running nothing.
    pub fn recorded_answer(&self, call: &crate::kit::ToolCall) -> Option<crate::kit::ToolOutcome> {
        let orig = call.original.as_ref()?;
        let misfit = check(&call.input, (self.types)(&call.tool)?).is_err();
        (misfit && (self.is_answer)(&call.tool, orig)).then(|| crate::kit::ToolOutcome {
            observation: orig.clone(),
            exit_code: None,
            duration_ms: 0,
            touched: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn types_and_required_arguments() {
        let args: &[Arg] = &[("command", Ty::Str, true), ("timeout", Ty::Num, false)];
        assert_eq!(check(&json!({"command": "ls"}), args), Ok(()));
        assert_eq!(
            check(&json!({"command": "ls", "timeout": null, "x": 1}), args),
            Ok(())
        );
        assert_eq!(
            check(&json!({"command": 12345}), args).unwrap_err().field,
            "command"
        );
        assert_eq!(check(&json!({}), args).unwrap_err().field, "command");
        assert_eq!(
            check(&json!({"command": "a", "timeout": "5"}), args)
                .unwrap_err()
                .field,
            "timeout"
        );
        assert!(check(&json!("oops"), args).is_err());
        assert!(check(&json!({"n": 1.5}), &[("n", Ty::Int, true)]).is_err());
        assert!(check(&json!({"c": ["a", 1]}), &[("c", Ty::Strs, true)]).is_err());
    }
}
