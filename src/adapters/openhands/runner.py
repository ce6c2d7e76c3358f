#!/usr/bin/env python3
"""pvisor companion runner for the OpenHands SDK (openhands-sdk / openhands-tools 1.34.0,
Python 3.12). pvisor writes it into the run's state dir and starts it with the Python of the
venv `pvisor agents install openhands` made (or `--agent-entrypoint`); see
docs/agents/openhands.md.

Run it with the Python of the venv where openhands-sdk and openhands-tools are installed:

    <venv>/bin/python runner.py                                   # tools mode (JSON lines)
    PVISOR_OPENHANDS_RUNNER='{"mode":"continue",...}' <venv>/bin/python runner.py
    PVISOR_OPENHANDS_RUNNER='{"mode":"messages",...}' <venv>/bin/python runner.py
  PVISOR_OPENHANDS_RUNNER='{"mode":"version"}' <venv>/bin/python runner.py

TOOLS MODE. One JSON object per line on stdin, one JSON answer per line on stdout. Every answer
echoes the request's "id" (if any) and has "ok": true|false ("error", "traceback" on failure).
Everything the SDK prints (banner, rich logs, visualizer) goes to stderr.

  {"op":"hello"}
      -> {"sdk_version","tools_version","litellm_version","openai_version","python","tmux"}
  {"op":"init","base_state":PATH|{...},          # the recorded base_state.json (its "agent" is used)
   "cwd":"/abs/workspace",                        # LocalWorkspace.working_dir (default: recorded one)
   "conversation_dir":"/abs/<persist>/<hex>",     # tool state dir: TASKS.json, observations/
   "terminal_cwd":"/abs/dir" (optional)}          # after a runner restart: cd the fresh shell there
      -> {"tools":[names],"agent_kind","conversation_id","conversation_dir","cwd",
          "terminal_backend","tmux_socket","tmux_session","overrides"}
  {"op":"execute","action_event":{ActionEvent JSON as persisted} | "action_event_path":PATH,
   "event_id":"<event id>" (optional: the id of the first returned event, e.g. the recorded one's),
   "parent_id":"<event id>" (optional: stamped on the first returned event, then chained)}
      -> {"events":[persisted event JSON objects, exactly as EventLog writes them],
          "events_json":[the same as the exact strings EventLog would write],
          "llm_messages":[Chat Completions tool message(s) the model will see],
          "observation_text": the model-visible text of the (first) result,
          "is_error": bool, "exit_code": int|null, "timeout": bool, "kind": "ObservationEvent"|...}
  {"op":"exit"}

The runner holds no replay state of its own. What the TOOLS hold between calls is OpenHands'
own: the terminal's persistent shell (tmux pane: cwd, exported variables, background jobs),
file_editor's undo history (a temp dir per process) and task_tracker's TASKS.json (in
conversation_dir, so it survives a restart). A restarted runner starts a fresh shell.

CONTINUE MODE. Configured by the JSON env var PVISOR_OPENHANDS_RUNNER:
  {"mode":"continue",
   "persistenceDir":"/abs/conversations",   # the dir that holds <conversation-id hex>/
   "conversationId":"<uuid>",
   "cwd":"/abs/workspace",                  # default: the stored workspace.working_dir
   "baseUrl":"http://127.0.0.1:PORT/v1",    # the bridge (Chat Completions)
   "model":"openai/<name>" (optional),      # default: stored model, forced to openai/<bare>
   "maxSteps":N (optional),                 # agent iterations (= model calls) for this run
   "promptFile":PATH (optional),            # boundary prompt: send_message(text) before run()
   "numRetries":N (optional),               # override llm.num_retries (default: stored)
   "checkStatus":false (optional)}          # tests only: accept any stored execution_status
  The API key comes from env PVISOR_OPENHANDS_API_KEY (removed from the environment at once;
  default "pvisor"). It is never written to the store (SecretStr is serialized redacted).
  The last stdout line is {"type":"pvisor_end", ...} (see continue_mode()).

MESSAGES MODE. {"mode":"messages","persistenceDir","conversationId","cwd"}: loads a copy of
the stored conversation exactly as continue mode does (so the store itself is never
rewritten) and prints {"type":"pvisor_messages","messages":[...]}: the Chat Completions
messages the agent's next request will carry (the SDK's own View -> events_to_messages ->
format_messages_for_llm), i.e. the prefix the bridge checks.

Environment knobs: RUNNER_BLOCK_NET (default 1: refuse non-loopback sockets and DNS of
non-loopback names).
"""

