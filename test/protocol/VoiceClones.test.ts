/**
 * Voice clones as a client meets them (SPEC 2.2, 2.3, endpoints 1–5, 4.2, issue 5): samples are
 * spoken by the service's own TTS (Flite james-en), uploaded the way the ElevenLabs SDK does
 * (`files` parts typed application/octet-stream), and every check goes over HTTP or WebSocket.
 */
import * as fs from "node:fs"
import * as path from "node:path"
import t, { type Test } from "tap"
import { bytesLEToInt16, int16ToFloat, rms } from "../../engines/audio/Pcm.ts"
import { parseWav } from "../../engines/audio/Wav.ts"
import { startTestService } from "../support/service.ts"
import { connectWs, isRefused } from "../support/wsClient.ts"

const service = await startTestService(t, { WORKERS: "2" })
const alice = await service.newUser(1_000_000)
const bob = await service.newUser(1_000_000)

const SENTENCE = "The old lighthouse keeper climbed the narrow stairs every evening and lit the lamp for the ships."

/** WAV bytes of james-en speaking `text`. */
const speak = async (text: string): Promise<Uint8Array> => {
  const res = await fetch(`${service.base}/text-to-speech/james-en`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": alice.apiKey },
    body: JSON.stringify({ text })
  })
  if (res.status !== 200) throw new Error(`reference synthesis failed: ${res.status} ${await res.text()}`)
  return new Uint8Array(await res.arrayBuffer())
}

// About 10 s, 3 s and 40 s of speech.
const [tenSeconds, threeSeconds, fortySeconds] = await Promise.all([
  speak(`${SENTENCE} He wrote a short note in his logbook and watched the sea until midnight.`),
  speak("Good morning, how are you today?"),
  speak(Array.from({ length: 8 }, () => SENTENCE).join(" "))
])

interface AddOptions {
  readonly key?: string
  readonly fields?: Record<string, string>
  readonly files?: ReadonlyArray<Uint8Array>
  readonly fileField?: string
}

