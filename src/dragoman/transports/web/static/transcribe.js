// Live transcription: a Realtime transcription session over a WebSocket (?intent=transcription).
import { Microphone, append, el, latencyTag, levelMeter, mintKey, openSocket, scrollDown, stateBadge } from "./common.js";

/**
 * One transcription session fed by the microphone. Callbacks (all optional):
 * state(state, text), started(itemId), stopped(itemId), partial(itemId, settled, tail),
 * completed(itemId, transcript, latencyMs), error(message).
 */
export class TranscriptionStream {
  constructor(language, handlers, level) {
    this.language = language;
    this.on = handlers;
    this.level = level;
    this.items = new Map();
  }

  async start() {
    this.on.state?.("connecting", "connecting…");
    const transcription = this.language ? { language: this.language } : {};
    // The session's settings travel with its key: the session starts with them.
    const key = await mintKey({
      type: "transcription",
      // The unstable tail of each step's hypothesis, shown greyed (this server's extension).
      include: ["mstar.transcription.partial"],
      audio: {
        input: {
          format: { type: "audio/pcm", rate: 24000 },
          transcription,
          turn_detection: { type: "server_vad", silence_duration_ms: 500 },
        },
      },
    });
    this.socket = openSocket("/v1/realtime?intent=transcription", key);
    this.socket.onmessage = (message) => this.handle(JSON.parse(message.data));
    this.socket.onclose = (event) => {
      this.mic?.stop();
      this.on.state?.(event.code === 1000 || this.stopping ? "closed" : "error", `closed (${event.code})`);
    };
    await new Promise((resolve, reject) => {
      this.socket.onopen = resolve;
      this.socket.onerror = () => reject(new Error("The transcription WebSocket could not connect."));
    });
  }

  handle(event) {
    switch (event.type) {
      case "session.created":
        this.on.state?.("live", "listening");
        this.mic = new Microphone(24000);
        this.mic
          .start((audio) => this.send({ type: "input_audio_buffer.append", audio }), this.level)
          .catch((error) => this.on.error?.(`Microphone: ${error.message}`));
        break;
      case "input_audio_buffer.speech_started":
        this.item(event.item_id);
        this.on.started?.(event.item_id);
        break;
      case "input_audio_buffer.speech_stopped":
        this.item(event.item_id).stoppedAt = performance.now();
        this.on.stopped?.(event.item_id);
        break;
      case "mstar.transcription.partial": {
        // The whole hypothesis: its first stable_chars characters will not change.
        const item = this.item(event.item_id);
        item.settled = event.text.slice(0, event.stable_chars);
        this.on.partial?.(event.item_id, item.settled, event.text.slice(event.stable_chars));
        break;
      }
      case "conversation.item.input_audio_transcription.delta": {
        // Append-only settled text (for servers without the partial extension).
        const item = this.item(event.item_id);
        item.deltas += event.delta;
        if (item.deltas.length > item.settled.length) {
          item.settled = item.deltas;
          this.on.partial?.(event.item_id, item.settled, "");
        }
        break;
      }
      case "conversation.item.input_audio_transcription.completed": {
        const item = this.item(event.item_id);
        const latency = item.stoppedAt ? performance.now() - item.stoppedAt : null;
        this.on.completed?.(event.item_id, event.transcript, latency);
        break;
      }
      case "conversation.item.input_audio_transcription.failed":
      case "error":
        this.on.error?.((event.error && event.error.message) || "The server reported an error.");
        break;
      default:
        break;
    }
  }

  item(id) {
    if (!this.items.has(id)) this.items.set(id, { settled: "", deltas: "", stoppedAt: null });
    return this.items.get(id);
  }

  send(event) {
    if (this.socket?.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify(event));
  }

  stop() {
    this.stopping = true;
    this.mic?.stop();
    // Whatever is still buffered is transcribed before the close.
    this.send({ type: "input_audio_buffer.commit" });
    setTimeout(() => this.socket?.close(1000), 1500);
  }
}

/** The Transcribe panel. */
export function transcribePanel(showError) {
  const button = document.getElementById("transcribe-start");
  const output = document.getElementById("transcribe-output");
  const setState = stateBadge("transcribe-state");
  const lines = new Map();
  let stream = null;

  const line = (id) => {
    if (!lines.has(id)) {
      const node = el("p", "line pending");
      node.append(el("span", "settled"), el("span", "tail", "…"), el("span", "meta"));
      lines.set(id, append(output, node));
    }
    return lines.get(id);
  };

  const handlers = {
    state: (state, text) => {
      setState(state, text);
      if (state === "closed" || state === "error") {
        button.textContent = "Start";
        stream = null;
      }
    },
    started: (id) => line(id),
    partial: (id, settled, tail) => {
      const node = line(id);
      node.querySelector(".settled").textContent = settled;
      node.querySelector(".tail").textContent = tail;
      scrollDown(output);
    },
    completed: (id, transcript, latency) => {
      const node = line(id);
      node.classList.remove("pending");
      node.querySelector(".settled").textContent = transcript.trim();
      node.querySelector(".tail").textContent = "";
      if (!transcript.trim()) node.remove();
      if (latency !== null) node.querySelector(".meta").replaceChildren(latencyTag(latency, "final"));
      scrollDown(output);
    },
    error: showError,
  };

  button.addEventListener("click", async () => {
    showError("");
    if (stream) {
      stream.stop();
      button.textContent = "Start";
      return;
    }
    const language = document.getElementById("transcribe-language").value;
    stream = new TranscriptionStream(language, handlers, levelMeter("transcribe-level"));
    button.textContent = "Stop";
    try {
      await stream.start();
    } catch (error) {
      showError(error.message);
      setState("error", "not connected");
      button.textContent = "Start";
      stream = null;
    }
  });
}