import json
import os
import sys
import time
import traceback
import uuid
from pathlib import Path

# --- 1. protect the protocol streams -------------------------------------------------------
PROTO_IN = os.fdopen(os.dup(0), "r", encoding="utf-8")
PROTO_OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.dup2(2, 1)  # anything printed to stdout (banner, rich console, visualizer) lands on stderr
sys.stdin = open(os.devnull)
sys.stdout = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")

# --- 1b. a clock shifted by libfaketime (a continuation "on another day") breaks Python's
# sleeps: time.sleep waits for an absolute CLOCK_MONOTONIC deadline, which libfaketime shifts
# like the wall clock. Under libfaketime sleeps become relative waits; nothing else changes.
if "faketime" in os.environ.get("LD_PRELOAD", ""):
    import select as _select
    import time as _time_module

    def _relative_sleep(secs):
        if secs > 0:
            _select.select([], [], [], secs)

    _time_module.sleep = _relative_sleep

# --- 2. environment defaults, read at import time -------------------------------------------
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # else litellm fetches a price list
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
_CONFIG_TEXT = os.environ.pop("PVISOR_OPENHANDS_RUNNER", None)
_API_KEY = os.environ.pop("PVISOR_OPENHANDS_API_KEY", None)

# --- 3. network guard -----------------------------------------------------------------------
NET_VIOLATIONS = []
if os.environ.get("RUNNER_BLOCK_NET", "1") != "0":
    import ipaddress
    import socket

    def _is_loopback(host):
        if host in ("localhost", "", None):
            return True
        try:
            return ipaddress.ip_address(str(host).split("%")[0]).is_loopback
        except ValueError:
            return False

    _orig_connect, _orig_connect_ex, _orig_gai = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def _check(addr):
        if isinstance(addr, tuple) and not _is_loopback(addr[0]):
            NET_VIOLATIONS.append(repr(addr))
            print(f"[runner] BLOCKED network connection to {addr!r}", file=sys.stderr, flush=True)
            raise OSError(f"runner: network to {addr!r} blocked (RUNNER_BLOCK_NET)")

    def _connect(self, addr):
        _check(addr)
        return _orig_connect(self, addr)

    def _connect_ex(self, addr):
        _check(addr)
        return _orig_connect_ex(self, addr)

    def _gai(host, *a, **k):
        h = host.decode() if isinstance(host, bytes) else host
        if not _is_loopback(h):
            NET_VIOLATIONS.append(f"dns:{h}")
            print(f"[runner] BLOCKED DNS lookup of {h!r}", file=sys.stderr, flush=True)
            raise socket.gaierror(f"runner: DNS lookup of {h!r} blocked (RUNNER_BLOCK_NET)")
        return _orig_gai(host, *a, **k)

    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = _connect, _connect_ex, _gai


def _versions():
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for key, dist in (("sdk_version", "openhands-sdk"), ("tools_version", "openhands-tools"),
                      ("litellm_version", "litellm"), ("openai_version", "openai")):
        try:
            out[key] = md.version(dist)
        except Exception:
            out[key] = None
    return out


if _CONFIG_TEXT is not None and json.loads(_CONFIG_TEXT).get("mode") == "version":
    PROTO_OUT.write(json.dumps({"type": "pvisor_version", **_versions()}) + "\n")
    PROTO_OUT.flush()
    os._exit(0)

# --- 4. import the SDK ----------------------------------------------------------------------
from openhands.sdk import LLM, Conversation  # noqa: E402
from openhands.sdk.agent.base import AgentBase  # noqa: E402
from openhands.sdk.conversation.impl.local_conversation import LocalConversation  # noqa: E402
from openhands.sdk.event import ActionEvent, AgentErrorEvent, ObservationEvent  # noqa: E402
from openhands.sdk.event.base import Event  # noqa: E402
from openhands.sdk.io import InMemoryFileStore  # noqa: E402

