/**
 * The webhook store and dispatcher against both databases (PGlite always, PostgreSQL when
 * DATABASE_URL is set), with the POST replaced by a recorder so each outcome can be chosen:
 * subscriptions are per user; a delivery that succeeds is sent once, signed; failures are
 * retried with growing waits and end dead after the last attempt; a revoked subscription's
 * delivery ends dead unsent; two dispatchers sweeping at once send each row once.
 */
import { Effect, Layer, ManagedRuntime } from "effect"
import * as Reactivity from "effect/reactivity/Reactivity"
import { SqlClient } from "effect/sql/SqlClient"
import { createHmac } from "node:crypto"
import * as fs from "node:fs"
import t, { type Test } from "tap"
import { retryDelayMs, WebhookDispatcher, webhookDispatcherLayer } from "../../actors/WebhookDispatcher.ts"
import { SIGNATURE_TOLERANCE_S, verifySignature } from "../../actors/WebhookSignature.ts"
import { databaseLayer } from "../../storage/Database.ts"
import { newEventId, WebhookOutbox, Webhooks, webhooksLayer } from "../../storage/Webhooks.ts"
import { freshEmbeddedDataDir, isolatedDatabaseUrl } from "../support/database.ts"

t.test("retry waits grow four-fold, within ±25 %, never past 48 h", async (t) => {
  for (let n = 1; n <= 8; n++) {
    const base = 20_000 * 4 ** (n - 1)
    t.equal(retryDelayMs(20_000, n, 0), Math.min(48 * 3600e3, Math.round(base * 0.75)))
    t.equal(retryDelayMs(20_000, n, 1), Math.min(48 * 3600e3, Math.round(base * 1.25)))
  }
  t.equal(retryDelayMs(20_000, 40, 0.5), 48 * 3600e3)
  const spanH = [1, 2, 3, 4, 5, 6, 7].reduce((s, n) => s + retryDelayMs(20_000, n, 0.5), 0) / 3600e3
  t.ok(spanH > 24 && spanH < 36, `8 attempts at 20 s span about a day (${spanH.toFixed(1)} h)`)
})

t.test("a receiver's check: stale, altered and malformed headers are refused", async (t) => {
  const secret = "whsec_test"
  const body = "{\"a\":1}"
  const now = 1_800_000_000
  const sig = createHmac("sha256", secret).update(`${now}.${body}`).digest("hex")
  t.same(verifySignature(secret, body, `t=${now},v1=${sig}`, now), { ok: true })
  t.same(verifySignature(secret, body, `t=${now},v1=${sig}`, now + SIGNATURE_TOLERANCE_S + 1), { ok: false, reason: "stale" })
  t.same(verifySignature(secret, body + " ", `t=${now},v1=${sig}`, now), { ok: false, reason: "mismatch" })
  t.same(verifySignature("whsec_other", body, `t=${now},v1=${sig}`, now), { ok: false, reason: "mismatch" })
  t.same(verifySignature(secret, body, `t=${now + 1},v1=${sig}`, now), { ok: false, reason: "mismatch" })
  for (const bad of [undefined, "", "t=1", `v1=${sig}`, `t=x,v1=${sig}`, `t=${now},v1=zz`]) {
    t.same(verifySignature(secret, body, bad, now), { ok: false, reason: "malformed" }, String(bad))
  }
})

const modes: Array<"embedded" | "postgres"> = ["embedded"]
if (process.env.DATABASE_URL) modes.push("postgres")

interface Sent {
  readonly url: string
  readonly body: string
  readonly signature: string
}

