// Microphone capture: the context's samples (mono, float) in chunks of `frames`, posted to the page.
// A block without input (a track that has ended) counts as silence, so the server's turn detection
// still hears the pause after the speech.
class Capture extends AudioWorkletProcessor {
  constructor(options) {
    super();
    this.chunk = new Float32Array(options.processorOptions.frames);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    const block = channel || new Float32Array(128);
    for (let i = 0; i < block.length; i++) {
      this.chunk[this.filled++] = block[i];
      if (this.filled === this.chunk.length) {
        this.port.postMessage(this.chunk.slice(0));
        this.filled = 0;
      }
    }
    return true;
  }
}

registerProcessor("capture", Capture);