# Tool name (as in base_state.json agent.tools[].name) -> module that registers it.
# Only these are replayed; any other tool name is refused before anything runs.
TOOL_MODULES = {
    "terminal": "openhands.tools.terminal",
    "file_editor": "openhands.tools.file_editor",
    "task_tracker": "openhands.tools.task_tracker",
    "glob": "openhands.tools.glob",
    "grep": "openhands.tools.grep",
    "apply_patch": "openhands.tools.apply_patch",
    "planning_file_editor": "openhands.tools.planning_file_editor",
}
BUILTIN_TOOLS = {"finish", "think"}  # include_default_tools FinishTool, ThinkTool


def _register_tools(agent_dict):
    import importlib

    names = [t.get("name") for t in agent_dict.get("tools") or []]
    unknown = [n for n in names if n not in TOOL_MODULES]
    if unknown:
        raise ValueError(f"unsupported OpenHands tool(s) {unknown}; supported: {sorted(TOOL_MODULES)}")
    for n in names:
        importlib.import_module(TOOL_MODULES[n])
    return names


def _load_json(value):
    if isinstance(value, dict):
        return value
    return json.loads(Path(value).read_text(encoding="utf-8"))


def _bare_model(name):
    return name.split("/", 1)[1] if "/" in name else name


def _build_agent(agent_dict, base_url=None, api_key=None, model=None, num_retries=None, overrides=None):
    """The recorded agent (base_state.json "agent"), validated by the SDK itself, with the LLM(s)
    pointed at the bridge. Only llm.base_url/api_key/(model)/(num_retries) change."""
    overrides = overrides if overrides is not None else []
    d = json.loads(json.dumps(agent_dict))
    _register_tools(d)
    llms = [("agent.llm", d.get("llm"))]
    cond = d.get("condenser")
    if isinstance(cond, dict) and isinstance(cond.get("llm"), dict):
        llms.append(("agent.condenser.llm", cond["llm"]))
    for label, llm in llms:
        if not isinstance(llm, dict):
            continue
        if base_url is not None:
            if llm.get("base_url") != base_url:
                overrides.append(f"{label}.base_url {llm.get('base_url')!r} -> {base_url!r}")
            llm["base_url"] = base_url
        # the stored key is always redacted ("**********"); never write a real one into the dict dump
        llm["api_key"] = api_key if api_key is not None else "pvisor"
        name = model or llm.get("model") or ""
        if base_url is not None and not name.startswith("openai/"):
            forced = f"openai/{_bare_model(name)}"
            overrides.append(f"{label}.model {llm.get('model')!r} -> {forced!r} (the bridge speaks Chat Completions)")
            name = forced
        elif model and model != llm.get("model"):
            overrides.append(f"{label}.model {llm.get('model')!r} -> {model!r}")
        llm["model"] = name
        if num_retries is not None and llm.get("num_retries") != num_retries:
            overrides.append(f"{label}.num_retries {llm.get('num_retries')} -> {num_retries}")
            llm["num_retries"] = num_retries
    return AgentBase.model_validate(d), overrides


def _tmux_socket_path():
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return os.path.join(base, f"tmux-{os.getuid()}", "openhands")


def _observability_dotenv():
    """The .env file OpenHands' observability get_env() would read (python-dotenv find_dotenv from
    openhands/sdk/observability/utils.py upwards); LMNR_*/OTEL_* keys there enable tracing."""
    import openhands.sdk.observability.utils as u

    d = os.path.dirname(os.path.abspath(u.__file__))
    while True:
        cand = os.path.join(d, ".env")
        if os.path.isfile(cand):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _event_json(event):
    """Exactly what EventLog.append writes for an event."""
    return event.model_dump_json(exclude_none=True)


def _llm_message(event, llm):
    """The Chat Completions message the SDK will send for this event (LLM.format_messages_for_llm)."""
    return llm.format_messages_for_llm([event.to_llm_message()])[0]


def _model_text(event):
    msg = event.to_llm_message()
    parts = []
    for c in msg.content:
        t = getattr(c, "text", None)
        if t is not None:
            parts.append(t)
    return "".join(parts)


