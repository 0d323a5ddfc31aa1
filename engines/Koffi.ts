/**
 * koffi (the FFI addon behind every engine that calls a Debian library in-process), required on
 * first use rather than imported, so that a thread whose platform has no koffi binary still
 * starts and only the engines that need it report themselves unavailable.
 */
import { createRequire } from "node:module"
import type Koffi from "koffi"

/** The koffi module; throws when its native binary is missing for this platform. */
export const requireKoffi = (): typeof Koffi => createRequire(import.meta.url)("koffi") as typeof Koffi
