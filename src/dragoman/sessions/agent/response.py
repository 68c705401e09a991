"""One response of a voice agent: what the LLM says, spoken clause by clause.

A response runs in three streams that overlap: the LLM's tokens, cut into clauses
(`streaming/clauses.py`); each clause's speech, one TTS job after another; and the
events the client sees. The events follow OpenAI's Realtime API and the reference
agent's table:

- `response.created` goes out "at the first outbound audio chunk (the response
  enters in_progress)", not when generation starts: until then the user is waiting
  on STT, the LLM and TTS, and a client must not take it for "thinking". A text
  response is created at its first text, a response that only calls a tool at the
  call, and one with no output at all when it ends.
- The assistant's message is an output item with one content part. Each clause's
  transcript delta goes out with the clause's first audio chunk, so what was sent
  of the transcript is exactly what was sent of the audio: "the deltas of an output
  item, joined, reproduce its `.done` transcript", and a cut-off response's `.done`
  carries what was spoken up to the cut.
- A tool call waits until the lead-in before it has been spoken ("the assistant has
  already spoken its lead-in before it calls the tool"), then goes out as its own
  item with `response.function_call_arguments.done`.
- Closing: `output_audio.done`, then `output_audio_transcript.done` (when there was
  text), the part and the item, and last `response.done` with the status and, for
  a cancelled one, `status_details.reason` (`turn_detected` or `client_cancelled`).

The response never calls an engine: it makes jobs (`sessions/agent/jobs.py`) and
takes their pieces. Each job carries the response's generation; the session drops
pieces of a superseded generation before they reach here.
"""

from __future__ import annotations

import base64
import dataclasses
from collections import deque
from collections.abc import Callable, Mapping
from typing import Literal, TypedDict

from dragoman.audio import g711
from dragoman.engines.llm.base import ChatRequest, Finished, ToolCall
from dragoman.engines.llm.calls import new_call_id
from dragoman.errors import DragomanError
from dragoman.languages import word_joiner
from dragoman.sessions.agent import events as out
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.conversation import Conversation, SpokenAudio, new_id
from dragoman.sessions.agent.jobs import LLMJob, SpeakRequest, SpeechJob
from dragoman.streaming.clauses import ClauseCutter, speakable

#: Longest audio delta sent, in seconds: a barge-in drops at most this much that was queued.
AUDIO_DELTA_SECONDS = 0.2
Status = Literal["completed", "cancelled", "incomplete", "failed"]
Reason = Literal["turn_detected", "client_cancelled", "max_output_tokens"]


class _Where(TypedDict):
    """Where a piece of the message goes (the `_InPart` fields of its event)."""

    response_id: str
    item_id: str
    output_index: int
    content_index: int