class Runner:
    def __init__(self):
        self.conv = None
        self.agent = None
        self.overrides = []

    def op_hello(self, req):
        import shutil

        return {**_versions(), "tmux": shutil.which("tmux"), "dotenv_file": _observability_dotenv()}

    def op_init(self, req):
        if self.conv is not None:
            raise RuntimeError("already initialized (one init per runner process)")
        base = _load_json(req["base_state"])
        agent_dict = base["agent"]
        self.overrides = []
        agent, _ = _build_agent(agent_dict, overrides=self.overrides)
        if getattr(agent, "agent_context", None) is not None:
            # path-scoped rules would add ObservationEvent.extended_content (needs the event log)
            self.overrides.append("agent.agent_context present: path-rule extended_content is NOT reproduced")
        cwd = req.get("cwd") or (base.get("workspace") or {}).get("working_dir")
        if not cwd:
            raise ValueError("no cwd given and none recorded")
        conv_dir = req.get("conversation_dir")
        conv_id = uuid.UUID(str(req.get("conversation_id") or base["id"]))
        if conv_dir:
            conv_dir = os.path.abspath(conv_dir)
            persist_base = str(Path(conv_dir).parent)
            if Path(conv_dir).name != conv_id.hex:
                raise ValueError(f"conversation_dir must end with the conversation id hex {conv_id.hex}")
        else:
            persist_base = None
        # Events stay in memory (the store is written by pvisor); persistence_dir still decides
        # where tools keep their files (task_tracker TASKS.json, terminal full outputs).
        self.conv = LocalConversation(
            agent=agent,
            workspace=cwd,
            persistence_dir=persist_base,
            conversation_id=conv_id,
            file_store=InMemoryFileStore(),
            visualizer=None,
            stuck_detection=False,
        )
        self.conv._ensure_agent_ready()  # the SDK's own tool initialisation (resolve_tool per spec)
        self.agent = self.conv.agent
        term = self.agent.tools_map.get("terminal")
        backend, tmux_session = None, None
        if term is not None:
            ex = term.executor
            if getattr(ex, "is_pooled", False):
                backend = "tmux-pool"
                try:
                    tmux_session = ex._pool._session.session_name
                except Exception:
                    pass
            else:
                backend = type(getattr(ex, "_session", None)).__name__
            if req.get("terminal_cwd"):
                self._hidden_cd(term, req["terminal_cwd"])
        return {
            "tools": sorted(self.agent.tools_map.keys()),
            "agent_kind": type(self.agent).__name__,
            "conversation_id": str(conv_id),
            "conversation_dir": self.conv.state.persistence_dir,
            "cwd": cwd,
            "terminal_backend": backend,
            "tmux_socket": _tmux_socket_path() if backend == "tmux-pool" else None,
            "tmux_session": tmux_session,
            "overrides": self.overrides,
        }

    def _hidden_cd(self, term, path):
        from openhands.tools.terminal.definition import TerminalAction

        obs = term.executor(TerminalAction(command=f"cd {json.dumps(path)}"), None)
        if obs.metadata.working_dir != path:
            raise RuntimeError(f"terminal_cwd: shell is in {obs.metadata.working_dir!r}, wanted {path!r}")
        self.overrides.append(f"terminal: fresh shell moved to {path!r} before the first call")

    def op_execute(self, req):
        if self.conv is None:
            raise RuntimeError("init first")
        raw = req.get("action_event")
        if raw is None and req.get("action_event_path"):
            raw = json.loads(Path(req["action_event_path"]).read_text(encoding="utf-8"))
        if isinstance(raw, str):
            raw = json.loads(raw)
        ae = Event.model_validate(raw)
        if not isinstance(ae, ActionEvent):
            raise ValueError(f"not an ActionEvent: {type(ae).__name__}")
        agent, conv = self.agent, self.conv
        if ae.action is None:
            # The recorded call failed validation: the SDK emitted ActionEvent(action=None) +
            # AgentErrorEvent. Regenerate that error by the SDK's own parser (nothing runs).
            produced = []
            agent._get_action_event(ae.tool_call, conversation=conv, llm_response_id=ae.llm_response_id,
                                    on_event=produced.append, thought=list(ae.thought))
            results = [e for e in produced if isinstance(e, AgentErrorEvent)]
            if not results:
                raise RuntimeError("recorded action has no parsed action, but the SDK now accepts the call")
        else:
            if ae.tool_name not in agent.tools_map:
                raise ValueError(f"tool {ae.tool_name!r} is not among the agent's tools {sorted(agent.tools_map)}")
            # == Agent._execute_actions for a batch of one: ParallelToolExecutor._run_safe (locking,
            # exception -> AgentErrorEvent) around Agent._execute_action_event (tool call -> event)
            results = agent._parallel_executor.execute_batch(
                [ae], lambda a: agent._execute_action_event(conv, a), agent.tools_map, None
            )[0]
        parent = req.get("parent_id")
        event_id = req.get("event_id")
        out = []
        for ev in results:
            update = {}
            if event_id is not None:
                update["id"] = event_id  # the recorded result's place in the event tree
                event_id = None
            if parent is not None:
                update["parent_id"] = parent
            if update:
                ev = ev.model_copy(update=update)
            if parent is not None:
                parent = ev.id
            out.append(ev)
        first = out[0]
        obs = getattr(first, "observation", None)
        return {
            "events": [json.loads(_event_json(e)) for e in out],
            "events_json": [_event_json(e) for e in out],
            "llm_messages": [_llm_message(e, agent.llm) for e in out],
            "observation_text": _model_text(first),
            "kind": type(first).__name__,
            "is_error": bool(getattr(obs, "is_error", False)) if obs is not None else isinstance(first, AgentErrorEvent),
            "exit_code": getattr(obs, "exit_code", None),
            "timeout": bool(getattr(obs, "timeout", False)),
            "net_violations": list(NET_VIOLATIONS),
        }

    def close(self):
        if self.conv is not None:
            try:
                self.conv.close()
            except Exception:
                traceback.print_exc()
            self.conv = None


