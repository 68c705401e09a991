// Simultaneous translation: the transcription session's settled words and open tail, streamed as the
// full state of each utterance to MT protocol v1 on /v1/mt; the committed translation and its draft.
import { append, el, latencyTag, levelMeter, mintKey, openSocket, scrollDown, stateBadge } from "./common.js";
import { TranscriptionStream } from "./transcribe.js";

const words = (text) => text.split(/\s+/).filter(Boolean);

export function translatePanel(showError) {
  const button = document.getElementById("translate-start");
  const output = document.getElementById("translate-output");
  const setState = stateBadge("translate-state");
  let run = null;

  async function start() {
    const target = document.getElementById("translate-target").value;
    setState("connecting", "connecting…");
    // MT needs no session config: the key only lets the page in (when the server has keys).
    const mtKey = await mintKey({ type: "realtime" });
    const mt = openSocket("/v1/mt", mtKey, "mt.v1");
    const state = {
      mt,
      seq: 0,
      // Transcription items in order, each one MT utterance; `current` is the open one.
      order: [],
      utterances: new Map(),
      current: 0,
      startedAt: performance.now(),
    };
    run = state;
    await new Promise((resolve, reject) => {
      mt.onopen = () => mt.send(JSON.stringify({ type: "init", protocol_version: 1, source_lang: "en", target_lang: target }));
      mt.onerror = () => reject(new Error("The MT WebSocket could not connect."));
      mt.onmessage = (message) => {
        const reply = JSON.parse(message.data);
        if (reply.type === "init_ok") resolve();
        else reject(new Error(reply.message || "The MT server refused the session."));
      };
    });
    mt.onmessage = (message) => translated(state, JSON.parse(message.data));
    mt.onclose = () => {
      if (run === state) stop("closed");
    };

    state.asr = new TranscriptionStream("en", {
      state: (s, text) => {
        if (s === "live") setState("live", `listening → ${target}`);
        else if (s === "error") stop("error");
      },
      started: (id) => utterance(state, id),
      stopped: (id) => {
        utterance(state, id).stoppedAt = performance.now();
      },
      partial: (id, settled, tail) => {
        const u = utterance(state, id);
        // Only whole words are settled: the settled text may end inside a word.
        const all = words(settled + tail);
        let firm = words(settled);
        if (firm.length && !/\s$/.test(settled) && tail && !/^\s/.test(tail)) firm = firm.slice(0, -1);
        u.words = firm;
        u.tail = all.slice(firm.length);
        u.source.querySelector(".settled").textContent = firm.join(" ");
        u.source.querySelector(".tail").textContent = (firm.length ? " " : "") + u.tail.join(" ");
        flush(state);
      },
      completed: (id, transcript) => {
        const u = utterance(state, id);
        u.words = words(transcript);
        u.tail = [];
        u.final = true;
        u.source.querySelector(".settled").textContent = transcript.trim();
        u.source.querySelector(".tail").textContent = "";
        flush(state);
      },
      error: showError,
    }, levelMeter("translate-level"));
    await state.asr.start();
  }

  function utterance(state, itemId) {
    if (!state.utterances.has(itemId)) {
      const row = el("div", "pair pending");
      const source = el("p", "source");
      source.append(el("span", "settled"), el("span", "tail", "…"));
      const target = el("p", "target");
      target.append(el("span", "committed"), el("span", "draft"), el("span", "meta"));
      row.append(source, target);
      append(output, row);
      const u = { id: state.order.length, row, source, target, words: [], tail: [], final: false, sent: "" };
      state.order.push(itemId);
      state.utterances.set(itemId, u);
    }
    return state.utterances.get(itemId);
  }

  /** Send the open utterance's state; once it is final, move on to the next one. */
  function flush(state) {
    while (state.current < state.order.length) {
      const u = state.utterances.get(state.order[state.current]);
      const clock = performance.now() - state.startedAt;
      const update = {
        type: "update",
        seq: ++state.seq,
        utterance_id: u.id,
        words: u.words.map((w) => [w, null, null]),
        tail: { words: u.tail.map((w) => [w, null, null]) },
        clock_ms: clock,
        is_final: u.final,
      };
      const fingerprint = JSON.stringify([update.words, update.tail, update.is_final]);
      if (fingerprint !== u.sent && (u.words.length || u.tail.length || u.final)) {
        u.sent = fingerprint;
        if (state.mt.readyState === WebSocket.OPEN) state.mt.send(JSON.stringify(update));
      }
      if (!u.final) return;
      state.current += 1;
    }
  }

  function translated(state, message) {
    if (message.type === "error") {
      showError(`Translation: ${message.message}`);
      return;
    }
    if (message.type !== "translation") return;
    const itemId = state.order[message.utterance_id];
    const u = itemId && state.utterances.get(itemId);
    if (!u) return;
    u.target.querySelector(".committed").textContent = message.committed_text;
    u.target.querySelector(".draft").textContent = message.final ? "" : message.buffer_text;
    if (message.final) {
      u.row.classList.remove("pending");
      if (u.stoppedAt) u.target.querySelector(".meta").replaceChildren(latencyTag(performance.now() - u.stoppedAt, "final"));
      if (!u.words.length) u.row.remove();
    }
    scrollDown(output);
  }

  function stop(how) {
    const state = run;
    if (!state) return;
    run = null;
    state.asr?.stop();
    // The final updates still in flight get a moment before the MT session closes.
    setTimeout(() => state.mt.close(1000), 4000);
    setState(how === "error" ? "error" : "closed", how === "error" ? "error" : "stopped");
    button.textContent = "Start";
  }

  button.addEventListener("click", async () => {
    showError("");
    if (run) {
      stop("closed");
      return;
    }
    button.textContent = "Stop";
    try {
      await start();
    } catch (error) {
      showError(error.message);
      stop("error");
      setState("error", "not connected");
    }
  });
}
