// `corral mcp` driven by a client nobody here wrote: the official MCP TypeScript SDK
// (@modelcontextprotocol/sdk, pinned in package.json / package-lock.json, installed by
// tools/setup.sh). Registered with ctest as mcp_sdk_test:
//   node tests/npm/mcp_sdk_test.mjs CORRAL_BINARY SOURCE_DIR WORK_DIR
// It starts its own `corral serve`, then `corral mcp` exactly as the README's host snippet says.
// WORK_DIR (the build tree) holds the workspace: sandboxes see the host's /tmp nowhere.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { spawn } from "node:child_process";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import readline from "node:readline";

const [corral, sourceDir, workDir] = process.argv.slice(2);
assert.ok(corral && sourceDir && workDir, "usage: node mcp_sdk_test.mjs CORRAL_BINARY SOURCE_DIR WORK_DIR");

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function waitFor(what, predicate, ms = 20000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await predicate()) return;
    await sleep(50);
  }
  throw new Error("timed out waiting for " + what);
}
// Processes whose command line contains `marker` (all of them: the sandbox's too).
function processesWith(marker) {
  const found = [];
  for (const pid of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0").join(" ");
      if (cmdline.includes(marker)) found.push(pid);
    } catch {}
  }
  return found;
}

const tmp = fs.mkdtempSync(path.join(workDir, "corral-mcp-test-"));
fs.chmodSync(tmp, 0o755);
const workspace = path.join(tmp, "project");
fs.mkdirSync(workspace);
fs.chmodSync(workspace, 0o777);  // the sandbox uid writes it (README "Who the command runs as")
fs.writeFileSync(path.join(workspace, "README.txt"), "in the workspace\n");
const socket = path.join(tmp, "run", "corral.sock");  // its own dir: the supervisor makes it 0700
const serve = spawn(corral, ["serve", "--socket", socket, "--log-level", "warn"], { stdio: "inherit" });
let failed = false;

