#!/usr/bin/env python3
"""The whole OpenHands replay pipeline, prototyped against the genuine fixture, at every boundary:

  1. fresh empty workspace at the recorded path;
  2. runner.py tools mode re-executes batches 1..N (fresh ObservationEvents);
  3. a cut store is written: recorded events up to the end of batch N with the fresh observations
     in place of the recorded ones, parent_id re-chained, base_state.json patched
     (execution_status idle, leaf_event_id, persistence_dir, stats cut to N calls);
  4. `pvisor model serve` plays the fixture's answers; runner.py continue mode reloads the store
     and runs (optionally with a boundary prompt and/or a step budget);
  5. the first request after the cut is compared with the original request N+1 (body bytes,
     then parsed), and the run's pvisor_end line is printed.

    python3 boundary_check.py [--venv /tmp/oh-venv] [--boundary N ...] [--prompt TEXT]
                              [--max-steps K] [--edit] [--keep]

Exit 0 when every checked first request matches.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(os.path.dirname(HERE), "runner.py")
FIXTURE = "/work/shared/fixtures/native/openhands"
PVISOR = "/work/main/target/debug/pvisor"


def dumps(o):  # what pydantic's model_dump_json writes for these JSON values (verified on the fixture)
    return json.dumps(o, separators=(",", ":"), ensure_ascii=False)


def load_events(conv_dir):
    out = []
    for p in sorted(glob.glob(os.path.join(conv_dir, "events", "event-*.json"))):
        out.append(json.loads(open(p, encoding="utf-8").read()))
    return out


def batches(events):
    """[(response_id, [action events], {action id: recorded result event})] in order."""
    res, by_resp = [], {}
    results = {}
    for e in events:
        if e["kind"] == "ActionEvent":
            rid = e["llm_response_id"]
            if rid not in by_resp:
                by_resp[rid] = (rid, [])
                res.append(by_resp[rid])
            by_resp[rid][1].append(e)
        elif e["kind"] in ("ObservationEvent", "UserRejectObservation"):
            results[e["action_id"]] = e
        elif e["kind"] == "AgentErrorEvent":
            results[e["tool_call_id"]] = e
    return [(rid, acts, {a["id"]: results.get(a["id"]) or results.get(a["tool_call_id"]) for a in acts})
            for rid, acts in res]


def cut_stats(stats, n_calls):
    s = json.loads(json.dumps(stats))
    for m in s.get("usage_to_metrics", {}).values():
        for k in ("costs", "response_latencies", "token_usages"):
            if k in m:
                m[k] = m[k][:n_calls] if m.get("model_name") and k else m[k]
        if m.get("token_usages") is not None:
            acc = m.get("accumulated_token_usage") or {}
            tu = m["token_usages"]
            for f in ("prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens", "reasoning_tokens"):
                if f in acc:
                    acc[f] = sum(t.get(f, 0) for t in tu)
            if "per_turn_token" in acc:
                acc["per_turn_token"] = tu[-1]["per_turn_token"] if tu else 0
        if "costs" in m:
            m["accumulated_cost"] = sum(c["cost"] for c in m["costs"]) if m["costs"] else 0.0
    return s


def write_store(src_conv, base, kept, dest_persist, conv_hex, n_calls):
    conv_dir = os.path.join(dest_persist, conv_hex)
    os.makedirs(os.path.join(conv_dir, "events"))
    prev = None
    for i, e in enumerate(kept):
        e = dict(e)
        if i > 0:
            e["parent_id"] = prev
        prev = e["id"]
        with open(os.path.join(conv_dir, "events", f"event-{i:05d}-{e['id']}.json"), "w", encoding="utf-8") as f:
            f.write(dumps(e))
    open(os.path.join(conv_dir, "events", ".eventlog.lock"), "w").close()
    b = json.loads(json.dumps(base))
    b["execution_status"] = "idle"
    b["leaf_event_id"] = kept[-1]["id"]
    b["persistence_dir"] = conv_dir
    users = [e["id"] for e in kept if e["kind"] == "MessageEvent" and e["source"] == "user"]
    if users:
        b["last_user_message_id"] = users[-1]
    b["stats"] = cut_stats(b["stats"], n_calls)
    with open(os.path.join(conv_dir, "base_state.json"), "w", encoding="utf-8") as f:
        f.write(dumps(b))
    return conv_dir


class ToolsRunner:
    def __init__(self, venv, env, stderr_path):
        self.p = subprocess.Popen([f"{venv}/bin/python", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=open(stderr_path, "w"), text=True, env=env, cwd=env["HOME"])

    def call(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        ans = json.loads(self.p.stdout.readline())
        if not ans.get("ok"):
            raise RuntimeError(json.dumps(ans, indent=1))
        return ans

    def close(self):
        self.call({"op": "exit"})
        self.p.wait(timeout=60)


def start_server(script, log, capture=False):
    if capture:
        pf = log + ".port"
        p = subprocess.Popen([sys.executable, os.path.join(HERE, "capture_server.py"), "--script", script, "--log", log,
                              "--port-file", pf])
        for _ in range(100):
            if os.path.exists(pf) and open(pf).read().strip():
                break
            time.sleep(0.1)
        return p, f"http://127.0.0.1:{open(pf).read().strip()}"
    p = subprocess.Popen([PVISOR, "model", "serve", "--script", script, "--log", log],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    url = p.stdout.readline().strip()
    return p, url


def run_boundary(args, n, all_events, base, original, src_conv):
    recorded_root = os.path.dirname(base["workspace"]["working_dir"])
    cwd = base["workspace"]["working_dir"]
    shutil.rmtree(recorded_root, ignore_errors=True)
    os.makedirs(cwd)
    home = os.path.join(recorded_root, "home")
    os.makedirs(home)
    persist = os.path.join(home, ".openhands", "conversations")
    conv_hex = base["id"].replace("-", "")
    conv_dir_final = os.path.join(persist, conv_hex)
    env = {"PATH": f"{args.path_prefix or args.venv + '/bin'}:/usr/local/bin:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8",
           "TERM": "xterm", "TMPDIR": os.path.join(recorded_root, "tmp"), "TMUX_TMPDIR": os.path.join(recorded_root, "tmp")}
    os.makedirs(env["TMPDIR"])
    bs = batches(all_events)
    # --- 2. replay batches 1..N with the tools runner
    t0 = time.time()
    tr = ToolsRunner(args.venv, env, os.path.join(recorded_root, "tools.stderr"))
    tr.call({"op": "init", "base_state": base, "cwd": cwd, "conversation_dir": conv_dir_final})
    fresh = {}
    edits = []
    for rid, acts, recs in bs[:n]:
        for a in acts:
            ans = tr.call({"op": "execute", "action_event": a})
            ev = ans["events"][0]
            if args.edit and a["tool_name"] == "terminal" and ev["kind"] == "ObservationEvent":
                ev["observation"]["content"][0]["text"] = "EDITED-OBS " + ev["observation"]["content"][0]["text"]
                edits.append(a["tool_call_id"])
            fresh[a["id"]] = ev
    tr.close()
    t_tools = time.time() - t0
    # --- 3. cut store: every recorded event up to the end of batch N, results replaced
    last_ids = set()
    for rid, acts, recs in bs[:n]:
        for a in acts:
            last_ids.add(recs[a["id"]]["id"])
    kept, seen = [], set()
    for e in all_events:
        if e["kind"] in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            key = e.get("action_id")
            kept.append(fresh[key] if key in fresh else e)
        else:
            kept.append(e)
        seen.add(e["id"])
        if last_ids <= seen:
            break
    conv_dir = write_store(src_conv, base, kept, persist, conv_hex, n)
    snapshot = {p: open(p, "rb").read() for p in glob.glob(conv_dir + "/**", recursive=True) if os.path.isfile(p)}
    # --- 4. continue
    log = os.path.join(recorded_root, "requests.jsonl")
    srv, url = start_server(args.script, log, args.capture)
    cfg = {"mode": "continue", "persistenceDir": persist, "conversationId": base["id"], "cwd": cwd,
           "baseUrl": url.rstrip("/") + "/v1"}
    if args.max_steps is not None:
        cfg["maxSteps"] = args.max_steps
    if args.num_retries is not None:
        cfg["numRetries"] = args.num_retries
    if args.dead_bridge:
        cfg["baseUrl"] = "http://127.0.0.1:9/v1"  # nothing listens there
    if args.prompt:
        pf = os.path.join(recorded_root, "prompt.txt")
        open(pf, "w").write(args.prompt)
        cfg["promptFile"] = pf
    cenv = dict(env, PVISOR_OPENHANDS_RUNNER=json.dumps(cfg), PVISOR_OPENHANDS_API_KEY="sk-pvisor-test")
    t1 = time.time()
    cp = subprocess.run([f"{args.venv}/bin/python", RUNNER], env=cenv, cwd=home, capture_output=True, text=True,
                        timeout=600)
    t_cont = time.time() - t1
    srv.terminate()
    srv.wait()
    open(os.path.join(recorded_root, "continue.stderr"), "w").write(cp.stderr)
    end = json.loads(cp.stdout.strip().splitlines()[-1]) if cp.stdout.strip() else {"ok": False, "error": "no output"}
    reqs = [json.loads(l) for l in open(log)] if os.path.exists(log) else []
    # --- 5. compare the first request with the original request N+1
    verdict = "no request"
    detail = []
    if reqs:
        first = reqs[0]["body"]
        if n < len(original) and not args.prompt:
            orig = original[n]["body"]
            if json.dumps(first) == json.dumps(orig):
                verdict = "EQUAL(parsed, same key order)"
            elif first == orig:
                verdict = "EQUAL(parsed, other key order)"
            else:
                verdict = "DIFF"
                for k in sorted(set(first) | set(orig)):
                    if first.get(k) != orig.get(k):
                        if k == "messages":
                            for i, (a, b) in enumerate(zip(first[k], orig[k])):
                                if a != b:
                                    detail.append(f"messages[{i}]: new={json.dumps(a)[:300]} orig={json.dumps(b)[:300]}")
                            if len(first[k]) != len(orig[k]):
                                detail.append(f"messages: {len(first[k])} vs {len(orig[k])}")
                        else:
                            detail.append(f"{k}: differs")
            h_new = reqs[0]["headers"].get("Content-Length") or reqs[0]["headers"].get("content-length")
            if "raw" in reqs[0]:
                raw = reqs[0]["raw"].encode("latin-1")
                cand = json.dumps(orig, separators=(",", ":"), ensure_ascii=False).encode()
                detail.append(f"raw bytes == compact-json(original parsed body): {raw == cand}; raw={len(raw)} bytes")
            h_old = original[n]["headers"].get("Content-Length")
            detail.append(f"content-length new={h_new} orig={h_old}")
        elif args.prompt and n == len(original):
            verdict = ("EQUAL(parsed, same key order, resume request 1)" if json.dumps(first) == json.dumps(args.resume_first["body"])
                       else "DIFF(resume request 1)")
            detail.append(f"content-length new={reqs[0]['headers'].get('Content-Length') or reqs[0]['headers'].get('content-length')} "
                          f"orig={args.resume_first['headers'].get('Content-Length')}")
        else:
            prev = original[n]["body"]["messages"] if n < len(original) else None
            msgs = first["messages"]
            detail.append(f"{len(msgs)} messages; last={json.dumps(msgs[-1])[:200]}")
            if prev is not None:
                detail.append(f"prefix equal to original request {n+1}: {msgs[:len(prev)] == prev}; "
                              f"extra={[m['role'] for m in msgs[len(prev):]]}")
            verdict = "SEE-DETAIL"
    after = sorted(os.path.relpath(p, conv_dir) for p in glob.glob(conv_dir + "/**", recursive=True) if os.path.isfile(p))
    changed = sorted(os.path.relpath(p, conv_dir) for p, b in snapshot.items() if open(p, "rb").read() != b)
    base_after = json.load(open(os.path.join(conv_dir, "base_state.json")))
    print(f"== boundary {n}: tools {t_tools:.1f}s continue {t_cont:.1f}s rc={cp.returncode} requests={len(reqs)} "
          f"first-request: {verdict}" + (f" edits={edits}" if edits else ""))
    for d in detail:
        print("   ", d)
    print("    pvisor_end:", json.dumps({k: v for k, v in end.items() if k != "traceback"})[:900])
    if end.get("traceback"):
        print(end["traceback"][-1500:])
    print(f"    store: {len(after)} files, changed={changed}, base_state.execution_status="
          f"{base_after.get('execution_status')} max_iterations={base_after.get('max_iterations')} "
          f"llm.base_url={base_after['agent']['llm'].get('base_url')} api_key={base_after['agent']['llm'].get('api_key')}")
    if args.verbose:
        for r in reqs:
            print("    req", r.get("seq"), r.get("turn"), len(r["body"]["messages"]), json.dumps(r.get("answer"))[:160])
    ws = {f: open(os.path.join(cwd, f)).read() for f in sorted(os.listdir(cwd))}
    print("    workspace:", ws)
    if not args.keep:
        shutil.rmtree(recorded_root, ignore_errors=True)
    return verdict.startswith("EQUAL") or verdict == "SEE-DETAIL"


def fixture_script(fixture, path):
    """The fixture's answers as a pvisor model script (turn i = request line i's answer)."""
    turns = []
    for fn in ("requests-run1.jsonl", "requests-resume.jsonl"):
        for line in open(os.path.join(fixture, fn), encoding="utf-8"):
            a = json.loads(line)["answer"]
            t = {}
            if a.get("text"):
                t["text"] = a["text"]
            if a.get("tool_calls"):
                t["tool_calls"] = [{"name": c["name"], "input": c["arguments"]} for c in a["tool_calls"]]
            turns.append(t)
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"name": "openhands-fixture", "turns": turns}, f, indent=1)
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default="/tmp/oh-venv")
    ap.add_argument("--path-prefix", help="PATH entry before /usr/bin for the agent's shell (default <venv>/bin)")
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--script", help="model script (default: built from the fixture's answers)")
    ap.add_argument("--boundary", type=int, action="append")
    ap.add_argument("--prompt")
    ap.add_argument("--max-steps", type=int)
    ap.add_argument("--edit", action="store_true")
    ap.add_argument("--num-retries", type=int)
    ap.add_argument("--dead-bridge", action="store_true")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--capture", action="store_true", help="use capture_server.py (raw bytes) instead of pvisor")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--source", default="native-run1")
    args = ap.parse_args()
    if not args.script:
        args.script = fixture_script(args.fixture, tempfile.mkstemp(prefix="oh-script-", suffix=".json")[1])
    src_conv = glob.glob(os.path.join(args.fixture, args.source, "*"))[0]
    base = json.load(open(os.path.join(src_conv, "base_state.json")))
    all_events = load_events(src_conv)
    original = [json.loads(l) for l in open(os.path.join(args.fixture, "requests-run1.jsonl"))]
    resume = [json.loads(l) for l in open(os.path.join(args.fixture, "requests-resume.jsonl"))]
    args.resume_first = resume[0]
    nb = len(batches(all_events))
    ok = True
    for n in args.boundary or range(1, nb + 1):
        ok &= run_boundary(args, n, all_events, base, original, src_conv)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
