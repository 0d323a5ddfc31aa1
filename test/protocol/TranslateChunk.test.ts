/**
 * Chunk translation through the real server with real Apertium (SPEC endpoint 23, 4.1 rule 5,
 * 4.3): JSON and SSE answers, language spellings, the same-language pass-through, every 400, the
 * per-credential rate limit (429 / SSE error), credits (charged per 100 characters, 402), and the
 * append-only property end to end: a caller that sends a text chunk by chunk, each time with
 * what it has shown as `previous`, ends with exactly the chunks' own translations joined, over
 * JSON and over SSE alike.
 */
import { Effect } from "effect"
import fc from "fast-check"
import t, { type Test } from "tap"
import { startTestService } from "../support/service.ts"
import { sseEvents } from "../support/sse.ts"

const service = await startTestService(t, { TRANSLATE_RATE_PER_S: "1000", TRANSLATE_BURST: "1000" })
// Until a pair's pipeline is started, requests for it get 503 engine_starting (TranslateStarting.test.ts).
await Effect.runPromise(service.translator.warm("eng", "spa"))
const user = await service.newUser(1000)
const balance = (userId: string) => Effect.runPromise(service.users.balance(userId))

type Json = Record<string, any>
const chunkUrl = (sse: boolean) => `${service.base}/translate/chunk${sse ? "?stream=true" : ""}`
const post = (body: unknown, opts: { apiKey?: string; sse?: boolean; accept?: string; base?: string } = {}) =>
  fetch(opts.base !== undefined ? `${opts.base}/translate/chunk${opts.sse === true ? "?stream=true" : ""}` : chunkUrl(opts.sse === true), {
    method: "POST",
    headers: {
      "content-type": "application/json",
      ...(opts.apiKey !== undefined ? { "xi-api-key": opts.apiKey } : {}),
      ...(opts.accept !== undefined ? { accept: opts.accept } : {})
    },
    body: typeof body === "string" ? body : JSON.stringify(body)
  })

const expectError = async (t: Test, res: Response, status: number, code: string) => {
  const body = await res.json() as Json
  t.equal(res.status, status, JSON.stringify(body).slice(0, 200))
  t.equal(body.detail?.status, code)
  t.type(body.detail?.message, "string")
  return body.detail.message as string
}

t.test("GET /translate/languages lists the installed Apertium pairs", async (t) => {
  const res = await fetch(`${service.base}/translate/languages`)
  t.equal(res.status, 200)
  const { pairs } = await res.json() as { pairs: Array<Json> }
  t.ok(pairs.some((p) => p.source === "en" && p.target === "es" && p.source_code === "eng" && p.target_code === "spa" && p.engine === "apertium" && p.mode === "eng-spa"), JSON.stringify(pairs.slice(0, 4)))
  t.ok(pairs.some((p) => p.source === "es" && p.target === "en"), "and back")
})

t.test("JSON: a chunk comes back translated, joined onto previous", async (t) => {
  const res = await post({ new_source: "Hello, how are you today?", source: "en", target: "es", previous: "" })
  t.equal(res.status, 200)
  const { appended } = await res.json() as Json
  t.match(appended, /^Hola/, appended)
  const next = await (await post({ new_source: "The meeting is at three.", source: "eng", target: "spa", previous: appended })).json() as Json
  t.match(next.appended, /^ La reunión/, "one space after previous; ISO 639-3 codes work too")
  const upper = await (await post({ new_source: "good morning", source: "EN", target: "ES" })).json() as Json
  t.type(upper.appended, "string", "codes are case-insensitive and previous may be left out")
})

t.test("source == target returns new_source unchanged, free", async (t) => {
  const before = await balance(user.userId)
  for (const text of ["  spaces kept \n", "ünïcode ✓", ""]) {
    const res = await post({ new_source: text, source: "en", target: "eng", previous: "x" }, { apiKey: user.apiKey })
    t.same(await res.json(), { appended: text })
  }
  t.equal(await balance(user.userId), before, "no credits taken")
})

t.test("every 400: body, languages, pair, length", async (t) => {
  await expectError(t, await post("not json"), 400, "invalid_request")
  await expectError(t, await post({ source: "en", target: "es" }), 400, "invalid_request")
  await expectError(t, await post({ new_source: 5, source: "en", target: "es" }), 400, "invalid_request")
  await expectError(t, await post([1, 2]), 400, "invalid_request")
  const unknown = await expectError(t, await post({ new_source: "hi", source: "xx", target: "es" }), 400, "unsupported_language")
  t.match(unknown, /eng-spa/, "the message lists the pairs")
  const pair = await expectError(t, await post({ new_source: "hi", source: "en", target: "de" }), 400, "unsupported_language_pair")
  t.match(pair, /eng-spa/, "the message lists the pairs")
  await expectError(t, await post({ new_source: "a".repeat(5001), source: "en", target: "es" }), 400, "text_too_long")
  const sse = await post({ new_source: "hi", source: "en", target: "de" }, { sse: true })
  await expectError(t, sse, 400, "unsupported_language_pair")
  await expectError(t, await post({ new_source: "hi", source: "en", target: "es" }, { apiKey: "sk_svc_nope" }), 401, "invalid_api_key")
})

