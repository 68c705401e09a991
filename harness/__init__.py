"""Real servers and real clients, shared by the tests and the benchmarks.

`subprocess_server` starts, waits for and stops any real server on a free loopback port;
`server` runs `python -m dragoman …` with it, `llama_server` `llama_cpp.server`;
`realtime_helpers` drives `/v1/realtime` with the openai SDK and validates every event;
`webrtc_client` places an aiortc call; `audio_files` encodes audio as clients upload it.
tests/ and bench/ both import these; neither imports the other.
"""
