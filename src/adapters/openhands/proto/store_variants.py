#!/usr/bin/env python3
"""How the SDK treats variants of a cut store (recorded observations, cut after batch 3 = event 9):

  ok            execution_status idle, leaf_event_id = last kept event          (the good cut)
  finished      execution_status kept 'finished'
  leaf-stale    leaf_event_id left pointing at the removed last event of the run
  leaf-none     leaf_event_id null (events keep their parent_id)
  no-parents    leaf_event_id null and every parent_id removed (legacy linear store)
  pending       cut after the ActionEvent of batch 4, no observation, status 'running'
  running       the good cut but status 'running' (a crashed continuation)

For each: runner.py continue mode against capture_server.py, max 1 step; prints the number of
requests, the first request's message count and roles' tail, and the pvisor_end status.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from boundary_check import dumps, fixture_script, load_events, start_server, RUNNER, FIXTURE  # noqa: E402

VENV = sys.argv[1] if len(sys.argv) > 1 else "/tmp/oh-venv-pinned"


def make(variant, root, events, base):
    persist = os.path.join(root, "conversations")
    hexid = base["id"].replace("-", "")
    d = os.path.join(persist, hexid, "events")
    os.makedirs(d)
    n = 10 if variant != "pending" else 11  # events 0..9 / 0..10
    kept = [dict(e) for e in events[:n]]
    if variant == "no-parents":
        for e in kept:
            e.pop("parent_id", None)
    for i, e in enumerate(kept):
        open(os.path.join(d, f"event-{i:05d}-{e['id']}.json"), "w").write(dumps(e))
    b = json.loads(json.dumps(base))
    b["persistence_dir"] = os.path.join(persist, hexid)
    b["execution_status"] = {"finished": "finished", "pending": "running", "running": "running"}.get(variant, "idle")
    b["leaf_event_id"] = {"leaf-stale": events[-1]["id"], "leaf-none": None, "no-parents": None}.get(variant, kept[-1]["id"])
    if b["leaf_event_id"] is None:
        b.pop("leaf_event_id")
    open(os.path.join(persist, hexid, "base_state.json"), "w").write(dumps(b))
    return persist


def main():
    src = glob.glob(os.path.join(FIXTURE, "native-run1", "*"))[0]
    base = json.load(open(os.path.join(src, "base_state.json")))
    events = load_events(src)
    script = fixture_script(FIXTURE, tempfile.mkstemp(prefix="oh-script-", suffix=".json")[1])
    for variant in ["ok", "finished", "leaf-stale", "leaf-none", "no-parents", "pending", "running"]:
        root = tempfile.mkdtemp(prefix=f"oh-variant-{variant}-")
        work = os.path.join(root, "work")
        os.makedirs(work)
        open(os.path.join(work, "notes.txt"), "w").write("line one\nline two\n")
        persist = make(variant, root, events, base)
        log = os.path.join(root, "req.jsonl")
        srv, url = start_server(script, log, capture=True)
        cfg = {"mode": "continue", "persistenceDir": persist, "conversationId": base["id"], "cwd": work,
               "baseUrl": url + "/v1", "maxSteps": 1, "checkStatus": False}
        env = {"PATH": "/tmp/oh-venv/bin:/usr/bin:/bin", "HOME": root, "LANG": "C.UTF-8",
               "TMUX_TMPDIR": root, "PVISOR_OPENHANDS_RUNNER": json.dumps(cfg)}
        t = time.time()
        cp = subprocess.run([f"{VENV}/bin/python", RUNNER], env=env, capture_output=True, text=True, timeout=300)
        srv.terminate()
        srv.wait()
        end = json.loads(cp.stdout.strip().splitlines()[-1])
        reqs = [json.loads(l) for l in open(log)] if os.path.exists(log) else []
        first = reqs[0]["body"]["messages"] if reqs else []
        print(f"{variant:11} {time.time()-t:4.1f}s requests={len(reqs)} first={len(first)} msgs "
              f"tail={[m['role'] for m in first[-3:]]} status={end.get('execution_status')} "
              f"agent_status={end.get('agent_status')} code={end.get('error_code')} new={end.get('new_event_kinds')} "
              f"err={(end.get('error') or '')[:150]}")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
