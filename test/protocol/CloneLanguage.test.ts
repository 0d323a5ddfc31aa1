/**
 * The language of a voice clone (issue 9 item 11), its cached preview (item 14) and NUL bytes in
 * clone fields (item 9). The SDK's `voices.ivc.create` sends no `language`: the service works it
 * out from the sample (the English recogniser's confidence) and from `refText`, shows it as
 * `labels.language`, lets `voices.update` change it, and a TTS request's language overrides it.
 *
 * The English sample is real human speech: the LibriVox clips of Debian's pocketsphinx-testdata
 * (installed by scripts/setup.sh). The others are spoken by the service's espeak presets.
 */
import fc from "fast-check"
import * as fs from "node:fs"
import t, { type Test } from "tap"
import { languageOfText } from "../../actors/CloneLanguage.ts"
import { encodeWav, parseWav } from "../../engines/audio/Wav.ts"
import { presetsForLanguage } from "../../engines/tts/Voices.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "2" })
const alice = await service.newUser(1_000_000)

const LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox"

/** About 18 s of a man reading Sense and Sensibility, as one 16 kHz WAV. */
const englishSample = (): Uint8Array => {
  const clips = ["0870", "0890", "0920"].map((n) => parseWav(new Uint8Array(fs.readFileSync(`${LIBRIVOX}/sense_and_sensibility_01_austen_64kb-${n}.wav`))).channelData[0]!)
  const all = new Float32Array(clips.reduce((n, c) => n + c.length, 0))
  let at = 0
  for (const c of clips) {
    all.set(c, at)
    at += c.length
  }
  return encodeWav(all, 16000)
}

const ESTONIAN_TEXT = "Tere hommikust, kallis sõber. Täna on ilus ja päikeseline ilm. Lähme koos pargis jalutama ja räägime sellest, mis meil eelmisel nädalal juhtus."
const GERMAN_TEXT = "Guten Morgen, lieber Freund. Heute ist schönes und sonniges Wetter. Lass uns zusammen im Park spazieren gehen und darüber reden, was letzte Woche passiert ist."

const speak = async (voice: string, text: string): Promise<Uint8Array> => {
  const res = await fetch(`${service.base}/text-to-speech/${voice}`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": alice.apiKey },
    body: JSON.stringify({ text })
  })
  if (res.status !== 200) throw new Error(`reference synthesis failed: ${res.status} ${await res.text()}`)
  return new Uint8Array(await res.arrayBuffer())
}

/** POST /voices/add as the SDK's voices.ivc.create sends it: no language field. */
const addVoice = (fields: Record<string, string>, sample: Uint8Array) => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  form.append("files", new Blob([sample as Uint8Array<ArrayBuffer>], { type: "application/octet-stream" }), "sample.wav")
  return fetch(`${service.base}/voices/add`, { method: "POST", headers: { "xi-api-key": alice.apiKey }, body: form })
}

const editVoice = (voiceId: string, fields: Record<string, string>) => {
  const form = new FormData()
  for (const [k, v] of Object.entries(fields)) form.append(k, v)
  return fetch(`${service.base}/voices/${voiceId}/edit`, { method: "POST", headers: { "xi-api-key": alice.apiKey }, body: form })
}

const created = async (t: Test, res: Response): Promise<string> => {
  const text = await res.text()
  t.equal(res.status, 200, text)
  return (JSON.parse(text) as { voice_id: string }).voice_id
}

const voice = async (voiceId: string) =>
  (await (await fetch(`${service.base}/voices/${voiceId}`, { headers: { "xi-api-key": alice.apiKey } })).json()) as { labels: Record<string, string> }

const tts = async (voiceId: string, body: Record<string, unknown>) => {
  const res = await fetch(`${service.base}/text-to-speech/${voiceId}`, {
    method: "POST",
    headers: { "content-type": "application/json", "xi-api-key": alice.apiKey },
    body: JSON.stringify(body)
  })
  if (res.status !== 200) throw new Error(`tts ${res.status}: ${await res.text()}`)
  return Buffer.from(await res.arrayBuffer())
}

