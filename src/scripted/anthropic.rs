//! Anthropic Messages API answers (`POST /v1/messages`): streaming events and JSON message.
//!
//! Streaming order, as the API streams it:
//! `message_start`, `ping`, then per content block (thinking, text, each tool_use, in that
//! order) `content_block_start` / `content_block_delta`* / `content_block_stop`, then
//! `message_delta` (stop_reason, usage) and `message_stop`.

use super::script::ids;
use super::wire::{Reply, SseEvent};
use serde_json::{json, Value};

fn usage_start(r: &Reply) -> Value {
    json!({
        "input_tokens": r.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": 1,
        "service_tier": "standard"
    })
}

fn usage_full(r: &Reply) -> Value {
    json!({
        "input_tokens": r.input_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "output_tokens": r.output_tokens(),
        "service_tier": "standard"
    })
}

/// The content blocks of the finished message.
pub(crate) fn content(r: &Reply) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(t) = r.thinking() {
        out.push(
            json!({"type": "thinking", "thinking": t, "signature": ids::signature_tag(&r.tag)}),
        );
    }
    if let Some(t) = r.text() {
        out.push(json!({"type": "text", "text": t}));
    }
    for (i, c) in r.turn.tool_calls.iter().enumerate() {
        out.push(json!({
            "type": "tool_use",
            "id": ids::anthropic_tool_tag(&r.tag, i),
            "name": c.name,
            "input": c.input_object()
        }));
    }
    out
}

/// The non-streaming response body.
pub(crate) fn message(r: &Reply) -> Value {
    json!({
        "id": ids::message_tag(&r.tag),
        "type": "message",
        "role": "assistant",
        "model": r.model,
        "content": content(r),
        "stop_reason": r.turn.stop_reason().as_str(),
        "stop_sequence": null,
        "usage": usage_full(r)
    })
}

/// The streaming events.
pub(crate) fn events(r: &Reply) -> Vec<SseEvent> {
    let mut ev = vec![SseEvent::named(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": ids::message_tag(&r.tag),
            "type": "message",
            "role": "assistant",
            "model": r.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": usage_start(r)
        }}),
    )];
    ev.push(SseEvent::named("ping", &json!({"type": "ping"})));
    let mut index = 0usize;
    let start = |index: usize, block: Value| {
        SseEvent::named(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": block}),
        )
    };
    let delta = |index: usize, d: Value| {
        SseEvent::named(
            "content_block_delta",
            &json!({"type": "content_block_delta", "index": index, "delta": d}),
        )
    };
    let stop = |index: usize| {
        SseEvent::named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        )
    };

    if let Some(t) = r.thinking() {
        ev.push(start(
            index,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ));
        for piece in r.chunks(t) {
            ev.push(delta(
                index,
                json!({"type": "thinking_delta", "thinking": piece}),
            ));
        }
        ev.push(delta(
            index,
            json!({"type": "signature_delta", "signature": ids::signature_tag(&r.tag)}),
        ));
        ev.push(stop(index));
        index += 1;
    }
    if let Some(t) = r.text() {
        ev.push(start(index, json!({"type": "text", "text": ""})));
        for piece in r.chunks(t) {
            ev.push(delta(index, json!({"type": "text_delta", "text": piece})));
        }
        ev.push(stop(index));
        index += 1;
    }
    for (i, c) in r.turn.tool_calls.iter().enumerate() {
        ev.push(start(
            index,
            json!({"type": "tool_use", "id": ids::anthropic_tool_tag(&r.tag, i), "name": c.name, "input": {}}),
        ));
        ev.push(delta(
            index,
            json!({"type": "input_json_delta", "partial_json": ""}),
        ));
        for piece in r.chunks(&c.input_object().to_string()) {
            ev.push(delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ));
        }
        ev.push(stop(index));
        index += 1;
    }
    ev.push(SseEvent::named(
        "message_delta",
        &json!({"type": "message_delta",
                "delta": {"stop_reason": r.turn.stop_reason().as_str(), "stop_sequence": null},
                "usage": {"output_tokens": r.output_tokens()}}),
    ));
    ev.push(SseEvent::named(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    ev
}

/// An Anthropic-style error body.
pub(crate) fn error(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}
