"""Append-only transcript deltas.

OpenAI's `conversation.item.input_audio_transcription.delta` events are
concatenated by clients, so what was sent can never be taken back. The bug to
avoid, seen in a reference server: cutting the record of what was sent back to the common
prefix and re-sending the tail turns "word" + a revision to "world is" into
"wordld is". Instead, only text that is firm is sent (the hypothesis minus its
unstable tail), and a revision that reaches into sent text is counted and left to
the partial and completed events, which carry the whole hypothesis.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DeltaLedger:
    """What has been sent for one item, and how often the hypothesis contradicted it."""

    sent: str = ""
    #: Steps whose firm text no longer started with what had been sent.
    revisions: int = 0

    def advance(self, firm: str) -> str:
        """The delta that extends `sent` towards `firm`, or "" when `firm` does not extend it.

        A `firm` that contradicts what was sent counts one revision; nothing is sent
        until the hypothesis agrees with the sent text again (or the item completes).
        """
        if firm.startswith(self.sent):
            delta = firm[len(self.sent) :]
            self.sent = firm
            return delta
        if not self.sent.startswith(firm):
            # `firm` shorter than `sent` but agreeing with it is no revision: the
            # stable part merely shrank (e.g. a cut that backed off further).
            self.revisions += 1
        return ""
