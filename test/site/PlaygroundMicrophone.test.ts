/**
 * The playground's microphone in Debian's Chromium (playwright-core): a fake capture device fed
 * from a real recording (the LibriVox reading followed by 2.5 s of silence, looped by Chromium)
 * goes through getUserMedia and the AudioWorklet, over the realtime socket opened with a
 * `realtime_scribe` single-use token the page mints with its session and CSRF token. A partial
 * shows, a committed line holds words of the recording, Stop ends the session and the developer
 * page's ledger shows the stt_realtime debit. Then the clear errors: a refused microphone, an
 * ended site session (the token is refused) and an account without credits.
 *
 * With SITE_SCREENSHOTS=<dir> it writes the microphone card at 1280 px and 375 px wide.
 */
import { Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { type Browser, chromium, type Page } from "playwright-core"
import t from "tap"
import { hashPassword } from "../../storage/Passwords.ts"
import { conversationWav, LIBRIVOX_WAV, pcmOf, SPEECH } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"

// Page functions run in the browser; this file is type-checked without the DOM library.
declare const document: any
declare const navigator: any
declare const DOMException: any

const CHROMIUM = "/usr/bin/chromium"
if (!fs.existsSync(CHROMIUM)) {
  t.fail("Debian chromium is missing: scripts/test.sh installs it (apt-get install chromium)")
  process.exit(1)
}

const service = await startTestService(t, { WORKERS: "1" })
const site = service.siteUrl
const newAccount = async (email: string, password: string, credits: number) =>
  Effect.runPromise(service.users.createUserWithKey({ name: email.split("@")[0]!, email, passwordHash: await Effect.runPromise(hashPassword(password)), credits }))
const alice = { email: "alice@example.com", password: "correct horse battery" }
const broke = { email: "broke@example.com", password: "no credits at all here" }
const aliceAccount = await newAccount(alice.email, alice.password, 100_000)
await newAccount(broke.email, broke.password, 0)

// 16-bit PCM WAV, as Chromium's fake capture wants; the silence lets the VAD commit each loop.
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "mic-"))
t.teardown(() => fs.rmSync(dir, { recursive: true, force: true }))
const wav = path.join(dir, "speech.wav")
fs.writeFileSync(wav, conversationWav([pcmOf(LIBRIVOX_WAV), Buffer.alloc(2.5 * 16000 * 2)], 0))

const browser: Browser = await chromium.launch({
  executablePath: CHROMIUM,
  args: ["--no-sandbox", "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream", `--use-file-for-fake-audio-capture=${wav}`]
})
t.teardown(() => browser.close())

const shots = process.env.SITE_SCREENSHOTS
const screenshot = async (p: Page, name: string) => {
  if (shots === undefined) return
  fs.mkdirSync(shots, { recursive: true })
  for (const [label, width, height] of [["desktop", 1280, 900], ["phone", 375, 740]] as const) {
    await p.setViewportSize({ width, height })
    await p.locator("#mic").screenshot({ path: path.join(shots, `${name}-${label}.png`) })
  }
  await p.setViewportSize({ width: 1280, height: 900 })
}

const signIn = async (p: Page, who: { email: string; password: string }) => {
  await p.goto(`${site}/playground`)
  await p.waitForURL(/\/sign-in/u)
  await p.getByLabel("E-mail").fill(who.email)
  await p.getByLabel("Password").fill(who.password)
  await p.getByRole("button", { name: "Sign in" }).click()
  await p.waitForURL(/\/playground$/u)
}

