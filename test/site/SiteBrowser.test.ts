/**
 * The site in a real browser (Debian's chromium through playwright-core) against the real
 * server: sign in, mint a key and use it with the official ElevenLabs SDK, delete it and see the
 * SDK get 401, speak in the playground (the audio element reports a duration), transcribe a real
 * recording, sign out. Then what must not work: a form without its CSRF token, an API call from a
 * signed-in browser without it, an expired session, too many sign-ins, another user's keys.
 *
 * With SITE_SCREENSHOTS=<dir> it also writes a screenshot of every page at desktop and phone width.
 */
import { ElevenLabsClient } from "@elevenlabs/elevenlabs-js"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import t from "tap"
import { hashPassword } from "../../storage/Passwords.ts"
import { LIBRIVOX_WAV } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"

// Page functions run in the browser; this file is type-checked without the DOM library.
declare const document: any
type HTMLAudioElement = any

const CHROMIUM = "/usr/bin/chromium"
if (!fs.existsSync(CHROMIUM)) {
  t.fail("Debian chromium is missing: scripts/test.sh installs it (apt-get install chromium)")
  process.exit(1)
}

const service = await startTestService(t, { WORKERS: "1" })
const site = service.siteUrl
const newAccount = async (email: string, password: string) =>
  Effect.runPromise(service.users.createUserWithKey({ name: email.split("@")[0]!, email, passwordHash: await Effect.runPromise(hashPassword(password)), credits: 100_000 }))
const alice = { email: "alice@example.com", password: "correct horse battery" }
const bob = { email: "bob@example.com", password: "another long password" }
const carol = { email: "carol@example.com", password: "carol's own password" }
const aliceAccount = await newAccount(alice.email, alice.password)
const bobAccount = await newAccount(bob.email, bob.password)
await newAccount(carol.email, carol.password)

const browser: Browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox", "--autoplay-policy=no-user-gesture-required"] })
t.teardown(() => browser.close())
const shots = process.env.SITE_SCREENSHOTS
const screenshot = async (p: Page, name: string) => {
  if (shots === undefined) return
  fs.mkdirSync(shots, { recursive: true })
  for (const [label, width, height] of [["desktop", 1280, 900], ["phone", 375, 740]] as const) {
    await p.setViewportSize({ width, height })
    await p.screenshot({ path: path.join(shots, `${name}-${label}.png`), fullPage: true })
  }
  await p.setViewportSize({ width: 1280, height: 900 })
}

const signIn = async (p: Page, who: { email: string; password: string }, next = "/developer") => {
  await p.goto(`${site}${next}`)
  await p.waitForURL(/\/sign-in/u)
  await p.getByLabel("E-mail").fill(who.email)
  await p.getByLabel("Password").fill(who.password)
  await p.getByRole("button", { name: "Sign in" }).click()
  await p.waitForURL(new RegExp(`${next}$`, "u"))
}

t.test("sign in, mint a key, use it with the ElevenLabs SDK, delete it: 401", async (t) => {
  const context = await browser.newContext()
  t.teardown(() => context.close())
  const p = await context.newPage()
  await p.goto(`${site}/`)
  await screenshot(p, "home")
  await p.goto(`${site}/sign-in`)
  await screenshot(p, "sign-in")
  await signIn(p, alice)
  t.equal(await p.locator("h1").textContent(), "Developer")
  t.match(await p.locator("#balance").textContent(), /^\d+$/u)
  await p.getByLabel("Name of a new key").fill("browser test")
  await p.getByRole("button", { name: "Create key" }).click()
  const key = await p.locator("#new-key").inputValue()
  t.match(key, /^sk_svc_/u, "the new key is shown once")
  await screenshot(p, "developer")
  const row = p.locator("#keys tr", { hasText: "browser test" })
  t.match(await row.textContent(), new RegExp(`${key.slice(0, 9)}.*…${key.slice(-4)}`, "u"), "listed by prefix and last four")

  const sdk = new ElevenLabsClient({ apiKey: key, baseUrl: `${site}/api` })
  const voices = await sdk.voices.getAll()
  t.ok(voices.voices.length > 100, "the SDK works with the minted key")

  await row.getByRole("button", { name: /Delete/u }).click()
  await p.waitForURL(/\/developer$/u)
  t.equal(await p.locator("#keys tr", { hasText: "browser test" }).count(), 0, "gone from the list")
  const refused = await sdk.voices.getAll().then(() => 0, (e: unknown) => (e as { statusCode?: number }).statusCode)
  t.equal(refused, 401, "the deleted key stops working at once")

  await p.getByRole("button", { name: "Sign out" }).click()
  await p.goto(`${site}/developer`)
  t.match(p.url(), /\/sign-in\?next=%2Fdeveloper/u, "signed out: the developer page asks to sign in")
})

