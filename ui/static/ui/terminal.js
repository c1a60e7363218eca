// The browser terminal: xterm.js + fit addon over WS /v1/agents/<id>/attach (binary frames both ways,
// a text frame {"type": "resize", cols, rows} on every size change).
import { socketUrl, strings } from "./shared.js";

const element = document.getElementById("terminal");
const readOnly = element.dataset.readOnly === "1";
const state = document.getElementById("terminal-state");

const terminal = new window.Terminal({
  cursorBlink: !readOnly,
  disableStdin: readOnly,
  fontFamily: "ui-monospace, 'DejaVu Sans Mono', monospace",
  fontSize: 14,
  scrollback: 5000,
});
const fit = new window.FitAddon.FitAddon();
terminal.loadAddon(fit);
terminal.open(element);
fit.fit();

const query = { cols: terminal.cols, rows: terminal.rows, ...(readOnly ? { mode: "ro" } : {}) };
const socket = new WebSocket(socketUrl(`/v1/agents/${element.dataset.agentId}/attach`, query));
socket.binaryType = "arraybuffer";
const encoder = new TextEncoder();

socket.addEventListener("open", () => {
  state.textContent = readOnly ? `${strings.connected} (${strings.readOnly})` : strings.connected;
  element.dataset.connected = "1";
  terminal.focus();
});
socket.addEventListener("message", (message) => {
  terminal.write(typeof message.data === "string" ? message.data : new Uint8Array(message.data));
});
socket.addEventListener("close", () => {
  state.textContent = strings.terminalClosed;
  delete element.dataset.connected;
});

const send = (text) => socket.readyState === WebSocket.OPEN && socket.send(encoder.encode(text));
if (!readOnly) terminal.onData(send);

function sendSize() {
  fit.fit();
  if (socket.readyState === WebSocket.OPEN) {
    socket.send(JSON.stringify({ type: "resize", cols: terminal.cols, rows: terminal.rows }));
  }
}
new ResizeObserver(sendSize).observe(element);
socket.addEventListener("open", sendSize);

// Copy and paste: Ctrl+Shift+C/V (plain Ctrl+C must stay an interrupt), and buttons for the mouse.
async function copySelection() {
  const selection = terminal.getSelection();
  if (selection) {
    await navigator.clipboard?.writeText(selection);
    state.textContent = strings.copied;
  }
}
async function paste() {
  const text = await navigator.clipboard?.readText();
  if (text) terminal.paste(text);
}
terminal.attachCustomKeyEventHandler((key) => {
  if (key.type !== "keydown" || !key.ctrlKey || !key.shiftKey) return true;
  if (key.code === "KeyC") { copySelection(); return false; }
  if (key.code === "KeyV" && !readOnly) { paste(); return false; }
  return true;
});
document.getElementById("terminal-copy").addEventListener("click", copySelection);
document.getElementById("terminal-paste")?.addEventListener("click", paste);
