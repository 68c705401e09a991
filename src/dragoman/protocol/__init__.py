"""Pydantic models of each wire protocol: OpenAI Realtime transcription and MT protocol v1."""
