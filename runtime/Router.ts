/**
 * Matches a method and path against the route table. Static paths are one map lookup (the hot
 * path for `/api/v1/models` and friends); templated paths are compared segment by segment.
 * A path that exists under another method gives 405 with `Allow`, anything else 404; a
 * parameter holding a NUL character gives 400.
 */
import type { Route } from "../protocol/Http.ts"

export type Match<R> =
  | { readonly _tag: "Found"; readonly route: Route<R>; readonly params: Record<string, string> }
  | { readonly _tag: "MethodNotAllowed"; readonly allow: ReadonlyArray<string> }
  | { readonly _tag: "NotFound" }
  /** The path matched a route but a parameter cannot be an id (a NUL character). */
  | { readonly _tag: "BadParam"; readonly message: string }

interface Template<R> {
  readonly segments: ReadonlyArray<string | { readonly param: string }>
  readonly byMethod: Map<string, Route<R>>
}

export class Router<R> {
  private readonly statics = new Map<string, Map<string, Route<R>>>()
  private readonly templates: Array<Template<R>> = []

  constructor(readonly routes: ReadonlyArray<Route<R>>) {
    for (const route of routes) {
      const segments = route.path.split("/").slice(1).map((s) => {
        const m = /^\{(\w+)\}$/.exec(s)
        return m ? { param: m[1]! } : s
      })
      let byMethod: Map<string, Route<R>>
      if (segments.every((s) => typeof s === "string")) {
        byMethod = this.statics.get(route.path) ?? new Map()
        this.statics.set(route.path, byMethod)
      } else {
        let t = this.templates.find((x) => x.segments.map(segText).join("/") === segments.map(segText).join("/"))
        if (t === undefined) {
          t = { segments, byMethod: new Map() }
          this.templates.push(t)
        }
        byMethod = t.byMethod
      }
      if (byMethod.has(route.method)) throw new Error(`duplicate route ${route.method} ${route.path}`)
      byMethod.set(route.method, route)
    }
  }

  match(method: string, path: string): Match<R> {
    const normalized = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path
    const stat = this.statics.get(normalized)
    if (stat !== undefined) return pick(stat, method, {})
    const parts = normalized.split("/").slice(1)
    for (const t of this.templates) {
      if (t.segments.length !== parts.length) continue
      const params: Record<string, string> = {}
      let ok = true
      for (let i = 0; i < parts.length; i++) {
        const seg = t.segments[i]!
        const part = parts[i]!
        if (typeof seg === "string") {
          if (seg !== part) {
            ok = false
            break
          }
        } else {
          if (part.length === 0) {
            ok = false
            break
          }
          try {
            params[seg.param] = decodeURIComponent(part)
          } catch {
            ok = false
            break
          }
        }
      }
      if (ok) {
        // PostgreSQL text cannot hold NUL, and no id has one: refuse it here, once, for every
        // route, rather than let it reach a query as a driver error (a 500).
        for (const name in params) {
          if (params[name]!.includes("\u0000")) return { _tag: "BadParam", message: `path parameter ${name} contains a NUL character` }
        }
        return pick(t.byMethod, method, params)
      }
    }
    return { _tag: "NotFound" }
  }
}

const segText = (s: string | { readonly param: string }) => (typeof s === "string" ? s : "{}")

const pick = <R>(byMethod: Map<string, Route<R>>, method: string, params: Record<string, string>): Match<R> => {
  const route = byMethod.get(method) ?? (method === "HEAD" ? byMethod.get("GET") : undefined)
  if (route !== undefined) return { _tag: "Found", route, params }
  return { _tag: "MethodNotAllowed", allow: [...byMethod.keys()] }
}
