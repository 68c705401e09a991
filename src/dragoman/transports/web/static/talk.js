// The voice agent over WebRTC, as a browser uses OpenAI's: the microphone as the call's audio track,
// the answer on the remote track, and the events on the "oai-events" data channel.
import {
  append,
  el,
  latencyTag,
  levelMeter,
  longLivedKey,
  mintKey,
  placeCall,
  scrollDown,
  stateBadge,
  watchLevel,
} from "./common.js";

export function talkPanel(showError) {
  const button = document.getElementById("talk-start");
  const output = document.getElementById("talk-output");
  const audio = document.getElementById("talk-audio");
  const setState = stateBadge("talk-state");
  const level = levelMeter("talk-level");
  let call = null;

  const bubble = (map, id, who) => {
    if (!map.has(id)) {
      const node = el("div", `bubble ${who} pending`);
      node.append(el("span", "who", who === "user" ? "You" : "Agent"), el("span", "text"), el("span", "meta"));
      map.set(id, append(output, node));
    }
    return map.get(id);
  };

  async function start() {
    setState("connecting", "connecting…");
    const voice = document.getElementById("talk-voice").value;
    const instructions = document.getElementById("talk-instructions").value.trim();
    const session = {
      type: "realtime",
      audio: {
        input: { transcription: { language: "en" }, turn_detection: { type: "server_vad" } },
        output: { voice },
      },
    };
    if (instructions) session.instructions = instructions;
    const key = await mintKey(session);

    const pc = new RTCPeerConnection();
    const state = { pc, users: new Map(), answers: new Map(), items: new Map(), stoppedAt: null, speaking: null };
    call = state;
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true },
    });
    state.mic = mic;
    state.unwatch = watchLevel(mic, level);
    mic.getTracks().forEach((track) => pc.addTrack(track, mic));
    pc.ontrack = (event) => {
      audio.srcObject = event.streams[0] || new MediaStream([event.track]);
      audio.play().catch(() => {});
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed") setState("error", "connection failed");
      if (pc.connectionState === "disconnected" || pc.connectionState === "closed") finish("closed");
    };
    const channel = pc.createDataChannel("oai-events");
    state.channel = channel;
    channel.onmessage = (message) => handle(state, JSON.parse(message.data));
    channel.onclose = () => finish("closed");

    state.location = await placeCall(pc, "/v1/realtime/calls", key);
    setState("connecting", "ringing…");
  }

  function handle(state, event) {
    switch (event.type) {
      case "session.created":
        setState("live", "in call");
        break;
      case "input_audio_buffer.speech_started": {
        setState("live", "listening");
        const node = bubble(state.users, event.item_id, "user");
        node.querySelector(".text").textContent = "…";
        break;
      }
      case "input_audio_buffer.speech_stopped":
        state.stoppedAt = performance.now();
        setState("live", "thinking");
        break;
      case "conversation.item.input_audio_transcription.delta": {
        const node = bubble(state.users, event.item_id, "user");
        if (!node.classList.contains("pending")) break; // the completed transcript is the last word
        const text = node.querySelector(".text");
        text.textContent = (text.textContent === "…" ? "" : text.textContent) + event.delta;
        scrollDown(output);
        break;
      }
      case "conversation.item.input_audio_transcription.completed": {
        const node = bubble(state.users, event.item_id, "user");
        node.classList.remove("pending");
        node.querySelector(".text").textContent = event.transcript.trim() || "(nothing heard)";
        scrollDown(output);
        break;
      }
      case "response.output_audio_transcript.delta":
      case "response.output_text.delta": {
        const node = bubble(state.answers, event.response_id, "agent");
        state.items.set(event.item_id, node);
        node.querySelector(".text").textContent += event.delta;
        scrollDown(output);
        break;
      }
      case "output_audio_buffer.started": {
        setState("live", "speaking");
        const node = bubble(state.answers, event.response_id, "agent");
        if (state.stoppedAt !== null && !node.dataset.timed) {
          node.dataset.timed = "1";
          node.querySelector(".meta").append(latencyTag(performance.now() - state.stoppedAt, "answer after"));
        }
        break;
      }
      case "output_audio_buffer.stopped":
        setState("live", "in call");
        break;
      case "output_audio_buffer.cleared": {
        // The server dropped the answer's unplayed audio: a barge-in (or a cancel).
        const node = state.answers.get(event.response_id) || [...state.answers.values()].pop();
        node?.classList.add("interrupted");
        setState("live", "listening");
        break;
      }
      case "conversation.item.truncated":
        // The server cut the answer to what was played: ask for what it kept.
        state.channel.send(JSON.stringify({ type: "conversation.item.retrieve", item_id: event.item_id }));
        break;
      case "conversation.item.retrieved": {
        const node = state.items.get(event.item.id);
        const part = (event.item.content || [])[0];
        if (node && part && typeof part.transcript === "string") {
          node.querySelector(".text").textContent = part.transcript;
        }
        break;
      }
      case "response.done": {
        const response = event.response || {};
        const node = state.answers.get(response.id);
        if (node) {
          node.classList.remove("pending");
          if (response.status === "cancelled") node.classList.add("interrupted");
        }
        break;
      }
      case "error":
        showError(event.error?.message || "The server reported an error.");
        break;
      default:
        break;
    }
  }

  function finish(how) {
    const state = call;
    if (!state) return;
    call = null;
    state.unwatch?.();
    state.mic?.getTracks().forEach((track) => track.stop());
    state.channel?.close();
    state.pc.close();
    audio.srcObject = null;
    setState(how === "closed" ? "closed" : "error", how === "closed" ? "call ended" : how);
    button.textContent = "Call";
  }

  button.addEventListener("click", async () => {
    showError("");
    if (call) {
      // Hang up on the server before closing the peer connection: closed first, the server
      // may end the call on its own before the DELETE arrives and answer it 404. (The DELETE
      // needs a long-lived key on a server with keys: the call's own key is spent; without
      // one, closing the peer connection still ends the call.)
      const location = call.location;
      const key = longLivedKey();
      const headers = key ? { Authorization: `Bearer ${key}` } : {};
      button.disabled = true;
      if (location) await fetch(location, { method: "DELETE", headers }).catch(() => {});
      button.disabled = false;
      finish("closed"); // if the server's hang-up has not already closed it
      return;
    }
    button.textContent = "Hang up";
    try {
      await start();
    } catch (error) {
      showError(error.message);
      finish("closed");
      setState("error", "not connected");
    }
  });
}
