/**
 * JSON request bodies as a fuzzer sends them, against the running service: arbitrary JSON values,
 * a valid body with one field of the wrong type (huge and NaN-ish numbers, deep nesting, long
 * strings), truncated JSON, bytes that are not UTF-8, sizes around the body limit. Every body here
 * is invalid by construction, so the answer is a 4xx with the spec's error body
 * `{detail: {status, message}}`, never a 5xx, and the server answers ordinary requests after.
 */
import fc from "fast-check"
import t from "tap"
import { startTestService } from "../support/service.ts"

// A generous translation rate, so the limiter's 429 does not hide the body check.
const service = await startTestService(t, { TRANSLATE_RATE_PER_S: "100000", TRANSLATE_BURST: "1000000" })
const user = await service.newUser(1_000_000)
const MIB = 1024 * 1024

interface Answer {
  readonly status: number
  readonly body: string
}

const post = async (route: string, body: string | Uint8Array): Promise<Answer> => {
  const res = await fetch(`${service.base}${route}`, {
    method: "POST",
    headers: { "xi-api-key": user.apiKey, "content-type": "application/json" },
    body
  })
  return { status: res.status, body: await res.text() }
}

/** A 4xx with the error body; otherwise an Error naming the input (fast-check reports it). */
const expect4xx = (a: Answer, what: string, allowed: (s: number) => boolean = () => false) => {
  if (allowed(a.status)) return
  if (a.status < 400 || a.status >= 500) throw new Error(`${what}: ${a.status} ${a.body.slice(0, 300)}`)
  let json: any
  try {
    json = JSON.parse(a.body)
  } catch {
    throw new Error(`${what}: ${a.status} with a body that is not JSON: ${a.body.slice(0, 200)}`)
  }
  if (typeof json?.detail?.status !== "string" || typeof json?.detail?.message !== "string") {
    throw new Error(`${what}: ${a.status} without the error body shape: ${a.body.slice(0, 200)}`)
  }
}

const deep = (depth: number, open: string, close: string, inner = "1") => open.repeat(depth) + inner + close.repeat(depth)

/** JSON texts of values that are never strings: the wrong type for a string field. */
const notAString: fc.Arbitrary<string> = fc.oneof(
  fc.jsonValue({ maxDepth: 3 }).filter((v) => typeof v !== "string" && v !== null).map((v) => JSON.stringify(v)),
  fc.constantFrom("1e999", "-1e999", "123456789012345678901234567890", "-0", "true", "[]", "{}", "0.1"),
  fc.integer({ min: 10, max: 20_000 }).map((d) => deep(d, "[", "]")),
  fc.integer({ min: 10, max: 20_000 }).map((d) => deep(d, "{\"a\":", "}"))
)
/** Values that are neither numbers in range nor null. */
const notANumber = fc.oneof(
  fc.constantFrom("\"NaN\"", "\"Infinity\"", "\"1\"", "\"0x10\"", "\"1e3\"", "\"\"", "true", "[1]", "{}", "1e999", "-1e999", "1e-400x"),
  fc.integer({ min: 10, max: 5_000 }).map((d) => deep(d, "[", "]"))
)
const notABoolean = fc.constantFrom("\"true\"", "1", "0", "\"\"", "[]", "{}", "\"false\"", "1e999")

/** A valid base body (as fields of JSON text) with one field replaced by a wrong one. */
const mutated = (base: Record<string, string>, wrong: Record<string, fc.Arbitrary<string>>) =>
  fc.constantFrom(...Object.keys(wrong)).chain((key) =>
    wrong[key]!.map((value) => `{${Object.entries({ ...base, [key]: value }).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`))

/** Strict prefixes of a JSON text: never valid JSON (an empty body is its own 400). */
const truncated = (json: fc.Arbitrary<string>) =>
  json.chain((s) => fc.integer({ min: 0, max: s.length - 1 }).map((n) => s.slice(0, n)))