class ResponseRun:
    """The response in progress: its jobs out, its engines' pieces in, its events out."""

    def __init__(
        self,
        config: AgentConfig,
        request: ChatRequest | None,
        generation: int,
        conversation: Conversation,
        emit: Callable[[out.ServerEvent], None],
        *,
        metadata: Mapping[str, str] | None = None,
        in_conversation: bool = True,
    ) -> None:
        """`request` None: the response waits for its context (`ask`). With `in_conversation`
        off (an out-of-band response) its items stay out of the conversation."""
        self.id = new_id("resp")
        self.config = config
        self.generation = generation
        self.audio = "audio" in config.output_modalities
        self.metadata = metadata
        self.in_conversation = in_conversation
        self._conversation = conversation
        self._emit = emit
        self._llm: LLMJob | None = None if request is None else LLMJob(request, self.id, generation)
        self._llm_running = False
        self._llm_finished: Finished | None = None
        self._cutter = ClauseCutter.spoken_answer()
        self._clauses: deque[str] = deque()
        self._clause_count = 0
        self._speech: SpeechJob | None = None
        self._chunk_began = False
        self._calls: list[ToolCall] = []
        self._created = False
        self._output: list[out.Item] = []
        #: The assistant message being said: its id and output index, and what was said so far.
        self._message_id: str | None = None
        self._message_index = 0
        self._said = ""
        #: Where each clause's audio begins in the message (ms), with the text it added.
        self._clause_starts: list[tuple[float, str]] = []
        #: Seconds of audio sent.
        self.audio_seconds = 0.0
        self.done = False

    # -- jobs -------------------------------------------------------------------

    @property
    def waiting(self) -> bool:
        """Created, with no LLM request yet: it waits for the transcripts of its context."""
        return self._llm is None and not self._llm_running and self._llm_finished is None and not self.done

    def ask(self, request: ChatRequest) -> None:
        """The context is ready: the LLM request of a waiting response."""
        assert self.waiting
        self._llm = LLMJob(request, self.id, self.generation)

    def next_llm_job(self) -> LLMJob | None:
        if self._llm is None or self._llm_running or self.done:
            return None
        self._llm_running = True
        return self._llm

    def next_speech_job(self) -> SpeechJob | None:
        if self._speech is not None or not self._clauses or self.done:
            return None
        text = self._clauses.popleft()
        request = SpeakRequest(text, self.config.voice or "", self.config.speed, self.config.output_rate)
        self._speech = SpeechJob(request, self.id, self.generation, index=self._clause_count)
        self._clause_count += 1
        self._chunk_began = False
        return self._speech

    def holds(self, item_id: str) -> bool:
        """Whether `item_id` is one of this response's output items."""
        return any(item.id == item_id for item in self._output)

    def in_flight(self) -> list[LLMJob | SpeechJob]:
        jobs: list[LLMJob | SpeechJob] = []
        if self._llm is not None and self._llm_running:
            jobs.append(self._llm)
        if self._speech is not None:
            jobs.append(self._speech)
        return jobs

    # -- LLM pieces ---------------------------------------------------------------

    def text(self, piece: str) -> None:
        if self.audio:
            self._clauses.extend(speakable(c) for c in self._cutter.push(piece))
            self._clauses = deque(c for c in self._clauses if c)
        elif piece:
            self._open_message()
            self._said += piece
            self._emit(out.TextDelta(**self._where(), delta=piece))

    def emit_to(self, emit: Callable[[out.ServerEvent], None]) -> None:
        """Send the events from now on to `emit` (a held early start, released)."""
        self._emit = emit

    @property
    def output_items(self) -> tuple[out.Item, ...]:
        return tuple(self._output)

    @property
    def finished(self) -> Finished | None:
        """How the LLM's turn ended (None while it runs, or when it never ended)."""
        return self._llm_finished

    def tool_call(self, call: ToolCall) -> None:
        # The client sees OpenAI-shaped call ids (`call_` and 24 letters and digits, under
        # 32 characters): an upstream LLM's own ids may be longer, and some clients hash those,
        # so that their `function_call_output` no longer matches. The LLM sees the same id in
        # the history it is sent next.
        self._calls.append(dataclasses.replace(call, call_id=new_call_id()))

    def llm_done(self, finished: Finished) -> None:
        self._llm_running = False
        self._llm = None
        self._llm_finished = finished
        if self.audio:
            rest = speakable(self._cutter.finish())
            if rest:
                self._clauses.append(rest)
        self._maybe_complete()

    def llm_failed(self, error: DragomanError) -> None:
        self._llm_running = False
        self._llm = None
        self.finish("failed", error=error)

    # -- TTS pieces -----------------------------------------------------------------

    def speech_chunk(self, job: SpeechJob, pcm: bytes) -> None:
        """A chunk of a clause's audio (PCM16 at the output rate): out in deltas of at most
        AUDIO_DELTA_SECONDS, the clause's transcript delta with its first."""
        if job is not self._speech or not pcm:
            return
        self._open_message()
        if not self._chunk_began:
            self._chunk_began = True
            clause = job.request.text
            joiner = word_joiner(self._said, clause)
            self._said += joiner + clause
            self._clause_starts.append((1000 * self.audio_seconds, joiner + clause))
            self._emit(out.AudioTranscriptDelta(**self._where(), delta=joiner + clause))
        self.audio_seconds += len(pcm) / 2 / job.request.rate
        step = int(AUDIO_DELTA_SECONDS * job.request.rate) * 2
        codec = self.config.output_codec
        for start in range(0, len(pcm), step):
            piece = pcm[start : start + step]
            if codec != "pcm16":
                piece = g711.from_pcm16(piece[: len(piece) & ~1], codec)
            delta = base64.b64encode(piece).decode("ascii")
            self._emit(out.AudioDelta(**self._where(), delta=delta))

    def speech_done(self, job: SpeechJob) -> None:
        if job is self._speech:
            self._speech = None
            self._maybe_complete()

    def speech_failed(self, job: SpeechJob) -> None:
        """A clause that could not be spoken is skipped (the session reports the error)."""
        self.speech_done(job)

    # -- closing --------------------------------------------------------------------

    def _maybe_complete(self) -> None:
        finished = self._llm_finished
        if self.done or finished is None or self._speech is not None or self._clauses:
            return
        if finished.reason == "length":
            self.finish("incomplete", reason="max_output_tokens")
        else:
            self.finish("completed")

    def cancel(self, reason: Reason) -> None:
        """Stop now: the jobs in flight are cancelled, and what was said is closed out."""
        for job in self.in_flight():
            job.cancel.cancel()
        self._clauses.clear()
        self._calls.clear()  # a call the user never heard the lead-in to is not made
        self.finish("cancelled", reason=reason)

    def finish(
        self, status: Status, reason: Reason | None = None, error: DragomanError | None = None
    ) -> None:
        if self.done:
            return
        self.done = True
        self._ensure_created()
        if self._message_id is not None:
            self._close_message("completed" if status == "completed" else "incomplete")
        if status in ("completed", "incomplete"):
            for call in self._calls:
                self._announce_call(call)
        finished = self._llm_finished
        # OpenAI sends usage in every response.done: zeros where the LLM never finished.
        usage = out.Usage()
        if finished is not None:
            usage = out.Usage(finished.input_tokens, finished.output_tokens, finished.cached_tokens)
        final = dataclasses.replace(
            self._response(),
            status=status,
            reason=reason,
            output=tuple(self._output),
            usage=usage,
            error=error,
        )
        self._emit(out.ResponseDone(final))

    # -- events -----------------------------------------------------------------------

    def _response(self) -> out.Response:
        return out.Response(
            id=self.id,
            output_modalities=self.config.output_modalities,
            voice=self.config.voice,
            output_rate=self.config.output_rate,
            output_codec=self.config.output_codec,
            max_output_tokens=self.config.max_output_tokens,
            metadata=self.metadata,
            in_conversation=self.in_conversation,
        )

    def _ensure_created(self) -> None:
        if not self._created:
            self._created = True
            self._emit(out.ResponseCreated(self._response()))

    def _part(self, said: str | None) -> out.ContentPart:
        if self.audio:
            return out.ContentPart("output_audio", transcript=said)
        return out.ContentPart("output_text", text=said)

    def _open_message(self) -> None:
        if self._message_id is not None:
            return
        self._ensure_created()
        self._message_id = new_id("item")
        self._message_index = len(self._output)
        item = out.Message(self._message_id, "assistant", (), status="in_progress")
        self._add_item(item)
        self._emit(out.ContentPartAdded(**self._where(), part=self._part("")))

    def _where(self) -> _Where:
        assert self._message_id is not None
        return {
            "response_id": self.id,
            "item_id": self._message_id,
            "output_index": self._message_index,
            "content_index": 0,
        }

    def _close_message(self, status: Literal["completed", "incomplete"]) -> None:
        where = self._where()
        if self.audio:
            self._emit(out.AudioDone(**where))
            self._emit(out.AudioTranscriptDone(**where, transcript=self._said))
        else:
            self._emit(out.TextDone(**where, text=self._said))
        part = self._part(self._said)
        self._emit(out.ContentPartDone(**where, part=part))
        assert self._message_id is not None
        if self.audio and self.in_conversation:
            spoken = SpokenAudio(1000 * self.audio_seconds, tuple(self._clause_starts))
            self._conversation.record_audio(self._message_id, spoken)
        item = out.Message(self._message_id, "assistant", (part,), status=status)
        self._finish_item(item)
        self._message_id = None

    def _announce_call(self, call: ToolCall) -> None:
        item_id = new_id("item")
        self._add_item(out.FunctionCall(item_id, call.call_id, call.name, "", status="in_progress"))
        index = len(self._output) - 1
        self._emit(out.FunctionArgumentsDelta(self.id, item_id, index, call.call_id, call.arguments))
        self._emit(
            out.FunctionArgumentsDone(self.id, item_id, index, call.call_id, call.name, call.arguments)
        )
        self._finish_item(out.FunctionCall(item_id, call.call_id, call.name, call.arguments))

    def _add_item(self, item: out.Item) -> None:
        """A new output item: into the response and the conversation, and announced."""
        index = len(self._output)
        self._output.append(item)
        self._emit(out.OutputItemAdded(self.id, index, item))
        if self.in_conversation:
            item, previous = self._conversation.add(item)
            self._emit(out.ItemAdded(item, previous))

    def _finish_item(self, item: out.Item) -> None:
        index = next(i for i, known in enumerate(self._output) if known.id == item.id)
        self._output[index] = item
        self._emit(out.OutputItemDone(self.id, index, item))
        if self.in_conversation:
            self._conversation.replace(item)
            self._emit(out.ItemDone(item, self._previous_of(item)))

    def _previous_of(self, item: out.Item) -> str | None:
        items = self._conversation.items
        for index, known in enumerate(items):
            if known.id == item.id:
                return items[index - 1].id if index > 0 else None
        return None
