// What every panel shares: keys, the microphone, WebSockets with a browser's key, and the page's UI bits.

/** The long-lived key typed into the page (kept in memory, never stored). */
export function longLivedKey() {
  return document.getElementById("api-key").value.trim();
}

/** A short-lived key bound to `session`, from POST `path` (OpenAI's request): a Realtime session's
 * by default, a translation session's from /v1/realtime/translations/client_secrets. */
export async function mintKey(session, path = "/v1/realtime/client_secrets") {
  const headers = { "Content-Type": "application/json" };
  const key = longLivedKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  const response = await fetch(path, {
    method: "POST",
    headers,
    body: JSON.stringify({ expires_after: { anchor: "created_at", seconds: 60 }, session }),
  });
  if (response.status === 401) {
    const field = document.getElementById("api-key");
    field.classList.add("attention");
    field.addEventListener("input", () => field.classList.remove("attention"), { once: true });
    field.focus();
    throw new Error(key ? "The server refused this API key." : "This server needs an API key: type it above.");
  }
  if (!response.ok) throw new Error(await errorMessage(response));
  return (await response.json()).value;
}

export async function errorMessage(response) {
  try {
    const body = await response.json();
    return body.error?.message || `HTTP ${response.status}`;
  } catch {
    return `HTTP ${response.status}`;
  }
}

/** A WebSocket to `path` on this server; browsers cannot set headers, so the key goes as a subprotocol. */
export function openSocket(path, key, protocol = "realtime") {
  const url = new URL(path, location.href);
  url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
  const protocols = key ? [protocol, `openai-insecure-api-key.${key}`] : [];
  return new WebSocket(url, protocols);
}

/** Wait (bounded) for ICE gathering, so the offer carries its candidates: the answer is not trickled. */
export function gathered(pc, timeoutMs = 3000) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      if (pc.iceGatheringState === "complete") resolve();
    };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, timeoutMs);
  });
}

/** Offer `pc` (with its ICE candidates) to the call endpoint `path` with the key `key`, and apply the
 * answer; returns the call's Location (where DELETE hangs up). Throws with the server's reason. */
export async function placeCall(pc, path, key) {
  await pc.setLocalDescription(await pc.createOffer());
  await gathered(pc);
  const response = await fetch(path, {
    method: "POST",
    body: pc.localDescription.sdp,
    headers: { "Content-Type": "application/sdp", Authorization: `Bearer ${key}` },
  });
  if (!response.ok) throw new Error(`The call was refused: ${await errorMessage(response)}`);
  const location = response.headers.get("Location");
  await pc.setRemoteDescription({ type: "answer", sdp: await response.text() });
  return location;
}

/** A bar that follows a stream's loudness (the call's own microphone track). */
export function watchLevel(stream, onLevel) {
  const context = new AudioContext();
  const analyser = context.createAnalyser();
  analyser.fftSize = 1024;
  context.createMediaStreamSource(stream).connect(analyser);
  const samples = new Float32Array(analyser.fftSize);
  const timer = setInterval(() => {
    analyser.getFloatTimeDomainData(samples);
    let sum = 0;
    for (const s of samples) sum += s * s;
    onLevel(Math.sqrt(sum / samples.length));
  }, 100);
  return () => {
    clearInterval(timer);
    context.close();
  };
}

/** The microphone as base64 PCM16 chunks of `chunkMs` at `rate` Hz, with a level callback. */
export class Microphone {
  constructor(rate = 24000, chunkMs = 100) {
    this.rate = rate;
    this.chunkMs = chunkMs;
  }

  async start(onChunk, onLevel) {
    this.stream = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    this.context = new AudioContext({ sampleRate: this.rate });
    await this.context.audioWorklet.addModule("/static/capture-worklet.js");
    const source = this.context.createMediaStreamSource(this.stream);
    this.node = new AudioWorkletNode(this.context, "capture", {
      processorOptions: { frames: Math.round((this.rate * this.chunkMs) / 1000) },
    });
    this.node.port.onmessage = (message) => {
      const samples = message.data;
      onLevel?.(rms(samples));
      onChunk(pcm16Base64(samples));
    };
    source.connect(this.node);
    return this.stream;
  }

  stop() {
    this.node?.disconnect();
    this.context?.close();
    this.stream?.getTracks().forEach((track) => track.stop());
    this.node = this.context = this.stream = undefined;
  }
}

function rms(samples) {
  let sum = 0;
  for (const s of samples) sum += s * s;
  return Math.sqrt(sum / samples.length);
}

export function pcm16Base64(samples) {
  const bytes = new Uint8Array(samples.length * 2);
  const view = new DataView(bytes.buffer);
  samples.forEach((s, i) => view.setInt16(i * 2, Math.max(-1, Math.min(1, s)) * 0x7fff, true));
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

/** A level meter: a bar whose width follows the microphone's loudness. */
export function levelMeter(id) {
  const bar = document.getElementById(id);
  return (level) => {
    bar.style.width = `${Math.min(100, Math.round(Math.sqrt(level) * 180))}%`;
  };
}

/** The connection-state badge of a panel. */
export function stateBadge(id) {
  const badge = document.getElementById(id);
  return (state, text = state) => {
    badge.dataset.state = state;
    badge.textContent = text;
  };
}

export function showError(message) {
  const box = document.getElementById("error");
  box.textContent = message;
  box.hidden = !message;
}

/** An element with a class and text. */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Clear `output` of its placeholder (once) and append `node`, keeping the newest line in view. */
export function append(output, node) {
  output.querySelector(".placeholder")?.remove();
  output.append(node);
  output.scrollTop = output.scrollHeight;
  return node;
}

export function scrollDown(output) {
  output.scrollTop = output.scrollHeight;
}

export function latencyTag(ms, label) {
  return el("span", "latency", `${label} ${Math.round(ms)} ms`);
}
