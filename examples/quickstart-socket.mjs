// The socket half of the quickstart in JavaScript (docs/quickstart.md): place a call over
// Relay's WebSocket and print its status until it ends, reconnecting and catching up through
// GET /api/calls/{callId} if the socket drops. For browsers and Node 22+ as it is; Node 20
// and 21 need --experimental-websocket:
//
//   RELAY_TOKEN=<a JWT> node --experimental-websocket examples/quickstart-socket.mjs
//
// RELAY_BASE (default http://127.0.0.1:8000), RELAY_TO and RELAY_MESSAGE may be set too.

const base = process.env.RELAY_BASE ?? "http://127.0.0.1:8000";
const token = process.env.RELAY_TOKEN;
if (!token) {
  console.error("Set RELAY_TOKEN to a JWT from POST /api/auth/login (docs/quickstart.md).");
  process.exit(2);
}
const TERMINAL = new Set(["completed", "busy", "no_answer", "failed", "canceled"]);
const call = {
  type: "call",
  callId: `quickstart-js-${Date.now()}`,
  to: process.env.RELAY_TO ?? "+442079460123",
  message: process.env.RELAY_MESSAGE ?? "Hello from the Relay quickstart, in JavaScript.",
};

async function api(path, { missingOk = false } = {}) {
  const response = await fetch(base + path, { headers: { Authorization: `Bearer ${token}` } });
  if (response.status === 404 && missingOk) return null;
  const body = await response.json();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${body.code}: ${body.error}`);
  return body;
}

const seen = new Set();
function show(status, extra = "") {
  if (!seen.has(status)) {
    seen.add(status);
    console.log(`  ${status}${extra}`);
  }
}

// One connection: resolves with the final status, or null if the socket dropped first.
function follow(wsUrl) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsUrl);
    let settled = false;
    const finish = (value) => {
      if (!settled) {
        settled = true;
        ws.close();
        resolve(value);
      }
    };
    ws.onopen = async () => {
      // The same callId again is safe: Relay acks the existing call, never a second.
      ws.send(JSON.stringify(call));
      // Catch up on what happened while we were away (on the first pass the call may not be
      // stored yet: its ack and states then come on the socket).
      try {
        const path = `/api/calls/${encodeURIComponent(call.callId)}`;
        const detail = await api(path, { missingOk: true });
        if (detail !== null) {
          for (const event of detail.timeline) show(event.status);
          if (TERMINAL.has(detail.status)) finish(detail.status);
        }
      } catch (error) {
        reject(error);
      }
    };
    ws.onmessage = (message) => {
      const frame = JSON.parse(message.data);
      if (frame.callId !== call.callId) return;
      if (frame.type === "call_ack") console.log(`acked: ${frame.status}`);
      if (frame.type === "error") reject(new Error(`refused: ${frame.code}: ${frame.error}`));
      if (frame.type === "call_status") {
        const extra = ["duration", "reason"]
          .filter((key) => key in frame)
          .map((key) => ` (${key} ${frame[key]})`)
          .join("");
        show(frame.status, extra);
        if (TERMINAL.has(frame.status)) finish(frame.status);
      }
    };
    ws.onclose = () => finish(null);
  });
}

console.log(`calling ${call.to} as ${call.callId}:`);
let pause = 500;
for (;;) {
  const { wsUrl } = await api("/api/dashboard");
  const final = await follow(wsUrl);
  if (final !== null) process.exit(final === "completed" ? 0 : 1);
  console.log(`socket lost; reconnecting in ${pause / 1000} s`);
  await new Promise((wake) => setTimeout(wake, pause));
  pause = Math.min(pause * 2, 10000);
}
