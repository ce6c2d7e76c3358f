//! OpenAI answers: Responses (`POST /v1/responses`) and Chat Completions
//! (`POST /v1/chat/completions`).
//!
//! Responses streaming order: `response.created`, `response.in_progress`, then per output
//! item (reasoning, message, each function/custom tool call) `response.output_item.added`,
//! its deltas and `.done` events, `response.output_item.done`; finally `response.completed`.
//! Every event carries an increasing `sequence_number`.
//!
//! Chat Completions streaming: `data:` chunks (`object: chat.completion.chunk`): a role chunk,
//! `reasoning_content` deltas, `content` deltas, `tool_calls` deltas (first with id, type and
//! name, then argument pieces), a final chunk with `finish_reason` (`tool_calls` | `stop`), a
//! usage chunk when `stream_options.include_usage` is true, then `data: [DONE]`.

use super::script::ids;
use super::wire::{Reply, SseEvent};
use serde_json::{json, Value};

// ---------------------------------------------------------------- Responses

fn responses_usage(r: &Reply) -> Value {
    let out = r.output_tokens();
    json!({
        "input_tokens": r.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": out,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": r.input_tokens + out
    })
}

fn response_object(r: &Reply, status: &str, output: Vec<Value>, usage: Value) -> Value {
    json!({
        "id": ids::response_tag(&r.tag),
        "object": "response",
        "created_at": r.created,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "model": r.model,
        "output": output,
        "parallel_tool_calls": true,
        "usage": usage
    })
}

/// The finished output items of a turn.
pub(crate) fn responses_output(r: &Reply) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = r.thinking() {
        out.push(
            json!({"id": ids::reasoning_tag(&r.tag), "type": "reasoning",
                        "summary": [{"type": "summary_text", "text": t}]}),
        );
    }
    if let Some(t) = r.text() {
        out.push(
            json!({"id": ids::message_tag(&r.tag), "type": "message", "status": "completed",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": t, "annotations": []}]}),
        );
    }
    for (i, c) in r.turn.tool_calls.iter().enumerate() {
        let id = ids::responses_call_item_tag(&r.tag, i, c.custom);
        let call_id = ids::openai_call_tag(&r.tag, i);
        if c.custom {
            out.push(
                json!({"id": id, "type": "custom_tool_call", "status": "completed",
                            "call_id": call_id, "name": c.name, "input": c.input_text()}),
            );
        } else {
            out.push(json!({"id": id, "type": "function_call", "status": "completed",
                            "call_id": call_id, "name": c.name, "arguments": c.input_object().to_string()}));
        }
    }
    out
}

/// The non-streaming Responses body.
pub(crate) fn response(r: &Reply) -> Value {
    response_object(r, "completed", responses_output(r), responses_usage(r))
}

/// The Responses streaming events.
pub(crate) fn responses_events(r: &Reply) -> Vec<SseEvent> {
    let mut ev = Vec::new();
    let mut seq = 0u64;
    let mut push = |ev: &mut Vec<SseEvent>, name: &str, mut data: Value| {
        data["type"] = json!(name);
        data["sequence_number"] = json!(seq);
        seq += 1;
        // Keep "type" first, as the API does.
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), json!(name));
        for (k, v) in data.as_object().unwrap() {
            if k != "type" {
                obj.insert(k.clone(), v.clone());
            }
        }
        ev.push(SseEvent::named(name, &Value::Object(obj)));
    };
    let empty = response_object(r, "in_progress", vec![], Value::Null);
    push(&mut ev, "response.created", json!({"response": empty}));
    push(&mut ev, "response.in_progress", json!({"response": empty}));

    let done_items = responses_output(r);
    let mut oi = 0usize; // output index == index into done_items
    if let Some(t) = r.thinking() {
        let id = ids::reasoning_tag(&r.tag);
        push(
            &mut ev,
            "response.output_item.added",
            json!({"output_index": oi, "item": {"id": id, "type": "reasoning", "summary": []}}),
        );
        push(
            &mut ev,
            "response.reasoning_summary_part.added",
            json!({"item_id": id, "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": ""}}),
        );
        for piece in r.chunks(t) {
            push(
                &mut ev,
                "response.reasoning_summary_text.delta",
                json!({"item_id": id, "output_index": oi, "summary_index": 0, "delta": piece}),
            );
        }
        push(
            &mut ev,
            "response.reasoning_summary_text.done",
            json!({"item_id": id, "output_index": oi, "summary_index": 0, "text": t}),
        );
        push(
            &mut ev,
            "response.reasoning_summary_part.done",
            json!({"item_id": id, "output_index": oi, "summary_index": 0, "part": {"type": "summary_text", "text": t}}),
        );
        push(
            &mut ev,
            "response.output_item.done",
            json!({"output_index": oi, "item": done_items[oi]}),
        );
        oi += 1;
    }
    if let Some(t) = r.text() {
        let id = ids::message_tag(&r.tag);
        push(
            &mut ev,
            "response.output_item.added",
            json!({"output_index": oi, "item": {"id": id, "type": "message", "status": "in_progress",
                                                  "role": "assistant", "content": []}}),
        );
        push(
            &mut ev,
            "response.content_part.added",
            json!({"item_id": id, "output_index": oi, "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
        );
        for piece in r.chunks(t) {
            push(
                &mut ev,
                "response.output_text.delta",
                json!({"item_id": id, "output_index": oi, "content_index": 0, "delta": piece}),
            );
        }
        push(
            &mut ev,
            "response.output_text.done",
            json!({"item_id": id, "output_index": oi, "content_index": 0, "text": t}),
        );
        push(
            &mut ev,
            "response.content_part.done",
            json!({"item_id": id, "output_index": oi, "content_index": 0,
                    "part": {"type": "output_text", "text": t, "annotations": []}}),
        );
        push(
            &mut ev,
            "response.output_item.done",
            json!({"output_index": oi, "item": done_items[oi]}),
        );
        oi += 1;
    }
    for (i, c) in r.turn.tool_calls.iter().enumerate() {
        let id = ids::responses_call_item_tag(&r.tag, i, c.custom);
        let call_id = ids::openai_call_tag(&r.tag, i);
        if c.custom {
            let input = c.input_text();
            push(
                &mut ev,
                "response.output_item.added",
                json!({"output_index": oi, "item": {"id": id, "type": "custom_tool_call", "status": "in_progress",
                                                      "call_id": call_id, "name": c.name, "input": ""}}),
            );
            for piece in r.chunks(&input) {
                push(
                    &mut ev,
                    "response.custom_tool_call_input.delta",
                    json!({"item_id": id, "output_index": oi, "delta": piece}),
                );
            }
            push(
                &mut ev,
                "response.custom_tool_call_input.done",
                json!({"item_id": id, "output_index": oi, "input": input}),
            );
        } else {
            let args = c.input_object().to_string();
            push(
                &mut ev,
                "response.output_item.added",
                json!({"output_index": oi, "item": {"id": id, "type": "function_call", "status": "in_progress",
                                                      "call_id": call_id, "name": c.name, "arguments": ""}}),
            );
            for piece in r.chunks(&args) {
                push(
                    &mut ev,
                    "response.function_call_arguments.delta",
                    json!({"item_id": id, "output_index": oi, "delta": piece}),
                );
            }
            push(
                &mut ev,
                "response.function_call_arguments.done",
                json!({"item_id": id, "output_index": oi, "arguments": args}),
            );
        }
        push(
            &mut ev,
            "response.output_item.done",
            json!({"output_index": oi, "item": done_items[oi]}),
        );
        oi += 1;
    }
    push(
        &mut ev,
        "response.completed",
        json!({"response": response(r)}),
    );
    ev
}

// ---------------------------------------------------------------- Chat Completions

fn chat_usage(r: &Reply) -> Value {
    let out = r.output_tokens();
    json!({"prompt_tokens": r.input_tokens, "completion_tokens": out, "total_tokens": r.input_tokens + out})
}

fn finish_reason(r: &Reply) -> &'static str {
    if r.turn.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

/// The non-streaming Chat Completions body.
pub(crate) fn chat_completion(r: &Reply) -> Value {
    let mut message = json!({"role": "assistant", "content": r.text()});
    if let Some(t) = r.thinking() {
        message["reasoning_content"] = json!(t);
    }
    if !r.turn.tool_calls.is_empty() {
        let calls: Vec<Value> = r
            .turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                json!({"id": ids::openai_call_tag(&r.tag, i), "type": "function",
                   "function": {"name": c.name, "arguments": c.input_object().to_string()}})
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": ids::chat_completion_tag(&r.tag),
        "object": "chat.completion",
        "created": r.created,
        "model": r.model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish_reason(r)}],
        "usage": chat_usage(r)
    })
}

