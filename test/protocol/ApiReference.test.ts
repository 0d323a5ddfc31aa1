/** The API reference renderer (protocol/site/ApiReference.ts): real document, hostile document, garbage. */
import t from "tap"
import { buildOpenApi } from "../../protocol/OpenApi.ts"
import type { Route } from "../../protocol/Http.ts"
import { speakerRoutes } from "../../protocol/routes/speakers.ts"
import { summaryRoutes } from "../../protocol/routes/summaries.ts"
import { systemRoutes } from "../../protocol/routes/system.ts"
import { transcriptRoutes } from "../../protocol/routes/transcripts.ts"
import { userRoutes } from "../../protocol/routes/user.ts"
import { makeModelList } from "../../protocol/schemas/Model.ts"
import { apiReferenceHtml, escapeHtml } from "../../protocol/site/ApiReference.ts"

const apiBase = "/api/v1"
const routes: ReadonlyArray<Route<any>> = [
  ...systemRoutes(apiBase, makeModelList([{ language_id: "en", name: "English" }])),
  ...userRoutes(apiBase),
  ...transcriptRoutes(apiBase),
  ...speakerRoutes({ apiBase, maxJsonBodyBytes: 65536 }),
  ...summaryRoutes({ apiBase, maxJsonBodyBytes: 65536 })
]
const realDoc = buildOpenApi(routes, { siteUrl: "http://localhost:8080", version: "test" })

/** Tag names in the output must all be ones the renderer writes itself. */
const allowedTags = new Set([
  "nav", "ul", "li", "a", "code", "span", "section", "h2", "h3", "h4", "p", "article", "div", "strong",
  "table", "thead", "tbody", "tr", "th", "td", "dl", "dt", "dd", "br"
])
const tagsIn = (html: string): Set<string> => new Set([...html.matchAll(/<\/?([A-Za-z][A-Za-z0-9-]*)/g)].map((m) => m[1]!.toLowerCase()))

t.test("the service's own document: every operation has an anchor and a table-of-contents link", async (t) => {
  const html = apiReferenceHtml(realDoc)
  const ids: Array<string> = []
  for (const item of Object.values(realDoc.paths as Record<string, Record<string, { operationId: string }>>)) {
    for (const op of Object.values(item)) ids.push(op.operationId)
  }
  t.ok(ids.length >= 10, `${ids.length} operations built in-process`)
  for (const id of ids) {
    t.ok(html.includes(`<article class="op method-`) && html.includes(`id="op-${id}"`), `anchor op-${id}`)
    t.ok(html.includes(`href="#op-${id}"`), `toc link to op-${id}`)
  }
  t.ok(html.startsWith(`<p class="api-info">`) && !/<(html|head|body)\b/.test(html), "a fragment, no document skeleton")
  t.match(html, /<nav class="toc">/)
  for (const tag of ["models", "meta", "user", "speakers"]) t.ok(html.includes(`<h2 id="tag-${tag}">${tag}</h2>`), `section ${tag}`)
  t.match(html, /<h3><code><span class="method method-get">GET<\/span> \/api\/v1\/user<\/code><\/h3>/)
  t.match(html, /<span class="method method-patch">PATCH<\/span> \/api\/v1\/recognition\/speakers\/\{id\}/)

  const article = (id: string) => html.slice(html.indexOf(`id="op-${id}"`), html.indexOf("</article>", html.indexOf(`id="op-${id}"`)))
  t.match(article("health"), /Who may call: anyone, no credential needed/, "public route")
  t.match(article("getUser"), /callers with a credential[\s\S]*xi-api-key[\s\S]*bearer/, "key route names both schemes")
  const rename = article("renameSpeaker")
  t.match(rename, /<table class="params">[\s\S]*<code>id<\/code><\/td><td>path<\/td><td>yes<\/td>/, "path parameter row")
  t.match(rename, /Request body \(required\)[\s\S]*<code>application\/json<\/code>/, "request body content type")
  t.match(rename, /<code>name<\/code><\/td><td><code>string<\/code><\/td><td>yes<\/td>/, "body property from a resolved $ref")
  t.match(rename, /<table class="responses">[\s\S]*<code>200<\/code>[\s\S]*<code>401<\/code><\/td><td>no valid credential/)
  for (const tag of tagsIn(html)) t.ok(allowedTags.has(tag), `only the renderer's own tags (${tag})`)
})

const injection = "<script>alert(1)</script>"
const hostile = {
  openapi: "3.1.0",
  info: { title: `API ${injection}`, version: "1\"><img src=x onerror=alert(2)>" },
  tags: [{ name: "things", description: `<b onmouseover="x">bold</b>` }],
  paths: {
    "/things/{thing_id}": {
      parameters: [{ name: "thing_id", in: "path", required: true, schema: { type: "string" }, description: "the <id>" }],
      post: {
        operationId: "makeThing",
        summary: injection,
        tags: ["things"],
        "x-scope": "things:write",
        "x-notes": { html: "<iframe>" },
        security: [{ "Key<i>": ["a&b"] }],
        parameters: [{ name: "verbose", in: "query", schema: { anyOf: [{ type: "boolean" }, { type: "null" }] } }],
        requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/Node" } } } },
        responses: { "200": { description: "the <thing>", content: { "application/json": { schema: { $ref: "#/components/schemas/Loop" } } } } }
      }
    },
    "/loops": {
      get: {
        operationId: "getLoop",
        tags: [`<svg onload=alert(3)>`],
        requestBody: { content: { "application/json": { schema: { $ref: "#/components/schemas/Loop" } } } },
        responses: { default: { $ref: "#/components/responses/Again" } }
      }
    }
  },
  components: {
    schemas: {
      // Node → child: Node → … and Node ↔ Pair: cycles through properties.
      Node: {
        type: "object",
        required: ["name"],
        properties: {
          name: { type: "string", description: injection },
          child: { $ref: "#/components/schemas/Node" },
          pair: { $ref: "#/components/schemas/Pair" },
          "<evil>": { type: "string", enum: ["<a>", "b"] }
        }
      },
      Pair: { type: "object", properties: { back: { $ref: "#/components/schemas/Node" } } },
      // A $ref that points at itself, and one that points nowhere.
      Loop: { $ref: "#/components/schemas/Loop" },
      Lost: { $ref: "#/components/schemas/Nowhere" }
    },
    responses: { Again: { $ref: "#/components/responses/Again" } },
    securitySchemes: { "Key<i>": { type: "apiKey", in: "header", name: "x-<key>" } }
  }
}

