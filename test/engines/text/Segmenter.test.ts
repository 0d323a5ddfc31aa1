import t, { type Test } from "tap"
import { segmentSentences } from "../../../engines/text/Segmenter.ts"

const check = (t: Test, text: string, segs: ReturnType<typeof segmentSentences>) => {
  let previous = 0
  for (const s of segs) {
    t.ok(s.text === text.slice(s.charStart, s.charEnd) && s.text === s.text.trim() && s.text.length > 0 && s.charStart >= previous, JSON.stringify(s.text))
    previous = s.charEnd
  }
  t.ok(text.replace(/\s+/g, "") === segs.map((s) => s.text).join("").replace(/\s+/g, ""), "nothing lost")
}

t.test("splits sentences and merges short pieces (abbreviations, one-word replies)", async (t) => {
  const text = "Tere. Dr. Smith tuli kell 12.30! Kas tõesti? Jah... See on pikk lause, mis jätkub veel."
  const segs = segmentSentences(text, { locale: "et" })
  t.same(segs.map((s) => s.text), ["Tere. Dr. Smith tuli kell 12.30!", "Kas tõesti? Jah... See on pikk lause, mis jätkub veel."])
  check(t, text, segs)
  t.same(segmentSentences("One. Two.", { minChars: 1 }).map((s) => s.text), ["One.", "Two."], "minChars 1 keeps every sentence")
  t.same(segmentSentences("A long enough first sentence here. Ok.").map((s) => s.text), ["A long enough first sentence here. Ok."], "a short tail joins the previous piece")
})

t.test("multilingual sentence ends", async (t) => {
  const ja = "今日は晴れです。明日は雨でしょう。ありがとう。"
  t.same(segmentSentences(ja, { locale: "ja", minChars: 5 }).map((s) => s.text), ["今日は晴れです。", "明日は雨でしょう。", "ありがとう。"])
  const ar = "مرحبا بكم في الخدمة الجديدة. كيف يمكنني مساعدتك اليوم؟"
  t.equal(segmentSentences(ar, { locale: "ar", minChars: 10 }).length, 2)
  const hi = "नमस्ते, आप कैसे हैं। मैं ठीक हूँ, धन्यवाद।"
  t.equal(segmentSentences(hi, { locale: "hi", minChars: 5 }).length, 2)
})

t.test("long sentences are cut at clause punctuation, then spaces", async (t) => {
  const clause = "this clause has some words in it, "
  const text = clause.repeat(20) + "end."
  const segs = segmentSentences(text, { maxChars: 100 })
  t.ok(segs.every((s) => s.text.length <= 100), "all within the limit")
  t.ok(segs.slice(0, -1).every((s) => s.text.endsWith(",")), "cut after commas")
  check(t, text, segs)
  const noPunct = "word ".repeat(100)
  const cut = segmentSentences(noPunct, { maxChars: 50 })
  t.ok(cut.every((s) => s.text.length <= 50 && !s.text.includes("  ") && /^(word ?)+$/.test(s.text)), "cut between words")
  const emoji = "😀".repeat(30)
  const hard = segmentSentences(emoji, { maxChars: 7 })
  t.ok(hard.every((s) => !/^[\uDC00-\uDFFF]|[\uD800-\uDBFF]$/.test(s.text)), "never splits a surrogate pair")
  check(t, emoji, hard)
})

t.test("empty and whitespace", async (t) => {
  t.same(segmentSentences(""), [])
  t.same(segmentSentences(" \n\t "), [])
  t.same(segmentSentences("  Hi.  "), [{ text: "Hi.", charStart: 2, charEnd: 5 }])
})
