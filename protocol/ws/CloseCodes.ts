/**
 * WebSocket close codes of the text-to-speech endpoints (RFC 6455 section 7.4.1; SPEC 4.2, 7):
 * 1000 after end of input or `close_socket`; 1007 for a text frame that is not UTF-8; 1008 for client faults (malformed frame, too much
 * pending text, too many contexts, out of credits, a revoked key); 1009 for a frame over the size
 * limit; 1011 for synthesis failures and idleness. Each but 1000 follows an error frame.
 */
import type { SessionEnd } from "../../actors/TtsSessionMessages.ts"

export const CLOSE_NORMAL = 1000
/** A text frame that is not UTF-8 (RFC 6455 7.4.1, 8.1); see TtsFrames.textFramePayload for when it can be sent. */
export const CLOSE_INVALID_DATA = 1007
export const CLOSE_POLICY = 1008
export const CLOSE_TOO_BIG = 1009
export const CLOSE_SERVER_ERROR = 1011

const codes: Record<SessionEnd["kind"], number> = {
  Normal: CLOSE_NORMAL,
  Violation: CLOSE_POLICY,
  Failure: CLOSE_SERVER_ERROR
}

/** The close code of how a session ended. */
export const closeCode = (end: SessionEnd): number => codes[end.kind]