/** The synchronous endpoint's words of the recording: what the committed line is held to. */
const referenceWords = async (): Promise<Set<string>> => {
  const form = new FormData()
  form.append("model_id", "scribe_v1")
  form.append("file", new Blob([SPEECH], { type: "audio/wav" }), "speech.wav")
  const res = await fetch(`${service.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": aliceAccount.apiKey }, body: form })
  const text = ((await res.json()) as { text: string }).text
  return new Set(text.toLowerCase().match(/[a-z']+/gu) ?? [])
}

t.test("microphone: a partial, then a committed line with the recording's words; Stop; the ledger shows stt_realtime", async (t) => {
  const reference = await referenceWords()
  t.ok(reference.size > 5, `the recording's words: ${[...reference].join(" ")}`)
  const context = await browser.newContext()
  t.teardown(() => context.close())
  const p = await context.newPage()
  const errors: Array<string> = []
  p.on("pageerror", (e) => errors.push(e.message))
  // The CSP (default-src 'self') must admit the worklet module and the ws: connection to this host.
  p.on("console", (m) => { if (/Content Security Policy/iu.test(m.text())) errors.push(m.text()) })
  await signIn(p, alice)
  t.ok(await p.locator("#mic-stop").isDisabled(), "Stop is disabled until listening")
  await p.locator("#mic-start").click()
  await p.waitForFunction(() => /Listening/u.test(document.getElementById("mic-status").textContent ?? ""), undefined, { timeout: 60_000 })
  await p.waitForFunction(() => (document.getElementById("mic-partial").textContent ?? "").trim().length > 0, undefined, { timeout: 60_000 })
  t.pass("a partial is shown while speech runs")
  t.equal(await p.locator("#mic-start").getAttribute("data-capture"), "worklet", "captured through the AudioWorklet, served under the CSP")
  await p.waitForFunction(() => document.querySelectorAll("#mic-lines li").length > 0, undefined, { timeout: 120_000 })
  const line = (await p.locator("#mic-lines li").first().textContent())!
  const shared = (line.toLowerCase().match(/[a-z']+/gu) ?? []).filter((w) => reference.has(w))
  t.ok(shared.length >= 3, `the committed line "${line}" holds words of the recording (${shared.length} shared)`)
  // The recording loops: wait for the next partial below the committed line, then look at it.
  await p.waitForFunction(() => (document.getElementById("mic-partial").textContent ?? "").trim().length > 0, undefined, { timeout: 60_000 })
  await screenshot(p, "playground-mic")

  await p.locator("#mic-stop").click()
  await p.waitForFunction(() => /Stopped/u.test(document.getElementById("mic-status").textContent ?? ""), undefined, { timeout: 60_000 })
  t.ok(await p.locator("#mic-start").isEnabled(), "Start is enabled again")
  t.equal(await p.locator("#mic-partial").textContent(), "", "no partial left after Stop")

  // The session's finalizer settles after the close reached the browser: wait for the debit.
  const realtimeDebits = async () => (await Effect.runPromise(service.credits.ledger(aliceAccount.userId, { limit: 50 }))).filter((e) => e.purpose === "stt_realtime")
  for (let i = 0; i < 400 && ((await realtimeDebits()).length === 0 || (await Effect.runPromise(service.credits.reserved(aliceAccount.userId))) > 0); i++) {
    await new Promise((r) => setTimeout(r, 50))
  }
  const debits = await realtimeDebits()
  t.ok(debits.length > 0 && debits.every((e) => e.amount < 0), `stt_realtime debits: ${debits.map((e) => e.amount).join(", ")}`)
  await p.goto(`${site}/developer`)
  t.ok(await p.locator("tr", { hasText: "stt_realtime" }).count() > 0, "the developer page's ledger shows the stt_realtime debit")
  t.same(errors, [], "no script errors")
})

t.test("errors in words: a refused microphone; an ended site session; an account without credits", async (t) => {
  const denied = await browser.newContext()
  t.teardown(() => denied.close())
  const p = await denied.newPage()
  await p.addInitScript(() => {
    navigator.mediaDevices.getUserMedia = () => Promise.reject(new DOMException("Permission denied", "NotAllowedError"))
  })
  await signIn(p, alice)
  await p.locator("#mic-start").click()
  await p.waitForFunction(() => document.getElementById("mic-status").classList.contains("error"))
  t.match(await p.locator("#mic-status").textContent(), /permission/iu, "a refused microphone says so")
  t.ok(await p.locator("#mic-start").isEnabled(), "and Start can be pressed again")

  // The site session ends (signed out elsewhere, expired): minting the token gets 401.
  await denied.clearCookies()
  await p.evaluate(() => {
    // Back to the real microphone: the refusal to test now is the service's.
    delete navigator.mediaDevices.getUserMedia
  })
  await p.locator("#mic-start").click()
  await p.waitForFunction(() => /session has ended/u.test(document.getElementById("mic-status").textContent ?? ""))
  t.pass(`signed out: ${await p.locator("#mic-status").textContent()}`)

  const poor = await browser.newContext()
  t.teardown(() => poor.close())
  const q = await poor.newPage()
  await signIn(q, broke)
  await q.locator("#mic-start").click()
  await q.waitForFunction(() => document.getElementById("mic-status").classList.contains("error"), undefined, { timeout: 60_000 })
  t.match(await q.locator("#mic-status").textContent(), /credits/iu, `no credits: ${await q.locator("#mic-status").textContent()}`)
  t.ok(await q.locator("#mic-start").isEnabled(), "Start is enabled after the refusal")
})
