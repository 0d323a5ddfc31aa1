/**
 * The scenario of bench/cluster.ts (also run by test/cluster/Cluster.test.ts in smoke mode):
 * three instances on one fresh PostgreSQL database and one DATA_DIR behind nginx, mixed traffic
 * through nginx, one instance SIGKILLed halfway, then the invariants checked. Returns one row
 * per invariant; `ok` is false when any is violated.
 */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import { admin, freshDatabase, type Instance, startInstance, startNginx, startWebhookReceiver } from "./clusterNodes.ts"
import { type Call, runTraffic } from "./clusterTraffic.ts"
import { freePort } from "./support.ts"

export interface ClusterOptions {
  /** PostgreSQL server URL; the run makes (and drops) its own database there. */
  readonly databaseUrl: string
  readonly durationS: number
  readonly log?: (line: string) => void
}

export interface Check {
  readonly name: string
  readonly ok: boolean
  readonly detail: string
}

export interface ClusterResult {
  readonly ok: boolean
  readonly checks: ReadonlyArray<Check>
}

const INSTANCES = 3
const LEASE_S = 3
const RATE = { perSecond: 1, burst: 5 }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

export const runCluster = async (o: ClusterOptions): Promise<ClusterResult> => {
  const log = o.log ?? ((line: string) => console.log(line))
  const checks: Array<Check> = []
  const check = (name: string, ok: boolean, detail: string) => {
    checks.push({ name, ok, detail })
    log(`${ok ? "ok  " : "FAIL"} ${name}: ${detail}`)
  }
  const db = await freshDatabase(o.databaseUrl)
  const dataDir = mkdtempSync(path.join(tmpdir(), "speech-cluster-data-"))
  const receiver = await startWebhookReceiver()
  const cleanups: Array<() => Promise<unknown> | unknown> = [() => db.drop(), () => rmSync(dataDir, { recursive: true, force: true }), () => receiver.stop()]
  const instances: Array<Instance> = []
  try {
    const nginxPort = await freePort()
    const ports = [await freePort(), await freePort(), await freePort()]
    const site = `http://127.0.0.1:${nginxPort}`
    const env: Record<string, string> = {
      DATABASE_URL: db.url,
      DATA_DIR: dataDir,
      SITE_URL: site,
      WORKERS: "1",
      JOBS_CONCURRENCY: "1",
      JOB_POLL_MS: "200",
      JOB_LEASE_S: String(LEASE_S),
      WEBHOOK_SWEEP_S: "1",
      WEBHOOK_BACKOFF_S: "1",
      URL_FETCH_ALLOW_PRIVATE: "true",
      URL_FETCH_CA_FILE: receiver.certFile,
      TRANSLATE_RATE_PER_S: String(RATE.perSecond),
      TRANSLATE_BURST: String(RATE.burst),
      SHUTDOWN_GRACE_MS: "2000",
      LOG_LEVEL: "info"
    }
    const t0 = Date.now()
    // The first applies the migrations; the others start together.
    instances.push(await startInstance(0, ports[0]!, env))
    cleanups.push(() => Promise.all(instances.map(stopInstance)))
    instances.push(...await Promise.all([1, 2].map((i) => startInstance(i, ports[i]!, env))))
    const nginx = await startNginx(nginxPort, ports)
    cleanups.push(() => nginx.stop())
    const [main, doomed] = await Promise.all([
      admin(env, ["create-user", "--name", "cluster", "--credits", "10000000"]),
      admin(env, ["create-user", "--name", "doomed", "--email", `doomed-${process.pid}@example.com`, "--credits", "100"])
    ])
    log(`3 instances (${ports.join(", ")}) and nginx (${nginxPort}) up in ${((Date.now() - t0) / 1000).toFixed(1)} s`)
    const apiKey = main!.api_key!
    const direct = (i: number) => `http://127.0.0.1:${instances[i]!.port}`

    // A key deleted through one instance is refused by every instance (each had it cached).
    const warm = await Promise.all(instances.map((_, i) => status(`${direct(i)}/api/v1/user`, doomed!.api_key!)))
    const deleteMs = await deleteKeyOnSite(direct(0), doomed!.email!, doomed!.password!)
    // The delete answers once every live instance has dropped the key (storage/ApiKeys.ts), so
    // the very next request to each is refused.
    const after = await Promise.all(instances.map((_, i) => status(`${direct(i)}/api/v1/user`, doomed!.api_key!)))
    check("deleted key refused by all at once", warm.every((s) => s === 200) && after.every((s) => s === 401), `before ${warm.join("/")}; right after the delete on instance 0 answered: ${after.join("/")}`)
    log(`     the delete on the site took ${deleteMs} ms (it waits for every instance to drop the key)`)

    // The translation rate limit is one bucket for the cluster: chunks round-robin over the instances.
    const rateStart = Date.now()
    const answers: Array<number> = []
    for (let i = 0; i < RATE.burst * 3; i++) answers.push(await translateStatus(direct(i % INSTANCES), apiKey))
    const seconds = (Date.now() - rateStart) / 1000
    const allowed = answers.filter((s) => s !== 429).length
    const bound = RATE.burst + Math.ceil(seconds * RATE.perSecond)
    const refusedOn = new Set(answers.flatMap((s, i) => (s === 429 ? [i % INSTANCES] : [])))
    check("rate limit shared", allowed <= bound && refusedOn.size === INSTANCES, `${answers.length} chunks in ${seconds.toFixed(1)} s over 3 instances: ${allowed} allowed (shared bound ${bound}; per-instance buckets would allow ${Math.min(answers.length, INSTANCES * RATE.burst)}), 429 from instances ${[...refusedOn].join(",")}`)

    // An MCP session through nginx stays on the instance that opened it.
    const mcp = await mcpSession(site, apiKey)
    check("MCP session through nginx", mcp.every((s) => s === 200 || s === 202), `initialize + 6 requests: ${mcp.join(" ")}`)

    const hook = await (await fetch(`${site}/api/v1/webhooks`, { method: "POST", headers: { "xi-api-key": apiKey, "content-type": "application/json" }, body: JSON.stringify({ url: receiver.url }) })).json() as { webhook_id: string }
    const before = (await db.query<{ credits: string }>(`SELECT credits FROM users WHERE id = $1`, [main!.user_id]))[0]!.credits

    // Traffic; the instance running a job is SIGKILLed halfway.
    const trafficEnd = Date.now() + o.durationS * 1000
    let killAt: number | undefined
    let killed: Instance | undefined
    const killer = (async () => {
      await sleep(o.durationS * 500)
      for (let i = 0; i < 50 && killed === undefined; i++) {
        const running = await db.query<{ pid: number }>(`SELECT s.pid FROM recognition_jobs j JOIN service_instances s ON s.id = j.claimed_by WHERE j.state = 'running' LIMIT 1`)
        killed = instances.find((x) => x.child.pid === running[0]?.pid)
        if (killed === undefined) await sleep(200)
      }
      killed ??= instances[INSTANCES - 1]!
      killAt = Date.now()
      killed.child.kill("SIGKILL")
      log(`SIGKILL instance ${killed.index} (port ${killed.port}) at ${((killAt - trafficEnd) / 1000 + o.durationS).toFixed(1)} s`)
    })()
    const traffic = await runTraffic({ site, apiKey, webhookId: hook.webhook_id, until: () => Date.now() > trafficEnd, jobEveryMs: o.durationS <= 15 ? 1500 : 2500, killAt: () => killAt })
    await killer
    const killedUpstream = `127.0.0.1:${killed!.port}`

    // Requests that failed: only those that were on the killed instance when it died are excused.
    const failed = traffic.calls.filter((c) => !c.ok)
    // In flight on the killed instance, or sent to it (nginx's kept-alive connection) before
    // nginx noticed: a POST that reached an upstream is not retried elsewhere (it might have run).
    const onKilled = (c: Call) => c.upstream.includes(killedUpstream) && c.startedAt <= killAt! + 2000 && c.endedAt >= killAt!
    const inFlight = (c: Call) => c.upstream === "" && c.startedAt <= killAt! && c.endedAt >= killAt!
    const excused = failed.filter((c) => onKilled(c) || inFlight(c))
    const unexcused = failed.filter((c) => !excused.includes(c))
    const byKind = new Map<string, number>()
    for (const c of traffic.calls) byKind.set(c.kind, (byKind.get(c.kind) ?? 0) + 1)
    check("no request failed except on the killed instance", unexcused.length === 0, `${traffic.calls.length} calls (${[...byKind].map(([k, n]) => `${k} ${n}`).join(", ")}); ${excused.length} cut by the kill; other failures ${unexcused.length}${unexcused.length > 0 ? `: ${unexcused.slice(0, 3).map((c) => `${c.kind} via ${c.upstream || "?"}: ${c.error}`).join("; ")}` : ""}`)
    const wsClients = [...traffic.wsAfterKill.values()]
    check("WebSocket clients continue after the kill", traffic.wsUnrecovered === 0 && wsClients.length > 0, `sessions completed after the kill per client: ${wsClients.join("/") || "none"}; ${traffic.wsReconnects} broken sessions followed by a good one through nginx, ${traffic.wsUnrecovered} not`)

    // Every job ends; the killed instance's job is finished by another after its lease.
    const jobDeadline = Date.now() + 90_000
    let jobs: ReadonlyArray<{ id: string; state: string; claims: number; claimed_by: string }> = []
    while (Date.now() < jobDeadline) {
      jobs = await db.query(`SELECT id, state, claims, claimed_by FROM recognition_jobs WHERE id = ANY($1)`, [traffic.jobs])
      if (jobs.every((j) => j.state === "succeeded" || j.state === "failed")) break
      await sleep(500)
    }
    const claimsOf = new Map<string, Array<number>>()
    for (const inst of instances) {
      for (const line of inst.log().split("\n")) {
        if (!line.includes('"msg":"job claimed"')) continue
        const id = /"jobId":"([^"]+)"/u.exec(line)?.[1]
        if (id !== undefined) claimsOf.set(id, [...(claimsOf.get(id) ?? []), inst.index])
      }
    }
    const perInstance = instances.map((inst) => [...claimsOf.values()].filter((c) => c.includes(inst.index)).length)
    const twice = [...claimsOf].filter(([, c]) => c.filter((i) => i !== killed!.index).length > 1)
    const reclaimed = [...claimsOf].filter(([, c]) => c.includes(killed!.index) && c.some((i) => i !== killed!.index))
    const succeeded = jobs.filter((j) => j.state === "succeeded").length
    check("jobs spread, none ran twice, all finished", twice.length === 0 && jobs.length === traffic.jobs.length && succeeded === jobs.length && perInstance.filter((n) => n > 0).length >= 2,
      `${jobs.length} jobs, ${succeeded} succeeded, claims per instance ${perInstance.join("/")}, run twice by live instances ${twice.length}, taken over from the killed instance after the ${LEASE_S} s lease ${reclaimed.length}`)

    // One delivery per terminal state, by event_id.
    const webhookDeadline = Date.now() + 30_000
    while (Date.now() < webhookDeadline && new Set(receiver.received.map((d) => d.jobId)).size < jobs.length) await sleep(300)
    const perEvent = new Map<string, number>()
    for (const d of receiver.received) perEvent.set(d.eventId, (perEvent.get(d.eventId) ?? 0) + 1)
    const eventsPerJob = new Map<string, Set<string>>()
    for (const d of receiver.received) eventsPerJob.set(d.jobId, (eventsPerJob.get(d.jobId) ?? new Set()).add(d.eventId))
    const duplicates = [...perEvent.values()].filter((n) => n > 1).length
    const missing = jobs.filter((j) => eventsPerJob.get(j.id)?.size !== 1).length
    check("webhooks once per terminal state", duplicates === 0 && missing === 0, `${receiver.received.length} deliveries, ${perEvent.size} event ids for ${jobs.length} jobs; duplicated events ${duplicates}, jobs without exactly one event ${missing}`)

    // Credits: never negative, and the ledger accounts for every change.
    await sleep(1500)
    const [c] = await db.query<Record<string, string>>(`
      SELECT u.credits,
             (SELECT coalesce(sum(amount), 0) FROM credit_reservations WHERE user_id = u.id) AS reserved,
             coalesce(sum(l.amount) FILTER (WHERE l.kind = 'debit' AND l.id > $2), 0) AS debits,
             coalesce(sum(l.amount) FILTER (WHERE l.kind = 'refund' AND l.id > $2), 0) AS refunds,
             coalesce(sum(l.amount) FILTER (WHERE l.kind = 'grant' AND l.id > $2), 0) AS grants,
             coalesce(sum(l.amount), 0) AS total,
             min(l.balance_after) AS lowest
        FROM users u JOIN credit_ledger l ON l.user_id = u.id WHERE u.id = $1 GROUP BY u.id, u.credits`, [main!.user_id, 0])
    const n = (k: string) => Number(c![k])
    const change = n("credits") - Number(before)
    const lowest = (await db.query<{ m: string }>(`SELECT min(least(balance_after, 0)) AS m FROM credit_ledger`))[0]!.m
    const accounted = n("total") === n("credits") + n("reserved")
    check("credits exact and never negative", accounted && Number(lowest) >= 0 && n("credits") >= 0,
      `debits ${-n("debits")}, refunds ${n("refunds")}, balance change ${change} (reservations open ${n("reserved")}); ledger sum ${n("total")} = balance ${n("credits")} + reserved ${n("reserved")}: ${accounted}; lowest balance in any ledger row ${Math.max(0, Number(lowest))}`)
  } finally {
    for (const f of cleanups.reverse()) await Promise.resolve().then(f).catch((e) => log(`cleanup: ${String(e)}`))
  }
  return { ok: checks.length > 0 && checks.every((c) => c.ok), checks }
}

