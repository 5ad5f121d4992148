// A TypeScript Device in Node, driven by a test or a benchmark (tests/interop/test_ts_python_live.py,
// bench/sdk_js_roundtrip.py) through a real server: @hashee/sdk as an app would use it, from dist/.
//
//   node test/device.mjs URL hsk_… STORE_DIR FILES_DIR
//
// It serves two standard tools of SPEC §12.1 the way a Node app would: send_notification
// through a handler that records the notification, read_file from FILES_DIR (names only).
// Commands, one JSON object a line on stdin:
//   {"op": "prompt", "answer": "allow" | "deny" | "ignore"}   how the user answers from now on
//   {"op": "grant", "agent_id", "scopes", "user_id"}           Device.grant (signed consent)
//   {"op": "reconsent", "relation_id", "scopes"}               Device.reconsent (signed)
//   {"op": "audit"}                                            the local audit log
//   {"op": "ping"}                                             "pong": everything said before it has been read
//   {"op": "stop"}
// What happened, one JSON object a line on stdout: {"event": "ready", "socket", "key_id"} once
// its socket is open, "prompt", "ran", "granted", "reconsented", "audit", "pong", "failed".
import { readFile, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { WebSocket as NodeWebSocket } from "ws";
import { Device, fileStore } from "../dist/index.node.js";

const [url, credential, storeDir, filesDir] = process.argv.slice(2);
const say = (event) => process.stdout.write(`${JSON.stringify(event)}\n`);
let answer = "allow";
let ready = false;

// The socket the listener uses: `ws` itself (Node 20 has no global WebSocket), told apart so
// the test sees that the device listens rather than polls.
class Socket extends NodeWebSocket {
  constructor(address) {
    super(address);
    this.addEventListener("open", () => {
      if (!ready) say({ event: "ready", socket: "ws", key_id: device.keys.keyId });
      ready = true;
    });
  }
}

const MAX_FILE_BYTES = 1024 * 1024;

async function readOneFile(args) {
  const path = join(filesDir, basename(String(args.path)));
  const size = (await stat(path)).size;
  if (size > MAX_FILE_BYTES) throw new Error("over 1 MiB");
  const bytes = await readFile(path);
  const text = new TextDecoder("utf-8", { fatal: true });
  try {
    return { name: basename(path), media_type: "text/plain", size, text: text.decode(bytes) };
  } catch {
    return { name: basename(path), media_type: "application/octet-stream", size, base64: bytes.toString("base64") };
  }
}

const device = new Device({
  url, credential, deviceId: "node", store: fileStore(storeDir), promptTimeoutMs: 1500, webSocket: Socket,
  tools: {
    send_notification: async (args) => {
      say({ event: "ran", tool: "send_notification", arguments: args });
      return { shown: true };
    },
    read_file: async (args) => {
      const result = await readOneFile(args);
      say({ event: "ran", tool: "read_file", arguments: args });
      return result;
    },
  },
  prompt: (request) => {
    say({ event: "prompt", tool: request.toolName, scope: request.scope, sensitivity: request.sensitivity,
      arguments: request.arguments, newly_granted: request.newlyGranted, safety_number: request.safetyNumber });
    if (answer === "ignore") return new Promise(() => undefined); // the user walked away
    return answer;
  },
});

async function command(line) {
  const order = JSON.parse(line);
  try {
    switch (order.op) {
      case "prompt": answer = order.answer; say({ event: "prompt_set", answer }); break;
      case "grant":
        say({ event: "granted", relation: await device.grant(order.agent_id, order.scopes, { userId: order.user_id }) });
        break;
      case "reconsent": say({ event: "reconsented", relation: await device.reconsent(order.relation_id, order.scopes) }); break;
      case "audit": say({ event: "audit", entries: await device.audit.entries() }); break;
      case "ping": say({ event: "pong" }); break;
      case "stop": await device.stop(); say({ event: "stopped" }); process.exit(0);
    }
  } catch (error) {
    say({ event: "failed", op: order.op, error: error?.name, code: error?.code ?? null, message: String(error?.message) });
  }
}

await device.start();
let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  let at;
  while ((at = buffered.indexOf("\n")) >= 0) {
    const line = buffered.slice(0, at);
    buffered = buffered.slice(at + 1);
    if (line.trim()) void command(line);
  }
});
process.stdin.on("end", async () => {
  await device.stop();
  process.exit(0);
});
