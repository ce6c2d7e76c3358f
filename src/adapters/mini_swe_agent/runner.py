#!/usr/bin/env python3
"""pvisor companion runner for mini-swe-agent 1.x (tested 1.17.5) and 2.x (tested 2.4.6).

Run it with the Python of the venv where the wanted mini-swe-agent version is installed:

    <venv of mini-swe-agent 2.4.6 or 1.17.5>/bin/python runner.py

Protocol: one JSON object per line on stdin, one JSON answer per line on stdout. Every answer
echoes the request's "id" (if any) and has "ok": true|false ("error", "traceback" on failure).
Everything mini itself prints (rich console, warnings) goes to stderr; the runner's fd 0 is
replaced by /dev/null for mini (so mini can never read the protocol stream with input()).

ops
  {"op":"init","trajectory":PATH,"cwd":"/abs"}
      -> {"ok","version","major","trajectory_format","agent_type","model_type","environment_type","overrides"}
  {"op":"execute","message":{assistant message as in the trajectory}}      (preferred, exact)
  {"op":"execute","action":"<command>"[, "tool_call_id":"call_..."]}      (one command)
      -> {"ok","messages":[...messages mini appends...],"observation":str|null,
          "observations":[...contents...],"returncode":int|null,"timeout":bool,
          "outputs":[per env.execute call: {returncode, timeout, exception_type}],
          "exit":{"exit_status","submission"}|null}
  {"op":"continue","messages":[prefix],"base_url":"http://127.0.0.1:PORT/v1","api_key":"...",
   "model":"openai/<name>" (optional), "max_steps":N (optional, additional model calls),
   "output":PATH, "litellm_model_registry":PATH (optional), "cost_tracking":"ignore_errors" (optional)}
      -> {"ok","exit_status","submission","steps","api_calls","cost","output","overrides"}
  {"op":"exit"}

Environment knobs: RUNNER_BLOCK_NET (default 1: refuse non-loopback sockets and DNS of
non-loopback names), MSWEA_GLOBAL_CONFIG_DIR (default: PVISOR_MINI_CONFIG_DIR, else a private temp dir).
"""

import copy
import importlib
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path
from types import SimpleNamespace

# --- 1. protect the protocol streams -------------------------------------------------------
PROTO_IN = os.fdopen(os.dup(0), "r", encoding="utf-8")
PROTO_OUT = os.fdopen(os.dup(1), "w", encoding="utf-8")
_devnull = os.open(os.devnull, os.O_RDONLY)
os.dup2(_devnull, 0)
os.dup2(2, 1)  # anything printed to stdout (rich, print) lands on stderr
sys.stdin = open(os.devnull)
sys.stdout = os.fdopen(os.dup(2), "w", encoding="utf-8", errors="replace")

# --- 1b. a clock shifted by libfaketime (a replay "on another day") breaks Python's sleeps:
# time.sleep waits for an absolute CLOCK_MONOTONIC deadline (clock_nanosleep TIMER_ABSTIME),
# which libfaketime shifts like the wall clock, so subprocess's wait loop fails with EINVAL
# or oversleeps. Under libfaketime sleeps become relative waits; nothing else changes.
if "faketime" in os.environ.get("LD_PRELOAD", ""):
    import select as _select
    import time as _time_module

    def _relative_sleep(secs):
        if secs > 0:
            _select.select([], [], [], secs)

    _time_module.sleep = _relative_sleep

# --- 2. environment defaults, must be set before minisweagent / litellm are imported --------
_ADDED_ENV = []


def _setdefault_env(key, value, *, remove_after_import):
    if key not in os.environ:
        os.environ[key] = value
        if remove_after_import:
            _ADDED_ENV.append(key)


