/**
 * JSON calls against a test service's API: `call` answers status and parsed body, `runJob`
 * reserves an upload, puts the audio, starts the job and polls it to its end, and
 * `expectApiError` checks the spec's error body.
 */
import type { Test } from "tap"

export type Json = Record<string, any>
export interface JsonAnswer {
  readonly status: number
  readonly json: Json
}

export const jsonApi = (base: string) => {
  const call = async (method: string, route: string, apiKey: string | null, body?: unknown): Promise<JsonAnswer> => {
    const res = await fetch(`${base}${route}`, {
      method,
      headers: { ...(apiKey !== null ? { "xi-api-key": apiKey } : {}), ...(body !== undefined ? { "content-type": "application/json" } : {}) },
      ...(body !== undefined ? { body: typeof body === "string" ? body : JSON.stringify(body) } : {})
    })
    return { status: res.status, json: await res.json() as Json }
  }
  /** Runs a job on `audio` to its end: its id and final status. */
  const runJob = async (apiKey: string | null, audio: Buffer, options: Json = {}): Promise<{ id: string; status: Json }> => {
    const r = await call("POST", "/recognition/uploads", apiKey, {})
    await fetch(r.json.upload_url, { method: "PUT", body: audio })
    const started = await call("POST", `/recognition/jobs/${r.json.job_id}/start`, apiKey, options)
    if (started.status !== 202) throw new Error(`start: ${started.status} ${JSON.stringify(started.json)}`)
    for (let i = 0; i < 1200; i++) {
      const s = await call("GET", `/recognition/jobs/${r.json.job_id}`, apiKey)
      if (["succeeded", "failed", "cancelled"].includes(s.json.state)) return { id: r.json.job_id as string, status: s.json }
      await new Promise((r) => setTimeout(r, 100))
    }
    throw new Error("job did not end")
  }
  return { call, runJob }
}

/** The spec's error body with `status` and, when given, `detail.status` = `code`. */
export const expectApiError = (t: Test, res: JsonAnswer, status: number, code?: string) => {
  t.equal(res.status, status, `${status} ${code ?? ""}: ${JSON.stringify(res.json).slice(0, 200)}`)
  t.type(res.json.detail?.message, "string")
  if (code !== undefined) t.equal(res.json.detail?.status, code)
}