/** Bytes that are not UTF-8, spliced into an invalid body. */
const withBadUtf8 = (json: fc.Arbitrary<string>) =>
  fc.tuple(json, fc.nat(), fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0xaf], [0x80]))
    .map(([s, at, bad]) => {
      const b = Buffer.from(s)
      const i = at % (b.length + 1)
      return new Uint8Array(Buffer.concat([b.subarray(0, i), Buffer.from(bad), b.subarray(i)]))
    })

interface RouteCase {
  readonly route: string
  /** Bodies that are invalid by construction. */
  readonly invalid: fc.Arbitrary<string | Uint8Array>
  /** Statuses that are also right for this route (e.g. a valid empty object). */
  readonly alsoOk?: (status: number) => boolean
}

const ttsWrong = {
  text: notAString,
  voice_settings: fc.oneof(notABoolean.filter((v) => !v.startsWith("{")), notANumber.map((n) => `{"speed":${n}}`), fc.constantFrom("{\"speed\":0.1}", "{\"speed\":99}", "{\"stability\":-1}")),
  seed: fc.oneof(notANumber, fc.constantFrom("1.5", "-1e999")),
  sentence_chunking: notABoolean,
  model_id: notAString,
  language_code: fc.oneof(notAString, fc.constantFrom("\"xx-not-a-language\"", "\"klingon\""))
}
const ttsBase = { text: "\"Tere.\"" }
const ttsInvalid = (): fc.Arbitrary<string | Uint8Array> => {
  const wrongField = mutated(ttsBase, ttsWrong)
  return fc.oneof(
    wrongField,
    // Any JSON value but an object with a string text (which would be spoken).
    fc.jsonValue({ maxDepth: 4 }).filter((v) => !(typeof v === "object" && v !== null && !Array.isArray(v) && typeof (v as any).text === "string")).map((v) => JSON.stringify(v)),
    truncated(fc.constantFrom("{\"text\":\"Tere.\",\"voice_settings\":{\"speed\":1.2}}", "{\"text\":\"Tere.\"}")),
    withBadUtf8(wrongField),
    fc.constantFrom("", " ", "null", "\"Tere\"", "{\"text\":\"\"}", "{\"text\":\"   \"}", "{\"text\":NaN}", "{\"text\":\"a\",\"seed\":Infinity}", "{\"text\":\"a\"}}", "{'text':'a'}"),
    // Over the 8000-character limit (400), and around the 1 MiB body limit (400 or 413).
    fc.constantFrom(8001, MIB - 20, MIB + 1).map((n) => JSON.stringify({ text: "a".repeat(n) }))
  )
}

