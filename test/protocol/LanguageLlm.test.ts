/**
 * Summaries and chunk translation through the real server with both language engines set to an
 * OpenAI-compatible chat model (SUMMARY_ENGINE=llm, TRANSLATE_ENGINE=llm), the model being the
 * small server of test/support/fakeOpenAi.ts: streamed deltas become SSE deltas, 429 then success
 * is invisible to the caller, a broken stream is one SSE `error`, a model that keeps failing is a
 * 502 with nothing stored and nothing charged, and a caller that leaves aborts the model call.
 */
import { Effect } from "effect"
import t, { type Test } from "tap"
import { startFakeOpenAi } from "../support/fakeOpenAi.ts"
import { conversationWav, pcmOf } from "../support/librivoxSpeech.ts"
import { jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"
import { sseEvents } from "../support/sse.ts"

const fake = await startFakeOpenAi()
t.teardown(() => fake.close())
const service = await startTestService(t, {
  SUMMARY_ENGINE: "llm",
  TRANSLATE_ENGINE: "llm",
  LLM_BASE_URL: fake.url,
  LLM_MODEL: "fake-model",
  LLM_API_KEY: "sk-upstream",
  LLM_TIMEOUT_S: "6"
})
const user = await service.newUser()
const balance = () => Effect.runPromise(service.users.balance(user.userId))
t.beforeEach(() => void fake.requests.splice(0))

type Json = Record<string, any>
const chunk = (body: Json, sse: boolean) =>
  fetch(`${service.base}/translate/chunk${sse ? "?stream=true" : ""}`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": user.apiKey },
    body: JSON.stringify(body)
  })
const expectError = async (t: Test, res: Response, status: number, code: string) => {
  const body = await res.json() as Json
  t.equal(res.status, status, JSON.stringify(body).slice(0, 200))
  t.equal(body.detail?.status, code)
}

t.test("the pair list is every pair of the language table, engine llm", async (t) => {
  const { pairs } = await (await fetch(`${service.base}/translate/languages`)).json() as { pairs: Array<Json> }
  t.ok(pairs.some((p) => p.source === "en" && p.target === "ja" && p.engine === "llm" && p.mode === "fake-model"))
  const bad = await chunk({ new_source: "x", source: "en", target: "xx" }, false)
  t.match((await bad.json() as Json).detail.message, /any two of .*eng.*spa/, "the 400 names the languages, not 1600 pairs")
})

t.test("JSON and SSE: the model's pieces, joined onto previous, the key sent upstream", async (t) => {
  fake.script({ pieces: ["y luego", " se fue\n"] })
  const res = await chunk({ new_source: "and then he left", source: "en", target: "es", previous: "Llegó tarde." }, false)
  t.same(await res.json(), { appended: " y luego se fue" })
  t.equal(fake.requests[0]!.authorization, "Bearer sk-upstream")
  t.match(fake.requests[0]!.body.messages!.at(-1)!.content, /Llegó tarde\./)
  fake.script({ pieces: ["y luego", " se", " fue"] })
  const events = sseEvents(await (await chunk({ new_source: "and then he left", source: "en", target: "es", previous: "" }, true)).text())
  t.same(events.filter((e) => e.event === "delta").map((e) => e.data.appended), ["y luego", " se", " fue"], "one delta per model piece")
  t.same(events.at(-1), { event: "done", data: { model: "llm:fake-model", source: "en", target: "es" } })
})

t.test("429 then success: the caller sees only the translation", async (t) => {
  fake.script({ status: 429, retryAfter: "0" }, { pieces: ["hola"] })
  const events = sseEvents(await (await chunk({ new_source: "hello", source: "en", target: "es" }, true)).text())
  t.same(events.map((e) => e.event), ["delta", "done"])
  t.equal(fake.requests.length, 2)
})

t.test("a stream broken after its first piece: one SSE error after the delta, credits given back", async (t) => {
  const before = await balance()
  fake.script({ pieces: ["hola", " mundo"], breakAfter: 1 })
  const events = sseEvents(await (await chunk({ new_source: "hello world", source: "en", target: "es" }, true)).text())
  t.same(events.map((e) => e.event), ["delta", "error"])
  t.equal(events[1]!.data.code, "engine_failed")
  t.type(events[1]!.data.message, "string")
  t.equal(await balance(), before, "a failed translation costs nothing")
  fake.script(...Array.from({ length: 4 }, () => ({ status: 500, retryAfter: "0" })))
  await expectError(t, await chunk({ new_source: "hello", source: "en", target: "es" }, false), 502, "engine_failed")
})

t.test("a caller that disconnects mid-stream aborts the model call", async (t) => {
  const before = fake.abandoned()
  fake.script({ pieces: Array.from({ length: 100 }, (_, i) => `${i} `), delayMs: 40 })
  const controller = new AbortController()
  const live = await fetch(`${service.base}/translate/chunk?stream=true`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": user.apiKey },
    body: JSON.stringify({ new_source: "count to one hundred", source: "en", target: "es" }),
    signal: controller.signal
  })
  const reader = live.body!.getReader()
  await reader.read() // the first delta: the model call is running
  controller.abort()
  for (let i = 0; i < 100 && fake.abandoned() < before + 1; i++) await new Promise((r) => setTimeout(r, 20))
  t.ok(fake.abandoned() >= before + 1, "the model server saw its client go")
})

t.test("a summary by the model: sections from its JSON, stored; a failing model is a 502 with nothing stored or charged", async (t) => {
  const audio = conversationWav([pcmOf("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav")], 0)
  const job = await jsonApi(service.base).runJob(user.apiKey, audio)
  t.equal(job.status.state, "succeeded")
  const up = { job_id: job.id }
  const summaryUrl = `${service.base}/recognition/jobs/${up.job_id}/summary`
  const post = (body: Json) => fetch(summaryUrl, { method: "POST", headers: { "xi-api-key": user.apiKey, "content-type": "application/json" }, body: JSON.stringify(body) })

  fake.script({ pieces: [JSON.stringify({ sections: { summary: [{ text: "A reader tells of a family.", units: [0] }, "It is about money.", "And a will."] } })] })
  const ok = await post({ templateId: "brief" })
  const s = await ok.json() as Json
  t.equal(ok.status, 200, JSON.stringify(s).slice(0, 200))
  t.equal(s.engine, "llm:fake-model")
  t.same(s.sections[0].items.map((i: Json) => i.text), ["A reader tells of a family.", "It is about money.", "And a will."])
  t.ok(s.sections[0].items[0].start >= 0 && s.sections[0].items[0].start < 1, "the cited unit's time (the first words)")
  t.match(s.text, /^# Brief\n\n## Summary\nA reader tells of a family\. It is about money\. And a will\.$/m)

  const before = await balance()
  fake.script(...Array.from({ length: 4 }, () => ({ status: 503, retryAfter: "0" })))
  await expectError(t, await post({ templateId: "brief" }), 502, "engine_failed")
  fake.script({ pieces: ["Sorry, I cannot."] })
  await expectError(t, await post({}), 502, "engine_failed")
  t.equal(await balance(), before, "nothing charged")
  const list = await (await fetch(summaryUrl, { headers: { "xi-api-key": user.apiKey } })).json() as Json
  t.equal(list.summaries.length, 1, "only the good summary was stored")
})