const stopInstance = (inst: Instance) =>
  new Promise<void>((resolve) => {
    if (inst.child.exitCode !== null || inst.child.signalCode !== null) return resolve()
    inst.child.once("exit", () => resolve())
    inst.child.kill("SIGTERM")
  })

const status = async (url: string, apiKey: string) => {
  const res = await fetch(url, { headers: { "xi-api-key": apiKey } })
  await res.arrayBuffer()
  return res.status
}

const translateStatus = async (site: string, apiKey: string) => {
  const res = await fetch(`${site}/api/v1/translate/chunk`, {
    method: "POST",
    headers: { "xi-api-key": apiKey, "content-type": "application/json" },
    body: JSON.stringify({ new_source: "Hello.", source: "en", target: "ca" })
  })
  await res.arrayBuffer()
  return res.status
}

/** Signs in on the site of one instance and deletes the account's only key there; how long the delete took, ms. */
const deleteKeyOnSite = async (site: string, email: string, password: string): Promise<number> => {
  const jar = new Map<string, string>()
  const go = async (p: string, init: RequestInit = {}) => {
    const res = await fetch(`${site}${p}`, { ...init, redirect: "manual", headers: { ...(init.headers as Record<string, string> ?? {}), cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } })
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(";")
      const at = pair!.indexOf("=")
      jar.set(pair!.slice(0, at), pair!.slice(at + 1))
    }
    return { status: res.status, text: await res.text() }
  }
  const form = (fields: Record<string, string>) => ({ method: "POST", headers: { "content-type": "application/x-www-form-urlencoded" }, body: new URLSearchParams(fields).toString() })
  const csrfIn = (html: string) => /name="csrf" value="([^"]+)"/u.exec(html)?.[1] ?? ""
  const signIn = await go("/sign-in")
  const signedIn = await go("/sign-in", form({ csrf: csrfIn(signIn.text), email, password }))
  if (signedIn.status !== 303) throw new Error(`sign-in answered ${signedIn.status}`)
  const developer = await go("/developer")
  const keyId = /action="\/developer\/keys\/([^"/]+)\/delete"/u.exec(developer.text)?.[1]
  if (keyId === undefined) throw new Error("no key on the developer page")
  const started = Date.now()
  const deleted = await go(`/developer/keys/${keyId}/delete`, form({ csrf: csrfIn(developer.text) }))
  if (deleted.status !== 303) throw new Error(`delete answered ${deleted.status}`)
  return Date.now() - started
}

/** initialize, initialized, then tools/list ×5 with the session id, through nginx; the statuses. */
const mcpSession = async (site: string, apiKey: string): Promise<Array<number>> => {
  const headers: Record<string, string> = { authorization: `Bearer ${apiKey}`, "content-type": "application/json", accept: "application/json, text/event-stream" }
  const post = async (body: unknown) => {
    const res = await fetch(`${site}/mcp`, { method: "POST", headers, body: JSON.stringify(body) })
    await res.arrayBuffer()
    return res
  }
  const init = await post({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "cluster-bench", version: "1" } } })
  const session = init.headers.get("mcp-session-id")
  if (session === null) return [init.status]
  headers["mcp-session-id"] = session
  headers["mcp-protocol-version"] = "2025-06-18"
  const statuses = [init.status, (await post({ jsonrpc: "2.0", method: "notifications/initialized" })).status]
  for (let i = 0; i < 5; i++) statuses.push((await post({ jsonrpc: "2.0", id: 2 + i, method: "tools/list" })).status)
  return statuses
}
