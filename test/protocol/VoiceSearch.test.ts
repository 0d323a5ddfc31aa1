/**
 * GET /v2/voices logic (protocol/VoiceSearch.ts) on a made-up catalogue: every filter, sorting,
 * paging through the tokens it issues, and the 400s. The HTTP route and the SDK's
 * voices.search() are exercised in ElevenLabsSdk.test.ts.
 */
import t from "tap"
import { ApiError } from "../../protocol/ApiError.ts"
import { searchVoices, type SearchableVoice, type SearchPage } from "../../protocol/VoiceSearch.ts"

type V = SearchableVoice<object>["json"]
const preset = (id: string, name: string, language: string, gender: string, accent: string): SearchableVoice<object> => ({
  json: { voice_id: id, name, category: "premade", description: `${name} speaks ${language}`, labels: { gender, accent, language } },
  language,
  createdAtUnix: 0
})
const clone = (id: string, name: string, language: string, createdAtUnix: number, labels: Record<string, string> = {}): SearchableVoice<object> => ({
  json: { voice_id: id, name, category: "cloned", description: null, labels },
  language,
  createdAtUnix
})

const catalogue = [
  preset("mari", "Mari", "et", "female", "estonian"),
  preset("kristjan", "Kristjan", "et", "male", "estonian"),
  preset("james-en", "James", "en", "male", "scottish"),
  preset("emma-en", "Emma", "en", "female", "american"),
  clone("vc_2", "Zed", "en", 2_000, { accent: "scottish" }),
  clone("vc_1", "Anna", "et", 1_000)
]

const page = (query: string) => {
  const result = searchVoices(catalogue, new URLSearchParams(query))
  if (result instanceof ApiError) throw new Error(`unexpected ${result.status}: ${result.message}`)
  return result as SearchPage<V>
}
const ids = (query: string) => page(query).voices.map((v) => v.voice_id)

t.test("defaults: catalogue order, ten per page, total and has_more", async (t) => {
  const p = page("")
  t.same(p.voices.map((v) => v.voice_id), ["mari", "kristjan", "james-en", "emma-en", "vc_2", "vc_1"])
  t.equal(p.total_count, 6)
  t.equal(p.has_more, false)
  t.equal(p.next_page_token, null)
})

t.test("filters", async (t) => {
  t.same(ids("voice_type=default"), ["mari", "kristjan", "james-en", "emma-en"])
  t.same(ids("voice_type=personal"), ["vc_2", "vc_1"])
  t.same(ids("voice_type=community"), [])
  t.same(ids("category=cloned"), ["vc_2", "vc_1"])
  t.same(ids("category=professional"), [])
  t.same(ids("gender=FEMALE"), ["mari", "emma-en"], "labels compare case-insensitively")
  t.same(ids("accent=scottish"), ["james-en", "vc_2"], "clones are filtered by their own labels")
  t.same(ids("language=en"), ["james-en", "emma-en", "vc_2"])
  t.same(ids("language=et&language=en&voice_type=personal"), ["vc_2", "vc_1"], "language is repeatable and ANDs with the rest")
  t.same(ids("voice_ids=mari&voice_ids=vc_1"), ["mari", "vc_1"])
  t.same(ids("search=scot"), ["james-en", "vc_2"], "search looks at label values")
  t.same(ids("search=speaks%20et"), ["mari", "kristjan"], "and at descriptions")
  t.same(ids("search=ann"), ["vc_1"], "and at names")
  t.same(ids("fine_tuning_state=draft&use_cases=news"), ids(""), "filters for data this server has not are ignored")
})

t.test("sorting", async (t) => {
  t.same(ids("sort=name"), ["vc_1", "emma-en", "james-en", "kristjan", "mari", "vc_2"])
  t.same(ids("sort=name&sort_direction=desc"), ["vc_2", "mari", "kristjan", "james-en", "emma-en", "vc_1"])
  t.same(ids("sort=created_at_unix&sort_direction=desc&voice_type=personal"), ["vc_2", "vc_1"])
})

t.test("paging follows next_page_token to the end, without gaps or repeats", async (t) => {
  const seen: Array<string> = []
  let token: string | null = null
  let pages = 0
  do {
    const p: SearchPage<V> = page(`page_size=4${token === null ? "" : `&next_page_token=${token}`}`)
    seen.push(...p.voices.map((v) => v.voice_id))
    t.equal(p.total_count, 6)
    token = p.next_page_token
    t.equal(p.has_more, token !== null)
    pages++
  } while (token !== null && pages < 10)
  t.equal(pages, 2)
  t.same(seen, ids(""))
})

t.test("malformed queries are 400 with a message", async (t) => {
  for (const query of ["page_size=0", "page_size=101", "page_size=abc", "next_page_token=garbage", "voice_type=friends", "category=robot", "sort=age", "sort_direction=up"]) {
    const result = searchVoices(catalogue, new URLSearchParams(query))
    t.ok(result instanceof ApiError && result.status === 400 && result.message.length > 10, `${query} → 400`)
  }
})
