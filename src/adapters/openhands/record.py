"""Drives the REAL OpenHands SDK for a recording (`pvisor certify`, src/adapters/openhands/
record.rs; the test fixtures' recorder, tests/support/openhands.rs): the default CLI
agent (`get_default_agent(llm, cli_mode=True)`: terminal, file_editor, task_tracker, finish,
think) on a local workspace, its LLM at the scripted model server, as a user of the SDK runs
it. With `conversation_id`, the stored conversation is loaded again and continued (the SDK's
own resume). Configuration: the JSON env var PVISOR_RECORD_OPENHANDS
{"base_url","api_key","work","persist","prompt","conversation_id"?}. Prints one JSON line.
"""
import json
import os
import uuid

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OPENHANDS_SUPPRESS_BANNER", "1")
cfg = json.loads(os.environ.pop("PVISOR_RECORD_OPENHANDS"))

from pydantic import SecretStr  # noqa: E402
from openhands.sdk import LLM, Conversation  # noqa: E402
from openhands.tools.preset.default import get_default_agent  # noqa: E402

llm = LLM(model="openai/fake-model", base_url=cfg["base_url"], api_key=SecretStr(cfg["api_key"]),
          usage_id="agent")
agent = get_default_agent(llm=llm, cli_mode=True)
kwargs = {}
if cfg.get("conversation_id"):
    kwargs["conversation_id"] = uuid.UUID(cfg["conversation_id"])
conv = Conversation(agent=agent, workspace=cfg["work"], persistence_dir=cfg["persist"],
                    visualizer=None, **kwargs)
conv.send_message(cfg["prompt"])
conv.run()
status = conv.state.execution_status
print(json.dumps({"conversation_id": str(conv.id),
                  "execution_status": getattr(status, "value", str(status))}), flush=True)
conv.close()
os._exit(0)