const addVoice = (options: AddOptions): Promise<Response> => {
  const form = new FormData()
  for (const [k, v] of Object.entries(options.fields ?? {})) form.append(k, v)
  for (const [i, bytes] of (options.files ?? []).entries()) {
    form.append(options.fileField ?? "files", new Blob([bytes as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), `sample${i}.wav`)
  }
  return fetch(`${service.base}/voices/add`, { method: "POST", headers: { "xi-api-key": options.key ?? alice.apiKey }, body: form })
}

const call = (method: string, p: string, key: string | null, body?: unknown) =>
  fetch(`${service.base}${p}`, {
    method,
    headers: { ...(key !== null ? { "xi-api-key": key } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })

const expectError = async (t: Test, res: Response, status: number, code?: string) => {
  t.equal(res.status, status, `answers ${status}`)
  const body = await res.json() as { detail?: { status?: string; message?: string } }
  t.type(body.detail?.message, "string", "detail.message")
  if (code !== undefined) t.equal(body.detail?.status, code, `detail.status ${code}`)
  return body.detail?.message ?? ""
}

const voiceIds = async (key: string) =>
  ((await (await call("GET", "/voices", key)).json()) as { voices: Array<{ voice_id: string; category: string }> }).voices

const blobFiles = (): Array<string> => {
  const root = path.join(service.dataDir, "blobs")
  return fs.existsSync(root) ? (fs.readdirSync(root, { recursive: true }) as Array<string>).filter((f) => fs.statSync(path.join(root, f)).isFile()) : []
}

let aliceClone = ""

t.test("a clone is made from an SDK-style upload and listed for its owner only", async (t) => {
  // No refText: the English sample is transcribed by the service.
  const res = await addVoice({
    fields: { name: "Lighthouse", language: "en", description: "a test voice", labels: JSON.stringify({ accent: "scottish" }), remove_background_noise: "false" },
    files: [tenSeconds, threeSeconds]
  })
  t.equal(res.status, 200, await res.clone().text())
  const body = await res.json() as { voice_id: string; requires_verification: boolean }
  t.match(body.voice_id, /^vc_[0-9a-f]+$/)
  t.equal(body.requires_verification, false)
  aliceClone = body.voice_id
  t.equal(blobFiles().length, 1, "the sample is in the blob store")

  const voices = await voiceIds(alice.apiKey)
  const mine = voices.find((v) => v.voice_id === aliceClone) as Record<string, unknown> | undefined
  t.ok(mine, "GET /voices lists the clone")
  t.equal(mine?.category, "cloned")
  t.same(mine?.labels, { accent: "scottish", language: "en" })
  t.equal(mine?.description, "a test voice")
  t.equal(mine?.preview_url, `${service.siteUrl}/api/v1/voices/${aliceClone}/preview`)
  t.equal(voices.findIndex((v) => v.category === "cloned"), voices.length - 1, "clones come after the presets")
  t.notOk((await voiceIds(bob.apiKey)).some((v) => v.voice_id === aliceClone), "another user does not see it")

  const own = await call("GET", `/voices/${aliceClone}`, alice.apiKey)
  t.equal(own.status, 200)
  t.equal((await own.json() as { name: string }).name, "Lighthouse")
  await expectError(t, await call("GET", `/voices/${aliceClone}`, bob.apiKey), 404, "voice_not_found")
})

t.test("validation: name, labels, file, speech length, size, type", async (t) => {
  await expectError(t, await addVoice({ files: [tenSeconds] }), 400)
  await expectError(t, await addVoice({ fields: { name: "x".repeat(61) }, files: [tenSeconds] }), 400)
  await expectError(t, await addVoice({ fields: { name: "Labels", labels: "{not json" }, files: [tenSeconds] }), 400)
  await expectError(t, await addVoice({ fields: { name: "No file" } }), 400)
  const short = await expectError(t, await addVoice({ fields: { name: "Short", language: "en", refText: "x" }, files: [threeSeconds] }), 400, "sample_too_short")
  t.match(short, /\d+\.\d s of speech/, `says how much speech was found: ${short}`)
  const long = await expectError(t, await addVoice({ fields: { name: "Long", language: "en", refText: "x" }, files: [fortySeconds] }), 400, "sample_too_long")
  t.match(long, /\d+\.\d s of speech/)
  await expectError(t, await addVoice({ fields: { name: "Lighthouse", language: "en" }, files: [tenSeconds] }), 409, "voice_name_taken")
  await expectError(t, await addVoice({ fields: { name: "Big" }, files: [new Uint8Array(10 * 1024 * 1024 + 1000)] }), 413)
  await expectError(t, await addVoice({ fields: { name: "Text" }, files: [new TextEncoder().encode("hello, this is not audio\n".repeat(50))] }), 415)
  t.equal(blobFiles().length, 1, "refused uploads leave no blob")
})

t.test("the legacy `audio` field: used alone, ignored next to `files`", async (t) => {
  const legacy = await addVoice({ fields: { name: "Legacy", refText: SENTENCE }, files: [tenSeconds], fileField: "audio" })
  t.equal(legacy.status, 200, await legacy.clone().text())
  const legacyId = (await legacy.json() as { voice_id: string }).voice_id
  // Both fields: `files` wins, so the 3 s `audio` part does not make it too short.
  const form = new FormData()
  form.append("name", "Both fields")
  form.append("refText", SENTENCE)
  form.append("files", new Blob([tenSeconds as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), "long.wav")
  form.append("audio", new Blob([threeSeconds as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), "short.wav")
  const both = await fetch(`${service.base}/voices/add`, { method: "POST", headers: { "xi-api-key": alice.apiKey }, body: form })
  t.equal(both.status, 200, await both.clone().text())
  const bothId = (await both.json() as { voice_id: string }).voice_id
  const listed = await voiceIds(alice.apiKey)
  for (const id of [legacyId, bothId]) {
    t.ok(listed.some((v) => v.voice_id === id && v.category === "cloned"), `${id} is listed`)
    t.equal((await call("DELETE", `/voices/${id}`, alice.apiKey)).status, 200)
  }
  t.equal(blobFiles().length, 1, "only the first clone's sample is left")
})

t.test("a clone speaks on endpoints 4 and 5 for its owner, 404 for anyone else and on the WebSocket", async (t) => {
  const text = { text: "Yesterday we walked to the market and bought fresh bread." }
  for (const p of [`/text-to-speech/${aliceClone}`, `/text-to-speech/${aliceClone}/stream`]) {
    const res = await call("POST", `${p}?output_format=pcm_24000`, alice.apiKey, text)
    t.equal(res.status, 200, p)
    const samples = int16ToFloat(bytesLEToInt16(new Uint8Array(await res.arrayBuffer())))
    t.ok(samples.length > 24000 * 1.5, `${p}: over 1.5 s of audio`)
    t.ok(rms(samples) > 0.01, `${p}: not silent`)
    await expectError(t, await call("POST", p, bob.apiKey, text), 404, "voice_not_found")
  }
  const ws = await connectWs(`${service.base}/text-to-speech/${aliceClone}/stream-input`, { "xi-api-key": alice.apiKey })
  t.ok(isRefused(ws), "the WebSocket refuses a clone")
  if (isRefused(ws)) {
    t.equal(ws.status, 404)
    t.match(ws.body, /POST \/v1\/text-to-speech/, "points to the POST endpoint")
  }
})

t.test("previews: presets public, clones only with the owner's key", async (t) => {
  t.equal((await call("GET", "/voices/james-en/preview", null)).status, 200, "preset preview is public")
  await expectError(t, await call("GET", `/voices/${aliceClone}/preview`, null), 401)
  await expectError(t, await call("GET", `/voices/${aliceClone}/preview`, bob.apiKey), 404)
  const own = await call("GET", `/voices/${aliceClone}/preview`, alice.apiKey)
  t.equal(own.status, 200)
  t.ok(rms(parseWav(new Uint8Array(await own.arrayBuffer())).channelData[0]!) > 0.01, "the preview speaks")
})

/** POST /voices/{id}/edit the way the SDK's voices.update sends it. */
const editVoice = (voiceId: string, key: string, fields: Record<string, string>, file?: Uint8Array) => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  if (file !== undefined) form.append("files", new Blob([file as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), "new.wav")
  return fetch(`${service.base}/voices/${voiceId}/edit`, { method: "POST", headers: { "xi-api-key": key }, body: form })
}

t.test("edit: owner only; rename, labels, description; a new sample replaces the old one", async (t) => {
  await expectError(t, await editVoice(aliceClone, bob.apiKey, { name: "Mine now" }), 404, "voice_not_found")
  await expectError(t, await editVoice("james-en", alice.apiKey, { name: "James" }), 400)
  await expectError(t, await editVoice(aliceClone, alice.apiKey, { name: "" }), 400)

  const res = await editVoice(aliceClone, alice.apiKey, { name: "Keeper", description: "renamed", labels: JSON.stringify({ mood: "calm" }) })
  t.equal(res.status, 200, await res.clone().text())
  t.same(await res.json(), { status: "ok" })
  const edited = await (await call("GET", `/voices/${aliceClone}`, alice.apiKey)).json() as { name: string; description: string; labels: Record<string, string> }
  t.same([edited.name, edited.description, edited.labels], ["Keeper", "renamed", { mood: "calm", language: "en" }])

  // A second clone may not take the first one's name.
  const other = await addVoice({ fields: { name: "Other", language: "en", refText: SENTENCE }, files: [tenSeconds] })
  t.equal(other.status, 200)
  const otherId = (await other.json() as { voice_id: string }).voice_id
  await expectError(t, await editVoice(otherId, alice.apiKey, { name: "Keeper" }), 409, "voice_name_taken")
  t.equal((await call("DELETE", `/voices/${otherId}`, alice.apiKey)).status, 200)

  // A sample with too little speech changes nothing, not even the name sent with it.
  const before = blobFiles()
  await expectError(t, await editVoice(aliceClone, alice.apiKey, { name: "Short" }, threeSeconds), 400, "sample_too_short")
  t.equal(((await (await call("GET", `/voices/${aliceClone}`, alice.apiKey)).json()) as { name: string }).name, "Keeper")
  t.same(blobFiles(), before, "the stored sample is untouched")

  const replaced = await editVoice(aliceClone, alice.apiKey, { name: "Keeper", refText: SENTENCE }, tenSeconds)
  t.equal(replaced.status, 200, await replaced.clone().text())
  const after = blobFiles()
  t.equal(after.length, 1, "one sample is stored")
  t.notSame(after, before, "and it is the new one")
  const spoken = await call("POST", `/text-to-speech/${aliceClone}?output_format=pcm_24000`, alice.apiKey, { text: "Still speaking after the edit." })
  t.equal(spoken.status, 200)
  t.ok(rms(int16ToFloat(bytesLEToInt16(new Uint8Array(await spoken.arrayBuffer())))) > 0.01, "the clone still speaks")
})

t.test("delete: owner only, removes the sample, frees the name", async (t) => {
  await expectError(t, await call("DELETE", `/voices/${aliceClone}`, bob.apiKey), 404)
  await expectError(t, await call("DELETE", "/voices/james-en", alice.apiKey), 400)
  const res = await call("DELETE", `/voices/${aliceClone}`, alice.apiKey)
  t.equal(res.status, 200)
  t.same(await res.json(), { status: "ok" })
  t.same(blobFiles(), [], "the sample blob is gone")
  t.notOk((await voiceIds(alice.apiKey)).some((v) => v.voice_id === aliceClone), "no longer listed")
  await expectError(t, await call("GET", `/voices/${aliceClone}`, alice.apiKey), 404)
  await expectError(t, await call("POST", `/text-to-speech/${aliceClone}`, alice.apiKey, { text: "Hello." }), 404)
  await expectError(t, await call("DELETE", `/voices/${aliceClone}`, alice.apiKey), 404)
})
