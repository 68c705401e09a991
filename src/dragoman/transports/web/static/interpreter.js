// The interpreter over WebRTC, as OpenAI's "Realtime translation" guide has a browser use it: a key
// minted for the translation session (POST /v1/realtime/translations/client_secrets), the chosen
// microphone as the call's audio track, the translated speech on the remote track, and the source
// and translated transcript deltas (append-only, their own spaces) on the "oai-events" data channel.
import { el, levelMeter, mintKey, placeCall, scrollDown, stateBadge, watchLevel } from "./common.js";

/** How long Stop waits for the rest of the translation (`session.close` → `session.closed`). */
const CLOSE_WAIT_MS = 30000;

export function interpreterPanel(showError) {
  const button = document.getElementById("interpreter-start");
  const output = document.getElementById("interpreter-output");
  const audio = document.getElementById("interpreter-audio");
  const microphones = document.getElementById("interpreter-mic");
  const setState = stateBadge("interpreter-state");
  const inLevel = levelMeter("interpreter-level");
  const outLevel = levelMeter("interpreter-out-level");
  let call = null;

  /** The microphones the browser lists (their names once the page may use one). */
  async function listMicrophones() {
    const devices = await navigator.mediaDevices?.enumerateDevices?.().catch(() => []);
    const chosen = microphones.value;
    const inputs = (devices || []).filter((d) => d.kind === "audioinput" && d.deviceId && d.deviceId !== "default");
    microphones.replaceChildren(el("option", "", "Default microphone"));
    microphones.firstChild.value = "";
    inputs.forEach((device, i) => {
      const option = el("option", "", device.label || `Microphone ${i + 1}`);
      option.value = device.deviceId;
      microphones.append(option);
    });
    microphones.value = [...microphones.options].some((o) => o.value === chosen) ? chosen : "";
  }

  /** The languages this server interprets (`/health`): the target list, and what to speak. */
  async function listLanguages() {
    const body = await fetch("/health", { cache: "no-store" })
      .then((r) => r.json())
      .catch(() => ({}));
    const languages = body.interpreter_languages;
    if (!languages?.targets?.length) return;
    const names = new Intl.DisplayNames(["en"], { type: "language" });
    const name = (code) => names.of(code) || code;
    const targets = document.getElementById("interpreter-target");
    const chosen = targets.value;
    targets.replaceChildren(
      ...languages.targets.map((code) => {
        const option = el("option", "", name(code));
        option.value = code;
        return option;
      }),
    );
    targets.value = languages.targets.includes(chosen) ? chosen : languages.targets[0];
    document.getElementById("interpreter-speak").textContent = `Speak ${languages.sources.map(name).join(" or ")}`;
  }

  async function start() {
    setState("connecting", "connecting…");
    const language = document.getElementById("interpreter-target").value;
    const session = {
      model: "gpt-realtime-translate",
      audio: { input: { transcription: { model: "whisper" } }, output: { language } },
    };
    const key = await mintKey(session, "/v1/realtime/translations/client_secrets");

    const pc = new RTCPeerConnection();
    const state = { pc, closing: null };
    call = state;
    const device = microphones.value;
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: {
        ...(device ? { deviceId: { exact: device } } : {}),
        channelCount: 1,
        echoCancellation: true,
        noiseSuppression: true,
        autoGainControl: true,
      },
    });
    state.mic = mic;
    state.unwatch = [watchLevel(mic, inLevel)];
    listMicrophones();
    mic.getTracks().forEach((track) => pc.addTrack(track, mic));
    pc.ontrack = (event) => {
      const stream = event.streams[0] || new MediaStream([event.track]);
      audio.srcObject = stream;
      audio.play().catch(() => {});
      let loudest = 0;
      state.unwatch.push(
        watchLevel(stream, (level) => {
          outLevel(level);
          loudest = Math.max(loudest, level);
          audio.dataset.loudest = loudest.toFixed(4);
        }),
      );
    };
    pc.onconnectionstatechange = () => {
      if (pc.connectionState === "failed") finish("connection failed");
      if (pc.connectionState === "disconnected" || pc.connectionState === "closed") finish("closed");
    };
    const channel = pc.createDataChannel("oai-events");
    state.channel = channel;
    channel.onmessage = (message) => handle(JSON.parse(message.data));
    channel.onclose = () => finish("closed");

    await placeCall(pc, "/v1/realtime/translations/calls", key);
    setState("connecting", "ringing…");
  }

  const column = (which) => {
    output.querySelector(".placeholder")?.remove();
    return output.querySelector(`.${which} .text`);
  };

  function handle(event) {
    switch (event.type) {
      case "session.created":
        setState("live", `interpreting → ${event.session.audio.output.language}`);
        break;
      case "session.input_transcript.delta":
        column("source").textContent += event.delta;
        scrollDown(output);
        break;
      case "session.output_transcript.delta":
        column("target").textContent += event.delta;
        scrollDown(output);
        break;
      case "session.closed":
        finish("closed");
        break;
      case "error":
        showError(event.error?.message || "The server reported an error.");
        break;
      default:
        break;
    }
  }

  /** Stop speaking: the server says the rest of the translation, then `session.closed`. */
  function close() {
    const state = call;
    if (!state || state.closing) return;
    if (state.channel?.readyState !== "open") {
      finish("closed");
      return;
    }
    state.mic?.getAudioTracks().forEach((track) => (track.enabled = false)); // silence, not a gap
    state.channel.send(JSON.stringify({ type: "session.close" }));
    state.closing = setTimeout(() => finish("closed"), CLOSE_WAIT_MS);
    setState("connecting", "finishing…");
    button.disabled = true;
  }

  function finish(how) {
    const state = call;
    if (!state) return;
    call = null;
    clearTimeout(state.closing);
    state.unwatch?.forEach((stop) => stop());
    state.mic?.getTracks().forEach((track) => track.stop());
    state.channel?.close();
    state.pc.close();
    audio.srcObject = null;
    setState(how === "closed" ? "closed" : "error", how === "closed" ? "stopped" : how);
    button.textContent = "Start";
    button.disabled = false;
  }

  button.addEventListener("click", async () => {
    showError("");
    if (call) {
      close();
      return;
    }
    column("source").textContent = "";
    column("target").textContent = "";
    button.textContent = "Stop";
    try {
      await start();
    } catch (error) {
      showError(error.message);
      finish("closed");
      setState("error", "not connected");
    }
  });
  listMicrophones();
  listLanguages();
}