_setdefault_env("LITELLM_LOCAL_MODEL_COST_MAP", "True", remove_after_import=False)  # read at litellm import
_setdefault_env("MSWEA_SILENT_STARTUP", "1", remove_after_import=True)
_setdefault_env("MSWEA_CONFIGURED", "true", remove_after_import=False)
_given_cfg_dir = os.environ.pop("PVISOR_MINI_CONFIG_DIR", None)  # pvisor's: in the run's state dir
if _given_cfg_dir and "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:
    _setdefault_env("MSWEA_GLOBAL_CONFIG_DIR", _given_cfg_dir, remove_after_import=True)
if "MSWEA_GLOBAL_CONFIG_DIR" not in os.environ:  # private, removed at exit: no ~/.config/mini-swe-agent, no user .env
    import atexit
    import shutil

    _cfg_dir = tempfile.mkdtemp(prefix="mini-runner-cfg-")
    atexit.register(shutil.rmtree, _cfg_dir, True)
    _setdefault_env("MSWEA_GLOBAL_CONFIG_DIR", _cfg_dir, remove_after_import=True)

# --- 3. optional network guard --------------------------------------------------------------
NET_VIOLATIONS = []
if os.environ.get("RUNNER_BLOCK_NET", "1") != "0":
    import ipaddress
    import socket

    def _is_loopback(host):
        if host in ("localhost", "", None):
            return True
        try:
            return ipaddress.ip_address(host.split("%")[0]).is_loopback
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

# --- 4. import mini -------------------------------------------------------------------------
import minisweagent  # noqa: E402

VERSION = minisweagent.__version__
MAJOR = int(VERSION.split(".")[0])
import litellm  # noqa: E402

for _k in _ADDED_ENV:  # only read at import time; keep them out of the commands' environment
    os.environ.pop(_k, None)


def _import_class(path):
    module_name, class_name = path.rsplit(".", 1)
    return getattr(importlib.import_module(module_name), class_name)


def _jsonable(obj):
    return json.loads(json.dumps(obj, default=str))


