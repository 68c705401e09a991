"""Speech in a given language to its own engine: Moonshine for English in front of Whisper.

A language-specific model can beat the multilingual one on its language: with Moonshine base
(English only) transcribing English speech, the interpreter's BLEU rose on FLEURS and on FLORES
lines read by our voices and by espeak-ng (bench/RESULTS.md, "ASR en=moonshine"); the voice
agent's short spoken questions, though, were answered right less often (docs/engines.md).
`asr.routes` (`{"en": "moonshine"}`) names, for each such language, the backend whose default
model serves it; everything else, and every step whose language is still open (Whisper detects
it), goes to the default engine. A service may have routes of its own, which only its steps
take (`StepRequest.scope`): `interpreter.asr_routes` sends the interpreter's English to
Moonshine while transcription sessions keep Whisper.

A step is routed by its request's language, so an item whose language Whisper detected moves to
the routed engine once the language has settled: the text decoded so far is forced as that
engine's prefix like any other (both take a decoder prompt; `PrefixMode` must agree). Steps of
different engines never share a call (`batch_key`). The stable prefix is cut with the default
engine's tokenizer for every step: it counts tokens only to leave the last few unforced, and the
forced text is re-encoded by the engine that decodes it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

from dragoman.engines.asr.base import ASRCapabilities, ASREngine, StepRequest, StepResult
from dragoman.engines.info import EngineInfo
from dragoman.errors import ClientError, ConfigError


class LanguageRoutedASR(ASREngine):
    """`default` for every step but those in a language of `routes`, which go to its engine, or
    of `scoped[step.scope]`, which then come first."""

    def __init__(
        self,
        default: ASREngine,
        routes: Mapping[str, ASREngine],
        scoped: Mapping[str, Mapping[str, ASREngine]] | None = None,
    ) -> None:
        first = default.capabilities
        self.scoped = {scope: dict(theirs) for scope, theirs in (scoped or {}).items()}
        # (setting, language, engine) of every route, the setting named in errors.
        every = [("asr.routes", *route) for route in routes.items()]
        every += [
            (f"{scope}.asr_routes", *route)
            for scope, theirs in self.scoped.items()
            for route in theirs.items()
        ]
        for setting, language, engine in every:
            theirs = engine.capabilities
            if theirs.languages and language not in theirs.languages:
                raise ConfigError(f"{setting}: {engine.name} does not transcribe {language!r}")
            if theirs.prefix_mode != first.prefix_mode or theirs.sample_rate != first.sample_rate:
                raise ConfigError(
                    f"{setting}: {engine.name} cannot take over {default.name}'s items "
                    f"(prefix mode {theirs.prefix_mode}, {theirs.sample_rate} Hz)"
                )
        self.default = default
        self.routes = dict(routes)
        self.name = default.name
        self.tokenizer = default.tokenizer
        engines = self._engines()
        routed = frozenset(language for _, language, _ in every)
        self.capabilities = ASRCapabilities(
            max_audio_seconds=min(e.capabilities.max_audio_seconds for e in engines),
            languages=first.languages | routed if first.languages else frozenset(),
            prefix_mode=first.prefix_mode,
            sample_rate=first.sample_rate,
            # Calls run at once on the worker's lanes; each is one engine's (`batch_key`).
            parallel_calls=max(e.capabilities.parallel_calls for e in engines),
        )

    def _engines(self) -> list[ASREngine]:
        """Every engine once, the default first (a scope may share another's engine)."""
        engines = [self.default, *self.routes.values()]
        engines += [e for theirs in self.scoped.values() for e in theirs.values()]
        return list({id(e): e for e in engines}.values())

    def engine_for(self, request: StepRequest) -> ASREngine:
        language = request.language or ""
        scoped = self.scoped.get(request.scope, {}).get(language)
        return scoped or self.routes.get(language, self.default)

    def batch_key(self, request: StepRequest) -> Hashable:
        engine = self.engine_for(request)
        return (engine.name, engine.batch_key(request))

    def transcribe_batch(self, requests: Sequence[StepRequest]) -> list[StepResult | ClientError]:
        results: dict[int, StepResult | ClientError] = {}
        groups: dict[int, tuple[ASREngine, list[int]]] = {}
        for slot, request in enumerate(requests):
            engine = self.engine_for(request)
            groups.setdefault(id(engine), (engine, []))[1].append(slot)
        for engine, slots in groups.values():
            done = engine.transcribe_batch([requests[slot] for slot in slots])
            results.update(zip(slots, done, strict=True))
        return [results[slot] for slot in range(len(requests))]

    def warm_up(self) -> None:
        for engine in self._engines():
            engine.warm_up()

    def describe(self) -> EngineInfo:
        info = self.default.describe()
        named = [f"{language}: {engine.name}" for language, engine in self.routes.items()]
        for scope, theirs in self.scoped.items():
            named += [f"{scope} {language}: {engine.name}" for language, engine in theirs.items()]
        routed = ", ".join(named)
        return EngineInfo(
            name=info.name,
            backend=f"{info.backend} ({routed})",
            device=info.device,
            compute_type=info.compute_type,
            compute_reason=info.compute_reason,
        )

    def close(self) -> None:
        for engine in reversed(self._engines()):
            engine.close()
