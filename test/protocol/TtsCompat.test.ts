/**
 * Issue 9 item 14: text length and credits in characters (code points), the public default
 * voice settings, and the OpenAPI description's own version.
 */
import { Effect } from "effect"
import t from "tap"
import { MAX_TEXT_CHARS } from "../../actors/SpeechRequest.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const owner = await service.newUser(1_000_000)
const balance = () => Effect.runPromise(service.users.balance(owner.userId))

const tts = (text: string) =>
  fetch(`${service.base}/text-to-speech/mari?output_format=pcm_8000`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": owner.apiKey },
    body: JSON.stringify({ text, sentence_chunking: false })
  })

t.test("4,001 emoji are 4,001 characters: accepted and charged 4,001", async (t) => {
  const text = "😀".repeat(4001)
  t.equal(text.length, 8002, "8002 UTF-16 units")
  const before = await balance()
  const res = await tts(text)
  const answer = Buffer.from(await res.arrayBuffer())
  t.equal(res.status, 200, res.status === 200 ? "accepted" : answer.toString())
  t.equal(before - (await balance()), 4001, "charged per code point")
})

t.test("8,001 code points are text_too_long", async (t) => {
  const over = await tts(`a${"😀".repeat(MAX_TEXT_CHARS)}`)
  t.equal(over.status, 400)
  const body = await over.json() as { detail: { status: string; message: string } }
  t.equal(body.detail.status, "text_too_long")
  t.match(body.detail.message, /8001 characters/)
})

t.test("GET /voices/settings/default needs no key (elevenlabs-node sends none)", async (t) => {
  const res = await fetch(`${service.base}/voices/settings/default`)
  t.equal(res.status, 200)
  t.match(await res.json(), { stability: 0.5, similarity_boost: 0.75, speed: 1 })
})

t.test("openapi.json info.version is the API description's version, 1.0.0", async (t) => {
  const res = await fetch(`${service.base}/openapi.json`)
  t.equal(res.status, 200)
  const doc = await res.json() as { info: { version: string }; paths: Record<string, Record<string, { security?: unknown }>> }
  t.equal(doc.info.version, "1.0.0")
  t.same(doc.paths["/api/v1/voices/settings/default"]?.get?.security ?? [], [], "documented as public")
})