const expectError = async (t: Test, res: Response, status: number, what: string) => {
  t.equal(res.status, status, what)
  const body = await res.json() as { detail?: { status?: string; message?: string } }
  t.type(body.detail?.message, "string", `${what}: error body`)
}

const syntheses = async (): Promise<number> => {
  const text = await (await fetch(`${service.siteUrl}/metrics`)).text()
  return Number(/^tts_syntheses_total(?:\{[^}]*\})? (\S+)$/m.exec(text)?.[1] ?? 0)
}

const [estonianSample, germanSample] = await Promise.all([speak("mari", ESTONIAN_TEXT), speak("greta-de", GERMAN_TEXT)])
let estonianClone = ""

t.test("no language, a real English recording: the clone is English (labels.language en)", async (t) => {
  const id = await created(t, await addVoice({ name: "Reader", labels: JSON.stringify({ accent: "british" }) }, englishSample()))
  t.same((await voice(id)).labels, { accent: "british", language: "en" })
})

t.test("no language, an Estonian sample: the clone is Estonian", async (t) => {
  estonianClone = await created(t, await addVoice({ name: "Mari clone" }, estonianSample))
  t.equal((await voice(estonianClone)).labels.language, "et")
})

t.test("no language, German refText: the clone is German", async (t) => {
  const id = await created(t, await addVoice({ name: "Greta clone", refText: GERMAN_TEXT }, germanSample))
  t.equal((await voice(id)).labels.language, "de")
})

t.test("language field and labels.language given: used as given; unknown is 400", async (t) => {
  const id = await created(t, await addVoice({ name: "Given", labels: JSON.stringify({ language: "fi" }) }, estonianSample))
  t.equal((await voice(id)).labels.language, "fi", "labels.language")
  await expectError(t, await addVoice({ name: "Bad", language: "Klingon" }, estonianSample), 400, "unknown language")
})

t.test("a TTS request's language overrides the clone's; voices.update changes it", async (t) => {
  const text = "Hello there, this is a cloned voice speaking English."
  const own = await tts(estonianClone, { text })
  const english = await tts(estonianClone, { text, language_code: "en" })
  t.notOk(english.equals(own), "language_code en changes the clone's audio")
  t.ok((await tts(estonianClone, { text }, )).equals(own), "and nothing else does")

  const edit = await editVoice(estonianClone, { name: "Mari clone", labels: JSON.stringify({ language: "en" }) })
  t.equal(edit.status, 200, await edit.text())
  t.equal((await voice(estonianClone)).labels.language, "en", "labels.language en via voices.update")
  t.ok((await tts(estonianClone, { text })).equals(english), "now speaks English by default, as language_code en did")
  t.ok((await tts(estonianClone, { text, language_code: "et" })).equals(own), "a request's et still overrides")

  const back = await editVoice(estonianClone, { name: "Mari clone", language: "Estonian" })
  t.equal(back.status, 200, await back.text())
  t.equal((await voice(estonianClone)).labels.language, "et", "the language field, an English name")
  t.ok((await tts(estonianClone, { text })).equals(own), "Estonian again")
  await expectError(t, await editVoice(estonianClone, { name: "Mari clone", language: "xx" }), 400, "unknown language on edit")
})

t.test("a clone's preview is made once, and again after an edit; gone after a delete", async (t) => {
  const get = () => fetch(`${service.base}/voices/${estonianClone}/preview`, { headers: { "xi-api-key": alice.apiKey } })
  const first = await get()
  t.equal(first.status, 200)
  const firstBytes = Buffer.from(await first.arrayBuffer())
  const before = await syntheses()
  const second = await get()
  t.equal(second.status, 200)
  t.ok(Buffer.from(await second.arrayBuffer()).equals(firstBytes), "same preview")
  t.equal(await syntheses(), before, "the second GET synthesised nothing")

  t.equal((await editVoice(estonianClone, { name: "Mari clone", labels: JSON.stringify({ language: "en" }) })).status, 200)
  const edited = await get()
  t.equal(edited.status, 200)
  t.notOk(Buffer.from(await edited.arrayBuffer()).equals(firstBytes), "the edited (now English) clone's preview is new")
  t.ok(await syntheses() > before, "synthesised again after the edit")

  const del = await fetch(`${service.base}/voices/${estonianClone}`, { method: "DELETE", headers: { "xi-api-key": alice.apiKey } })
  t.equal(del.status, 200)
  t.equal((await get()).status, 404, "no preview of a deleted clone")
})

