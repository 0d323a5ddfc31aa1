/**
 * The language of an HTTP text-to-speech request (issue 9 item 10): `language_code` in the JSON
 * body (what the Vercel AI SDK and LiveKit's `synthesize()` send), `?language=` /
 * `?language_code=` in the query and the `X-Speak-Language` header make a preset speak that
 * language, as the WebSocket endpoint does. Precedence: query, then body, then header.
 */
import { Effect } from "effect"
import fc from "fast-check"
import t from "tap"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused } from "../support/wsClient.ts"

const service = await startTestService(t, { WORKERS: "2" })
const owner = await service.newUser(1_000_000)

const ENGLISH_TEXT = "Hello there, this is English spoken by an Estonian preset."

interface Call {
  readonly query?: string
  readonly headers?: Record<string, string>
}

const post = (path: string, body: unknown, call: Call = {}) =>
  fetch(`${service.base}${path}${call.query === undefined ? "" : `?${call.query}`}`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": owner.apiKey, ...call.headers },
    body: JSON.stringify(body)
  })

const bytes = async (res: Response) => {
  if (res.status !== 200) throw new Error(`status ${res.status}: ${await res.text()}`)
  return Buffer.from(await res.arrayBuffer())
}

/** The audio of one request, whichever endpoint: with-timestamps answers are decoded from base64. */
const audioOf = async (endpoint: string, body: unknown, call: Call = {}): Promise<Buffer> => {
  const res = await post(`/text-to-speech/mari${endpoint}`, body, call)
  const raw = await bytes(res)
  if (endpoint === "/with-timestamps") return Buffer.from((JSON.parse(raw.toString()) as { audio_base64: string }).audio_base64, "base64")
  if (endpoint === "/stream/with-timestamps") {
    return Buffer.concat(raw.toString().trim().split("\n").map((l) => Buffer.from((JSON.parse(l) as { audio_base64: string }).audio_base64, "base64")))
  }
  return raw
}

const ENDPOINTS = ["", "/stream", "/with-timestamps", "/stream/with-timestamps"]

t.test("language_code in the body, ?language= and X-Speak-Language change the audio on every endpoint", async (t) => {
  for (const endpoint of ENDPOINTS) {
    await t.test(endpoint === "" ? "sync" : endpoint, async (t) => {
      const base = { text: ENGLISH_TEXT }
      const native = await audioOf(endpoint, base)
      const body = await audioOf(endpoint, { ...base, language_code: "en" })
      const query = await audioOf(endpoint, base, { query: "language=en" })
      const queryCode = await audioOf(endpoint, base, { query: "language_code=en" })
      const header = await audioOf(endpoint, base, { headers: { "x-speak-language": "en" } })
      const named = await audioOf(endpoint, { ...base, language_code: "English" })
      t.notOk(body.equals(native), "language_code en differs from the preset's own Estonian")
      t.ok(query.equals(body), "?language=en = body language_code en")
      t.ok(queryCode.equals(body), "?language_code=en = body language_code en")
      t.ok(header.equals(body), "X-Speak-Language en = body language_code en")
      t.ok(named.equals(body), "an English name works as the code does")
      const same = await audioOf(endpoint, { ...base, language_code: "et" })
      t.ok(same.equals(native), "the preset's own language changes nothing")
    })
  }
})

t.test("the revoiced preset speaks with that language's rules and keeps its own voice: mari in German is not greta-de", async (t) => {
  // greta-de is espeak de+f3 at pitch 1, rate 1, mari's own variant on the German voice; mari
  // keeps her variant there at a pitch of her own (issue 38: two presets never sound the same).
  const text = "Guten Morgen, lieber Freund. Heute ist schönes Wetter."
  const greta = await bytes(await post("/text-to-speech/greta-de", { text }))
  const mariDe = await bytes(await post("/text-to-speech/mari", { text, language_code: "de" }))
  t.notOk(mariDe.equals(greta), "not the German preset of the same variant")
  const mariEt = await bytes(await post("/text-to-speech/mari", { text }))
  t.notOk(mariEt.equals(mariDe), "without a language it reads German with Estonian rules")
})

