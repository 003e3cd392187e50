// amux's Claude sidecar: one Claude Agent SDK query() in streaming-input mode per process,
// driven by amux's Python adapter (runtimes/claude.py) over JSON lines.
//
// stdin (from amux), one object a line:
//   {"type":"start","options":{...}}      open the query (new session id, or resume)
//   {"type":"turn","content":[...]}       one user message (Anthropic content blocks)
//   {"type":"interrupt"}                  stop the turn in flight
//   {"type":"permission","call","result"} the answer to a can_use_tool request
//   {"type":"close"}                      end the input, close the query, exit
// stdout (to amux):
//   {"type":"started","session_id"}  |  {"type":"start_failed","error"}
//   {"type":"sdk","message":{...}}        every SDK message, as the SDK gave it
//   {"type":"can_use_tool","call","tool_name","input","tool_use_id","title",...}
//   {"type":"can_use_tool_cancelled","call"}   the CLI gave up waiting (interrupt, turn end)
//   {"type":"interrupted"} | {"type":"error","error"} | {"type":"ended"}
//
// Why a sidecar and not claude-code-acp: the SDK gives what amux needs directly — the
// preset system prompt with an append, the in-memory flag-settings layer
// (applyFlagSettings: nothing in argv or in a settings file), canUseTool with the full
// AskUserQuestion input, the result's is_error/subtype and a transcript for `resume`.

import { createInterface } from "node:readline";
import { pathToFileURL } from "node:url";

// An empty CLAUDE_CONFIG_DIR is taken as a relative directory by the SDK and the CLI,
// never as "the default": drop it before the SDK is loaded and from the child's env.
if (process.env.CLAUDE_CONFIG_DIR === "") delete process.env.CLAUDE_CONFIG_DIR;

// the SDK amux pinned (its runtimes directory may be anywhere, so no bare specifier)
const { query } = await import(pathToFileURL(process.env.AMUX_RUNTIME_CLAUDE_SDK).href);

function send(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// --- the streaming input: an async iterable amux feeds one user message per turn --------
const inbox = [];
let wake = null;
let inputClosed = false;

function pushInput(msg) {
  inbox.push(msg);
  if (wake) { wake(); wake = null; }
}

async function* userMessages() {
  while (true) {
    while (inbox.length) yield inbox.shift();
    if (inputClosed) return;
    await new Promise((resolve) => { wake = resolve; });
  }
}

// --- permission requests the CLI sends through canUseTool ---------------------------------
const pending = new Map(); // id -> resolve
let nextId = 1;

function canUseTool(toolName, input, options) {
  const id = String(nextId++);
  return new Promise((resolve) => {
    const settle = (result) => {
      if (!pending.has(id)) return;
      pending.delete(id);
      resolve(result);
    };
    pending.set(id, settle);
    options.signal?.addEventListener("abort", () => {
      if (!pending.has(id)) return;
      send({ type: "can_use_tool_cancelled", call: id });
      settle({ behavior: "deny", message: "cancelled", interrupt: true });
    });
    send({
      type: "can_use_tool", call: id, tool_name: toolName, input,
      tool_use_id: options.toolUseID ?? null, title: options.title ?? null,
      description: options.description ?? null, display_name: options.displayName ?? null,
      decision_reason: options.decisionReason ?? null, blocked_path: options.blockedPath ?? null,
    });
  });
}

// --- the query ----------------------------------------------------------------------------
let q = null;

function childEnv(extra) {
  const env = { ...process.env, ...(extra || {}) };
  if (env.CLAUDE_CONFIG_DIR === "") delete env.CLAUDE_CONFIG_DIR;
  // every managed launch, resume included: Claude's own auto memory (and its subagents')
  // stays off; amux owns memory
  env.CLAUDE_CODE_DISABLE_AUTO_MEMORY = "1";
  return env;
}

async function start(o) {
  const options = {
    cwd: o.cwd,
    model: o.model || undefined,
    permissionMode: o.permissionMode,
    allowDangerouslySkipPermissions: o.permissionMode === "bypassPermissions",
    canUseTool,
    env: childEnv(o.env),
    // the user's, project's and local settings load as the CLI always does (CLAUDE.md
    // instructions too); amux's own values come through the flag layer below
    settingSources: ["user", "project", "local"],
    // not recorded into the transcript: a changed prompt takes effect at the restart that
    // resumes the conversation (amux restarts the sidecar when its prompt changed)
    systemPrompt: { type: "preset", preset: "claude_code", snapshot: false,
                    ...(o.append ? { append: o.append } : {}) },
    mcpServers: o.mcpServers || {},
    includePartialMessages: true,
    stderr: (data) => process.stderr.write(data),
  };
  if (o.executable) options.pathToClaudeCodeExecutable = o.executable;
  if (o.disallowedTools?.length) options.disallowedTools = o.disallowedTools;
  if (o.resume) options.resume = o.resume;
  else options.sessionId = o.sessionId;
  q = query({ prompt: userMessages(), options });
  pump(q);
  await q.initializationResult();
  if (o.flagSettings) {
    // before any input: a model-service launch must not run on the wrong gateway
    await q.applyFlagSettings(o.flagSettings);
  }
  return o.resume || o.sessionId;
}

async function pump(query_) {
  try {
    for await (const message of query_) send({ type: "sdk", message });
    send({ type: "ended" });
  } catch (err) {
    send({ type: "error", error: String(err?.message || err) });
  }
}

function releasePending() {
  for (const settle of [...pending.values()]) {
    settle({ behavior: "deny", message: "cancelled", interrupt: true });
  }
}

async function handle(msg) {
  switch (msg.type) {
    case "start":
      try {
        const sessionId = await start(msg.options || {});
        send({ type: "started", session_id: sessionId });
      } catch (err) {
        send({ type: "start_failed", error: String(err?.message || err) });
      }
      break;
    case "turn":
      pushInput({
        type: "user", session_id: "", parent_tool_use_id: null,
        message: { role: "user", content: msg.content },
      });
      break;
    case "interrupt":
      releasePending();
      try {
        await q?.interrupt();
        send({ type: "interrupted" });
      } catch (err) {
        send({ type: "error", error: `interrupt: ${err?.message || err}` });
      }
      break;
    case "permission": {
      const settle = pending.get(String(msg.call));
      if (settle) settle(msg.result);
      break;
    }
    case "set_model":
      try {
        await q?.setModel(msg.model || undefined);
        send({ type: "model_set", model: msg.model });
      } catch (err) {
        send({ type: "error", error: `set_model: ${err?.message || err}` });
      }
      break;
    case "close":
      shutdown(0);
      break;
  }
}

let closing = false;
function shutdown(code) {
  if (closing) return;
  closing = true;
  inputClosed = true;
  releasePending();
  if (wake) { wake(); wake = null; }
  try { q?.close(); } catch { /* already gone */ }
  setTimeout(() => process.exit(code), 200);
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  if (!line.trim()) return;
  let msg;
  try { msg = JSON.parse(line); } catch { return; }
  handle(msg).catch((err) => send({ type: "error", error: String(err?.message || err) }));
});
rl.on("close", () => shutdown(0));
process.on("SIGTERM", () => shutdown(0));
