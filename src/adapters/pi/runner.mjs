// pvisor's Pi runner: Pi's OWN code, for the two things pvisor needs from Pi, run inside
// the real Pi entrypoint: pvisor starts `<pi> --version` with
// `NODE_OPTIONS=--import=<this file>` and `PVISOR_PI_RUNNER=<JSON config>`, so this module
// is evaluated by Pi's own Node before Pi's CLI, does its work and exits (the CLI never
// runs; an entrypoint that does not load the module just prints its version, which pvisor
// reports). Pi's package is the one of the CLI (`process.argv[1]` = `<pkg>/dist/cli.js`).
// Protocol: docs/agents/pi.md ("The Node runner").
//
//   {"mode":"tools"}
//     stdin:  one JSON request per line {id, tool, args, cwd, toolCallId, ctx?, timeoutMs?}
//     stdout: one JSON line per request, in order: {id, content, details?, isError}
//             or {id, protocolError} (pvisor reports it as an executor error)
//     As Pi's agent loop does: the active tools are read, bash, edit, write ("Tool X not
//     found" otherwise), `prepareArguments`, `validateToolArguments` (with coercion), then
//     `execute`; a thrown Error is {content:[{type:"text",text:message}], details:{}, isError:true}.
//
//   {"mode":"continue", session, baseUrl, provider, cwd?, promptFile?, maxModelCalls?}
//     `createAgentSession` on `SessionManager.open(session)`, the session's provider pointed
//     at baseUrl (a models.json of the run), then `session.agent.continue()` (or one
//     `session.prompt(<text of promptFile>)`), stopping after maxModelCalls model calls
//     (their tools still run, so the session ends at a tool result). stdout: the session
//     header, then every agent event as JSON lines (update deltas dropped), then
//     {"type":"pvisor_end", modelCalls, appendedEntries, stopReason, budgetReached, error?}.
import { join, dirname } from "node:path";
import { pathToFileURL } from "node:url";
import { writeFileSync, readFileSync, existsSync, mkdirSync } from "node:fs";
import { StringDecoder } from "node:string_decoder";

const opt = JSON.parse(process.env.PVISOR_PI_RUNNER ?? "{}");
const mode = opt.mode;
// Nothing Pi starts (bash commands) inherits the preload.
delete process.env.NODE_OPTIONS;
delete process.env.PVISOR_PI_RUNNER;
opt.pkg = dirname(dirname(process.argv[1] ?? ""));
if (!existsSync(join(opt.pkg, "dist/index.js"))) {
  process.stderr.write(`runner.mjs: ${process.argv[1]} is not Pi's dist/cli.js\n`);
  process.exit(2);
}

// What Pi's cli.js and main() set before anything else (bash children inherit them).
process.env.PI_CODING_AGENT = "true";
process.emitWarning = () => {};
if (["1", "true", "yes"].includes(String(process.env.PI_OFFLINE ?? "").toLowerCase())) {
  process.env.PI_OFFLINE = "1";
  process.env.PI_SKIP_VERSION_CHECK = "1";
}

const pi = await import(pathToFileURL(join(opt.pkg, "dist/index.js")).href);

async function loadAi() {
  for (const d of [join(dirname(opt.pkg), "pi-ai"), join(opt.pkg, "node_modules/@earendil-works/pi-ai")]) {
    const f = join(d, "dist/index.js");
    if (existsSync(f)) return import(pathToFileURL(f).href);
  }
  throw new Error("@earendil-works/pi-ai not found next to " + opt.pkg);
}

const out = (obj) => process.stdout.write(JSON.stringify(obj) + "\n");

// Exit once stdout is drained (a full pipe makes Node queue writes, which process.exit would
// drop), and never return: Pi's CLI must not run after this module.
async function finish(code) {
  await new Promise((resolve) => process.stdout.write("", resolve));
  process.exit(code);
  await new Promise(() => {});
}

