"""Audio input: PCM16 decoding, stream resampling to 16 kHz and voice activity detection."""