t.test("English through HTTP is the audio the WebSocket makes with language=en", async (t) => {
  const http = await bytes(await post("/text-to-speech/mari", { text: ENGLISH_TEXT, sentence_chunking: false }, { query: "output_format=pcm_24000&language=en" }))
  const url = `${service.base}/text-to-speech/mari/stream-input?language=en`
  const ws = await connectWs(url, { "xi-api-key": owner.apiKey })
  if (isRefused(ws)) throw new Error(`WebSocket refused: ${ws.status}`)
  ws.send({ text: " " })
  ws.send({ text: ENGLISH_TEXT, flush: true })
  const audio: Array<Buffer> = []
  for (;;) {
    const f = await ws.nextJson() as { audio?: string; flushDone?: boolean; close?: unknown }
    if (typeof f.audio === "string") audio.push(Buffer.from(f.audio, "base64"))
    if (f.flushDone === true || f.close !== undefined) break
  }
  ws.close()
  t.ok(Buffer.concat(audio).equals(http), `same PCM (${http.length} bytes over HTTP)`)
})

t.test("precedence: the query beats the body, the body beats the header", async (t) => {
  const base = { text: ENGLISH_TEXT }
  const en = await audioOf("", { ...base, language_code: "en" })
  const de = await audioOf("", { ...base, language_code: "de" })
  t.ok((await audioOf("", { ...base, language_code: "de" }, { query: "language=en" })).equals(en), "query en over body de")
  t.ok((await audioOf("", { ...base, language_code: "en" }, { headers: { "x-speak-language": "de" } })).equals(en), "body en over header de")
  t.ok((await audioOf("", base, { query: "language=de", headers: { "x-speak-language": "en" } })).equals(de), "query de over header en")
  // An invalid value that loses is never looked at, as on the WebSocket.
  t.ok((await audioOf("", { ...base, language_code: "Klingon" }, { query: "language=en" })).equals(en), "a losing bad body value is ignored")
  // Empty and null mean "not given".
  t.ok((await audioOf("", { ...base, language_code: null }, { headers: { "x-speak-language": "en" } })).equals(en), "null body falls through to the header")
  t.ok((await audioOf("", { ...base, language_code: "" }, { query: "language=", headers: { "x-speak-language": "en" } })).equals(en), "empty values fall through")
})

t.test("an unknown language is 400 invalid_request on every endpoint, nothing charged", async (t) => {
  const before = await Effect.runPromise(service.users.balance(owner.userId))
  for (const endpoint of ENDPOINTS) {
    for (const call of [{ body: { text: ENGLISH_TEXT, language_code: "Klingon" } }, { body: { text: ENGLISH_TEXT }, query: "language=xx" }, { body: { text: ENGLISH_TEXT }, headers: { "x-speak-language": "Klingon" } }]) {
      const res = await post(`/text-to-speech/mari${endpoint}`, call.body, call)
      t.equal(res.status, 400, `${endpoint || "sync"} ${JSON.stringify(call)}`)
      const body = await res.json() as { detail: { status: string; message: string } }
      t.equal(body.detail.status, "invalid_request")
      t.match(body.detail.message, /unknown language/)
    }
  }
  const after = await Effect.runPromise(service.users.balance(owner.userId))
  t.equal(after, before, "no credits taken")
})

t.test("property: any language value in body, query or header answers 200 or 400, never more", async (t) => {
  await fc.assert(
    fc.asyncProperty(fc.string({ unit: "binary", maxLength: 24 }), fc.constantFrom("body", "query", "header"), async (value, where) => {
      const call: Call = where === "query"
        ? { query: `language=${encodeURIComponent(value.replace(/[\uD800-\uDFFF]/g, "?"))}` }
        : where === "header"
        ? { headers: { "x-speak-language": value.replace(/[^\x20-\x7e]/g, "") } }
        : {}
      const res = await post("/text-to-speech/mari", { text: "Tere.", ...(where === "body" ? { language_code: value } : {}) }, call)
      await res.arrayBuffer()
      return res.status === 200 || res.status === 400
    }),
    { numRuns: 40 }
  )
  t.pass("200 or 400 for every value")
})
