// A TypeScript Agent in Node, driven by tests/interop/test_ts_python_live.py through a real
// server: @hashee/sdk as an agent runtime would use it, from dist/.
//
//   node test/agent.mjs URL hak_… AGENT_ID STORE_DIR RELATION_ID CALLS_JSON
//
// CALLS_JSON: [{"tool", "arguments"}, …], called one after the other once its /ws/agent socket
// is open. Prints one JSON line per call: the answer ({status, result} or {status, reason,
// details?}), or {"raised": ErrorName, "code"} when callTool throws.
import { WebSocket as NodeWebSocket } from "ws";
import { Agent, fileStore } from "../dist/index.node.js";

const [url, credential, agentId, storeDir, relationId, callsJson] = process.argv.slice(2);
let opened;
const open = new Promise((resolve) => { opened = resolve; });

class Socket extends NodeWebSocket {
  constructor(address) {
    super(address);
    this.addEventListener("open", () => opened());
  }
}

const agent = new Agent({ url, credential, agentId, store: fileStore(storeDir), webSocket: Socket });
await agent.start();
const timer = setTimeout(() => {
  process.stderr.write("the agent's socket did not open in 20 s\n");
  process.exit(2);
}, 20_000);
await open;
clearTimeout(timer);
for (const { tool, arguments: args } of JSON.parse(callsJson)) {
  try {
    process.stdout.write(`${JSON.stringify(await agent.callTool(relationId, tool, args, { timeoutMs: 20_000 }))}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ raised: error?.name, code: error?.code ?? null })}\n`);
  }
}
await agent.stop();
process.exit(0);