def tools_main():
    runner = Runner()
    try:
        for line in PROTO_IN:
            line = line.strip()
            if not line:
                continue
            rid, req = None, None
            try:
                req = json.loads(line)
                rid = req.get("id")
                op = req.get("op")
                if op == "exit":
                    ans = {"ok": True}
                else:
                    fn = getattr(runner, f"op_{op}", None)
                    if fn is None:
                        raise ValueError(f"unknown op {op!r}")
                    ans = {"ok": True, **fn(req)}
            except Exception as e:
                ans = {"ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
            if rid is not None:
                ans = {"id": rid, **ans}
            PROTO_OUT.write(json.dumps(ans) + "\n")
            PROTO_OUT.flush()
            if isinstance(req, dict) and req.get("op") == "exit":
                break
    finally:
        runner.close()
    return 0


# ------------------------------------------------------------------------------ continue mode
def _agent_calls(conv):
    """Number of completed agent LLM calls so far (ConversationStats, usage_id 'agent')."""
    try:
        m = conv.state.stats.usage_to_metrics.get("agent")
        return len(m.response_latencies) if m is not None else 0
    except Exception:
        return None


def continue_mode(cfg):
    ans = {"type": "pvisor_end", "ok": False}
    conv = None
    try:
        persist = os.path.abspath(cfg["persistenceDir"])
        conv_id = uuid.UUID(str(cfg["conversationId"]))
        conv_dir = Path(persist) / conv_id.hex
        base = json.loads((conv_dir / "base_state.json").read_text(encoding="utf-8"))
        status0 = base.get("execution_status")
        if cfg.get("checkStatus", True) and status0 not in ("idle", "paused", "error", "stuck", None):
            raise ValueError(f"stored execution_status {status0!r}: run() would return at once; the cut "
                             "store must say 'idle'")
        recorded_max_iterations = base.get("max_iterations", 500)
        agent, overrides = _build_agent(base["agent"], base_url=cfg["baseUrl"], api_key=_API_KEY,
                                        model=cfg.get("model"), num_retries=cfg.get("numRetries"))
        cwd = cfg.get("cwd") or base["workspace"]["working_dir"]
        max_steps = cfg.get("maxSteps")
        max_iter = int(max_steps) if max_steps is not None else int(recorded_max_iterations)
        if max_iter < 1:
            raise ValueError("maxSteps must be >= 1")
        conv = Conversation(
            agent=agent,
            workspace=cwd,
            persistence_dir=persist,
            conversation_id=conv_id,
            max_iteration_per_run=max_iter,
            visualizer=None,
        )
        n0 = len(conv.state.events)
        if cfg.get("promptFile"):
            prompt = Path(cfg["promptFile"]).read_text(encoding="utf-8")
            conv.send_message(prompt)
        calls0 = _agent_calls(conv) or 0
        error = None
        try:
            conv.run()
        except Exception as e:  # ConversationRunError: status already 'error', event written
            error = f"{type(e).__name__}: {e}"
            traceback.print_exc()
        st = conv.state
        status = st.execution_status.value if hasattr(st.execution_status, "value") else str(st.execution_status)
        new_events = list(st.events)[n0:]
        err_ev = None
        for ev in reversed(new_events):
            if type(ev).__name__ == "ConversationErrorEvent":
                err_ev = ev
                break
        code = getattr(err_ev, "code", None)
        if status == "finished":
            agent_status = "completed"
        elif status == "error" and code == "MaxIterationsReached":
            agent_status = "max_steps"
        else:
            agent_status = "failed"  # error / stuck / paused / waiting_for_confirmation / idle / running
        if max_steps is not None and st.max_iterations != recorded_max_iterations:
            st.max_iterations = recorded_max_iterations  # autosaves base_state.json
            overrides.append(f"max_iterations {recorded_max_iterations} -> {max_iter} during the run "
                             "(recorded value restored in base_state.json)")
        calls1 = _agent_calls(conv)
        ans = {
            "type": "pvisor_end",
            "ok": True,
            "execution_status": status,
            "agent_status": agent_status,
            "error_code": code,
            "error_detail": getattr(err_ev, "detail", None),
            "exception": error,
            "model_calls": (calls1 - calls0) if calls1 is not None else None,
            "events_before": n0,
            "events_after": len(st.events),
            "new_event_kinds": [type(e).__name__ for e in new_events],
            "conversation_dir": str(conv_dir),
            "overrides": overrides,
            "net_violations": list(NET_VIOLATIONS),
            "dotenv_file": _observability_dotenv(),
        }
    except Exception as e:
        ans = {"type": "pvisor_end", "ok": False, "error": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc(), "net_violations": list(NET_VIOLATIONS)}
    finally:
        if conv is not None:
            try:
                conv.close()
            except Exception:
                traceback.print_exc()
    PROTO_OUT.write(json.dumps(ans) + "\n")
    PROTO_OUT.flush()
    return 0


def messages_mode(cfg):
    import shutil
    import tempfile

    from openhands.sdk.agent.utils import prepare_llm_messages

    ans = {"type": "pvisor_messages", "ok": False}
    conv = None
    tmp = tempfile.mkdtemp(prefix="pvisor-oh-messages-")
    try:
        conv_id = uuid.UUID(str(cfg["conversationId"]))
        src = Path(os.path.abspath(cfg["persistenceDir"])) / conv_id.hex
        shutil.copytree(src, Path(tmp) / conv_id.hex)
        base = json.loads((src / "base_state.json").read_text(encoding="utf-8"))
        agent, _ = _build_agent(base["agent"], base_url="http://127.0.0.1:9/v1", api_key=_API_KEY)
        cwd = cfg.get("cwd") or base["workspace"]["working_dir"]
        conv = Conversation(agent=agent, workspace=cwd, persistence_dir=tmp, conversation_id=conv_id,
                            visualizer=None)
        msgs = prepare_llm_messages(conv.state.view, condenser=None)
        ans = {"type": "pvisor_messages", "ok": True,
               "messages": conv.agent.llm.format_messages_for_llm(msgs),
               "net_violations": list(NET_VIOLATIONS)}
    except Exception as e:
        ans = {"type": "pvisor_messages", "ok": False, "error": f"{type(e).__name__}: {e}",
               "traceback": traceback.format_exc()}
    finally:
        if conv is not None:
            try:
                conv.close()
            except Exception:
                traceback.print_exc()
        shutil.rmtree(tmp, ignore_errors=True)
    PROTO_OUT.write(json.dumps(ans, ensure_ascii=False) + "\n")
    PROTO_OUT.flush()
    return 0


def main():
    cfg = json.loads(_CONFIG_TEXT) if _CONFIG_TEXT else {}
    try:
        if cfg.get("mode") == "continue":
            return continue_mode(cfg)
        if cfg.get("mode") == "messages":
            return messages_mode(cfg)
        return tools_main()
    finally:
        try:
            sys.stderr.flush()
        except Exception:
            pass


if __name__ == "__main__":
    code = main()
    # The SDK registers atexit handlers and leaves threads (tmux pool, litellm); exit hard but clean.
    sys.stderr.flush()
    os._exit(code)
