/**
 * Webhooks through the real server (SPEC 2.8, 5, 6; endpoints 16-18): subscriptions per user,
 * https and public addresses only, and deliveries of real transcripts to an https receiver
 * written here, which checks Vendor-Signature with its own HMAC code (not the service's), sees
 * retries after failures with one stable event_id, and still gets the result when it was down
 * as the job finished.
 */
import { createHmac, timingSafeEqual } from "node:crypto"
import t, { type Test } from "tap"
import { startTestService } from "../support/service.ts"
import { startWebhookReceiver } from "../support/webhookReceiver.ts"
import { SPEECH } from "../support/librivoxSpeech.ts"

const receiver = await startWebhookReceiver(t)
const service = await startTestService(t, {
  WORKERS: "1",
  URL_FETCH_ALLOW_PRIVATE: "true",
  URL_FETCH_CA_FILE: receiver.certFile,
  WEBHOOK_BACKOFF_S: "1",
  WEBHOOK_SWEEP_S: "1",
  WEBHOOK_TIMEOUT_S: "5"
})
const owner = await service.newUser()
const other = await service.newUser()

const call = (method: string, path: string, apiKey: string | null, body?: unknown, target = service) =>
  fetch(`${target.base}${path}`, {
    method,
    headers: { ...(apiKey !== null ? { "xi-api-key": apiKey } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
    ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {})
  })

const expectError = async (t: Test, res: Response, status: number, code?: string) => {
  t.equal(res.status, status)
  const body = await res.json() as { detail: { status: string; message: string } }
  t.type(body.detail.message, "string", "the spec's error body")
  if (code !== undefined) t.equal(body.detail.status, code)
  return body.detail
}

/** What a receiver does (README "Webhooks"), written independently of actors/WebhookSignature.ts. */
const receiverAccepts = (secret: string, rawBody: string, header: string | string[] | undefined): boolean => {
  if (typeof header !== "string") return false
  const parts = Object.fromEntries(header.split(",").map((p) => p.split("=", 2) as [string, string]))
  const ts = Number(parts.t)
  if (!Number.isInteger(ts) || Math.abs(Date.now() / 1000 - ts) > 300 || parts.v1 === undefined) return false
  const expected = createHmac("sha256", secret).update(`${parts.t}.${rawBody}`).digest()
  const given = Buffer.from(parts.v1, "hex")
  return given.length === expected.length && timingSafeEqual(given, expected)
}

const createHook = async (apiKey: string, url = receiver.url) => {
  const res = await call("POST", "/webhooks", apiKey, { url, description: "results" })
  if (res.status !== 201) throw new Error(`create webhook: ${res.status} ${await res.text()}`)
  return await res.json() as { webhook_id: string; url: string; description: string | null; created_at: string; signing_secret: string }
}

t.test("subscriptions: create shows the secret once, list and revoke are the owner's", async (t) => {
  const hook = await createHook(owner.apiKey)
  t.match(hook, { webhook_id: /^wh_/, url: receiver.url, description: "results", signing_secret: /^whsec_/ })
  t.ok(Number.isFinite(Date.parse(hook.created_at)))
  const listed = await (await call("GET", "/webhooks", owner.apiKey)).json() as { webhooks: Array<Record<string, unknown>> }
  t.ok(listed.webhooks.some((w) => w.webhook_id === hook.webhook_id))
  t.notOk(listed.webhooks.some((w) => "signing_secret" in w), "no secret in the list")
  const theirs = await (await call("GET", "/webhooks", other.apiKey)).json() as { webhooks: Array<unknown> }
  t.same(theirs.webhooks, [], "another user sees none of them")
  await expectError(t, await call("DELETE", `/webhooks/${hook.webhook_id}`, other.apiKey), 404, "webhook_not_found")
  await expectError(t, await call("GET", "/webhooks", null), 401)
  await expectError(t, await call("POST", "/webhooks", null, { url: receiver.url }), 401)
  await expectError(t, await call("DELETE", `/webhooks/${hook.webhook_id}`, null), 401)
  const revoked = await call("DELETE", `/webhooks/${hook.webhook_id}`, owner.apiKey)
  t.equal(revoked.status, 200)
  t.same(await revoked.json(), { webhook_id: hook.webhook_id, revoked: true })
  await expectError(t, await call("DELETE", `/webhooks/${hook.webhook_id}`, owner.apiKey), 404, "webhook_not_found")
  const after = await (await call("GET", "/webhooks", owner.apiKey)).json() as { webhooks: Array<{ webhook_id: string }> }
  t.notOk(after.webhooks.some((w) => w.webhook_id === hook.webhook_id), "revoked ones are not listed")
})

t.test("subscriptions: malformed bodies and addresses are 400", async (t) => {
  for (const body of ["", "{", "[]", "{}", JSON.stringify({ url: 7 }), JSON.stringify({ url: "x".repeat(3000) })]) {
    await expectError(t, await call("POST", "/webhooks", owner.apiKey, body), 400)
  }
  for (const url of ["not a url", "http://example.com/hook", "ftp://example.com/", "https://user:pw@example.com/hook"]) {
    await expectError(t, await call("POST", "/webhooks", owner.apiKey, { url }), 400, "invalid_webhook_url")
  }
})

t.test("subscriptions: inward addresses are refused by default", async (t) => {
  const strict = await startTestService(t, { WORKERS: "1" })
  const user = await strict.newUser()
  for (const host of ["127.0.0.1", "localhost", "[::1]", "10.0.0.7", "169.254.169.254", "[::ffff:127.0.0.1]", "0.0.0.0"]) {
    const detail = await expectError(t, await call("POST", "/webhooks", user.apiKey, { url: `https://${host}/hook` }, strict), 400, "invalid_webhook_url")
    t.notMatch(detail.message, /127\.0\.0\.1|loopback|private/, `${host}: the answer names no address or range`)
  }
})

interface Delivery {
  type: string
  event_id: string
  data: {
    job_id: string
    transcription_id: string
    state: string
    transcription?: { text: string; words: Array<{ text: string; start: number; end: number }> }
    webhook_metadata: unknown
  }
}

const jobStatus = async (jobId: string) => await (await call("GET", `/recognition/jobs/${jobId}`, owner.apiKey)).json() as {
  state: string
  webhook?: { webhook_id: string; delivery: { event_id: string; state: string; attempts: number; last_status: number | null } | null }
}

t.test("speech-to-text with webhook=true: answered at once, delivered signed after two failures", async (t) => {
  const hook = await createHook(owner.apiKey)
  receiver.answers.push(500, 503)
  const before = receiver.received.length
  const form = new FormData()
  form.set("model_id", "scribe_v1")
  form.set("file", new Blob([SPEECH], { type: "audio/wav" }), "talk.wav")
  form.set("webhook", "true")
  form.set("webhook_id", hook.webhook_id)
  form.set("webhook_metadata", JSON.stringify({ order: 7 }))
  const res = await fetch(`${service.base}/speech-to-text`, { method: "POST", headers: { "xi-api-key": owner.apiKey }, body: form })
  t.equal(res.status, 200)
  const accepted = await res.json() as { message: string; request_id: string; task_id: string; transcription_id: string }
  t.match(accepted, { message: /accepted/i, request_id: /\S/, task_id: /^job_/, transcription_id: /\S/ })

  await receiver.waitFor(before + 3)
  const got = receiver.received.slice(before)
  t.same(got.map((r) => r.status), [500, 503, 200], "two failures, then the third attempt lands")
  for (const r of got) {
    t.ok(receiverAccepts(hook.signing_secret, r.rawBody, r.headers["vendor-signature"]), "the signature verifies")
    t.equal(r.headers["content-type"], "application/json")
  }
  t.notOk(receiverAccepts(`${hook.signing_secret}x`, got[2]!.rawBody, got[2]!.headers["vendor-signature"]), "and not with another secret")
  const bodies = got.map((r) => JSON.parse(r.rawBody) as Delivery)
  t.equal(new Set(bodies.map((b) => b.event_id)).size, 1, "one event_id for every attempt")
  const body = bodies[2]!
  t.equal(body.type, "speech_to_text_transcription")
  t.match(body.data, { job_id: accepted.task_id, transcription_id: accepted.transcription_id, state: "succeeded", webhook_metadata: { order: 7 } })
  const words = body.data.transcription!.words.filter((w) => w.text.trim() !== "")
  t.ok(words.length >= 8, `a real transcript (${words.length} words: ${body.data.transcription!.text.slice(0, 80)})`)
  t.ok(words.at(-1)!.end > 4 && words.at(-1)!.end < 8, `word times span the 7.1 s recording (last ends ${words.at(-1)!.end} s)`)

  const status = await jobStatus(accepted.task_id)
  t.match(status.webhook, { webhook_id: hook.webhook_id, delivery: { event_id: body.event_id, state: "delivered", attempts: 3, last_status: 200 } })
})

t.test("a receiver that is down when the job finishes still gets the result", async (t) => {
  const hook = await createHook(owner.apiKey)
  await receiver.stop()
  const before = receiver.received.length
  // The job flow this time: reserve, PUT, start with the webhook.
  const reserved = await (await call("POST", "/recognition/uploads", owner.apiKey, { content_type: "audio/wav", size_bytes: SPEECH.length })).json() as { job_id: string; upload_url: string }
  t.equal((await fetch(reserved.upload_url, { method: "PUT", body: SPEECH })).status, 200)
  const started = await call("POST", `/recognition/jobs/${reserved.job_id}/start`, owner.apiKey, { webhook: true, webhook_id: hook.webhook_id })
  t.equal(started.status, 202)
  let status = await jobStatus(reserved.job_id)
  for (let i = 0; i < 600 && !(status.webhook?.delivery?.attempts ?? 0); i++) {
    await new Promise((r) => setTimeout(r, 100))
    status = await jobStatus(reserved.job_id)
  }
  t.equal(status.state, "succeeded")
  t.match(status.webhook!.delivery, { state: "pending", last_status: null }, "the first attempt found nobody")
  await receiver.start()
  await receiver.waitFor(before + 1)
  const delivered = JSON.parse(receiver.received[before]!.rawBody) as Delivery
  t.equal(delivered.data.job_id, reserved.job_id)
  t.ok(receiverAccepts(hook.signing_secret, receiver.received[before]!.rawBody, receiver.received[before]!.headers["vendor-signature"]))
  for (let i = 0; i < 100 && status.webhook?.delivery?.state !== "delivered"; i++) {
    await new Promise((r) => setTimeout(r, 100))
    status = await jobStatus(reserved.job_id)
  }
  t.match(status.webhook!.delivery, { state: "delivered", last_status: 200 })
  t.ok(status.webhook!.delivery!.attempts >= 2)
})

t.test("a subscription revoked before the job ends gets nothing; the delivery is dead", async (t) => {
  const hook = await createHook(owner.apiKey)
  const before = receiver.received.length
  const reserved = await (await call("POST", "/recognition/uploads", owner.apiKey, {})).json() as { job_id: string; upload_url: string }
  t.equal((await fetch(reserved.upload_url, { method: "PUT", body: SPEECH })).status, 200)
  t.equal((await call("POST", `/recognition/jobs/${reserved.job_id}/start`, owner.apiKey, { webhook: true, webhook_id: hook.webhook_id })).status, 202)
  t.equal((await call("DELETE", `/webhooks/${hook.webhook_id}`, owner.apiKey)).status, 200)
  let status = await jobStatus(reserved.job_id)
  for (let i = 0; i < 600 && status.webhook?.delivery?.state !== "dead"; i++) {
    await new Promise((r) => setTimeout(r, 100))
    status = await jobStatus(reserved.job_id)
  }
  t.equal(status.webhook!.delivery!.state, "dead")
  t.equal(receiver.received.length, before, "nothing was sent")
  // Another user cannot aim a job at someone else's subscription.
  const theirs = await createHook(owner.apiKey)
  const job = await (await call("POST", "/recognition/uploads", other.apiKey, {})).json() as { job_id: string; upload_url: string }
  await fetch(job.upload_url, { method: "PUT", body: SPEECH })
  await expectError(t, await call("POST", `/recognition/jobs/${job.job_id}/start`, other.apiKey, { webhook: true, webhook_id: theirs.webhook_id }), 404, "webhook_not_found")
})
