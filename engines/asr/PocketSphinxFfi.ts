/**
 * FFI binding (koffi) to Debian's libpocketsphinx 5prealpha (`libpocketsphinx.so.3`, which pulls
 * in `libsphinxbase.so.3`): only the calls PocketSphinxAsr needs, declared from
 * `/usr/include/pocketsphinx/pocketsphinx.h` and sphinxbase's `cmd_ln.h`, `err.h`, `logmath.h`.
 *
 * API version details (5prealpha, not 5.0):
 *  - There is no `ps_config_init`; a config is a sphinxbase `cmd_ln_t` built with
 *    `cmd_ln_parse_r(NULL, ps_args(), argc, argv, strict)`. (`cmd_ln_init` is variadic; the argv
 *    form needs no variadic call.) `ps_init` takes its own reference to the config.
 *  - `ps_seg_iter(ps)` takes no score argument; `ps_seg_prob` gives the log posterior of a word
 *    when `-bestpath yes` (the default) ran after `ps_end_utt`, in the decoder's logmath base
 *    (1.0001), so convert with `logmath_exp` / `logmath_log_to_ln`.
 *  - Frames are `-frate` per second (100: 10 ms); a segment covers frames sf..ef inclusive.
 *
 * Hazards:
 *  - The library is process-wide while every worker thread loads its own koffi instance and
 *    decoder. sphinxbase's logger is a process global: `err_set_logfile` (what `-logfn` does)
 *    fcloses the previous FILE, so two threads initialising at once could close it twice. We
 *    never pass `-logfn`; we call `err_set_logfp(NULL)` (idempotent, no fclose) to silence it.
 *  - sphinxbase's E_FATAL calls `exit()`: a missing or unreadable model file can end the whole
 *    process instead of returning NULL. Callers check every model file before `ps_init`.
 *  - Calls are synchronous on the worker thread; a terminated worker cannot interrupt a running
 *    `ps_process_raw`, and its decoder (≈ 100 MB of RSS with the en-us model) is not freed
 *    when the thread dies.
 *  - Pointers are koffi values (BigInt-like handles); NULL comes back as `null`.
 *  - koffi (a native addon) is required on first use, not at import, so a worker whose platform
 *    has no koffi binary still starts and only this engine reports itself unavailable.
 */
import { requireKoffi } from "../Koffi.ts"

/** Opaque native handles (`void *` on the C side). */
export type Pointer = { readonly __brand: "PocketSphinxPointer" }
export type Decoder = Pointer & { readonly __decoder: true }
export type Config = Pointer & { readonly __config: true }
export type Segment = Pointer & { readonly __segment: true }
export type LogMath = Pointer & { readonly __logmath: true }

export interface PocketSphinxLib {
  readonly path: string
  readonly ps_args: () => Pointer
  readonly cmd_ln_parse_r: (inout: null, defn: Pointer, argc: number, argv: ReadonlyArray<string>, strict: number) => Config | null
  readonly cmd_ln_free_r: (config: Config) => number
  readonly cmd_ln_int_r: (config: Config, name: string) => number
  readonly cmd_ln_float_r: (config: Config, name: string) => number
  readonly err_set_logfp: (fp: null) => void
  readonly ps_init: (config: Config) => Decoder | null
  readonly ps_free: (ps: Decoder) => number
  readonly ps_get_logmath: (ps: Decoder) => LogMath
  /** Resets per-stream channel state (the noise floor of `-remove_noise`). */
  readonly ps_start_stream: (ps: Decoder) => number
  readonly ps_start_utt: (ps: Decoder) => number
  /** Returns frames searched, or < 0 on error. `data` is int16 at the configured rate. */
  readonly ps_process_raw: (ps: Decoder, data: Int16Array, nSamples: number, noSearch: number, fullUtt: number) => number
  readonly ps_end_utt: (ps: Decoder) => number
  readonly ps_get_hyp: (ps: Decoder, outScore: Array<number>) => string | null
  readonly ps_seg_iter: (ps: Decoder) => Segment | null
  readonly ps_seg_next: (seg: Segment) => Segment | null
  readonly ps_seg_word: (seg: Segment) => string
  readonly ps_seg_frames: (seg: Segment, outSf: Array<number>, outEf: Array<number>) => void
  readonly ps_seg_prob: (seg: Segment, outAscr: Array<number>, outLscr: Array<number>, outLback: Array<number>) => number
  readonly ps_seg_free: (seg: Segment) => void
  readonly logmath_exp: (lmath: LogMath, logp: number) => number
  readonly logmath_log_to_ln: (lmath: LogMath, logp: number) => number
}

const libraries = new Map<string, PocketSphinxLib>()

/**
 * Opens the shared library (dlopen by soname or path) and declares the functions, once per
 * thread and path. Throws koffi's error (with dlerror's text) when the library cannot load.
 */
export const openPocketSphinx = (path: string): PocketSphinxLib => {
  const known = libraries.get(path)
  if (known !== undefined) return known
  const lib = requireKoffi().load(path)
  // sphinxbase symbols resolve through this handle: dlsym searches the library's dependencies.
  const f = (signature: string) => lib.func(signature) as (...args: Array<any>) => any
  const binding: PocketSphinxLib = {
    path,
    ps_args: f("void *ps_args(void)"),
    cmd_ln_parse_r: f("void *cmd_ln_parse_r(void *inout, void *defn, int32_t argc, const char **argv, int32_t strict)"),
    cmd_ln_free_r: f("int cmd_ln_free_r(void *cmdln)"),
    cmd_ln_int_r: f("long cmd_ln_int_r(void *cmdln, const char *name)"),
    cmd_ln_float_r: f("double cmd_ln_float_r(void *cmdln, const char *name)"),
    err_set_logfp: f("void err_set_logfp(void *stream)"),
    ps_init: f("void *ps_init(void *config)"),
    ps_free: f("int ps_free(void *ps)"),
    ps_get_logmath: f("void *ps_get_logmath(void *ps)"),
    ps_start_stream: f("int ps_start_stream(void *ps)"),
    ps_start_utt: f("int ps_start_utt(void *ps)"),
    ps_process_raw: f("int ps_process_raw(void *ps, const int16_t *data, size_t n_samples, int no_search, int full_utt)"),
    ps_end_utt: f("int ps_end_utt(void *ps)"),
    ps_get_hyp: f("const char *ps_get_hyp(void *ps, _Out_ int32_t *out_best_score)"),
    ps_seg_iter: f("void *ps_seg_iter(void *ps)"),
    ps_seg_next: f("void *ps_seg_next(void *seg)"),
    ps_seg_word: f("const char *ps_seg_word(void *seg)"),
    ps_seg_frames: f("void ps_seg_frames(void *seg, _Out_ int *out_sf, _Out_ int *out_ef)"),
    ps_seg_prob: f("int32_t ps_seg_prob(void *seg, _Out_ int32_t *out_ascr, _Out_ int32_t *out_lscr, _Out_ int32_t *out_lback)"),
    ps_seg_free: f("void ps_seg_free(void *seg)"),
    logmath_exp: f("double logmath_exp(void *lmath, int logb_p)"),
    logmath_log_to_ln: f("double logmath_log_to_ln(void *lmath, int logb_p)")
  }
  libraries.set(path, binding)
  return binding
}
