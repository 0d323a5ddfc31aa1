/**
 * `GET /v2/voices`: the paged, filtered voice list that the ElevenLabs SDKs' `voices.search()`
 * calls (the SDKs now steer users there instead of `GET /v1/voices`). Beyond the SPEC; it only
 * reads what `GET /v1/voices` lists (presets, then the caller's clones), so it adds no state.
 *
 * Filters, all optional and combined with AND (ElevenLabs' semantics where they apply here):
 *  - `search`: case-insensitive substring of name, description, category or any label value;
 *  - `voice_type`: `default` = presets; `personal`, `non-default`, `non-community`, `saved` =
 *    the caller's clones; `community`, `workspace` = none (no shared library here);
 *  - `category`: `premade` or `cloned` (`generated`, `professional`: none);
 *  - `gender`, `age`, `accent`: equal (case-insensitive) to that label;
 *  - `language` (repeatable): the voice's language label (presets) or sample language (clones)
 *    is one of them;
 *  - `voice_ids` (repeatable): only these ids;
 *  - accepted and ignored (no such data here): fine_tuning_state, collection_id, use_cases,
 *    min_notice_period_days, include_custom_rates, include_live_moderated, high_quality.
 * Sort: `name` or `created_at_unix` (presets count as created at 0), `sort_direction` asc or
 * desc; without `sort`, catalogue order (presets, then clones oldest first).
 * Paging: `page_size` 1–100 (default 10); `next_page_token` is opaque (an offset).
 */
import { Schema } from "effect"
import { badRequest, type ApiError } from "./ApiError.ts"

export const VoicesSearchQuery = Schema.Struct({
  page_size: Schema.optional(Schema.String).annotate({ description: "1 to 100, default 10" }),
  next_page_token: Schema.optional(Schema.String).annotate({ description: "from the previous page" }),
  search: Schema.optional(Schema.String),
  sort: Schema.optional(Schema.String).annotate({ description: "name or created_at_unix" }),
  sort_direction: Schema.optional(Schema.String).annotate({ description: "asc or desc" }),
  voice_type: Schema.optional(Schema.String),
  category: Schema.optional(Schema.String),
  gender: Schema.optional(Schema.String),
  age: Schema.optional(Schema.String),
  accent: Schema.optional(Schema.String),
  language: Schema.optional(Schema.String).annotate({ description: "repeatable" }),
  voice_ids: Schema.optional(Schema.String).annotate({ description: "repeatable" }),
  include_total_count: Schema.optional(Schema.String)
}).annotate({ identifier: "VoicesSearchQuery" })

/** One voice as the search sees it: its JSON (SPEC 2.2 Voice) plus what filters and sorts need. */
export interface SearchableVoice<V> {
  readonly json: V & {
    readonly voice_id: string
    readonly name: string
    readonly category: string
    readonly description: string | null
    readonly labels: Readonly<Record<string, string>>
  }
  readonly language: string
  /** Seconds since the epoch; 0 for presets. */
  readonly createdAtUnix: number
}

export interface SearchPage<V> {
  readonly voices: ReadonlyArray<V>
  readonly has_more: boolean
  readonly total_count: number
  readonly next_page_token: string | null
}

const DEFAULT_PAGE_SIZE = 10
const MAX_PAGE_SIZE = 100
const CLONE_TYPES = new Set(["personal", "non-default", "non-community", "saved"])
const VOICE_TYPES = new Set([...CLONE_TYPES, "default", "community", "workspace"])
const CATEGORIES = new Set(["premade", "cloned", "generated", "professional"])

const pageToken = (offset: number) => Buffer.from(`o:${offset}`).toString("base64url")

const offsetOf = (token: string | null): number | ApiError => {
  if (token === null || token === "") return 0
  const match = /^o:(\d{1,9})$/.exec(Buffer.from(token, "base64url").toString("latin1"))
  return match === null ? badRequest("next_page_token is not one this server issued") : Number(match[1])
}

const lower = (s: string | null | undefined) => (s ?? "").trim().toLowerCase()

/** Filters, sorts and pages `voices` by the query; an ApiError (400) for a malformed one. */
export const searchVoices = <V>(voices: ReadonlyArray<SearchableVoice<V>>, query: URLSearchParams): SearchPage<V> | ApiError => {
  const sizeText = query.get("page_size")
  const pageSize = sizeText === null || sizeText === "" ? DEFAULT_PAGE_SIZE : Number(sizeText)
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > MAX_PAGE_SIZE) {
    return badRequest(`page_size must be an integer from 1 to ${MAX_PAGE_SIZE}, got ${sizeText}`)
  }
  const offset = offsetOf(query.get("next_page_token"))
  if (typeof offset !== "number") return offset
  const voiceType = lower(query.get("voice_type"))
  if (voiceType !== "" && !VOICE_TYPES.has(voiceType)) return badRequest(`unknown voice_type ${voiceType}; one of ${[...VOICE_TYPES].join(", ")}`)
  const category = lower(query.get("category"))
  if (category !== "" && !CATEGORIES.has(category)) return badRequest(`unknown category ${category}; one of ${[...CATEGORIES].join(", ")}`)
  const sort = lower(query.get("sort"))
  if (sort !== "" && sort !== "name" && sort !== "created_at_unix") return badRequest(`sort must be name or created_at_unix, got ${sort}`)
  const direction = lower(query.get("sort_direction")) || "asc"
  if (direction !== "asc" && direction !== "desc") return badRequest(`sort_direction must be asc or desc, got ${direction}`)

  const search = lower(query.get("search"))
  const labelFilters = (["gender", "age", "accent"] as const).flatMap((k) => (lower(query.get(k)) === "" ? [] : [[k, lower(query.get(k))] as const]))
  const languages = new Set(query.getAll("language").flatMap((l) => l.split(",")).map(lower).filter((l) => l !== ""))
  const ids = new Set(query.getAll("voice_ids").flatMap((l) => l.split(",")).map((s) => s.trim()).filter((s) => s !== ""))

  const matches = voices.filter(({ json, language }) => {
    const isClone = json.category === "cloned"
    if (voiceType === "default" && isClone) return false
    if (CLONE_TYPES.has(voiceType) && !isClone) return false
    if (voiceType === "community" || voiceType === "workspace") return false
    if (category !== "" && json.category !== category) return false
    if (ids.size > 0 && !ids.has(json.voice_id)) return false
    if (languages.size > 0 && !languages.has(lower(language))) return false
    for (const [label, wanted] of labelFilters) if (lower(json.labels[label]) !== wanted) return false
    if (search !== "") {
      const haystack = [json.name, json.description ?? "", json.category, ...Object.values(json.labels)].map(lower)
      if (!haystack.some((h) => h.includes(search))) return false
    }
    return true
  })
  const sorted = sort === ""
    ? matches
    : [...matches].sort((a, b) =>
      sort === "name"
        ? a.json.name.localeCompare(b.json.name) || a.json.voice_id.localeCompare(b.json.voice_id)
        : a.createdAtUnix - b.createdAtUnix || a.json.voice_id.localeCompare(b.json.voice_id)
    )
  const ordered = direction === "desc" ? [...sorted].reverse() : sorted
  const page = ordered.slice(offset, offset + pageSize)
  const hasMore = offset + pageSize < ordered.length
  return {
    voices: page.map((v) => v.json),
    has_more: hasMore,
    total_count: ordered.length,
    next_page_token: hasMore ? pageToken(offset + pageSize) : null
  }
}