// ---------------------------------------------------------------------------------- tools
async function tools() {
  const { validateToolArguments } = await loadAi();
  const factories = { read: pi.createReadTool, bash: pi.createBashTool, edit: pi.createEditTool, write: pi.createWriteTool };
  const failed = (message) => ({ content: [{ type: "text", text: message }], details: {} });

  function ctxOf(req) {
    const c = req.ctx;
    if (!c) return undefined;
    return {
      cwd: req.cwd,
      model: c.provider || c.model ? { provider: c.provider, id: c.model, input: c.modelInput ?? ["text", "image"] } : undefined,
      thinkingLevel: c.thinkingLevel,
      sessionManager: { getSessionId: () => c.sessionId ?? "", getSessionFile: () => c.sessionFile },
    };
  }

  async function runOne(req) {
    const call = { type: "toolCall", id: req.toolCallId ?? String(req.id), name: req.tool, arguments: req.args ?? {} };
    const factory = factories[req.tool];
    if (!factory) return { result: failed(`Tool ${call.name} not found`), isError: true };
    const tool = factory(req.cwd);
    let args;
    try {
      let prepared = call;
      if (tool.prepareArguments) {
        const a = tool.prepareArguments(call.arguments);
        if (a !== call.arguments) prepared = { ...call, arguments: a };
      }
      args = validateToolArguments(tool, prepared);
    } catch (e) {
      return { result: failed(e instanceof Error ? e.message : String(e)), isError: true };
    }
    const ac = new AbortController();
    const timer = req.timeoutMs ? setTimeout(() => ac.abort(), req.timeoutMs) : undefined;
    try {
      return { result: await tool.execute(call.id, args, ac.signal, () => {}, ctxOf(req)), isError: false };
    } catch (e) {
      return { result: failed(e instanceof Error ? e.message : String(e)), isError: true };
    } finally {
      if (timer) clearTimeout(timer);
    }
  }

  // LF-only framing (readline would also split on \r, U+2028 and U+2029).
  let chain = Promise.resolve();
  let buf = "";
  const decoder = new StringDecoder("utf8");
  const handle = (line) => {
    if (line.endsWith("\r")) line = line.slice(0, -1);
    if (!line.trim()) return;
    chain = chain.then(async () => {
      let req;
      try {
        req = JSON.parse(line);
      } catch (e) {
        return out({ id: null, protocolError: `bad JSON request: ${e.message}` });
      }
      try {
        const { result, isError } = await runOne(req);
        out({ id: req.id, content: result.content ?? [], details: result.details, isError });
      } catch (e) {
        out({ id: req.id, protocolError: String(e?.stack ?? e) });
      }
    });
  };
  process.stdin.on("data", (chunk) => {
    buf += decoder.write(chunk);
    let i;
    while ((i = buf.indexOf("\n")) !== -1) {
      handle(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  process.stdin.on("end", () => {
    buf += decoder.end();
    if (buf.length) handle(buf);
    chain.then(() => finish(0));
  });
  // Pi's CLI must never run after this module: wait here until stdin ends (then exit).
  await new Promise(() => {});
}

// ------------------------------------------------------------------------------- continue
async function cont() {
  const { createAgentSession, SessionManager, ModelRuntime, getAgentDir } = pi;
  try {
    const hd = await import(pathToFileURL(join(opt.pkg, "dist/core/http-dispatcher.js")).href);
    hd.configureHttpDispatcher?.();
  } catch {}
  const agentDir = getAgentDir();
  const sessionManager = SessionManager.open(opt.session, undefined, opt.cwd);
  const header = sessionManager.getHeader();
  // The session's provider, pointed at the bridge in a models.json of the run.
  const provider = opt.provider ?? "anthropic";
  const modelsDir = join(agentDir, "pvisor");
  mkdirSync(modelsDir, { recursive: true });
  let cfg = {};
  const own = join(agentDir, "models.json");
  if (existsSync(own)) cfg = JSON.parse(readFileSync(own, "utf8"));
  cfg.providers ??= {};
  cfg.providers[provider] = { ...(cfg.providers[provider] ?? {}), baseUrl: opt.baseUrl };
  const modelsPath = join(modelsDir, "models.json");
  writeFileSync(modelsPath, JSON.stringify(cfg));
  const modelRuntime = await ModelRuntime.create({ authPath: join(agentDir, "auth.json"), modelsPath });

  const before = sessionManager.getEntries().length;
  const { session, modelFallbackMessage } = await createAgentSession({ sessionManager, agentDir, modelRuntime, ...(opt.cwd ? { cwd: opt.cwd } : {}) });
  if (modelFallbackMessage) process.stderr.write(`runner.mjs: ${modelFallbackMessage}\n`);
  if (!session.model || session.model.api === "unknown") {
    out({ type: "pvisor_end", modelCalls: 0, appendedEntries: 0, error: "no model for the session (its provider has no API key)" });
    await finish(3);
  }
  await session.bindExtensions({ mode: "json", onError: (e) => process.stderr.write(`Extension error (${e.extensionPath}): ${e.error}\n`) });
  if (header) out(header);
  let modelCalls = 0;
  let last;
  const max = opt.maxModelCalls ? Number(opt.maxModelCalls) : Infinity;
  session.subscribe((event) => {
    if (event.type === "message_end" && event.message.role === "assistant") {
      modelCalls++;
      last = event.message;
    }
    if (event.type === "message_update" || event.type === "tool_execution_update") return;
    out(event);
  });
  if (Number.isFinite(max)) {
    // agent-core's loop checks `shouldStopAfterTurn` after each turn_end (the turn's tools
    // have run); Agent never sets it: set it on this instance.
    const agent = session.agent;
    const orig = agent.createLoopConfig.bind(agent);
    agent.createLoopConfig = (o) => ({ ...orig(o), shouldStopAfterTurn: async () => modelCalls >= max });
  }
  let error;
  try {
    if (opt.promptFile) await session.prompt(readFileSync(opt.promptFile, "utf8"));
    else await session.agent.continue();
  } catch (e) {
    error = e instanceof Error ? e.message : String(e);
  }
  if (!error && last && (last.stopReason === "error" || last.stopReason === "aborted")) error = last.errorMessage ?? last.stopReason;
  out({
    type: "pvisor_end",
    modelCalls,
    appendedEntries: sessionManager.getEntries().length - before,
    stopReason: last?.stopReason ?? null,
    budgetReached: modelCalls >= max,
    ...(error ? { error } : {}),
  });
  session.dispose();
  await finish(error ? 1 : 0);
}

if (mode === "tools") await tools();
else if (mode === "continue") await cont();
else {
  process.stderr.write(`runner.mjs: unknown mode ${mode} (tools | continue)\n`);
  await finish(2);
}
