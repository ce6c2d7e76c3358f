"""pvisor: runs the mini-swe-agent companion runner (`runner.py` beside this file) inside the
real mini entrypoint's interpreter, before mini's own CLI starts.

pvisor starts the entrypoint with this folder on PYTHONPATH and the runner's configuration in
PVISOR_MINI_RUNNER. Python imports `sitecustomize` once its site-packages are set up, so the
runner sees exactly the packages (mini, litellm) of the entrypoint's virtual environment, and
wrappers around the entrypoint (libfaketime, a container) apply to it. Both variables are
removed at once (the user's own PYTHONPATH, saved in PVISOR_MINI_PYTHONPATH, is put back),
so that no command the runner executes sees them. Without PVISOR_MINI_RUNNER this does
nothing.
"""
import os

_config = os.environ.pop("PVISOR_MINI_RUNNER", None)
if _config is not None:
    _saved = os.environ.pop("PVISOR_MINI_PYTHONPATH", None)
    if _saved:
        os.environ["PYTHONPATH"] = _saved
    else:
        os.environ.pop("PYTHONPATH", None)
    import importlib.util
    import sys

    import json

    if json.loads(_config).get("mode") == "version":
        os.environ["MSWEA_SILENT_STARTUP"] = "1"
        import minisweagent

        sys.stdout.write(json.dumps({"version": minisweagent.__version__}) + "\n")
        sys.stdout.flush()
        os._exit(0)
    _here = os.path.dirname(os.path.abspath(__file__))
    if _here in sys.path:
        sys.path.remove(_here)
    _spec = importlib.util.spec_from_file_location("pvisor_mini_runner", os.path.join(_here, "runner.py"))
    _code = 70
    try:
        _runner = importlib.util.module_from_spec(_spec)
        sys.modules["pvisor_mini_runner"] = _runner
        _spec.loader.exec_module(_runner)
        _code = _runner.preloaded(_config)
    except BaseException as _e:  # noqa: BLE001 - report, never fall through into mini's CLI
        import traceback

        traceback.print_exc()
        print(f"pvisor mini runner failed: {type(_e).__name__}: {_e}", file=sys.stderr, flush=True)
    os._exit(_code)
