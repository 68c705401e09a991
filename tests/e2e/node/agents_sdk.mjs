// OpenAI's Agents SDK for JavaScript (@openai/agents-realtime) against a real `dragoman serve`.
//
// usage: node agents_sdk.mjs <ws url of /v1/realtime> <flow> <24 kHz PCM16 file>
// flows: "tool"    a spoken turn, then a question the agent answers with its tool (the SDK runs
//                  it, sends the output and asks for the answer);
//        "ptt"     push-to-talk: turn detection off, sendAudio(..., {commit: true}), then
//                  requestResponse();
//        "history" a spoken turn, then updateHistory() re-sends the user's audio item (with its
//                  corrected transcript) and adds a text message.
// It prints one JSON object: the server events the SDK's transport received, those its zod
// schema refuses, the errors it reported, its history and the tool calls it ran.
import { readFileSync } from "node:fs";
import { RealtimeAgent, RealtimeSession, tool } from "@openai/agents-realtime";
// The SDK's own zod schema of server events: an event that fails it is dropped by the SDK
// as unknown ("generic"), so each one is checked here too. Not exported: imported by path.
import { realtimeServerEventSchema } from "./node_modules/@openai/agents-realtime/dist/openaiRealtimeEvents.mjs";

const [url, flow, audioFile] = process.argv.slice(2);
const pcm = readFileSync(audioFile);
const RATE = 24000;

const toolCalls = [];
const getWeather = tool({
  name: "get_weather",
  description: "Get the current weather in a city.",
  parameters: {
    type: "object",
    properties: { city: { type: "string", description: "The city name" } },
    required: ["city"],
    additionalProperties: false,
  },
  strict: true,
  execute: async ({ city }) => {
    toolCalls.push(city);
    return JSON.stringify({ city, sky: "sunny", celsius: 21 });
  },
});

const agent = new RealtimeAgent({
  name: "Assistant",
  instructions: "You are a helpful voice assistant. Answer in one or two short sentences.",
  tools: flow === "tool" ? [getWeather] : [],
});
const turnDetection = flow === "ptt" ? null : { type: "server_vad", silenceDurationMs: 500 };
const session = new RealtimeSession(agent, {
  transport: "websocket",
  model: "dragoman-agent",
  config: { audio: { input: { turnDetection, transcription: { model: "whisper-base" } } } },
});

const events = [];
const malformed = [];
const errors = [];
const waiters = [];
session.on("transport_event", (event) => {
  events.push(event);
  const checked = realtimeServerEventSchema.safeParse(event);
  if (!checked.success) malformed.push({ type: event.type, issues: checked.error.issues.slice(0, 3) });
  for (const waiter of [...waiters]) {
    if (waiter.test(event)) {
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.resolve(event);
    }
  }
});
session.on("error", (error) => errors.push(String(error?.error?.message ?? error?.error ?? error)));

function next(test, seconds = 180) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting (${flow})`)), seconds * 1000);
    waiters.push({ test, resolve: (event) => (clearTimeout(timer), resolve(event)) });
  });
}
const responseDone = (event) => event.type === "response.done";

async function speak({ commit = false } = {}) {
  const step = RATE * 2 / 10; // 100 ms
  for (let start = 0; start < pcm.length; start += step) {
    const piece = pcm.subarray(start, Math.min(start + step, pcm.length));
    const last = start + step >= pcm.length;
    session.sendAudio(piece.buffer.slice(piece.byteOffset, piece.byteOffset + piece.byteLength), {
      commit: commit && last,
    });
  }
  if (!commit) {
    // Enough silence for server VAD to end the turn.
    const silence = new ArrayBuffer(RATE * 2 * 1.2);
    session.sendAudio(silence);
  }
}

await session.connect({ apiKey: "sk-local", url });
await next((event) => event.type === "session.updated", 30);

if (flow === "tool") {
  await speak();
  await next(responseDone);
  // The answer after the tool: the SDK runs the call, sends its output and asks for a reply.
  const answered = next(
    (event) =>
      responseDone(event) &&
      toolCalls.length > 0 &&
      event.response.output?.some((item) => item.type === "message") &&
      !event.response.output?.some((item) => item.type === "function_call"),
  );
  session.sendMessage("What is the weather in Paris right now? Use your tool.");
  await answered;
} else if (flow === "ptt") {
  await speak({ commit: true });
  session.transport.requestResponse();
  await next(responseDone);
} else if (flow === "history") {
  await speak();
  await next(responseDone);
  const added = next(
    (event) => event.type === "conversation.item.done" && event.item.role === "user" &&
      event.item.content?.[0]?.type === "input_text",
  );
  session.updateHistory((history) => [
    ...history.map((item) =>
      item.type === "message" && item.role === "user"
        ? { ...item, content: item.content.map((part) =>
            part.type === "input_audio" ? { ...part, transcript: `${part.transcript ?? ""} (corrected)` } : part) }
        : item,
    ),
    { itemId: "item_from_history", type: "message", role: "user", status: "completed",
      content: [{ type: "input_text", text: "Thanks, that is all." }] },
  ]);
  await added;
  await new Promise((resolve) => setTimeout(resolve, 1000));
}

const history = session.history.map((item) => ({
  type: item.type,
  role: item.role,
  content: (item.content ?? []).map((part) => ({ type: part.type, text: part.text, transcript: part.transcript })),
}));
session.close();
// Audio deltas are left out of what is printed (the tests read the events' other fields).
const raw = events.map((e) => (e.type === "response.output_audio.delta" ? { ...e, delta: "" } : e));
const result = JSON.stringify({ events: events.map((e) => e.type), raw, malformed, errors, history, toolCalls });
process.stdout.write(result, () => process.exit(0));