const cases: ReadonlyArray<RouteCase> = [
  { route: "/text-to-speech/mari", invalid: ttsInvalid() },
  { route: "/text-to-speech/mari/stream", invalid: ttsInvalid() },
  {
    route: "/translate/chunk",
    invalid: (() => {
      const base = { new_source: "\"Tere.\"", source: "\"et\"", target: "\"en\"" }
      const wrong = mutated(base, { new_source: notAString, source: notAString, target: notAString, previous: notAString })
      return fc.oneof(
        wrong,
        withBadUtf8(wrong),
        truncated(fc.constant(JSON.stringify({ new_source: "Tere.", source: "et", target: "en" }))),
        fc.jsonValue({ maxDepth: 4 }).filter((v) => !(typeof v === "object" && v !== null && typeof (v as any).new_source === "string")).map((v) => JSON.stringify(v)),
        fc.constantFrom(5001, MIB + 1).map((n) => JSON.stringify({ new_source: "a".repeat(n), source: "et", target: "en" }))
      )
    })()
  },
  {
    route: "/webhooks",
    invalid: (() => {
      const base = { url: "\"https://hooks.example.com/x\"" }
      const badUrl = fc.oneof(notAString, fc.constantFrom("\"http://example.com\"", "\"\"", "\"ftp://x\"", "\"https://\"", "\"https://127.0.0.1/x\"", "\"https://[::1]/\"", "\"javascript:alert(1)\"", JSON.stringify(`https://x.example/${"a".repeat(2048)}`)))
      const wrong = mutated(base, { url: badUrl, description: fc.oneof(notAString, fc.constant(JSON.stringify("d".repeat(501)))) })
      return fc.oneof(wrong, withBadUtf8(wrong), truncated(fc.constant(JSON.stringify({ url: "https://hooks.example.com/x" }))),
        fc.jsonValue({ maxDepth: 4 }).filter((v) => !(typeof v === "object" && v !== null && typeof (v as any).url === "string")).map((v) => JSON.stringify(v)))
    })()
  },
  {
    // An empty object, or one with only some known fields, is a valid reservation (201).
    route: "/recognition/uploads",
    invalid: (() => {
      const wrong = mutated({}, {
        filename: fc.oneof(notAString, fc.constant(JSON.stringify("f".repeat(256)))),
        content_type: fc.oneof(notAString, fc.constantFrom("\"text/html\"", "\"application/json\"")),
        size_bytes: fc.oneof(notANumber, fc.constantFrom("-1", "1.5", "1e300", "99999999999999999999"))
      })
      return fc.oneof(wrong, withBadUtf8(wrong), truncated(fc.constant(JSON.stringify({ filename: "a.wav", size_bytes: 10 }))),
        fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)))
    })(),
    alsoOk: (s) => s === 201
  }
]

for (const c of cases) {
  t.test(`${c.route}: invalid JSON bodies are 4xx with the error body, never 5xx`, async (t) => {
    await fc.assert(fc.asyncProperty(c.invalid, async (body) => {
      const what = typeof body === "string" ? JSON.stringify(body.slice(0, 120)) : Buffer.from(body.subarray(0, 120)).toString("hex")
      expect4xx(await post(c.route, body), `${c.route} ${what}`, c.alsoOk)
    }), { seed: 0x150 + c.route.length, numRuns: 60 })
    const health = await fetch(`${service.siteUrl}/healthz`)
    t.equal(health.status, 200, "the server still answers")
  })
}

t.test("recognition job start: random option bodies are 4xx (bad options, or the upload not landed)", async (t) => {
  const reserved = await post("/recognition/uploads", "{}")
  t.equal(reserved.status, 201)
  const jobId = JSON.parse(reserved.body).job_id as string
  const options = fc.oneof(
    fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v)),
    fc.dictionary(
      fc.constantFrom("language_code", "diarize", "num_speakers", "timestamps_granularity", "tag_audio_events", "webhook", "webhook_id", "speaker_recognition", "temperature", "seed", "model_id", "additional_formats"),
      fc.oneof(notAString, notANumber, notABoolean, fc.constantFrom("\"word\"", "\"none\"", "\"zz\"", "null", "-1", "33", "\"wh_nope\""))
    ).map((d) => `{${Object.entries(d).map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(",")}}`),
    truncated(fc.constant(JSON.stringify({ language_code: "et", diarize: true }))),
    withBadUtf8(fc.constant(JSON.stringify({ language_code: "et" })))
  )
  await fc.assert(fc.asyncProperty(options, async (body) => {
    const what = typeof body === "string" ? JSON.stringify(body.slice(0, 120)) : Buffer.from(body.subarray(0, 120)).toString("hex")
    expect4xx(await post(`/recognition/jobs/${jobId}/start`, body), `start ${what}`)
  }), { seed: 0x151, numRuns: 80 })
  t.equal((await fetch(`${service.siteUrl}/healthz`)).status, 200, "the server still answers")
})

t.test("after the fuzzing, ordinary requests still work", async (t) => {
  const voices = await fetch(`${service.base}/voices`, { headers: { "xi-api-key": user.apiKey } })
  t.equal(voices.status, 200)
  const speech = await post("/text-to-speech/mari", JSON.stringify({ text: "Tere." }))
  t.equal(speech.status, 200, "a valid synthesis still succeeds")
})
