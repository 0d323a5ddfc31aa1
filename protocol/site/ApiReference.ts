/**
 * The service's OpenAPI 3.1 document (protocol/OpenApi.ts) as an HTML fragment: a table of contents
 * by tag, then per operation who may call it, parameters, request body and responses. Everything
 * from the document is escaped; odd input renders what is there. Only class names, no styles.
 */

type Obj = Record<string, unknown>

const isObj = (v: unknown): v is Obj => typeof v === "object" && v !== null && !Array.isArray(v)
const asObj = (v: unknown): Obj => (isObj(v) ? v : {})
const asArr = (v: unknown): ReadonlyArray<unknown> => (Array.isArray(v) ? v : [])
const text = (v: unknown): string | undefined =>
  typeof v === "string" ? v : typeof v === "number" || typeof v === "boolean" ? String(v) : undefined

const entities: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;" }

export const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => entities[c] ?? c)

/** Escaped text of a scalar, or "" for anything else. */
const e = (v: unknown): string => escapeHtml(text(v) ?? "")

/** A safe id fragment: the id itself when it is already tame (real operationIds are camelCase). */
const idPart = (s: string): string => s.replace(/[^A-Za-z0-9_.:-]/g, "_") || "_"
const METHODS = ["get", "put", "post", "delete", "patch", "head", "options", "trace"] as const

const jsonText = (v: unknown): string => {
  try { const s = JSON.stringify(v) ?? ""; return s.length > 200 ? `${s.slice(0, 200)}…` : s } catch { return "[unprintable]" }
}

/** Follows a local `#/...` JSON pointer; undefined when it leads nowhere. */
const lookup = (doc: Obj, ref: string): unknown => {
  if (!ref.startsWith("#/")) return undefined
  let node: unknown = doc
  for (const raw of ref.slice(2).split("/")) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~")
    if (!isObj(node) || !Object.hasOwn(node, key)) return undefined
    node = node[key]
  }
  return node
}

const refName = (ref: string): string => ref.slice(ref.lastIndexOf("/") + 1)

/** Resolves a chain of `$ref`s (at most a few hops, never one already in `seen`). */
const deref = (doc: Obj, v: unknown, seen: ReadonlySet<string>): { node: Obj | undefined; seen: Set<string> } => {
  const trail = new Set(seen)
  let node = v
  for (let hops = 0; isObj(node) && typeof node.$ref === "string"; hops++) {
    if (hops >= 4 || trail.has(node.$ref)) return { node: undefined, seen: trail }
    trail.add(node.$ref)
    node = lookup(doc, node.$ref)
  }
  return { node: isObj(node) ? node : undefined, seen: trail }
}

/** A short type label: `string`, `Voice`, `string | null`, `Model[]`. */
const typeLabel = (s: unknown, depth = 0): string => {
  if (!isObj(s) || depth > 4) return ""
  if (typeof s.$ref === "string") return refName(s.$ref)
  if (Array.isArray(s.type)) return s.type.map((t) => text(t) ?? "?").join(" | ")
  if (s.type === "array") return `${typeLabel(s.items, depth + 1) || "any"}[]`
  const format = text(s.format)
  if (typeof s.type === "string") return format !== undefined ? `${s.type} (${format})` : s.type
  for (const [key, sep] of [["anyOf", " | "], ["oneOf", " | "], ["allOf", " & "]] as const) {
    const parts = new Set(asArr(s[key]).map((x) => typeLabel(x, depth + 1) || "any"))
    if (parts.size > 0) return [...parts].join(sep)
  }
  if (s.const !== undefined) return `const ${jsonText(s.const)}`
  return Array.isArray(s.enum) ? "enum" : ""
}

/** The description of a schema, with its allowed values when it is an enum. */
const schemaNote = (s: unknown): string => {
  const o = asObj(s)
  const description = text(o.description)
  const parts = description !== undefined && description !== "" ? [description] : []
  if (Array.isArray(o.enum)) parts.push(`one of: ${o.enum.map(jsonText).join(", ")}`)
  if (o.default !== undefined) parts.push(`default ${jsonText(o.default)}`)
  return escapeHtml(parts.join("; "))
}

const table = (cls: string, head: ReadonlyArray<string>, rows: ReadonlyArray<string>): string =>
  rows.length === 0
    ? ""
    : `<table class="${cls}"><thead><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr></thead><tbody>${rows.join("")}</tbody></table>`

