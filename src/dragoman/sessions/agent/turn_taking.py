"""Turn-taking: which of the agent's responses runs, and when (`session.py` routes to it).

- One response at a time: a second `response.create` while one is active gets
  `conversation_already_has_active_response`.
- Push-to-talk: a response waits for the transcript of every turn committed before it
  was created (a client commits and at once asks for the answer; OpenAI answers the
  committed audio). Until then it is created but asks the LLM nothing.
- Barge-in: when the user starts speaking during a response and
  `turn_detection.interrupt_response` is on (the default), the response is closed
  first (`output_audio.done`, `output_audio_transcript.done`, `response.done`
  cancelled with `turn_detected`), before the session sends `speech_started`. With it
  off, the user's speech is still transcribed and delivered while the response plays
  on, and the turn is answered once the response ends.
- The early start (`early_start.py`): at each pause in a turn, the answer starts on the
  turn's transcript before the silence runs out, held from the client until the turn really
  ends; speech that goes on drops it unseen.
- Cancellation by generations: every response takes the next value of a monotonic
  counter, and every job carries it. A piece of a superseded generation is dropped;
  a piece of the current one always passes, so a response that did not finish
  cleanly can never silence the next.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from dragoman.engines.llm.base import Finished, LLMPiece, TextPiece, ToolCallPiece
from dragoman.errors import ClientError, DragomanError, InvalidValue
from dragoman.sessions.agent import events as out
from dragoman.sessions.agent.config import AgentConfig
from dragoman.sessions.agent.conversation import ROOT, Conversation
from dragoman.sessions.agent.early_start import Speculation, same_words
from dragoman.sessions.agent.jobs import LLMJob, SpeechJob
from dragoman.sessions.agent.limits import AgentLimits
from dragoman.sessions.agent.requests import chat_request
from dragoman.sessions.agent.response import Reason, ResponseRun
from dragoman.sessions.speech import events as speech
from dragoman.sessions.speech.front import SpeechFront


class ActiveResponse(ClientError):
    code = "conversation_already_has_active_response"


@dataclass
class _Waiting:
    """A response created before the transcripts of its context: the turns it waits for, and
    how to build its request once they are in."""

    response: ResponseRun
    config: AgentConfig
    context: tuple[out.Item | out.ItemReference, ...] | None
    turns: set[str] = field(default_factory=set)


class TurnTaking:
    """The session's responses: the one that runs, the one held by the early start, the one
    waiting for transcripts, and the turn to answer once the current response ends.

    `settings` gives the session's settings as they are now (a turn is answered with them);
    `emit` sends an event to the client, `stats` counts what the session did."""

    def __init__(
        self,
        session_id: str,
        conversation: Conversation,
        limits: AgentLimits,
        front: SpeechFront,
        settings: Callable[[], AgentConfig],
        emit: Callable[[out.ServerEvent], None],
        stats: defaultdict[str, float],
    ) -> None:
        self.session_id = session_id
        self.conversation = conversation
        self.limits = limits
        self.front = front
        self._settings = settings
        self._emit = emit
        self.stats = stats
        self.generation = 0
        self.response: ResponseRun | None = None
        #: A turn that ended while a response it could not interrupt played: answered next.
        self._answer_next = False
        #: The early start's held response, while its turn is not yet over.
        self._early: Speculation | None = None
        #: Committed turns (and client audio items) whose transcript has not come yet, in order.
        self._untranscribed: dict[str, None] = {}
        self._waiting: _Waiting | None = None

    # -- the client's requests ------------------------------------------------------------

    def create(
        self,
        config: Callable[[], AgentConfig],
        context: tuple[out.Item | out.ItemReference, ...] | None,
        metadata: Mapping[str, str] | None,
        in_conversation: bool,
    ) -> None:
        """`response.create` with the settings `config()` gives (checked once no response is
        active); raises ClientError before anything changes (the held early start aside: unseen
        by the client, and its own request comes first)."""
        if self._early is not None:
            self._drop_early()
        if self.response is not None:
            raise ActiveResponse(
                f"Conversation already has an active response in progress: {self.response.id}. "
                "Wait until the response is finished before creating a new one."
            )
        settings = config()
        for index, entry in enumerate(context or ()):
            if isinstance(entry, out.ItemReference) and self.conversation.get(entry.id) is None:
                raise InvalidValue(
                    f"No item with id {entry.id[:64]!r} is in the conversation.",
                    param=f"response.input[{index}].id",
                )
        self._start(settings, context, metadata, in_conversation)

    def cancel(self, response_id: str | None) -> None:
        """`response.cancel`; raises ClientError when there is no such response."""
        response = self.response
        if response is None or self._early is not None:  # a held early start is not the client's yet
            raise InvalidValue(
                "There is no response in progress to cancel.", code="response_cancel_not_active"
            )
        if response_id is not None and response_id != response.id:
            raise InvalidValue(
                f"Response {response_id[:64]!r} is not the one in progress.", param="response_id"
            )
        self._stop(response, "client_cancelled")

    def output_cleared(self) -> None:
        """WebRTC: "cut off the current audio response". The transport drops the unplayed
        audio; what is still being generated for it stops too."""
        if self.response is not None and self._early is None:
            self._stop(self.response, "client_cancelled")

    def buffer_cleared(self, turn_id: str | None) -> None:
        """The input buffer holding `turn_id` was dropped: so is an early start held for it, as
        that turn will never be committed, so nothing would ever release or drop its answer."""
        if self._early is not None and turn_id is not None and self._early.item_id == turn_id:
            self._drop_early()

    # -- what the user said ---------------------------------------------------------------

    def awaits_transcript(self, item_id: str) -> None:
        """A committed turn or a client's audio item, whose transcript a response may wait for."""
        self._untranscribed[item_id] = None

    def transcript_in(self, item_id: str) -> bool:
        """A turn's transcript came (or never will): whether the waiting response waited for it."""
        self._untranscribed.pop(item_id, None)
        waiting = self._waiting
        if waiting is None or item_id not in waiting.turns:
            return False
        waiting.turns.discard(item_id)
        return True

    def speech_started(self, interrupts: bool) -> None:
        """Barge-in, when the turn detection `interrupts` responses."""
        if self.response is None or not interrupts:
            return
        self._answer_next = False  # the user is saying something new
        if self._early is not None:
            self._drop_early()
        else:
            self.stats["barge_ins"] += 1
            self._stop(self.response, "turn_detected")

    def turn_follows(self, item_id: str) -> str | None:
        """Where a committed turn goes in the conversation: before its early answer, which is
        already in it (None: at the end)."""
        early = self._early
        if early is None or early.item_id != item_id:
            return None
        return early.before or ROOT

    def transcribed(self, event: speech.Completed, answered: bool, idle: bool) -> None:
        """A turn's final transcript: its held early answer released, or the turn answered, unless
        a response already waits for it (`answered`). `idle`: the idle timeout committed it
        ("The model will effectively prompt the user to continue the conversation")."""
        early = self._early
        if early is not None and early.item_id == event.item_id:
            if same_words(event.transcript, early.transcript):
                self._confirm_early(early)
                return
            self._drop_early()  # the final transcript says something else: answer that
        turns = self._settings().turn_detection
        if not (event.transcript.strip() or idle) or turns is None or not turns.create_response:
            return
        if answered:
            return
        if self.front.user_speaking:
            # The transcript came after the user went on: answering now would talk over them,
            # with the barge-in check already past. Their next turn is answered with both.
            return
        if self.response is None:
            self._start(self._settings())
        else:
            self._answer_next = True

    def ask_when_ready(self) -> None:
        """Ask the LLM for the waiting response once nothing it waits for is untranscribed."""
        waiting = self._waiting
        if waiting is None:
            return
        if waiting.response is not self.response or not waiting.response.waiting:
            self._waiting = None  # cancelled meanwhile
            return
        if waiting.turns:
            return
        self._waiting = None
        context = None
        if waiting.context is not None:
            resolved = (self._resolve(entry) for entry in waiting.context)
            context = [item for item in resolved if item is not None]
        request = chat_request(
            waiting.config, self.conversation, self.limits, self.session_id, context=context
        )
        waiting.response.ask(request)

    # -- the early start (early_start.py) -------------------------------------------------

    def provisional(self, event: speech.Provisional | speech.TurnResumed) -> None:
        if isinstance(event, speech.TurnResumed):
            if self._early is not None and self._early.item_id == event.item_id:
                self._drop_early()
            return
        config = self._settings()
        turns = config.turn_detection
        if self.response is not None or turns is None or not turns.create_response:
            return
        if not event.transcript.strip():
            return
        self.generation += 1
        held: list[out.ServerEvent] = []
        request = chat_request(config, self.conversation, self.limits, self.session_id, event.transcript)
        response = ResponseRun(config, request, self.generation, self.conversation, held.append)
        self._early = Speculation(event.item_id, event.transcript, response, self.conversation.last_id, held)
        self.response = response
        self.front.hold_idle()

    def _drop_early(self) -> None:
        early, self._early = self._early, None
        assert early is not None
        self.generation += 1  # what its jobs still send is stale
        early.drop(self.conversation)
        if self.response is early.response:
            self.response = None
            self.front.arm_idle()

    def _confirm_early(self, early: Speculation) -> None:
        self._early = None
        self.stats["responses"] += 1
        self.stats["early_starts"] += 1
        for event in early.release(early.item_id):
            self._emit(event)
        early.response.emit_to(self._emit)
        if early.response.done:
            self._ended(early.response)

    # -- the engines' pieces --------------------------------------------------------------

    def progress(self, job: LLMJob | SpeechJob, piece: LLMPiece | bytes) -> None:
        response = self._live(job)
        if response is None:
            return  # a superseded generation's output is dropped
        if isinstance(job, SpeechJob) and isinstance(piece, bytes):
            response.speech_chunk(job, piece)
        elif isinstance(piece, TextPiece):
            response.text(piece.text)
        elif isinstance(piece, ToolCallPiece):
            self.stats["tool_calls"] += 1
            response.tool_call(piece.call)
        self._after(response)

    def done(self, job: LLMJob | SpeechJob, result: Finished | None) -> None:
        response = self._live(job)
        if response is None:
            return
        if isinstance(job, LLMJob):
            assert isinstance(result, Finished)
            response.llm_done(result)
        else:
            response.speech_done(job)
        self._after(response)

    def failed(self, job: LLMJob | SpeechJob, error: DragomanError) -> None:
        response = self._live(job)
        if response is None:
            return
        if isinstance(job, LLMJob):
            response.llm_failed(error)
        else:
            self._emit(speech.Error(error))
            response.speech_failed(job)
        self._after(response)

    def close(self) -> None:
        """The connection is gone: stop the response's engine work now."""
        if self.response is not None:
            for job in self.response.in_flight():
                job.cancel.cancel()

    # -- a response's life ----------------------------------------------------------------

    def _start(
        self,
        config: AgentConfig,
        context: tuple[out.Item | out.ItemReference, ...] | None = None,
        metadata: Mapping[str, str] | None = None,
        in_conversation: bool = True,
    ) -> None:
        """Start a response; it asks the LLM once the transcripts of its context are in."""
        self.generation += 1
        self.stats["responses"] += 1
        self.front.hold_idle()  # the idle timeout runs again once this answer has played
        self.response = ResponseRun(
            config,
            None,
            self.generation,
            self.conversation,
            self._emit,
            metadata=metadata,
            in_conversation=in_conversation,
        )
        if context is None:
            turns = set(self._untranscribed)
        else:
            turns = {
                e.id for e in context if isinstance(e, out.ItemReference) and e.id in self._untranscribed
            }
        self._waiting = _Waiting(self.response, config, context, turns)
        self.ask_when_ready()

    def _resolve(self, entry: out.Item | out.ItemReference) -> out.Item | None:
        """An item of a response's own context; a reference, as the conversation holds it now."""
        return self.conversation.get(entry.id) if isinstance(entry, out.ItemReference) else entry

    def _stop(self, response: ResponseRun, reason: Reason) -> None:
        """Cancel the response now; its jobs' later pieces belong to a stale generation."""
        self.stats["responses_cancelled"] += 1
        self.generation += 1
        response.cancel(reason)
        self._ended(response)

    def _ended(self, response: ResponseRun) -> None:
        if self.response is response:
            self.response = None
        self.stats["output_audio_seconds"] += response.audio_seconds
        if response.finished is not None:
            self.stats["llm_input_tokens"] += response.finished.input_tokens
            self.stats["llm_output_tokens"] += response.finished.output_tokens
            self.stats["llm_cached_tokens"] += response.finished.cached_tokens
        if self._answer_next and self.response is None:
            self._answer_next = False
            self._start(self._settings())
        if self.response is None:
            # OpenAI: the idle timeout "will be applied after the last model response's audio has
            # finished playing, i.e. it's set to the `response.done` time plus audio playback duration".
            self.front.arm_idle(response.audio_seconds)

    def _live(self, job: LLMJob | SpeechJob) -> ResponseRun | None:
        """The response a job's piece is for, or None when its generation is stale."""
        response = self.response
        if response is None or job.generation != self.generation or job.response_id != response.id:
            return None
        return response

    def _after(self, response: ResponseRun) -> None:
        held = self._early is not None and self._early.response is response
        if response.done and not held:  # a held response ends when it is released
            self._ended(response)