t.test("NUL in clone fields and ids is 400, never 500", async (t) => {
  await expectError(t, await addVoice({ name: "Nul labels", labels: JSON.stringify({ accent: "a\u0000b" }) }, estonianSample), 400, "NUL in a label value")
  await expectError(t, await addVoice({ name: "Nul labels", labels: JSON.stringify({ "a\u0000": "b" }) }, estonianSample), 400, "NUL in a label key")
  await expectError(t, await addVoice({ name: "Nul\u0000name" }, estonianSample), 400, "NUL in the name")
  await expectError(t, await addVoice({ name: "Nul ref", refText: "x\u0000y" }, estonianSample), 400, "NUL in refText")
  const id = await created(t, await addVoice({ name: "Target", language: "et" }, estonianSample))
  await expectError(t, await editVoice(id, { name: "Target", labels: JSON.stringify({ accent: "\u0000" }) }), 400, "NUL in an edited label")
  await expectError(t, await editVoice(id, { name: "Tar\u0000get" }), 400, "NUL in an edited name")
  await expectError(t, await editVoice(id, { name: "Target", description: "\u0000" }), 400, "NUL in an edited description")
  for (const bad of ["vc_%00", `${id}%00`]) {
    const res = await fetch(`${service.base}/voices/${bad}`, { headers: { "xi-api-key": alice.apiKey } })
    t.ok(res.status === 400 || res.status === 404, `GET /voices/${bad}: ${res.status}`)
    t.not((await fetch(`${service.base}/voices/${bad}/preview`, { headers: { "xi-api-key": alice.apiKey } })).status, 500, `preview of ${bad}`)
    t.not((await fetch(`${service.base}/voices/${bad}`, { method: "DELETE", headers: { "xi-api-key": alice.apiKey } })).status, 500, `DELETE ${bad}`)
    t.not((await editVoice(bad, { name: "x" })).status, 500, `edit ${bad}`)
    t.not((await fetch(`${service.base}/text-to-speech/${bad}`, { method: "POST", headers: { "content-type": "application/json", "xi-api-key": alice.apiKey }, body: JSON.stringify({ text: "Tere" }) })).status, 500, `TTS with ${bad}`)
  }
  t.equal((await voice(id)).labels.language, "et", "the clone is untouched")
})

t.test("property: a NUL anywhere in an edited name, description or label is 400, and changes nothing", async (t) => {
  const id = await created(t, await addVoice({ name: "Nul target", language: "et" }, estonianSample))
  const withNul = fc.tuple(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 })).map(([a, b]) => `${a}\u0000${b}`)
  await fc.assert(
    fc.asyncProperty(withNul, fc.constantFrom("name", "description", "labelKey", "labelValue", "language"), async (value, field) => {
      const fields: Record<string, string> = { name: "Nul target" }
      if (field === "name" || field === "description" || field === "language") fields[field] = value
      else fields.labels = JSON.stringify(field === "labelKey" ? { [value]: "x" } : { accent: value })
      const res = await editVoice(id, fields)
      await res.arrayBuffer()
      return res.status === 400
    }),
    { numRuns: 30 }
  )
  t.same((await voice(id)).labels, { language: "et" }, "the clone is unchanged")
})

t.test("property: languageOfText never throws and names only catalogue languages", async (t) => {
  fc.assert(
    fc.property(fc.string({ unit: "grapheme", maxLength: 80 }), (text) => {
      const code = languageOfText(text)
      return code === undefined || presetsForLanguage(code).length > 0
    }),
    { numRuns: 300 }
  )
  t.equal(languageOfText("Tere hommikust, kallis sõber, kuidas sul täna läheb?"), "et")
  t.equal(languageOfText("Good morning, my dear friend, how are you today?"), "en")
  t.equal(languageOfText("a test voice"), undefined, "three words are too few to tell")
})
