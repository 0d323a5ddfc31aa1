/**
 * Language codes for translation: callers write ISO 639-1 (`en`, `es`) or the engines' own
 * ISO 639-3 names (`eng`, `spa`, as in Apertium's `eng-spa`); inside the service every language
 * is its ISO 639-3 code. A region or script subtag (`en-US`, `pt_BR`, `zh-Hant`) is accepted and
 * ignored: no engine here translates into a regional variant on request.
 *
 * The table lists the languages a chat model can be asked for by name; Apertium's pairs use a
 * few of them. Codes outside it are unknown (400), not guessed.
 */

/** ISO 639-3 → [ISO 639-1, English name]. */
const LANGUAGES: Readonly<Record<string, readonly [string, string]>> = {
  ara: ["ar", "Arabic"],
  bul: ["bg", "Bulgarian"],
  cat: ["ca", "Catalan"],
  ces: ["cs", "Czech"],
  dan: ["da", "Danish"],
  deu: ["de", "German"],
  ell: ["el", "Greek"],
  eng: ["en", "English"],
  epo: ["eo", "Esperanto"],
  est: ["et", "Estonian"],
  eus: ["eu", "Basque"],
  fin: ["fi", "Finnish"],
  fra: ["fr", "French"],
  glg: ["gl", "Galician"],
  heb: ["he", "Hebrew"],
  hin: ["hi", "Hindi"],
  hrv: ["hr", "Croatian"],
  hun: ["hu", "Hungarian"],
  ind: ["id", "Indonesian"],
  ita: ["it", "Italian"],
  jpn: ["ja", "Japanese"],
  kor: ["ko", "Korean"],
  lit: ["lt", "Lithuanian"],
  lav: ["lv", "Latvian"],
  nld: ["nl", "Dutch"],
  nob: ["nb", "Norwegian Bokmål"],
  oci: ["oc", "Occitan"],
  pol: ["pl", "Polish"],
  por: ["pt", "Portuguese"],
  ron: ["ro", "Romanian"],
  rus: ["ru", "Russian"],
  slk: ["sk", "Slovak"],
  slv: ["sl", "Slovenian"],
  spa: ["es", "Spanish"],
  srp: ["sr", "Serbian"],
  swe: ["sv", "Swedish"],
  tha: ["th", "Thai"],
  tur: ["tr", "Turkish"],
  ukr: ["uk", "Ukrainian"],
  vie: ["vi", "Vietnamese"],
  zho: ["zh", "Chinese"]
}

/** ISO 639-2/B spellings some callers still use, mapped to 639-3. */
const BIBLIOGRAPHIC: Readonly<Record<string, string>> = {
  cze: "ces",
  ger: "deu",
  gre: "ell",
  baq: "eus",
  fre: "fra",
  dut: "nld",
  rum: "ron",
  slo: "slk",
  chi: "zho"
}

const byIso1 = new Map(Object.entries(LANGUAGES).map(([iso3, [iso1]]) => [iso1, iso3]))

/** The ISO 639-3 code of `code` (`en`, `EN-us`, `eng`, `ger`), or undefined when unknown. */
export const normalizeLanguage = (code: string): string | undefined => {
  const base = code.trim().toLowerCase().split(/[-_]/u)[0] ?? ""
  if (base.length === 2) return byIso1.get(base)
  if (base.length === 3) return LANGUAGES[base] !== undefined ? base : BIBLIOGRAPHIC[base]
  return undefined
}

/** The ISO 639-1 spelling of an ISO 639-3 code, when it has one here. */
export const iso1Of = (iso3: string): string | undefined => LANGUAGES[iso3]?.[0]

/** The English name of an ISO 639-3 code (for a chat model's instructions). */
export const languageName = (iso3: string): string => LANGUAGES[iso3]?.[1] ?? iso3

/** Every ISO 639-3 code in the table, sorted. */
export const knownLanguages = (): ReadonlyArray<string> => Object.keys(LANGUAGES).sort()
