/*
 * AudioWorklet of the playground's microphone: hands the capture thread's 128-sample frames
 * (first channel, Float32 in [-1, 1], at the context's rate) to the page in batches of about
 * 50 ms, so the main thread wakes ~20 times a second rather than ~375. Resampling to 16 kHz and
 * the s16le encoding happen on the page (playground-mic.js), shared with the ScriptProcessor
 * fallback. Served from /static/ so the CSP's default-src 'self' admits it (no blob: module).
 */
class MicBatcher extends AudioWorkletProcessor {
  constructor() {
    super();
    // `sampleRate` is the AudioWorkletGlobalScope's: the context's rate in Hz.
    this.size = Math.max(128, Math.round(sampleRate / 20));
    this.batch = new Float32Array(this.size);
    this.filled = 0;
  }

  process(inputs) {
    const channel = inputs[0] && inputs[0][0];
    if (channel) {
      let at = 0;
      while (at < channel.length) {
        const n = Math.min(channel.length - at, this.size - this.filled);
        this.batch.set(channel.subarray(at, at + n), this.filled);
        this.filled += n;
        at += n;
        if (this.filled === this.size) {
          // Transferred, not copied: a fresh buffer takes its place.
          this.port.postMessage(this.batch, [this.batch.buffer]);
          this.batch = new Float32Array(this.size);
          this.filled = 0;
        }
      }
    }
    return true; // keep running while the graph holds the node
  }
}

registerProcessor('mic-batcher', MicBatcher);