// The README's MCP host snippet, with this test's workspace and socket.
function readmeServer() {
  const readme = fs.readFileSync(path.join(sourceDir, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("## MCP"));
  const block = section.match(/```json\n([\s\S]*?)```/);
  assert.ok(block, "README's MCP section has a ```json host snippet");
  const server = JSON.parse(block[1]).mcpServers.corral;
  assert.equal(server.command, "corral");
  const args = server.args.map((a) => (a === "/home/me/project" ? workspace : a));
  assert.ok(args.includes(workspace), "the snippet names the workspace /home/me/project");
  return { command: corral, args: [...args, "--socket", socket] };
}

async function connect(params) {
  const client = new Client({ name: "corral-mcp-test", version: "1.0.0" });
  const transport = new StdioClientTransport({ ...params, stderr: "inherit" });
  await client.connect(transport);
  return { client, transport };
}

// Raw JSON lines to a fresh `corral mcp`, for what an SDK never sends.
async function raw(args, lines) {
  const child = spawn(corral, ["mcp", "--socket", socket, ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const replies = [];
  const rl = readline.createInterface({ input: child.stdout });
  rl.on("line", (l) => replies.push(JSON.parse(l)));
  for (const l of lines) child.stdin.write(l + "\n");
  child.stdin.end();
  const code = await new Promise((r) => child.on("exit", r));
  await new Promise((r) => setImmediate(r));
  return { code, replies };
}

async function main() {
  await waitFor("the supervisor's socket", () => fs.existsSync(socket));
  const { client } = await connect(readmeServer());
  assert.equal(client.getServerVersion().name, "corral");
  assert.ok(client.getServerCapabilities().tools, "tools capability");

  // The tools and their schemas.
  const { tools } = await client.listTools();
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(Object.keys(byName).sort(),
    ["background_poll", "background_start", "background_stop", "exec", "list_dir", "python", "read_file", "write_file"]);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, "object", t.name);
    assert.ok(t.description.length > 40, `${t.name} tells a model when to use it`);
  }
  assert.deepEqual(Object.keys(byName.exec.inputSchema.properties).sort(), ["argv", "command", "cwd", "env", "stdin", "timeout_seconds"]);
  assert.deepEqual(byName.read_file.inputSchema.required, ["path"]);
  assert.ok(byName.read_file.inputSchema.properties.offset && byName.read_file.inputSchema.properties.limit);
  assert.deepEqual(byName.write_file.inputSchema.required.sort(), ["content", "path"]);
  assert.ok(byName.python.inputSchema.properties.code && byName.python.inputSchema.properties.reset);
  assert.deepEqual(byName.background_poll.inputSchema.required, ["id"]);
  for (const t of tools) assert.ok(!("mode" in t.inputSchema.properties) && !("network" in t.inputSchema.properties),
    "the model cannot choose the policy");

  // A command: a success, and a failure that is a normal result with isError.
  let r = await client.callTool({ name: "exec", arguments: { command: "echo hello; cat README.txt", cwd: workspace } });
  assert.equal(r.isError, false, JSON.stringify(r));
  assert.equal(r.structuredContent.stdout, "hello\nin the workspace\n");
  assert.equal(r.structuredContent.exit_code, 0);
  assert.match(r.content[0].text, /hello/);
  r = await client.callTool({ name: "exec", arguments: { argv: ["/bin/sh", "-c", "echo oops >&2; exit 3"], env: { A: "1" } } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.status, "exited");
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.structuredContent.stderr, "oops\n");
  assert.ok(r.structuredContent.enforced.includes("net-ns"), "network denied is enforced");

  // Write, then read, a file.
  r = await client.callTool({ name: "write_file", arguments: { path: "notes/../notes.txt", content: "x" } });
  assert.equal(r.isError, true, "'..' is refused");
  r = await client.callTool({ name: "write_file", arguments: { path: "notes.txt", content: "first line\nsecond line\n" } });
  assert.equal(r.isError, false);
  assert.equal(fs.readFileSync(path.join(workspace, "notes.txt"), "utf8"), "first line\nsecond line\n");
  r = await client.callTool({ name: "read_file", arguments: { path: "notes.txt" } });
  assert.equal(r.structuredContent.content, "first line\nsecond line\n");
  r = await client.callTool({ name: "read_file", arguments: { path: "notes.txt", offset: 6, limit: 4 } });
  assert.equal(r.structuredContent.content, "line");
  assert.equal(r.structuredContent.truncated, true);
  r = await client.callTool({ name: "read_file", arguments: { path: "/etc/passwd" } });
  assert.equal(r.isError, true);
  assert.equal(r.structuredContent.error, "outside_roots");
  r = await client.callTool({ name: "list_dir", arguments: {} });
  assert.deepEqual(r.structuredContent.entries.map((e) => e.name).sort(), ["README.txt", "notes.txt"]);

  // Python keeps its state between calls.
  r = await client.callTool({ name: "python", arguments: { code: "import math\nx = 20" } });
  assert.equal(r.isError, false);
  r = await client.callTool({ name: "python", arguments: { code: "print('side')\nx * 2 + math.floor(2.5)" } });
  assert.equal(r.structuredContent.value, "42");
  assert.equal(r.structuredContent.stdout, "side\n");
  r = await client.callTool({ name: "python", arguments: { code: "1/0" } });
  assert.equal(r.isError, true);
  assert.match(r.structuredContent.error, /ZeroDivisionError/);
  r = await client.callTool({ name: "python", arguments: { reset: true, code: "'x' in globals()" } });
  assert.equal(r.structuredContent.value, "False");

  // Progress keeps a long command alive past the client's request timeout.
  let progress = 0;
  r = await client.callTool({ name: "exec", arguments: { command: "sleep 11; echo done" } }, undefined,
    { timeout: 8000, resetTimeoutOnProgress: true, onprogress: () => progress++ });
  assert.equal(r.structuredContent.stdout, "done\n");
  assert.ok(progress >= 2, `progress notifications: ${progress}`);

  // Cancelling a long command ends it: nothing is left running, and the session goes on.
  // The shell and its two sleeps (one in the background) carry a duration no one else uses.
  const seconds = String(3000 + (process.pid % 997));
  const ac = new AbortController();
  const pending = client.callTool({ name: "exec", arguments: { command: `sleep ${seconds} & sleep ${seconds}; wait` } },
    undefined, { signal: ac.signal });
  await waitFor("the long command", () => processesWith(`sleep ${seconds}`).length >= 2);
  await client.ping();  // answered while the command runs
  r = await client.callTool({ name: "exec", arguments: { command: "echo meanwhile" } });
  assert.equal(r.structuredContent.stdout, "meanwhile\n", "another call completes while the long one runs");
  ac.abort("the test cancels it");
  await assert.rejects(pending);
  await waitFor("the cancelled command's whole tree to be gone", () => processesWith(`sleep ${seconds}`).length === 0);
  await client.ping();
  r = await client.callTool({ name: "exec", arguments: { command: "echo after" } });
  assert.equal(r.structuredContent.stdout, "after\n");

  // Background commands: start, poll, stop; and closing the session ends the rest.
  r = await client.callTool({ name: "background_start", arguments: { command: "echo bg; sleep 0.2; echo bg-done" } });
  const bg = r.structuredContent.id;
  for (;;) {
    r = await client.callTool({ name: "background_poll", arguments: { id: bg } });
    if (r.structuredContent.result) break;
    await sleep(100);
  }
  assert.equal(r.structuredContent.result.exit_code, 0);
  const leftMarker = `corral-mcp-left-${process.pid}`;
  r = await client.callTool({ name: "background_start", arguments: { argv: ["/bin/sh", "-c", "sleep 300", leftMarker] } });
  const left = r.structuredContent.id;
  await waitFor("the background command", () => processesWith(leftMarker).length > 0);
  r = await client.callTool({ name: "background_poll", arguments: { id: "b-not-ours" } });
  assert.equal(r.isError, true, "only this session's background commands");
  await client.close();
  await waitFor("the session's background command to end with the session", () => processesWith(leftMarker).length === 0);
  void left;

  // Malformed input gets a JSON-RPC error, and the server keeps serving; versions negotiate.
  let out = await raw(["--max-message", "4096"], [
    "{this is not json",
    JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2024-11-05", capabilities: {}, clientInfo: { name: "raw", version: "0" } } }),
    "x".repeat(5000),
    JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
    JSON.stringify([{ jsonrpc: "2.0", id: 3, method: "ping" }]),
    JSON.stringify({ jsonrpc: "2.0", id: 4, method: "no/such/method" }),
    JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "no_such_tool", arguments: {} } }),
    JSON.stringify({ jsonrpc: "2.0", id: 6, method: "tools/call", params: { name: "exec", arguments: { timeout_seconds: -1, command: "true" } } }),
    JSON.stringify({ jsonrpc: "2.0", id: 7, method: "initialize", params: { protocolVersion: "1999-01-01", capabilities: {}, clientInfo: { name: "raw", version: "0" } } }),
  ]);
  assert.equal(out.code, 0);
  const byId = (id) => out.replies.find((m) => m.id === id);
  const anonymous = out.replies.filter((m) => m.id === null).map((m) => m.error.code);
  assert.deepEqual(anonymous, [-32700, -32600, -32600], "parse error, oversized line, batch");
  assert.equal(byId(1).result.protocolVersion, "2024-11-05");
  assert.deepEqual(byId(2).result, {});
  assert.equal(byId(4).error.code, -32601);
  assert.equal(byId(5).error.code, -32602);
  assert.equal(byId(6).result.isError, true);
  assert.equal(byId(7).result.protocolVersion, "2025-11-25");

  // A policy refusal is a tool error naming the reason; the model cannot widen the policy.
  out = await raw(["--mode", "read-only", "--workspace", workspace], [
    JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "write_file", arguments: { path: "x.txt", content: "no" } } }),
    JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "exec", arguments: { command: "touch " + workspace + "/y.txt" } } }),
  ]);
  const refused = out.replies.find((m) => m.id === 1).result;
  assert.equal(refused.isError, true);
  assert.equal(refused.structuredContent.error, "refused_by_policy");
  assert.match(refused.content[0].text, /read-only/);
  assert.equal(out.replies.find((m) => m.id === 2).result.isError, true);
  assert.ok(!fs.existsSync(path.join(workspace, "x.txt")) && !fs.existsSync(path.join(workspace, "y.txt")));

  // --deny-read binds the file tools as it binds commands: the session's scope carries it.
  fs.writeFileSync(path.join(workspace, "secret.txt"), "hidden\n");
  fs.symlinkSync("secret.txt", path.join(workspace, "innocent.txt"));
  out = await raw(["--workspace", workspace, "--deny-read", path.join(workspace, "secret.txt")], [
    JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "read_file", arguments: { path: "secret.txt" } } }),
    JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/call", params: { name: "read_file", arguments: { path: "innocent.txt" } } }),
    JSON.stringify({ jsonrpc: "2.0", id: 3, method: "tools/call", params: { name: "exec", arguments: { command: "cat secret.txt", cwd: workspace } } }),
    JSON.stringify({ jsonrpc: "2.0", id: 4, method: "tools/call", params: { name: "read_file", arguments: { path: "README.txt" } } }),
  ]);
  for (const id of [1, 2, 3]) {
    const res = out.replies.find((m) => m.id === id).result;
    assert.equal(res.isError, true, JSON.stringify(res));
    assert.ok(!JSON.stringify(res).includes("hidden"), JSON.stringify(res));
  }
  assert.equal(out.replies.find((m) => m.id === 4).result.structuredContent.content, "in the workspace\n");
  console.log("mcp_sdk_test: all checks passed");
}

try {
  await main();
} catch (e) {
  failed = true;
  console.error(e);
} finally {
  serve.kill("SIGTERM");
  await new Promise((r) => serve.on("exit", r));
  fs.rmSync(tmp, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