/** Rows for an object schema's properties; one nested level (`parent.child`) for object-typed ones. */
const propertyRows = (doc: Obj, schema: Obj, seen: ReadonlySet<string>, prefix: string, level: number): Array<string> => {
  const required = new Set(asArr(schema.required).map((r) => text(r)))
  const rows: Array<string> = []
  for (const [name, raw] of Object.entries(asObj(schema.properties))) {
    const { node, seen: trail } = deref(doc, raw, seen)
    const note = schemaNote(raw) || schemaNote(node)
    rows.push(`<tr><td><code>${escapeHtml(prefix + name)}</code></td><td><code>${escapeHtml(typeLabel(raw))}</code></td>`
      + `<td>${required.has(name) ? "yes" : "no"}</td><td>${note}</td></tr>`)
    // A nullable object (`anyOf: [{$ref}, {type: "null"}]`) expands its one non-null member.
    const alts = asArr(node?.anyOf ?? node?.oneOf).filter((x) => !(isObj(x) && x.type === "null"))
    const inner = isObj(node?.properties) ? { node, seen: trail } : alts.length === 1 ? deref(doc, alts[0], trail) : undefined
    if (level < 1 && inner?.node !== undefined && isObj(inner.node.properties) && inner.node !== schema) {
      rows.push(...propertyRows(doc, inner.node, inner.seen, `${prefix}${name}.`, level + 1))
    }
  }
  return rows
}

const describeScheme = (doc: Obj, name: string, scopes: ReadonlyArray<unknown>): string => {
  const scheme = asObj(asObj(asObj(doc.components).securitySchemes)[name])
  let how = ""
  if (scheme.type === "apiKey") how = `API key in ${e(scheme.in)} <code>${e(scheme.name)}</code>`
  else if (scheme.type === "http") how = `HTTP ${e(scheme.scheme)} token`
  else if (text(scheme.type) !== undefined) how = e(scheme.type)
  const desc = text(scheme.description)
  if (desc !== undefined) how += how === "" ? escapeHtml(desc) : ` (${escapeHtml(desc)})`
  const scopeList = scopes.map(text).filter((s): s is string => s !== undefined)
  const scopeText = scopeList.length > 0 ? `, scopes ${scopeList.map((s) => `<code>${escapeHtml(s)}</code>`).join(", ")}` : ""
  return `<strong>${escapeHtml(name)}</strong>${how === "" ? "" : `: ${how}`}${scopeText}`
}

/** Who may call: from the operation's `security`, else the document's. */
const authHtml = (doc: Obj, op: Obj): string => {
  const security = op.security !== undefined ? op.security : doc.security
  if (!Array.isArray(security)) return `<p class="auth">Who may call: not stated.</p>`
  if (security.length === 0) return `<p class="auth">Who may call: anyone, no credential needed.</p>`
  const anonymous = security.some((req) => isObj(req) && Object.keys(req).length === 0)
  const options = security.filter((req) => isObj(req) && Object.keys(req).length > 0).map((req) =>
    Object.entries(asObj(req)).map(([name, scopes]) => describeScheme(doc, name, asArr(scopes))).join(" and ")
  )
  const list = options.length > 0 ? `<ul>${options.map((o) => `<li>${o}</li>`).join("")}</ul>` : ""
  const lead = anonymous ? "anyone; a credential is optional. Accepted credentials, any one of:" : "callers with a credential, any one of:"
  return `<div class="auth"><p>Who may call: ${lead}</p>${list}</div>`
}

const extensionsHtml = (op: Obj): string => {
  const rows = Object.entries(op).filter(([k]) => k.startsWith("x-"))
    .map(([k, v]) => `<dt><code>${escapeHtml(k)}</code></dt><dd>${escapeHtml(text(v) ?? jsonText(v))}</dd>`)
  return rows.length > 0 ? `<dl class="extensions">${rows.join("")}</dl>` : ""
}

const paramsHtml = (doc: Obj, pathItem: Obj, op: Obj): string => {
  const byKey = new Map<string, Obj>()
  for (const raw of [...asArr(pathItem.parameters), ...asArr(op.parameters)]) {
    const p = deref(doc, raw, new Set()).node
    if (p !== undefined) byKey.set(`${text(p.in)}:${text(p.name)}`, p)
  }
  const rows = [...byKey.values()].map((p) => {
    const schema = deref(doc, p.schema, new Set()).node
    const note = text(p.description) !== undefined ? e(p.description) : schemaNote(schema ?? p.schema)
    return `<tr><td><code>${e(p.name)}</code></td><td>${e(p.in)}</td><td>${p.required === true ? "yes" : "no"}</td>`
      + `<td><code>${escapeHtml(typeLabel(p.schema))}</code></td><td>${note}</td></tr>`
  })
  const t = table("params", ["Name", "In", "Required", "Type", "Description"], rows)
  return t === "" ? "" : `<h4>Parameters</h4>${t}`
}

const bodyHtml = (doc: Obj, op: Obj): string => {
  const body = deref(doc, op.requestBody, new Set()).node
  if (body === undefined) return ""
  const parts = [`<h4>Request body${body.required === true ? " (required)" : " (optional)"}</h4>`]
  if (text(body.description) !== undefined) parts.push(`<p>${e(body.description)}</p>`)
  for (const [type, media] of Object.entries(asObj(body.content))) {
    const raw = asObj(media).schema
    const { node, seen } = deref(doc, raw, new Set())
    const label = typeLabel(raw)
    parts.push(`<p><code>${escapeHtml(type)}</code>${label !== "" ? ` — <code>${escapeHtml(label)}</code>` : ""}</p>`)
    if (node === undefined) continue
    const note = schemaNote(node)
    if (note !== "") parts.push(`<p>${note}</p>`)
    const rows = propertyRows(doc, node, seen, "", 0)
    parts.push(table("params", ["Field", "Type", "Required", "Description"], rows))
  }
  return parts.join("")
}