t.test("playground: speech plays as it streams and the audio element has a duration; a real recording is transcribed and cloned", async (t) => {
  const context = await browser.newContext()
  t.teardown(() => context.close())
  const p = await context.newPage()
  const errors: Array<string> = []
  p.on("pageerror", (e) => errors.push(e.message))
  await signIn(p, alice, "/playground")
  await p.waitForFunction(() => document.getElementById("tts-voice").options.length > 100)
  await p.locator("#tts-text").fill("Hello from the browser test. This sentence is spoken by the service.")
  await p.locator("#tts-speak").click()
  await p.waitForFunction(() => /Done/u.test(document.getElementById("tts-status")!.textContent ?? ""), undefined, { timeout: 60_000 })
  const duration = await p.evaluate(async () => {
    const audio = document.getElementById("tts-audio") as HTMLAudioElement
    if (!(audio.duration > 0)) await new Promise((r) => audio.addEventListener("loadedmetadata", r, { once: true }))
    return audio.duration
  })
  t.ok(duration > 2 && duration < 15, `the audio element reports ${duration.toFixed(2)} s`)

  await p.locator("#stt-file").setInputFiles(LIBRIVOX_WAV)
  await p.locator("#stt-transcribe").click()
  await p.waitForFunction(() => (document.getElementById("stt-text")!.textContent ?? "").trim().split(/\s+/u).length > 5, undefined, { timeout: 120_000 })
  const transcript = (await p.locator("#stt-text").textContent())!
  t.match(transcript, /[a-z]+ [a-z]+/u, `transcript: ${transcript.slice(0, 80)}`)
  t.ok(await p.locator("#stt-words tbody tr").count() > 5, "word timings listed")
  t.match(await p.locator("#stt-srt").textContent(), /00:00:0\d,\d{3} --> /u, "the SRT is shown")

  await p.locator("#clone-name").fill("My browser clone")
  await p.locator("#clone-file").setInputFiles(LIBRIVOX_WAV)
  await p.locator("#clone-create").click()
  await p.waitForFunction(() => /created/u.test(document.getElementById("clone-status").textContent ?? ""), undefined, { timeout: 120_000 })
  const preview = await p.evaluate(async () => {
    const audio = document.getElementById("clone-audio")
    if (!(audio.duration > 0)) await new Promise((r) => audio.addEventListener("loadedmetadata", r, { once: true }))
    return audio.duration
  })
  t.ok(preview > 0.5, `the clone's preview plays (${preview.toFixed(2)} s, fetched with the session cookie)`)
  t.match(await p.locator("#tts-voice option:checked").textContent(), /My browser clone/u, "the new clone is selected for speech")
  await screenshot(p, "playground")
  t.same(errors, [], "no script errors")
})

