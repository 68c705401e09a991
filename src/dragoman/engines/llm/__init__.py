"""The LLM engine role: one assistant turn of the voice agent, streamed, with tool calls."""
