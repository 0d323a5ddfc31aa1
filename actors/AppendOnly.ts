/**
 * Joins a chunk's translation onto the text a caller has already shown, append-only (SPEC 4.1
 * rule 5): the result is only what goes after `previous`, never an edit of it.
 *
 * Engines answer with their own spacing (Apertium prefixes a space to some sentences, chat models
 * end with a newline), and pieces arrive one by one on SSE. So leading whitespace of the
 * translation is dropped, one space is put between `previous` and the new text unless `previous`
 * already ends in whitespace (or is empty) or the new text starts with closing punctuation, and
 * trailing whitespace is held back until more text follows it (dropped at the end): a caller that
 * concatenates every `appended` gets single-spaced text whatever the chunking.
 */

/** Punctuation that attaches to the word before it (no space in front). */
const CLOSING = /^[.,;:!?%)\]}»›”’…、。，！？：；]/u

export interface Appender {
  /** The next piece of the translation, as text to append now (possibly empty). */
  readonly push: (piece: string) => string
  /** What is left to append once the translation is complete (trailing whitespace is dropped). */
  readonly end: () => string
}

export const makeAppender = (previous: string): Appender => {
  let started = false
  // Whitespace seen after the last visible character, emitted only if more text follows.
  let held = ""
  return {
    push: (piece) => {
      let text = piece
      if (!started) {
        text = text.replace(/^\s+/u, "")
        if (text === "") return ""
        started = true
        const needsSpace = previous !== "" && !/\s$/u.test(previous) && !CLOSING.test(text)
        text = (needsSpace ? " " : "") + text
      } else {
        text = held + text
        held = ""
      }
      const trailing = /\s+$/u.exec(text)
      if (trailing !== null) {
        held = trailing[0]
        text = text.slice(0, trailing.index)
      }
      return text
    },
    end: () => ""
  }
}

/** The whole of a finished translation as `appended` after `previous`. */
export const appendOnce = (previous: string, translation: string): string => {
  const a = makeAppender(previous)
  return a.push(translation) + a.end()
}
