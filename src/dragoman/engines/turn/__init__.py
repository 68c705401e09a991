"""End-of-turn models: P(the user has finished their turn) from the turn's audio (semantic_vad)."""