class Runner:
    def __init__(self):
        self.agent = None
        self.traj = None
        self.overrides = []
        self.records = []

    # ---------------------------------------------------------------- hello
    def op_hello(self, req):
        return {"version": VERSION, "major": MAJOR}

    # ---------------------------------------------------------------- init
    def op_init(self, req):
        traj = req["traj"] if "traj" in req else json.loads(Path(req["trajectory"]).read_text())
        self.traj = traj
        fmt = traj.get("trajectory_format")
        expected = "mini-swe-agent-1.1" if MAJOR >= 2 else "mini-swe-agent-1"
        if fmt != expected:
            raise ValueError(f"trajectory_format {fmt!r} does not match mini {VERSION} (writes {expected!r})")
        if req.get("cwd"):
            os.chdir(req["cwd"])
        cfg = traj["info"]["config"]
        self.overrides = []
        agent_type = cfg.get("agent_type", "minisweagent.agents.interactive.InteractiveAgent")
        if agent_type.endswith("TextualAgent"):
            self.overrides.append(f"agent_type {agent_type} -> InteractiveAgent (Textual UI cannot run headless)")
            agent_type = "minisweagent.agents.interactive.InteractiveAgent"
        agent_class = _import_class(agent_type)
        model_class = _import_class(cfg.get("model_type", "minisweagent.models.litellm_model.LitellmModel"))
        env_class = _import_class(cfg.get("environment_type", "minisweagent.environments.local.LocalEnvironment"))
        self.classes = (agent_class, model_class, env_class)
        self.model_config = copy.deepcopy(cfg["model"])
        env = env_class(**copy.deepcopy(cfg["environment"]))
        model = model_class(**copy.deepcopy(self.model_config))
        agent_config = copy.deepcopy(cfg["agent"])
        if MAJOR >= 2:
            agent_config["output_path"] = None  # set by "continue"
        if agent_type.endswith("InteractiveAgent"):
            if agent_config.get("mode", "confirm") != "yolo":
                self.overrides.append(f"agent.mode {agent_config.get('mode')!r} -> 'yolo' (no human in the loop)")
                agent_config["mode"] = "yolo"
            if agent_config.get("confirm_exit", True):
                self.overrides.append("agent.confirm_exit True -> False (no human in the loop)")
                agent_config["confirm_exit"] = False
        self.agent = agent_class(model, env, **agent_config)
        self.init_overrides = list(self.overrides)
        self._wrap_env(env)
        return {
            "version": VERSION,
            "major": MAJOR,
            "trajectory_format": fmt,
            "agent_type": agent_type,
            "model_type": cfg.get("model_type"),
            "environment_type": cfg.get("environment_type"),
            "overrides": self.overrides,
        }

    def _wrap_env(self, env):
        """Observe (not change) every env.execute call so we can report returncode/timeout."""
        orig = env.execute
        records = self.records

        def execute(*args, **kwargs):
            try:
                out = orig(*args, **kwargs)
            except BaseException as e:  # 1.x: TimeoutExpired; 2.x: Submitted (raised after running)
                timeout = type(e).__name__ in ("TimeoutExpired", "TimeoutError")
                records.append({"returncode": None, "timeout": timeout, "exception_type": type(e).__name__})
                raise
            exc_type = (out.get("extra") or {}).get("exception_type") if isinstance(out, dict) else None
            records.append(
                {
                    "returncode": out.get("returncode") if isinstance(out, dict) else None,
                    "timeout": exc_type == "TimeoutExpired",
                    "exception_type": exc_type,
                }
            )
            return out

        env.execute = execute

    # ---------------------------------------------------------------- execute
    def op_execute(self, req):
        if self.agent is None:
            raise RuntimeError("init first")
        agent = self.agent
        agent.messages = []
        self.records.clear()
        exit_info = None
        if MAJOR >= 2:
            exit_info = self._execute_v2(req)
        else:
            exit_info = self._execute_v1(req)
        new = _jsonable(agent.messages)
        agent.messages = []
        obs = [m.get("content") for m in new if m.get("role") != "exit"]
        if MAJOR < 2 and exit_info is not None:
            obs = []  # 1.x: the final user message is the submission, not an observation
        rec = list(self.records)
        return {
            "messages": new,
            "observation": obs[0] if len(obs) == 1 else (obs[0] if obs else None),
            "observations": obs,
            "returncode": rec[0]["returncode"] if len(rec) == 1 else None,
            "timeout": any(r["timeout"] for r in rec),
            "outputs": rec,
            "exit": exit_info,
        }

    def _execute_v1(self, req):
        from minisweagent.agents.default import NonTerminatingException, TerminatingException

        agent = self.agent
        try:
            if "message" in req:
                msg = req["message"]
                response = {"content": msg["content"]}
                if "extra" in msg:
                    response["extra"] = msg["extra"]
                agent.get_observation(response)  # parse_action -> execute_action -> render -> add_message
            else:
                # == DefaultAgent.get_observation without parse_action (the command is already known)
                output = agent.execute_action({"action": req["action"]})
                observation = agent.render_template(agent.config.action_observation_template, output=output)
                agent.add_message("user", observation)
        except NonTerminatingException as e:  # == DefaultAgent.run()
            agent.add_message("user", str(e))
        except TerminatingException as e:
            agent.add_message("user", str(e))
            return {"exit_status": type(e).__name__, "submission": str(e)}
        return None

    def _execute_v2(self, req):
        from minisweagent.exceptions import InterruptAgentFlow

        agent = self.agent
        if "message" in req:
            msg = copy.deepcopy(req["message"])
            extra = msg.setdefault("extra", {})
            if "actions" not in extra:
                from minisweagent.models.utils.actions_toolcall import parse_toolcall_actions

                tcs = [
                    SimpleNamespace(
                        id=tc.get("id"),
                        function=SimpleNamespace(name=tc["function"]["name"], arguments=tc["function"]["arguments"]),
                    )
                    for tc in (msg.get("tool_calls") or [])
                ]
                extra["actions"] = parse_toolcall_actions(
                    tcs, format_error_template=getattr(agent.model.config, "format_error_template", "{{ error }}")
                )
        else:
            action = {"command": req["action"]}
            if req.get("tool_call_id"):
                action["tool_call_id"] = req["tool_call_id"]
            msg = {"role": "assistant", "content": "", "extra": {"actions": [action]}}
        try:
            agent.execute_actions(msg)
        except InterruptAgentFlow as e:  # == DefaultAgent.run(): Submitted etc. add their (exit) messages
            agent.add_messages(*e.messages)
        last = agent.messages[-1] if agent.messages else {}
        if last.get("role") == "exit":
            ex = last.get("extra", {})
            return {"exit_status": ex.get("exit_status"), "submission": ex.get("submission")}
        return None

    # ---------------------------------------------------------------- continue
    def _build_model(self, req):
        model_class = self.classes[1]
        cfg = copy.deepcopy(self.model_config)
        if req.get("model"):
            if req["model"] != cfg.get("model_name"):
                self.overrides.append(f"model.model_name {cfg.get('model_name')!r} -> {req['model']!r}")
            cfg["model_name"] = req["model"]
        # The bridge speaks Chat Completions: litellm's OpenAI provider, whatever provider the
        # recorded model name implies (`claude-…`, `anthropic/…`, `hosted_vllm/…`).
        name = cfg.get("model_name") or ""
        try:
            bare, provider = litellm.get_llm_provider(name)[:2]
        except Exception:
            bare, provider = name, None
        if provider != "openai":
            forced = f"openai/{bare}"
            self.overrides.append(f"model.model_name {name!r} -> {forced!r} (the bridge speaks Chat Completions)")
            cfg["model_name"] = forced
        mk = cfg.setdefault("model_kwargs", {})
        if req.get("base_url"):
            litellm.api_base = req["base_url"]  # module-level: not saved in the trajectory, not in os.environ
            for k in ("api_base", "base_url"):
                if k in mk:
                    self.overrides.append(f"model.model_kwargs.{k} -> {req['base_url']!r}")
                    mk[k] = req["base_url"]
        if req.get("api_key") is not None:
            litellm.api_key = req["api_key"]
            if "api_key" in mk:
                self.overrides.append("model.model_kwargs.api_key replaced")
                mk["api_key"] = req["api_key"]
        if req.get("litellm_model_registry"):
            cfg["litellm_model_registry"] = req["litellm_model_registry"]
        if req.get("cost_tracking"):
            cfg["cost_tracking"] = req["cost_tracking"]
        reg = cfg.get("litellm_model_registry")
        renamed = cfg.get("model_name") != self.model_config.get("model_name")
        if cfg.get("cost_tracking", "default") == "default" and renamed:
            # Another name than the recorded one has no price where the recording had one.
            self.overrides.append("model.cost_tracking 'default' -> 'ignore_errors' (the model was renamed)")
            cfg["cost_tracking"] = "ignore_errors"
        if cfg.get("cost_tracking", "default") == "default" and not (reg and Path(reg).is_file()):
            self.overrides.append(
                f"model.cost_tracking 'default' -> 'ignore_errors' (registry {reg!r} not found; cost will be 0)"
            )
            cfg["cost_tracking"] = "ignore_errors"
        return model_class(**cfg)

    def op_continue(self, req):
        if self.agent is None:
            raise RuntimeError("init first")
        agent = self.agent
        prefix = copy.deepcopy(req["messages"])
        if any(m.get("role") == "exit" for m in prefix):
            raise ValueError("prefix contains an 'exit' message; cut before it")
        self.overrides = list(self.init_overrides)
        agent.model = self._build_model(req)
        output = Path(req["output"]) if req.get("output") else None
        if MAJOR >= 2:
            return self._continue_v2(agent, prefix, req, output)
        return self._continue_v1(agent, prefix, req, output)

    def _continue_v2(self, agent, prefix, req, output):
        import time as _time


        agent.messages = prefix
        calls = [m for m in prefix if "response" in (m.get("extra") or {})]  # assistant msgs + FormatError msgs
        agent.n_calls = len(calls)
        agent.cost = sum((m.get("extra") or {}).get("cost", 0.0) for m in calls)
        n_fe = 0
        for m in reversed(prefix):
            if (m.get("extra") or {}).get("interrupt_type") == "FormatError":
                n_fe += 1
            else:
                break
        agent.n_consecutive_format_errors = n_fe
        agent._start_time = _time.time()
        n0 = agent.n_calls
        self._apply_budget(agent, n0, req)
        agent.config.output_path = output
        try:
            return self._loop_v2(agent, n0, output)
        finally:
            if self._restore_step_limit(agent):
                agent.save(agent.config.output_path)

    def _loop_v2(self, agent, n0, output):
        from minisweagent.exceptions import FormatError, InterruptAgentFlow

        # == DefaultAgent.run() 2.4.6 loop body (without the reset of self.messages)
        while True:
            try:
                agent.step()
                agent.n_consecutive_format_errors = 0
            except FormatError as e:
                agent.cost += e.messages[0].get("extra", {}).get("cost", 0.0)
                agent.n_consecutive_format_errors += 1
                if 0 < agent.config.max_consecutive_format_errors <= agent.n_consecutive_format_errors:
                    agent.add_messages(
                        *e.messages,
                        {
                            "role": "exit",
                            "content": "RepeatedFormatError",
                            "extra": {"exit_status": "RepeatedFormatError", "submission": ""},
                        },
                    )
                else:
                    agent.add_messages(*e.messages)
            except InterruptAgentFlow as e:
                agent.add_messages(*e.messages)
            except Exception as e:
                agent.handle_uncaught_exception(e)
                agent.save(agent.config.output_path)
                last = agent.messages[-1].get("extra", {})
                return self._continue_answer(last.get("exit_status"), last.get("submission"), agent.n_calls - n0,
                                             agent.n_calls, agent.cost, output, error=f"{type(e).__name__}: {e}")
            finally:
                agent.save(agent.config.output_path)
            if agent.messages[-1].get("role") == "exit":
                break
        last = agent.messages[-1].get("extra", {})
        return self._continue_answer(last.get("exit_status"), last.get("submission"), agent.n_calls - n0,
                                     agent.n_calls, agent.cost, output)

    def _continue_v1(self, agent, prefix, req, output):
        from minisweagent.agents.default import LimitsExceeded, NonTerminatingException, TerminatingException
        from minisweagent.run.utils.save import save_traj

        model = agent.model
        agent.messages = prefix
        model.n_calls = sum(1 for m in prefix if m.get("role") == "assistant")
        cost = 0.0
        for m in prefix:
            resp = (m.get("extra") or {}).get("response")
            if m.get("role") == "assistant" and resp:
                try:
                    cost += litellm.cost_calculator.completion_cost(
                        litellm.ModelResponse(**resp), model=model.config.model_name
                    )
                except Exception:
                    pass
        model.cost = cost
        n0 = model.n_calls
        self._apply_budget(agent, n0, req)
        exit_status, result, extra_info, error = None, None, None, None
        try:
            # == DefaultAgent.run() 1.17.5 loop (without the reset of self.messages)
            while True:
                try:
                    # InteractiveAgent.query() would call input() on LimitsExceeded; check like DefaultAgent.query()
                    c = agent.config
                    if 0 < c.step_limit <= model.n_calls or 0 < c.cost_limit <= model.cost:
                        raise LimitsExceeded()
                    agent.step()
                except NonTerminatingException as e:
                    agent.add_message("user", str(e))
                except TerminatingException as e:
                    agent.add_message("user", str(e))
                    exit_status, result = type(e).__name__, str(e)
                    break
        except Exception as e:  # == run/mini.py
            exit_status, result = type(e).__name__, str(e)
            extra_info = {"traceback": traceback.format_exc()}
            error = f"{type(e).__name__}: {e}"
        finally:
            self._restore_step_limit(agent)
            save_traj(agent, output, exit_status=exit_status, result=result, extra_info=extra_info,
                      print_fct=lambda *a: print(*a, file=sys.stderr))
        return self._continue_answer(exit_status, result, model.n_calls - n0, model.n_calls, model.cost, output,
                                     error=error)

    def _apply_budget(self, agent, n0, req):
        """max_steps = additional model calls. Enforced natively through agent.config.step_limit
        (mini raises LimitsExceeded and writes its own exit). Unless "record_step_limit" is true, the
        recorded step_limit is put back into the config before the final save."""
        self._saved_step_limit = None
        if req.get("max_steps") is None:
            return
        limit = n0 + int(req["max_steps"])
        if agent.config.step_limit <= 0 or limit < agent.config.step_limit:
            if not req.get("record_step_limit"):
                self._saved_step_limit = agent.config.step_limit
            self.overrides.append(f"agent.step_limit {agent.config.step_limit} -> {limit} during the run"
                                  + ("" if req.get("record_step_limit") else " (recorded value restored in the saved file)"))
            agent.config.step_limit = limit

    def _restore_step_limit(self, agent):
        if self._saved_step_limit is None:
            return False
        agent.config.step_limit, self._saved_step_limit = self._saved_step_limit, None
        return True

    def _continue_answer(self, exit_status, submission, steps, api_calls, cost, output, error=None):
        ans = {
            "exit_status": exit_status,
            "submission": submission,
            "steps": steps,
            "api_calls": api_calls,
            "cost": cost,
            "output": str(output) if output else None,
            "overrides": self.overrides,
            "net_violations": list(NET_VIOLATIONS),
        }
        if error:
            ans["error"] = error
        return ans


