/**
 * The MCP endpoint with the MCP SDK's own client: with an API key (every scope) it lists and
 * calls every tool (audio comes back as MCP audio content with a duration; a real recording is
 * transcribed, summarised, translated); with the SDK's OAuth client provider it registers,
 * authorizes through our sign-in and consent pages in chromium (the user unticks `tts`), and the
 * synthesis tool then answers an error naming the missing scope while the others work. Sessions:
 * another user's token on a session is refused, no credential is a 401 pointing at the metadata.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js"
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js"
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js"
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js"
import { Effect } from "effect"
import * as fs from "node:fs"
import { chromium } from "playwright-core"
import t from "tap"
import { hashPassword } from "../../storage/Passwords.ts"
import { jsonApi } from "../support/jsonApi.ts"
import { consentedTokens, loopbackCallback, registerPublicClient } from "../support/oauthFlow.ts"
import { conversationWav, LIBRIVOX_WAV } from "../support/librivoxSpeech.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t, { WORKERS: "1" })
// translate_text on a pair not started yet is refused with engine_starting (Apertium starts in the background).
await Effect.runPromise(service.translator.warm("eng", "spa"))
const site = service.siteUrl
const password = "mcp test password"
const cat = await Effect.runPromise(service.users.createUserWithKey({ name: "cat", email: "cat@example.com", passwordHash: await Effect.runPromise(hashPassword(password)), credits: 100_000 }))
const dan = await Effect.runPromise(service.users.createUserWithKey({ name: "dan", credits: 1000 }))

type Content = { type: string; text?: string; data?: string; mimeType?: string }
const connect = async (headers: Record<string, string>) => {
  const client = new Client({ name: "speech-test", version: "1.0.0" })
  const transport = new StreamableHTTPClientTransport(new URL(`${site}/mcp`), { requestInit: { headers } })
  await client.connect(transport)
  return { client, transport }
}

t.test("with an API key: every tool, real audio in and out", async (t) => {
  const { client, transport } = await connect({ authorization: `Bearer ${cat.apiKey}` })
  t.teardown(() => client.close())
  const tools = (await client.listTools()).tools
  t.same(tools.map((x) => x.name).sort(), ["create_voice_clone", "delete_voice", "denoise_audio", "list_voices", "summarize_job", "synthesize_speech", "transcribe_audio", "translate_text"])
  for (const tool of tools) t.ok(tool.description!.length > 20 && tool.inputSchema.type === "object", `${tool.name} is described`)

  const spoken = await client.callTool({ name: "synthesize_speech", arguments: { text: "Hello from the model context protocol.", voice_id: "emma-en" } })
  const audio = (spoken.content as Array<Content>).find((c) => c.type === "audio")!
  t.equal(audio.mimeType, "audio/wav")
  const wav = Buffer.from(audio.data!, "base64")
  t.equal(wav.subarray(0, 4).toString(), "RIFF")
  const seconds = (wav.length - 44) / 2 / wav.readUInt32LE(24)
  t.ok(seconds > 1 && seconds < 6, `${seconds.toFixed(2)} s`)
  t.match((spoken.content as Array<Content>).find((c) => c.type === "text")!.text, /s of speech/u)

  const voices = JSON.parse(((await client.callTool({ name: "list_voices", arguments: { language: "en" } })).content as Array<Content>)[0]!.text!) as { voices: Array<{ voice_id: string }> }
  t.ok(voices.voices.some((v) => v.voice_id === "emma-en"))

  const progress: Array<number> = []
  const heard = await client.callTool({ name: "transcribe_audio", arguments: { audio_base64: fs.readFileSync(LIBRIVOX_WAV).toString("base64") } }, undefined, {
    onprogress: (p) => void progress.push(p.progress)
  })
  t.ok(progress.length >= 2 && progress.every((x, i) => i === 0 || x > progress[i - 1]!), `progress notifications rise: ${progress.join(" ")}`)
  const transcript = JSON.parse((heard.content as Array<Content>)[0]!.text!) as { text: string; words: Array<unknown> }
  t.ok(transcript.words.length > 10, transcript.text)

  const sample = fs.readFileSync(LIBRIVOX_WAV).toString("base64")
  const made = await client.callTool({ name: "create_voice_clone", arguments: { audio_base64: sample, name: "Reader", language: "en" } })
  const clone = JSON.parse((made.content as Array<Content>)[0]!.text!) as { voice_id: string }
  t.match(clone.voice_id, /^vc_/u)
  const withClone = await client.callTool({ name: "synthesize_speech", arguments: { text: "Spoken by my clone.", voice_id: clone.voice_id } })
  t.ok((withClone.content as Array<Content>).some((c) => c.type === "audio"), "the clone speaks")
  t.equal((await client.callTool({ name: "delete_voice", arguments: { voice_id: clone.voice_id } })).isError, undefined)
  const inward = await client.callTool({ name: "transcribe_audio", arguments: { audio_url: `${site}/static/site.css` } })
  t.equal(inward.isError, true)
  t.match((inward.content as Array<Content>)[0]!.text, /not a public address|url_unreachable|invalid_url/u, "a URL pointing inward is refused by the address guard")
  // Noise removal: a real reading with white noise added comes back the same length, quieter where the reader pauses.
  const clean = fs.readFileSync(LIBRIVOX_WAV)
  const noisy = Buffer.from(clean)
  let seed = 7
  for (let i = 44; i + 1 < noisy.length; i += 2) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff
    noisy.writeInt16LE(Math.max(-32768, Math.min(32767, clean.readInt16LE(i) + ((seed / 0x7fffffff) - 0.5) * 3000)), i)
  }
  const denoised = await client.callTool({ name: "denoise_audio", arguments: { audio_base64: noisy.toString("base64") } })
  const out = Buffer.from((denoised.content as Array<Content>).find((c) => c.type === "audio")!.data!, "base64")
  t.equal(out.length, clean.length, "same length (16 kHz mono WAV)")
  const rms = (b: Buffer, from: number, to: number) => {
    let sum = 0
    for (let i = 44 + from * 2; i < 44 + to * 2; i += 2) sum += b.readInt16LE(i) ** 2
    return Math.sqrt(sum / (to - from))
  }
  const diff = (a: Buffer, b: Buffer) => {
    let sum = 0
    for (let i = 44; i + 1 < a.length; i += 2) sum += (a.readInt16LE(i) - b.readInt16LE(i)) ** 2
    return sum
  }
  t.ok(diff(out, clean) < diff(noisy, clean), `closer to the clean reading than the noisy input (rms of the first 0.1 s: ${rms(noisy, 0, 1600).toFixed(0)} → ${rms(out, 0, 1600).toFixed(0)})`)

  // Past the SDK's own 4 MB body cap: 160 s of 16 kHz audio (5 MB, 6.8 MB as base64).
  const tone = Buffer.alloc(160 * 16000 * 2)
  for (let i = 0; i < tone.length; i += 2) tone.writeInt16LE(Math.round(3000 * Math.sin(i / 7)), i)
  const long = conversationWav([tone], 0)
  const big = await client.callTool({ name: "denoise_audio", arguments: { audio_base64: long.toString("base64") } })
  t.notOk(big.isError, "a 6.8 MB request is accepted")

  const both = await client.callTool({ name: "transcribe_audio", arguments: {} })
  t.match((both.content as Array<Content>)[0]!.text, /exactly one of audio_base64 and audio_url/u)

  const translated = await client.callTool({ name: "translate_text", arguments: { text: "The cat is black.", source: "en", target: "es" } })
  t.equal((translated.content as Array<Content>)[0]!.text, "El gato es negro.")
  const badPair = await client.callTool({ name: "translate_text", arguments: { text: "x", source: "en", target: "de" } })
  t.equal(badPair.isError, true)
  t.match((badPair.content as Array<Content>)[0]!.text, /unsupported_language_pair/u)

  const job = await jsonApi(`${site}/api/v1`).runJob(cat.apiKey, fs.readFileSync(LIBRIVOX_WAV))
  const summary = await client.callTool({ name: "summarize_job", arguments: { job_id: job.id, template_id: "brief" } })
  t.match((summary.content as Array<Content>)[0]!.text, /^# Brief/u)
  const notMine = await Effect.runPromise(service.users.createUserWithKey({ name: "eve", credits: 10 }))
  const other = await connect({ authorization: `Bearer ${notMine.apiKey}` })
  t.teardown(() => other.client.close())
  const refused = await other.client.callTool({ name: "summarize_job", arguments: { job_id: job.id } })
  t.match((refused.content as Array<Content>)[0]!.text, /job_not_found/u, "another user's job is not found")

  // Another user's credential on this session is refused like an unknown session.
  const hijack = await fetch(`${site}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${dan.apiKey}`, "mcp-session-id": transport.sessionId!, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "tools/list" })
  })
  t.equal(hijack.status, 404)
  const anonymous = await fetch(`${site}/mcp`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })
  t.equal(anonymous.status, 401)
  t.match(anonymous.headers.get("www-authenticate"), /resource_metadata="[^"]+\/\.well-known\/oauth-protected-resource"/u)
})

t.test("the SDK's OAuth client provider: register, authorize in the browser without tts, and the tool says which scope is missing", async (t) => {
  const redirectUrl = await loopbackCallback(t)
  let authorizationUrl: URL | undefined
  const store: { client?: OAuthClientInformationMixed; tokens?: OAuthTokens; verifier?: string } = {}
  const provider: OAuthClientProvider = {
    get redirectUrl() {
      return redirectUrl
    },
    get clientMetadata(): OAuthClientMetadata {
      return { redirect_uris: [redirectUrl], client_name: "MCP SDK test client", token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"], response_types: ["code"] }
    },
    clientInformation: () => store.client,
    saveClientInformation: (c) => void (store.client = c),
    tokens: () => store.tokens,
    saveTokens: (x) => void (store.tokens = x),
    redirectToAuthorization: (url) => void (authorizationUrl = url),
    saveCodeVerifier: (v) => void (store.verifier = v),
    codeVerifier: () => store.verifier!
  }
  const first = new StreamableHTTPClientTransport(new URL(`${site}/mcp`), { authProvider: provider })
  const client = new Client({ name: "speech-oauth-test", version: "1.0.0" })
  await client.connect(first).then(() => t.fail("connected without authorization"), (e: Error) => t.match(e.message, /Unauthorized/iu))
  t.ok(authorizationUrl, "the SDK registered and built the authorization URL")
  t.match((store.client as { client_id: string }).client_id, /^cli_/u)

  const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] })
  t.teardown(() => browser.close())
  const page = await (await browser.newContext()).newPage()
  await page.goto(authorizationUrl!.href)
  await page.getByLabel("E-mail").fill("cat@example.com")
  await page.getByLabel("Password").fill(password)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.waitForSelector("#scopes")
  await page.locator("#grant-tts").uncheck()
  await page.getByRole("button", { name: "Allow" }).click()
  await page.waitForURL(/\/callback/u)
  const code = new URL(page.url()).searchParams.get("code")!
  await first.finishAuth(code)
  t.match(store.tokens!.access_token, /^oat_/u)
  t.notMatch(store.tokens!.scope ?? "", /\btts\b/u, "tts was not granted")

  const second = new StreamableHTTPClientTransport(new URL(`${site}/mcp`), { authProvider: provider })
  const authed = new Client({ name: "speech-oauth-test", version: "1.0.0" })
  await authed.connect(second)
  t.teardown(() => authed.close())
  t.equal((await authed.listTools()).tools.length, 8)
  const denied = await authed.callTool({ name: "synthesize_speech", arguments: { text: "hello" } })
  t.equal(denied.isError, true)
  t.match((denied.content as Array<Content>)[0]!.text, /needs the "tts" scope/u)
  const allowed = await authed.callTool({ name: "translate_text", arguments: { text: "The dog is big.", source: "en", target: "es" } })
  t.equal((allowed.content as Array<Content>)[0]!.text, "El perro es grande.")
})

t.test("each tool family refuses a token without its scope and names it", async (t) => {
  const redirectUri = await loopbackCallback(t, "/cb")
  const clientId = await registerPublicClient(site, redirectUri)
  const session = await Effect.runPromise(service.webSessions.start(cat.userId))
  const families = { tts: ["synthesize_speech", { text: "hi" }], voices: ["list_voices", {}], asr: ["transcribe_audio", { audio_base64: "AAAA" }], summary: ["summarize_job", { job_id: "job_x" }], translate: ["translate_text", { text: "x", source: "en", target: "es" }], denoise: ["denoise_audio", { audio_base64: "AAAA" }] } as const
  for (const [scope, [tool, args]] of Object.entries(families)) {
    const others = Object.keys(families).filter((x) => x !== scope)
    const tokens = await consentedTokens(site, { session, clientId, redirectUri, scopes: Object.keys(families), granted: others })
    t.notMatch(` ${tokens.scope} `, ` ${scope} `, `the token lacks ${scope}`)
    const { client } = await connect({ authorization: `Bearer ${tokens.access_token}` })
    const answer = await client.callTool({ name: tool, arguments: args })
    t.equal(answer.isError, true, tool)
    t.match((answer.content as Array<Content>)[0]!.text, new RegExp(`needs the "${scope}" scope`, "u"))
    if (scope === "tts") {
      // The same user's API key (another client) cannot ride this OAuth session to more scopes.
      const transport = (client as unknown as { transport: { sessionId?: string } }).transport
      const ride = await fetch(`${site}/mcp`, {
        method: "POST",
        headers: { authorization: `Bearer ${cat.apiKey}`, "mcp-session-id": transport.sessionId!, "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: "synthesize_speech", arguments: { text: "hi" } } })
      })
      t.equal(ride.status, 404, "a session belongs to the client that opened it")
    }
    await client.close()
  }
})