t.test("SSE by ?stream=true and by Accept: deltas, then done; the same text as JSON", async (t) => {
  const body = { new_source: "We decided to ship on Friday. Then we will rest.", source: "en", target: "es", previous: "Bien." }
  const json = await (await post(body)).json() as Json
  for (const opts of [{ sse: true }, { accept: "text/event-stream" }]) {
    const res = await post(body, opts)
    t.equal(res.status, 200)
    t.match(res.headers.get("content-type"), /^text\/event-stream/)
    const events = sseEvents(await res.text())
    const deltas = events.filter((e) => e.event === "delta")
    t.ok(deltas.length >= 1)
    t.equal(deltas.map((d) => d.data.appended).join(""), json.appended, "deltas concatenate to the JSON answer")
    t.same(events.at(-1), { event: "done", data: { model: "apertium:eng-spa", source: "en", target: "es" } })
  }
})

t.test("credits: one per started 100 characters of new_source; 402 when out, JSON and SSE", async (t) => {
  const before = await balance(user.userId)
  const res = await post({ new_source: "the cat is black. ".repeat(14).trim(), source: "en", target: "es" }, { apiKey: user.apiKey })
  t.equal(res.status, 200)
  t.equal(before - await balance(user.userId), 3, "251 characters cost 3")
  const poor = await service.newUser(0)
  await expectError(t, await post({ new_source: "hello", source: "en", target: "es" }, { apiKey: poor.apiKey }), 402, "quota_exceeded")
  const events = sseEvents(await (await post({ new_source: "hello", source: "en", target: "es" }, { apiKey: poor.apiKey, sse: true })).text())
  t.same(events.map((e) => e.event), ["error"])
  t.equal(events[0]!.data.code, "quota_exceeded")
})

t.test("rate limit: a bucket per credential; 429 with Retry-After, or one SSE error", async (t) => {
  const limited = await startTestService(t, { TRANSLATE_RATE_PER_S: "1", TRANSLATE_BURST: "2" })
  await Effect.runPromise(limited.translator.warm("eng", "spa"))
  const a = await limited.newUser()
  const b = await limited.newUser()
  const body = { new_source: "hello", source: "en", target: "es" }
  // All at once: the bucket is checked as each request arrives, within a fraction of the 1 s a
  // token takes to come back, however long the translations then take on a loaded machine (one
  // by one, two slow translations let a token refill and the third passed).
  const batch = await Promise.all(Array.from({ length: 8 }, (_, k) => post(body, { apiKey: a.apiKey, base: limited.base, sse: k % 2 === 1 })))
  const allowed: Array<Response> = []
  const refusedJson: Array<Response> = []
  const refusedSse: Array<Array<{ event: string; data: Json }>> = []
  for (const [k, res] of batch.entries()) {
    if (k % 2 === 0) {
      if (res.status === 429) refusedJson.push(res)
      else allowed.push(res)
      continue
    }
    const events = sseEvents(await res.text()) as Array<{ event: string; data: Json }>
    if (events[0]?.event === "error") refusedSse.push(events)
    else allowed.push(res)
  }
  t.ok(allowed.length >= 2 && allowed.length <= 3, `the burst of 2 (and at most one refilled token) passed: ${allowed.length} of 8`)
  t.ok(refusedJson.length >= 1 && refusedSse.length >= 1, "refused over JSON and over SSE")
  const refused = refusedJson[0]!
  t.ok(Number(refused.headers.get("retry-after")) >= 1)
  await expectError(t, refused, 429, "rate_limited")
  const events = refusedSse[0]!
  t.same(events.map((e) => e.event), ["error"], "exactly one error event, no done")
  t.equal(events[0]!.data.code, "rate_limited")
  t.equal((await post(body, { apiKey: b.apiKey, base: limited.base })).status, 200, "another credential has its own bucket")
  t.equal((await post(body, { base: limited.base })).status, 200, "anonymous callers are limited by address, apart from keys")
})

const TEXT = "Good morning everyone. We need to decide whether the release goes out on Friday. " +
  "The test results look much better than last week. I will send the schedule to the team this afternoon. " +
  "Let us agree that the migration happens before the holidays."

t.test("property: chunk by chunk, the caller ends with the chunks' own translations joined, over JSON and SSE", async (t) => {
  const words = TEXT.split(" ")
  const translateAlone = new Map<string, string>()
  const alone = async (chunk: string) => {
    if (!translateAlone.has(chunk)) {
      translateAlone.set(chunk, ((await (await post({ new_source: chunk, source: "en", target: "es" })).json()) as Json).appended)
    }
    return translateAlone.get(chunk)!
  }
  await fc.assert(
    fc.asyncProperty(fc.array(fc.integer({ min: 1, max: 9 }), { minLength: words.length, maxLength: words.length }), fc.boolean(), async (sizes, sse) => {
      const chunks: Array<string> = []
      for (let i = 0, k = 0; i < words.length; i += sizes[k++]!) chunks.push(words.slice(i, i + sizes[k]!).join(" "))
      let shown = ""
      let expected = ""
      for (const chunk of chunks) {
        const res = await post({ new_source: chunk, source: "en", target: "es", previous: shown.slice(-80) }, { sse })
        const appended = sse
          ? sseEvents(await res.text()).filter((e) => e.event === "delta").map((e) => e.data.appended).join("")
          : ((await res.json()) as Json).appended as string
        shown += appended
        const own = (await alone(chunk)).trim()
        // A chunk whose words Apertium drops ("will") translates to nothing and adds nothing.
        if (own !== "") expected += expected === "" || /^[.,;:!?]/.test(own) ? own : ` ${own}`
      }
      t.equal(shown, expected, `${chunks.length} chunks over ${sse ? "SSE" : "JSON"}`)
      return shown === expected
    }),
    { numRuns: 8 }
  )
})