def main():
    runner = Runner()
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


def continue_mode(cfg):
    """The continuation: the rebuilt trajectory's messages (+ the boundary prompt as one user
    message), then mini's own loop against the bridge; ends with one `pvisor_end` line."""
    runner = Runner()
    try:
        runner.op_init({"trajectory": cfg["trajectory"], "cwd": cfg.get("cwd")})
        messages = copy.deepcopy(runner.traj["messages"])
        if cfg.get("promptFile"):
            prompt = Path(cfg["promptFile"]).read_text(encoding="utf-8")
            if MAJOR >= 2:
                messages.append(runner.agent.model.format_message(role="user", content=prompt))
            else:
                import time as _time

                messages.append({"role": "user", "content": prompt, "timestamp": _time.time()})
        req = {
            "messages": messages,
            "base_url": cfg["baseUrl"],
            "api_key": os.environ.pop("PVISOR_MINI_API_KEY", None),
            "model": cfg.get("model"),
            "max_steps": cfg.get("maxSteps"),
            "output": cfg["output"],
            "litellm_model_registry": cfg.get("litellmModelRegistry"),
        }
        ans = {"type": "pvisor_end", "ok": True, **runner.op_continue(req)}
    except Exception as e:
        ans = {"type": "pvisor_end", "ok": False, "error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
    PROTO_OUT.write(json.dumps(ans) + "\n")
    PROTO_OUT.flush()
    return 0


def preloaded(cfg_text):
    """Entry from `sitecustomize.py` (the runner preloaded into the real mini entrypoint)."""
    cfg = json.loads(cfg_text)
    try:
        if cfg.get("mode") == "continue":
            return continue_mode(cfg)
        main()
        return 0
    finally:
        try:
            sys.stderr.flush()
        except Exception:
            pass
        if "_cfg_dir" in globals():
            import shutil

            shutil.rmtree(_cfg_dir, True)


if __name__ == "__main__":
    main()