for (const mode of modes) {
  t.test(`webhook store and dispatcher on ${mode}`, async (t) => {
    const db = mode === "embedded"
      ? await (async () => {
        const dataDir = await freshEmbeddedDataDir()
        t.teardown(() => fs.rmSync(dataDir, { recursive: true, force: true }))
        return databaseLayer({ databaseUrl: undefined, dataDir })
      })()
      : databaseLayer({ databaseUrl: await isolatedDatabaseUrl(t, process.env.DATABASE_URL!), dataDir: "/tmp" })
    const base = webhooksLayer.pipe(Layer.provideMerge(db), Layer.provide(Reactivity.layer))
    const runtime = ManagedRuntime.make(base)
    t.teardown(() => runtime.dispose())
    const run = <A, E>(e: Effect.Effect<A, E, SqlClient | Webhooks | WebhookOutbox>) => runtime.runPromise(e)
    const sql = (text: string) => run(Effect.flatMap(Effect.service(SqlClient), (s) => s.unsafe(text)))
    await sql(`INSERT INTO users (id, name) VALUES ('u1', 'one'), ('u2', 'two')`)
    const hooks = await run(Effect.service(Webhooks))

    /**
     * A dispatcher of its own with a scripted receiver, closed with the subtest. Its loop also
     * runs; retries wait a minute, so after the first look the test drives it (`due` then
     * `deliverDue`).
     */
    const dispatcher = async (t: Test, answers: Array<number | "down">, options: { maxAttempts?: number } = {}) => {
      const sent: Array<Sent> = []
      const layer = webhookDispatcherLayer({
        maxAttempts: options.maxAttempts ?? 3,
        backoffMs: 60_000,
        sweepMs: 3_600_000,
        leaseMs: 60_000,
        post: (url, body, headers) =>
          Effect.suspend(() => {
            sent.push({ url, body, signature: headers["vendor-signature"]! })
            const answer = answers.shift() ?? 200
            return answer === "down" ? Effect.fail({ message: "connect ECONNREFUSED" }) : Effect.succeed(answer)
          })
      }).pipe(Layer.provide(base))
      const rt = ManagedRuntime.make(layer)
      t.teardown(() => rt.dispose())
      const d = await rt.runPromise(Effect.service(WebhookDispatcher))
      return { sent, deliverDue: () => rt.runPromise(d.deliverDue) }
    }
    const queue = async (webhookId: string, body = `{"n":${Math.random()}}`) => {
      const eventId = newEventId()
      // No job row behind it (job_id is nullable: a job may be deleted while its delivery waits).
      await run(Effect.flatMap(Effect.service(SqlClient), (s) =>
        s`INSERT INTO webhook_deliveries (event_id, webhook_id, body) VALUES (${eventId}, ${webhookId}, ${body})`))
      return eventId
    }
    const row = async (eventId: string) =>
      (await sql(`SELECT state, attempts, last_status, last_error, next_attempt_at FROM webhook_deliveries WHERE event_id = '${eventId}'`))[0] as {
        state: string
        attempts: number
        last_status: number | null
        last_error: string | null
        next_attempt_at: Date
      }
    const due = (eventId: string) => sql(`UPDATE webhook_deliveries SET next_attempt_at = now() - interval '1 second' WHERE event_id = '${eventId}'`)

    t.test("subscriptions belong to their user; the secret is shown at creation only", async (t) => {
      const a = await run(hooks.create("u1", "https://example.com/a", "first"))
      t.match(a.signingSecret, /^whsec_[A-Za-z0-9_-]{43}$/)
      t.match(a.webhookId, /^wh_[0-9a-f]{24}$/)
      const listed = await run(hooks.list("u1"))
      t.same(listed.map((w) => w.webhookId), [a.webhookId])
      t.notOk("signingSecret" in listed[0]!, "list carries no secret")
      t.same(await run(hooks.list("u2")), [])
      t.equal(await run(hooks.find("u2", a.webhookId)), undefined, "another user's id is not found")
      t.equal(await run(hooks.revoke("u2", a.webhookId)), false, "nor revoked by them")
      t.equal(await run(hooks.revoke("u1", a.webhookId)), true)
      t.equal(await run(hooks.revoke("u1", a.webhookId)), false, "revoked once")
      t.same(await run(hooks.list("u1")), [])
      t.equal(await run(hooks.find("u1", a.webhookId)), undefined)
    })

    t.test("msUntilNextDue: nothing pending is undefined (the dispatcher sleeps a sweep), not 0", async (t) => {
      const outbox = await run(Effect.service(WebhookOutbox))
      await sql(`DELETE FROM webhook_deliveries`)
      t.equal(await run(outbox.msUntilNextDue), undefined, "an empty outbox is never due")
      const hook = await run(hooks.create("u2", "https://example.com/later", "later"))
      const eventId = await queue(hook.webhookId)
      await sql(`UPDATE webhook_deliveries SET next_attempt_at = now() + interval '1 hour' WHERE event_id = '${eventId}'`)
      const later = (await run(outbox.msUntilNextDue))!
      t.ok(later > 3_500_000 && later <= 3_600_000, `a retry in an hour is ${later} ms away`)
      await due(eventId)
      t.equal(await run(outbox.msUntilNextDue), 0, "one that is past due is due now")
      await sql(`DELETE FROM webhook_deliveries`)
    })

    t.test("a delivery is sent once, signed with the subscription's secret", async (t) => {
      const hook = await run(hooks.create("u1", "https://example.com/ok", null))
      const eventId = await queue(hook.webhookId, "{\"hello\":\"world\"}")
      const d = await dispatcher(t, [204])
      t.equal(await d.deliverDue(), 1)
      t.equal(d.sent.length, 1)
      t.equal(d.sent[0]!.url, "https://example.com/ok")
      t.same(verifySignature(hook.signingSecret, "{\"hello\":\"world\"}", d.sent[0]!.signature, Date.now() / 1000), { ok: true })
      t.match(await row(eventId), { state: "delivered", attempts: 1, last_status: 204, last_error: null })
      t.equal(await d.deliverDue(), 0, "nothing is due any more")
    })

    t.test("failures are retried later, then the delivery succeeds with the same event", async (t) => {
      const hook = await run(hooks.create("u1", "https://example.com/flaky", null))
      const eventId = await queue(hook.webhookId)
      const d = await dispatcher(t, [500, "down", 200])
      await d.deliverDue()
      const first = await row(eventId)
      t.match(first, { state: "pending", attempts: 1, last_status: 500, last_error: /answered 500/ })
      t.ok(new Date(first.next_attempt_at).getTime() > Date.now() - 1000, "the retry is scheduled, not immediate")
      await due(eventId)
      await d.deliverDue()
      t.match(await row(eventId), { state: "pending", attempts: 2, last_status: null, last_error: /ECONNREFUSED/ })
      await due(eventId)
      await d.deliverDue()
      t.match(await row(eventId), { state: "delivered", attempts: 3, last_status: 200 })
      t.equal(new Set(d.sent.map((s) => s.body)).size, 1, "the same body every time")
    })

    t.test("after the last attempt the delivery is dead", async (t) => {
      const hook = await run(hooks.create("u1", "https://example.com/broken", null))
      const eventId = await queue(hook.webhookId)
      const d = await dispatcher(t, [503, 503, 503, 503], { maxAttempts: 2 })
      await d.deliverDue()
      await due(eventId)
      await d.deliverDue()
      t.match(await row(eventId), { state: "dead", attempts: 2, last_status: 503 })
      await due(eventId)
      t.equal(await d.deliverDue(), 0, "a dead delivery is not sent again")
      t.equal(d.sent.length, 2)
    })

    t.test("a revoked subscription's pending delivery ends dead without a send", async (t) => {
      const hook = await run(hooks.create("u1", "https://example.com/gone", null))
      const eventId = await queue(hook.webhookId)
      await run(hooks.revoke("u1", hook.webhookId))
      const d = await dispatcher(t, [200])
      await d.deliverDue()
      t.equal(d.sent.length, 0)
      t.match(await row(eventId), { state: "dead", last_error: /revoked/ })
    })

    t.test("two dispatchers sweeping at once send each delivery once", async (t) => {
      const hook = await run(hooks.create("u2", "https://example.com/many", null))
      const ids: Array<string> = []
      for (let i = 0; i < 40; i++) ids.push(await queue(hook.webhookId, `{"i":${i}}`))
      const a = await dispatcher(t, [])
      const b = await dispatcher(t, [])
      await Promise.all([a.deliverDue(), b.deliverDue(), a.deliverDue(), b.deliverDue()])
      // The dispatchers' own loops may still hold rows they claimed: wait until every row is done.
      const settled = async () => {
        const [count] = (await sql(`SELECT count(*) AS n FROM webhook_deliveries WHERE state = 'pending'`)) as ReadonlyArray<{ n: number | string }>
        return Number(count!.n) === 0
      }
      for (let i = 0; i < 200 && !(await settled()); i++) await new Promise((r) => setTimeout(r, 50))
      const bodies = [...a.sent, ...b.sent].map((s) => s.body).filter((s) => s.startsWith("{\"i\""))
      t.equal(bodies.length, 40, `40 sends in all (${a.sent.length} + ${b.sent.length})`)
      t.equal(new Set(bodies).size, 40, "no delivery sent twice")
      for (const id of ids) t.equal((await row(id)).state, "delivered")
    })
  })
}
