"""Real servers and real clients, shared by the tests and the benchmarks.

`server` starts `python -m dragoman …` on a free loopback port; `realtime_helpers`
drives `/v1/realtime` with the openai SDK and validates every event; `webrtc_client`
places an aiortc call; `audio_files` encodes audio as clients upload it. tests/ and
bench/ both import these; neither imports the other.
"""