t.test("account page; CSRF, expiry, rate limit, and one user never sees another's keys", async (t) => {
  const context = await browser.newContext()
  t.teardown(() => context.close())
  const p = await context.newPage()
  await signIn(p, bob)
  await p.goto(`${site}/account`)
  t.equal(await p.locator("#account-email").textContent(), bob.email)
  await screenshot(p, "account")
  await p.goto(`${site}/docs`)
  t.ok(await p.locator("#op-translateChunk").count() === 1, "the API reference lists the operations")
  await screenshot(p, "docs")

  // Bob's developer page lists only Bob's key; Alice's key id cannot be deleted by Bob.
  await p.goto(`${site}/developer`)
  t.equal(await p.locator("#keys").textContent().then((x) => x!.includes(aliceAccount.apiKey.slice(0, 9))), false)
  const csrf = (await p.locator("meta[name=csrf-token]").getAttribute("content"))!
  const other = await p.request.post(`${site}/developer/keys/${aliceAccount.keyId}/delete`, { form: { csrf } })
  t.equal(other.status(), 404, "another user's key is not found")
  t.equal((await service.keys.authenticate(aliceAccount.apiKey).pipe(Effect.map(() => "alive"), Effect.runPromise)), "alive")

  // Alice's clone and usage are hers: Bob's browser sees neither.
  const form = new FormData()
  form.append("name", "Alice's clone")
  form.append("files", new Blob([fs.readFileSync(LIBRIVOX_WAV)], { type: "audio/wav" }), "sample.wav")
  const clone = await fetch(`${site}/api/v1/voices/add`, { method: "POST", headers: { "xi-api-key": aliceAccount.apiKey }, body: form })
  t.equal(clone.status, 200)
  const cloneId = ((await clone.json()) as { voice_id: string }).voice_id
  const spoken = await fetch(`${site}/api/v1/text-to-speech/mari`, { method: "POST", headers: { "xi-api-key": aliceAccount.apiKey, "content-type": "application/json" }, body: JSON.stringify({ text: "tere" }) })
  const aliceRequest = spoken.headers.get("x-request-id")!
  await spoken.arrayBuffer()
  t.ok((await Effect.runPromise(service.credits.ledger(aliceAccount.userId))).some((e) => e.reference === aliceRequest), "Alice's ledger has her request")
  const bobVoices = (await (await p.request.get(`${site}/api/v1/voices`)).json()) as { voices: Array<{ voice_id: string }> }
  t.notOk(bobVoices.voices.some((v) => v.voice_id === cloneId), "Bob's voice list has no Alice clone")
  t.equal((await p.request.get(`${site}/api/v1/voices/${cloneId}`)).status(), 404)
  t.not((await p.request.get(`${site}/api/v1/voices/${cloneId}/preview`)).status(), 200)
  await p.goto(`${site}/developer`)
  t.notOk((await p.content()).includes(aliceRequest), "Bob's usage does not list Alice's request")

  // Forms without the session's token, and API calls from the browser without x-csrf-token.
  t.equal((await p.request.post(`${site}/developer/keys`, { form: { name: "x" } })).status(), 403)
  t.equal((await p.request.post(`${site}/developer/keys`, { form: { name: "x", csrf: "wrong" } })).status(), 403)
  t.equal((await p.request.post(`${site}/api/v1/text-to-speech/mari`, { data: { text: "tere" } })).status(), 403, "cookie without x-csrf-token")
  t.equal((await p.request.post(`${site}/api/v1/text-to-speech/mari`, { data: { text: "tere" }, headers: { "x-csrf-token": csrf } })).status(), 200, "with it")
  t.equal((await p.request.get(`${site}/api/v1/user`)).status(), 200, "GET with the cookie alone")

  // An expired session is no session.
  const expired = await Effect.runPromise(service.webSessions.start(bobAccount.userId, 1))
  await new Promise((r) => setTimeout(r, 20))
  const fresh = await browser.newContext()
  t.teardown(() => fresh.close())
  await fresh.addCookies([{ name: "svc_session", value: expired.token, url: site }])
  const q = await fresh.newPage()
  await q.goto(`${site}/developer`)
  t.match(q.url(), /\/sign-in/u, "an expired session must sign in again")
  t.equal((await q.request.get(`${site}/api/v1/user`)).status(), 401)

  // Sign out everywhere ends this browser's session too.
  await p.goto(`${site}/account`)
  await p.getByRole("button", { name: "Sign out of every browser" }).click()
  await p.goto(`${site}/developer`)
  t.match(p.url(), /\/sign-in/u)

  // Five attempts per account, then 429 whatever the password; the message never says which part was wrong.
  const r = await browser.newContext()
  t.teardown(() => r.close())
  const s = await r.newPage()
  const statuses: Array<number> = []
  for (let i = 0; i < 7; i++) {
    await s.goto(`${site}/sign-in`)
    await s.getByLabel("E-mail").fill(carol.email)
    await s.getByLabel("Password").fill(i === 6 ? carol.password : "wrong password!")
    const [response] = await Promise.all([s.waitForResponse((res) => res.url().includes("/sign-in") && res.request().method() === "POST"), s.getByRole("button", { name: "Sign in" }).click()])
    statuses.push(response.status())
  }
  t.same(statuses, [401, 401, 401, 401, 401, 429, 429], "the right password is refused too once limited")
  t.match(await s.locator("[role=alert]").textContent(), /Too many sign-in attempts/u)
  await s.goto(`${site}/sign-in`)
  await s.getByLabel("E-mail").fill("nobody@example.com")
  await s.getByLabel("Password").fill("whatever password")
  await s.getByRole("button", { name: "Sign in" }).click()
  t.equal(await s.locator("[role=alert]").textContent(), "That e-mail and password do not match an account.")
})