const responsesHtml = (doc: Obj, op: Obj): string => {
  const rows = Object.entries(asObj(op.responses)).sort(([a], [b]) => a.localeCompare(b)).map(([status, raw]) => {
    const r = deref(doc, raw, new Set()).node ?? {}
    const content = Object.entries(asObj(r.content)).map(([type, media]) => {
      const label = typeLabel(asObj(media).schema)
      return `<code>${escapeHtml(type)}</code>${label !== "" ? ` <code>${escapeHtml(label)}</code>` : ""}`
    })
    return `<tr><td><code>${escapeHtml(status)}</code></td><td>${e(r.description)}</td><td>${content.join("<br>")}</td></tr>`
  })
  const t = table("responses", ["Status", "Description", "Content"], rows)
  return t === "" ? "" : `<h4>Responses</h4>${t}`
}

interface Operation { readonly id: string; readonly method: string; readonly path: string; readonly op: Obj; readonly pathItem: Obj }

const render = (input: unknown): string => {
  const doc = asObj(input)
  const groups = new Map<string, Array<Operation>>()
  for (const tag of asArr(doc.tags)) {
    const name = text(asObj(tag).name)
    if (name !== undefined) groups.set(name, [])
  }
  const usedIds = new Set<string>()
  for (const [path, rawItem] of Object.entries(asObj(doc.paths))) {
    const pathItem = asObj(rawItem)
    for (const method of METHODS) {
      if (!isObj(pathItem[method])) continue
      const op = asObj(pathItem[method])
      const base = `op-${idPart(text(op.operationId) ?? `${method}-${path}`)}`
      let id = base
      for (let n = 2; usedIds.has(id); n++) id = `${base}-${n}`
      usedIds.add(id)
      const tag = text(asArr(op.tags)[0]) ?? "other"
      const list = groups.get(tag) ?? []
      list.push({ id, method, path, op, pathItem })
      groups.set(tag, list)
    }
  }
  const info = asObj(doc.info)
  const version = text(info.version) !== undefined ? ` version ${e(info.version)}` : ""
  const head = text(info.title) !== undefined ? `<p class="api-info"><strong>${e(info.title)}</strong>${version}</p>` : ""
  const filled = [...groups].filter(([, ops]) => ops.length > 0)
  if (filled.length === 0) return `${head}<p class="empty">No operations are described.</p>`
  const sig = (o: Operation) =>
    `<code><span class="method method-${o.method}">${o.method.toUpperCase()}</span> ${escapeHtml(o.path)}</code>`
  const toc = filled.map(([tag, ops]) =>
    `<li><a href="#tag-${escapeHtml(idPart(tag))}">${escapeHtml(tag)}</a><ul>`
    + ops.map((o) => `<li><a href="#${escapeHtml(o.id)}">${sig(o)}</a>${text(o.op.summary) !== undefined ? ` ${e(o.op.summary)}` : ""}</li>`).join("")
    + `</ul></li>`
  ).join("")
  const tagNotes = new Map(asArr(doc.tags).map((t) => [text(asObj(t).name), text(asObj(t).description)] as const))
  const sections = filled.map(([tag, ops]) => {
    const note = tagNotes.get(tag)
    return `<section class="tag"><h2 id="tag-${escapeHtml(idPart(tag))}">${escapeHtml(tag)}</h2>`
      + (note !== undefined ? `<p>${escapeHtml(note)}</p>` : "")
      + ops.map((o) =>
        `<article class="op method-${o.method}" id="${escapeHtml(o.id)}"><h3>${sig(o)}</h3>`
        + (text(o.op.summary) !== undefined ? `<p class="summary">${e(o.op.summary)}</p>` : "")
        + (text(o.op.description) !== undefined ? `<p class="description">${e(o.op.description)}</p>` : "")
        + (o.op.deprecated === true ? `<p class="deprecated">Deprecated.</p>` : "")
        + authHtml(doc, o.op) + extensionsHtml(o.op) + paramsHtml(doc, o.pathItem, o.op) + bodyHtml(doc, o.op)
        + responsesHtml(doc, o.op) + `</article>`
      ).join("")
      + `</section>`
  }).join("")
  return `${head}<nav class="toc"><ul>${toc}</ul></nav>${sections}`
}

/** The OpenAPI document as an HTML fragment (goes inside a page's <main>). */
export const apiReferenceHtml = (doc: unknown): string => {
  try {
    return render(doc)
  } catch {
    return `<p class="error">The API description could not be rendered.</p>`
  }
}