t.test("text from the document is escaped; $ref cycles terminate", async (t) => {
  const html = apiReferenceHtml(hostile)
  t.notOk(html.includes(injection), "the raw script tag never appears")
  t.ok(html.includes(escapeHtml(injection)), "the injection string appears escaped")
  t.ok(html.includes(`<p class="summary">&lt;script&gt;alert(1)&lt;/script&gt;</p>`), "the summary, escaped")
  for (const tag of tagsIn(html)) t.ok(allowedTags.has(tag), `only the renderer's own tags (${tag})`)
  const attributes = new Set([...html.matchAll(/<[a-z0-9]+((?:\s+[a-z-]+="[^"<>]*")*)>/g)]
    .flatMap((m) => [...m[1]!.matchAll(/([a-z-]+)=/g)].map((a) => a[1]!)))
  t.same([...attributes].sort(), ["class", "href", "id"], "no attribute but class, id and href (no onerror, no onload)")
  t.notOk(/<[a-z0-9]+\s[^>]*\bon\w+=/i.test(html), "no event-handler attribute inside any tag")
  t.ok(html.includes(`id="op-makeThing"`) && html.includes(`id="op-getLoop"`), "every operationId has an anchor")
  t.ok(html.includes(`<h2 id="tag-_svg_onload_alert_3__">&lt;svg onload=alert(3)&gt;</h2>`), "tag ids are sanitized, names escaped")
  t.match(html, /<code>thing_id<\/code><\/td><td>path<\/td><td>yes<\/td><td><code>string<\/code><\/td><td>the &lt;id&gt;<\/td>/,
    "path-level parameter")
  t.match(html, /<code>verbose<\/code><\/td><td>query<\/td><td>no<\/td><td><code>boolean \| null<\/code>/, "query parameter")
  t.match(html, /<code>name<\/code><\/td><td><code>string<\/code><\/td><td>yes<\/td>/, "JSON body property, required")
  t.ok(html.includes("<code>pair.back</code>"), "one nested level through a $ref")
  t.notOk(html.includes("pair.back.") || html.includes("child.child."), "no deeper than that: the cycle stops")
  t.ok(html.includes("<code>&lt;evil&gt;</code>") && html.includes("one of: &quot;&lt;a&gt;&quot;, &quot;b&quot;"), "enum values escaped")
  t.ok(html.includes("<code>x-scope</code></dt><dd>things:write</dd>"), "x- fields are shown")
  t.ok(html.includes("<strong>Key&lt;i&gt;</strong>: API key in header <code>x-&lt;key&gt;</code>, scopes <code>a&amp;b</code>"), "security")
  t.match(html, /<code>default<\/code><\/td><td><\/td>/, "a self-referencing response renders empty")
})

t.test("garbage input returns a string and never throws", async (t) => {
  const selfish: Record<string, unknown> = { operationId: "selfish", responses: {} }
  selfish["x-self"] = selfish
  const inputs: ReadonlyArray<unknown> = [
    null, undefined, 42, "openapi", [], [1, 2], true, {}, { paths: 5 }, { paths: [] }, { paths: null },
    { paths: { "/a": null, "/b": 7, "/c": { get: 5, post: null, put: [] } } },
    { paths: { "/d": { get: { operationId: 9, tags: "x", parameters: 5, requestBody: 3, responses: [1], security: "x" } } } },
    { paths: { "/e": { get: { parameters: [null, 5, { name: {}, in: [] }], requestBody: { content: { "a/b": 5, "c/d": { schema: 7 } } } } } } },
    { paths: { "/f": { delete: { security: [null, 5, { A: 5 }], responses: { "204": null, "404": { description: {} } } } } } },
    { paths: { "/g": { patch: selfish } }, components: 5, tags: [null, 5, { name: 7 }] },
    { paths: { "/h": { get: { requestBody: { content: { "application/json": { schema: { $ref: 5, properties: [] } } } } } } } },
    { paths: { "/i": { get: { requestBody: { content: { "application/json": { schema: { $ref: "#/a/~1/../b" } } } } } } } }
  ]
  for (const input of inputs) {
    let out: unknown
    t.doesNotThrow(() => {
      out = apiReferenceHtml(input)
    }, `input ${typeof input}`)
    t.type(out, "string")
  }
  t.match(apiReferenceHtml(null), /No operations are described/)
  t.match(apiReferenceHtml({ paths: 5 }), /No operations are described/)
  const odd = apiReferenceHtml(inputs[13])
  t.match(odd, /id="op-get-_e"/, "an operation without a usable operationId still gets an anchor")
  t.match(apiReferenceHtml(inputs[15]), /<dd>\[unprintable\]<\/dd>/, "a cyclic x- value is not printed")
})

t.test("escapeHtml covers the five characters", async (t) => {
  t.equal(escapeHtml(`&<>"'`), "&amp;&lt;&gt;&quot;&#39;")
  t.equal(escapeHtml("plain"), "plain")
})
