/**
 * Text length as users and the spec count it: characters are Unicode code points, not UTF-16
 * units. An emoji outside the BMP is one character (JavaScript's `length` says two), so the
 * 8000-character limit and per-character credits must use this, never `String.length`.
 */

/** Number of code points in `text`; a lone surrogate counts as one. O(n), no allocation. */
export const countCharacters = (text: string): number => {
  let n = text.length
  for (let i = 0; i < text.length - 1; i++) {
    const c = text.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--
        i++
      }
    }
  }
  return n
}