/// The Chat Completions streaming events (`data:` lines only).
pub(crate) fn chat_events(r: &Reply, include_usage: bool) -> Vec<SseEvent> {
    let chunk =
        |delta: Value, finish: Value| {
            SseEvent::data(json!({
            "id": ids::chat_completion_tag(&r.tag),
            "object": "chat.completion.chunk",
            "created": r.created,
            "model": r.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        }).to_string())
        };
    let mut ev = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(t) = r.thinking() {
        for piece in r.chunks(t) {
            ev.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    if let Some(t) = r.text() {
        for piece in r.chunks(t) {
            ev.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (i, c) in r.turn.tool_calls.iter().enumerate() {
        ev.push(chunk(
            json!({"tool_calls": [{"index": i, "id": ids::openai_call_tag(&r.tag, i), "type": "function",
                                   "function": {"name": c.name, "arguments": ""}}]}),
            Value::Null,
        ));
        for piece in r.chunks(&c.input_object().to_string()) {
            ev.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    ev.push(chunk(json!({}), json!(finish_reason(r))));
    if include_usage {
        ev.push(SseEvent::data(
            json!({
                "id": ids::chat_completion_tag(&r.tag),
                "object": "chat.completion.chunk",
                "created": r.created,
                "model": r.model,
                "choices": [],
                "usage": chat_usage(r)
            })
            .to_string(),
        ));
    }
    ev.push(SseEvent::data("[DONE]"));
    ev
}

/// An OpenAI-style error body.
pub(crate) fn error(kind: &str, code: &str, message: &str) -> Value {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}
