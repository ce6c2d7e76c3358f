#!/usr/bin/env python3
"""Tools-mode checks beyond the fixture: synthetic ActionEvents for task_tracker, think, a failing
command, a hard timeout, output past 30,000 chars, shell state (cd/export) across calls, an
undo_edit, a tool call that failed validation (action=None -> AgentErrorEvent), and an unknown tool.
Prints kind / is_error / exit_code / first 160 chars of the model-visible text for each.

    python3 tools_extra.py [/tmp/oh-venv-pinned]
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(os.path.dirname(HERE), "runner.py")
VENV = sys.argv[1] if len(sys.argv) > 1 else "/tmp/oh-venv-pinned"
FIX = glob.glob("/work/shared/fixtures/native/openhands/native-run1/*")[0]


def action_event(tool, args, kind_fields, action_kind, rid):
    cid = f"call_x_{uuid.uuid4().hex[:8]}"
    ev = {"id": str(uuid.uuid4()), "timestamp": "2026-11-30T00:00:00", "source": "agent", "thought": [],
          "thinking_blocks": [], "tool_name": tool, "tool_call_id": cid,
          "tool_call": {"id": cid, "name": tool, "arguments": json.dumps(args), "origin": "completion"},
          "llm_response_id": rid, "security_risk": "UNKNOWN", "summary": "x", "kind": "ActionEvent"}
    if action_kind is not None:
        ev["action"] = {**kind_fields, "kind": action_kind}
    return ev


def main():
    root = tempfile.mkdtemp(prefix="oh-tools-extra-")
    work, conv = os.path.join(root, "work"), os.path.join(root, "conversations", "22b9fc3dce304d2b8b3c154c2bfa0130")
    os.makedirs(work)
    env = {"PATH": f"{VENV}/bin:/usr/bin:/bin", "HOME": root, "LANG": "C.UTF-8", "TMUX_TMPDIR": root, "TMPDIR": root}
    p = subprocess.Popen([f"{VENV}/bin/python", RUNNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=open(os.path.join(root, "stderr"), "w"), text=True, env=env)

    def call(req):
        p.stdin.write(json.dumps(req) + "\n")
        p.stdin.flush()
        return json.loads(p.stdout.readline())

    print(call({"op": "init", "base_state": os.path.join(FIX, "base_state.json"), "cwd": work,
                "conversation_dir": conv})["tools"])
    T = lambda c, **kw: action_event("terminal", {"command": c, **kw}, {"command": c, "is_input": False, "reset": False, **kw}, "TerminalAction", "r1")
    F = lambda **a: action_event("file_editor", a, a, "FileEditorAction", "r2")
    tasks = [{"title": "first", "notes": "", "status": "todo"}, {"title": "second", "notes": "n", "status": "done"}]
    cases = [
        ("terminal cd+export", T("cd /tmp && export FOO=bar")),
        ("terminal state", T("pwd; echo $FOO")),
        ("terminal exit 3", T("ls /nonexistent; (exit 3)")),
        ("terminal timeout", T("sleep 5; echo done", timeout=1)),
        ("terminal after timeout", T("echo next")),
        ("terminal 40k output", T("python3 -c \"print('x'*40000)\"")),
        ("file create", F(command="create", path=os.path.join(work, "f.txt"), file_text="a\nb\n")),
        ("file str_replace", F(command="str_replace", path=os.path.join(work, "f.txt"), old_str="b", new_str="c")),
        ("file undo_edit", F(command="undo_edit", path=os.path.join(work, "f.txt"))),
        ("file missing", F(command="view", path=os.path.join(work, "nope.txt"))),
        ("task plan", action_event("task_tracker", {"command": "plan", "task_list": tasks},
                                   {"command": "plan", "task_list": tasks}, "TaskTrackerAction", "r3")),
        ("task view", action_event("task_tracker", {"command": "view"}, {"command": "view", "task_list": []},
                                   "TaskTrackerAction", "r4")),
        ("think", action_event("think", {"thought": "hmm"}, {"thought": "hmm"}, "ThinkAction", "r5")),
        ("invalid call", action_event("file_editor", {"command": "view"}, {}, None, "r6")),
        ("unknown tool", action_event("browser", {"url": "x"}, {}, None, "r7")),
    ]
    for name, ev in cases:
        ans = call({"op": "execute", "action_event": ev})
        if not ans.get("ok"):
            print(f"{name:22} ERROR {ans['error'][:200]}")
            continue
        print(f"{name:22} {ans['kind']:16} is_error={ans['is_error']!s:5} exit={ans['exit_code']!s:4} "
              f"timeout={ans['timeout']!s:5} text={ans['observation_text'][:170]!r}"
              + (f" ...[{len(ans['observation_text'])} chars] tail={ans['observation_text'][-260:]!r}"
                 if len(ans['observation_text']) > 1000 else ""))
    call({"op": "exit"})
    p.wait(timeout=60)
    print("conversation dir:", sorted(os.path.relpath(x, conv) for x in glob.glob(conv + "/**", recursive=True)))
    print("TASKS.json:", open(os.path.join(conv, "TASKS.json")).read()[:200] if os.path.exists(os.path.join(conv, "TASKS.json")) else None)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
