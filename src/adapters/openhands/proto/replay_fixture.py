#!/usr/bin/env python3
"""Tools-mode check: re-execute every recorded action of the genuine OpenHands fixture with
runner.py in a fresh empty workspace at the recorded path, and compare with the recorded
ObservationEvents (persisted JSON minus id/timestamp) and with the tool messages the SDK sent
(requests-run1.jsonl).

    python3 replay_fixture.py [--venv /tmp/oh-venv] [--fixture DIR] [--keep] [--path-prefix]

Exit 0 when every observation matches. Prints one line per action.
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
DYNAMIC = ("id", "timestamp")


def load_events(conv_dir):
    out = []
    for p in sorted(glob.glob(os.path.join(conv_dir, "events", "event-*.json"))):
        with open(p, encoding="utf-8") as f:
            out.append((os.path.basename(p), f.read()))
    return out


def tool_messages(requests_path):
    msgs = {}
    with open(requests_path, encoding="utf-8") as f:
        for line in f:
            body = json.loads(line)["body"]
            for m in body["messages"]:
                if m.get("role") == "tool":
                    msgs[m["tool_call_id"]] = m
    return msgs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", default="/tmp/oh-venv")
    ap.add_argument("--fixture", default=FIXTURE)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--no-venv-path", action="store_true", help="do not put <venv>/bin first on PATH")
    ap.add_argument("--path-prefix", help="PATH entry before /usr/local/bin (default <venv>/bin)")
    args = ap.parse_args()

    conv_src = glob.glob(os.path.join(args.fixture, "native-run1", "*"))[0]
    base = json.load(open(os.path.join(conv_src, "base_state.json")))
    cwd = base["workspace"]["working_dir"]
    conv_dir = base["persistence_dir"]
    root = os.path.dirname(cwd)  # /tmp/realagent-openhands.XXXX
    if os.path.exists(root):
        print(f"refusing: {root} exists (remove it first)", file=sys.stderr)
        return 2
    os.makedirs(cwd)
    home = os.path.join(root, "runner-home")
    os.makedirs(os.path.join(home, "tmp"))
    env = {
        "PATH": ("" if args.no_venv_path else f"{args.path_prefix or args.venv + '/bin'}:") + "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "xterm",
        "TMPDIR": os.path.join(home, "tmp"),
        "TMUX_TMPDIR": os.path.join(home, "tmp"),
    }
    t0 = time.time()
    p = subprocess.Popen([f"{args.venv}/bin/python", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(os.path.join(home, "runner.stderr"), "w"), text=True, env=env, cwd=home)

    def call(req):
        p.stdin.write(json.dumps(req) + "\n")
        p.stdin.flush()
        ans = json.loads(p.stdout.readline())
        if not ans.get("ok"):
            print(json.dumps(ans, indent=1), file=sys.stderr)
            raise SystemExit(1)
        return ans

    hello = call({"op": "hello", "id": 1})
    t_hello = time.time() - t0
    init = call({"op": "init", "id": 2, "base_state": os.path.join(conv_src, "base_state.json"),
                 "cwd": cwd, "conversation_dir": conv_dir})
    print(f"hello {hello} ({t_hello:.1f}s)\ninit {init}")
    recorded = load_events(conv_src)
    by_id = {json.loads(t)["id"]: json.loads(t) for _, t in recorded}
    obs_for = {}
    for _, t in recorded:
        d = json.loads(t)
        if d["kind"] in ("ObservationEvent", "AgentErrorEvent", "UserRejectObservation"):
            obs_for[d.get("action_id") or d["tool_call_id"]] = (d, t)
            obs_for[d["tool_call_id"]] = (d, t)
    sent = tool_messages(os.path.join(args.fixture, "requests-run1.jsonl"))
    failures = 0
    for name, text in recorded:
        d = json.loads(text)
        if d["kind"] != "ActionEvent":
            continue
        rec_obs, rec_text = obs_for[d["id"]]
        t1 = time.time()
        ans = call({"op": "execute", "action_event": d, "parent_id": rec_obs.get("parent_id")})
        dt = time.time() - t1
        new = ans["events"][0]
        new_json = ans["events_json"][0]
        # persisted JSON minus dynamic fields (key order too: compare the strings)
        strip = lambda o: {k: v for k, v in o.items() if k not in DYNAMIC}
        same_json = strip(new) == strip(rec_obs)
        same_bytes = (json.dumps(strip(json.loads(new_json))) == json.dumps(strip(json.loads(rec_text))))
        sent_msg = sent.get(d["tool_call_id"])
        same_msg = sent_msg is None or ans["llm_messages"][0] == sent_msg
        ok = same_json and same_bytes and same_msg
        failures += 0 if ok else 1
        print(f"{'OK  ' if ok else 'DIFF'} {d['tool_call_id']:18} {d['tool_name']:12} json={same_json} "
              f"order={same_bytes} llm_msg={same_msg if sent_msg else 'n/a'} {dt*1000:.0f}ms "
              f"text={ans['observation_text'][:60]!r}")
        if not ok:
            for k in sorted(set(new) | set(rec_obs)):
                if k not in DYNAMIC and new.get(k) != rec_obs.get(k):
                    print(f"     {k}: recorded={json.dumps(rec_obs.get(k))[:400]}\n     {k}: replayed={json.dumps(new.get(k))[:400]}")
            if sent_msg and not same_msg:
                print(f"     sent    ={json.dumps(sent_msg)[:600]}\n     replayed={json.dumps(ans['llm_messages'][0])[:600]}")
    call({"op": "exit", "id": 99})
    p.wait(timeout=30)
    print(f"runner exit {p.returncode}; total {time.time()-t0:.1f}s; HOME files: "
          f"{[os.path.relpath(x, home) for x in glob.glob(home + '/**', recursive=True, include_hidden=True)][:20]}")
    print("workspace:", {f: open(os.path.join(cwd, f)).read() for f in sorted(os.listdir(cwd))})
    print("conversation dir:", sorted(os.listdir(conv_dir)) if os.path.isdir(conv_dir) else None)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    print(f"{sum(1 for _, t in recorded if json.loads(t)['kind']=='ActionEvent') - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
