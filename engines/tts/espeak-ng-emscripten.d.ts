/**
 * Types for `@echogarden/espeak-ng-emscripten` (ESM, no typings): only what EspeakRuntime uses.
 * The build is wasm2js (memory is a JS ArrayBuffer) with WebIDL bindings; strings may be passed
 * as `{ ptr }` pointing at NUL-terminated UTF-8 in the module heap.
 */
declare module "@echogarden/espeak-ng-emscripten" {
  export interface EspeakRawEvent {
    readonly type: "list_terminated" | "word" | "sentence" | "mark" | "play" | "end" | "msg_terminated" | "phoneme" | "samplerate"
    /** 1-based character (code point) position in the synthesized text. */
    readonly text_position: number
    /** Characters (code points) of the word, for word events. */
    readonly word_length: number
    /** ms from the start of this synthesis. */
    readonly audio_position: number
    readonly id?: string | number
  }
  export interface EspeakVoiceInfo {
    readonly name: string
    readonly identifier: string
    readonly languages: ReadonlyArray<{ readonly priority: number; readonly name: string }>
  }
  export type CString = string | { readonly ptr: number }
  export interface ESpeakNGWorker {
    /** 0 = ok; 2 = unknown voice, and the previous voice silently stays selected. */
    set_voice(name: CString): number
    set_rate(wpm: number): void
    set_pitch(pitch: number): void
    set_range(range: number): void
    get_samplerate(): number
    list_voices(): Array<EspeakVoiceInfo>
    /** Callback gets Int16 samples (may be empty) and the events of that block; return 0 to go on. */
    synthesize(text: CString, callback: (samples: Int16Array | null, events: Array<EspeakRawEvent>) => number): void
    /** Returns a pointer to a heap string the caller owns (never freed by the binding). */
    text_to_phonemes(text: CString, useIpa: number): { readonly ptr: number }
  }
  export interface EspeakModule {
    readonly eSpeakNGWorker: new () => ESpeakNGWorker
    readonly HEAPU8: Uint8Array
    /** The same memory as 32-bit words (re-created, like HEAPU8, when memory grows). */
    readonly HEAPU32: Uint32Array
    _malloc(bytes: number): number
    _free(ptr: number): void
    readonly FS: { readdir(path: string): Array<string> }
  }
  const init: (moduleArg?: object) => Promise<EspeakModule>
  export default init
}
