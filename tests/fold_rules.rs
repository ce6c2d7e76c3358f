//! Model tests of the phase machine's continuation rules: resumed attempts, superseded
//! live steps, live in-doubt decisions, injection counting. Events are built directly.

use journal_format::event::*;
use journal_format::Event;
use pvisor::fold::{self, Phase};
use pvisor::journal::{Journal, MemStorage, StoredEvent};

/// The 27 events of the golden complete run, cut right after `continuation_started`
/// (seq 20), as stored events with their sequence numbers.
fn until_continuing() -> Vec<StoredEvent> {
    let bytes = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/journal-format/vectors/complete.pvj"
    ))
    .unwrap();
    let (_, evs, _) = Journal::open_with(
        MemStorage::from_image(bytes),
        "<m>".into(),
        Default::default(),
        || 0,
    )
    .unwrap();
    evs.into_iter().take(20).collect()
}

fn push(evs: &mut Vec<StoredEvent>, e: Event) {
    let seq = evs.last().map(|x| x.seq).unwrap_or(0) + 1;
    evs.push(StoredEvent {
        seq,
        at_ms: 0,
        offset: 0,
        event: e,
    });
}

fn step(n: u64, d: &str) -> Event {
    Event::ContinuationStep(ContinuationStep {
        n,
        action_digest: d.into(),
        tools: vec!["Bash".into()],
    })
}

fn validated(n: u64, injected: bool) -> Event {
    Event::BridgeRequestValidated(BridgeRequestValidated {
        n,
        request_digest: "r".into(),
        prefix_digest: "p".into(),
        removed: vec![],
        boundary_prompt_injected: injected,
        ok: true,
        reason: None,
        side: false,
        ..Default::default()
    })
}

fn started(attempt: u64) -> Event {
    Event::ContinuationStarted(ContinuationStarted {
        command: vec!["claude".into()],
        agent_version: None,
        budget: Some(2),
        attempt,
        ..Default::default()
    })
}

#[test]
fn a_resumed_attempt_supersedes_the_steps_it_asks_again() {
    let mut evs = until_continuing();
    assert_eq!(fold::fold(&evs).unwrap().phase, Phase::Continuing);
    push(&mut evs, validated(1, true));
    push(&mut evs, step(1, "a1"));
    push(&mut evs, validated(2, false));
    push(&mut evs, step(2, "a2-lost"));
    // crash; the agent's session held only step 1 as a complete turn
    push(
        &mut evs,
        Event::BridgeStarted(BridgeStarted {
            listen: "127.0.0.1:1".into(),
            protocol: "anthropic".into(),
            upstream: "u".into(),
            prefix_digest: "p".into(),
            prefix_items: 6,
        }),
    );
    push(&mut evs, started(2));
    push(&mut evs, validated(2, false));
    push(&mut evs, step(2, "a2"));
    let s = fold::fold(&evs).unwrap();
    assert_eq!(
        s.steps
            .iter()
            .map(|x| x.action_digest.as_str())
            .collect::<Vec<_>>(),
        ["a1", "a2"]
    );
    assert_eq!(s.superseded_steps.len(), 1);
    assert_eq!(s.superseded_steps[0].action_digest, "a2-lost");
    assert_eq!(s.bridge.injections, 1);
    assert_eq!(pvisor::fold::derive(&s).continued_steps, 2);
}

#[test]
fn steps_may_only_go_back_at_the_start_of_a_resumed_attempt() {
    let mut evs = until_continuing();
    push(&mut evs, step(1, "a1"));
    push(&mut evs, step(1, "again"));
    let e = fold::fold(&evs).unwrap_err();
    assert!(e.reason.contains("step 1 where 2 was expected"), "{e}");
    assert_eq!(e.seq, evs.last().unwrap().seq);
}

#[test]
fn attempts_are_numbered_in_order() {
    let mut evs = until_continuing();
    push(&mut evs, started(3));
    let e = fold::fold(&evs).unwrap_err();
    assert!(e.reason.contains("attempt 3 where 2 was expected"), "{e}");
}

#[test]
fn a_second_injection_is_illegal() {
    let mut evs = until_continuing();
    push(&mut evs, validated(1, true));
    push(&mut evs, validated(2, true));
    assert!(fold::fold(&evs)
        .unwrap_err()
        .reason
        .contains("injected more than once"));
}

#[test]
fn a_live_in_doubt_stop_blocks_and_names_the_step() {
    let mut evs = until_continuing();
    push(&mut evs, step(1, "a1"));
    push(
        &mut evs,
        Event::InDoubtResolved(InDoubtResolved {
            batch: 0,
            call: 1,
            call_id: "toolu_x".into(),
            tool: "Bash".into(),
            decision: InDoubtDecision::Stopped,
        }),
    );
    let s = fold::fold(&evs).unwrap();
    let r = pvisor::fold::derive(&s);
    assert_eq!(r.failure.unwrap().category.as_str(), "ambiguous_execution");
    // a live step that does not exist cannot be in doubt
    let mut bad = until_continuing();
    push(
        &mut bad,
        Event::InDoubtResolved(InDoubtResolved {
            batch: 0,
            call: 4,
            call_id: "x".into(),
            tool: "Bash".into(),
            decision: InDoubtDecision::Stopped,
        }),
    );
    assert!(fold::fold(&bad).is_err());
}

fn restarted(attempt: u64) -> Event {
    Event::ContinuationStarted(ContinuationStarted {
        command: vec!["codex".into()],
        budget: Some(2),
        attempt,
        from_boundary: true,
        ..Default::default()
    })
}

#[test]
fn an_attempt_from_the_boundary_supersedes_every_earlier_step_and_injects_again() {
    let mut evs = until_continuing();
    push(&mut evs, validated(1, true));
    push(&mut evs, step(1, "a1-old"));
    push(&mut evs, validated(2, false));
    push(&mut evs, step(2, "a2-old"));
    // crash; the agent cannot resume its session: it starts again from the rebuilt one
    push(&mut evs, restarted(2));
    push(&mut evs, validated(1, true));
    push(&mut evs, step(1, "a1"));
    let s = fold::fold(&evs).unwrap();
    assert_eq!(
        s.steps
            .iter()
            .map(|x| x.action_digest.as_str())
            .collect::<Vec<_>>(),
        ["a1"]
    );
    assert_eq!(
        s.superseded_steps
            .iter()
            .map(|x| x.action_digest.as_str())
            .collect::<Vec<_>>(),
        ["a1-old", "a2-old"]
    );
    assert_eq!(s.bridge.injections, 1);
    assert_eq!(pvisor::fold::derive(&s).continued_steps, 1);
    // Without from_boundary, the second injection is refused as before.
    let mut evs = until_continuing();
    push(&mut evs, validated(1, true));
    push(&mut evs, step(1, "a1-old"));
    push(&mut evs, started(2));
    push(&mut evs, validated(1, true));
    assert!(fold::fold(&evs)
        .unwrap_err()
        .to_string()
        .contains("injected more than once"));
}

#[test]
fn a_first_attempt_cannot_start_from_the_boundary() {
    let mut evs = until_continuing();
    evs.pop(); // the golden continuation_started (attempt 1)
    push(&mut evs, restarted(1));
    let e = fold::fold(&evs).unwrap_err().to_string();
    assert!(e.contains("cannot start again from the boundary"), "{e}");
}
