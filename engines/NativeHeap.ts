/**
 * Gives freed native memory back to the operating system (glibc `malloc_trim(0)`), after a
 * native engine released a model. Without it, the ~50 MB of small allocations a PocketSphinx
 * decoder frees stay in malloc's arenas and RSS does not drop (measured: ps_free alone gave back
 * 49 of 99 MB; ps_free then malloc_trim gave back all of it).
 *
 * Best effort: where libc is not glibc (musl) or koffi has no binary, it does nothing.
 */
import { requireKoffi } from "./Koffi.ts"

let trim: ((pad: number) => number) | null | undefined

export const trimNativeHeap = (): void => {
  if (trim === undefined) {
    try {
      trim = requireKoffi().load("libc.so.6").func("int malloc_trim(size_t pad)") as (pad: number) => number
    } catch {
      trim = null
    }
  }
  trim?.(0)
}
