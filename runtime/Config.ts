/**
 * Every setting of the service, read once at start-up through Effect `Config`.
 *
 * Each entry names its environment variable, its default and a one-line description; the README's
 * configuration table is checked against `settingsTable` by a test, so the two cannot drift.
 * All entries are parsed even when an earlier one fails, so a bad deployment sees every mistake
 * in one start-up message instead of one per restart.
 */
import { Cause, Config, ConfigProvider, Context, Effect, Layer, Option, Redacted } from "effect"
import * as os from "node:os"
import * as path from "node:path"
import { POCKETSPHINX_DEFAULTS } from "../engines/asr/PocketSphinxAsr.ts"
import { speakerModelProfile } from "../engines/speaker/SpeakerModel.ts"
import { languageInfo, resolveLanguage } from "../engines/tts/Voices.ts"

const mib = 1024 * 1024


/** A setting with a parser and an optional range check whose message names the bound. */
interface Setting<A> {
  readonly env: string
  readonly doc: string
  readonly defaultText: string
  readonly config: Config.Config<A>
  readonly check?: (a: A) => string | undefined
}

const intIn = (name: string, fallback: number, min: number, max: number) => ({
  config: Config.Int(name).pipe(Config.withDefault(fallback)),
  check: (n: number) => (n >= min && n <= max ? undefined : `must be an integer from ${min} to ${max}, got ${n}`)
})

const setting = <A>(
  env: string,
  doc: string,
  defaultText: string,
  parse: Config.Config<A> | { config: Config.Config<A>; check: (a: A) => string | undefined }
): Setting<A> => (Config.isConfig(parse) ? { env, doc, defaultText, config: parse } : { env, doc, defaultText, ...parse })

/** WS_DEFAULT_LANGUAGE as written ("preset", "EN", "English") → "preset" or a catalogue code; anything else as it was, for the check. */
const sessionLanguage = (value: string): string => {
  const v = value.trim().toLowerCase()
  return v === "preset" ? v : resolveLanguage(v) ?? value
}

const logLevels = ["trace", "debug", "info", "warn", "error", "fatal", "none"] as const
export type LogLevelName = (typeof logLevels)[number]

const cpuCount = Math.max(1, os.availableParallelism?.() ?? os.cpus().length)

/** The table itself; order is the README order. */
export const settings = {
  port: setting("PORT", "TCP port for HTTP and WebSocket traffic (0 picks a free port)", "8080", intIn("PORT", 8080, 0, 65535)),
  host: setting("HOST", "Interface to listen on", "0.0.0.0", Config.String("HOST").pipe(Config.withDefault("0.0.0.0"))),
  siteUrl: setting("SITE_URL", "Public root URL of the site (discovery documents, OAuth, preview URLs); the API is at SITE_URL/api/v1", "http://localhost:PORT", Config.option(Config.URL("SITE_URL"))),
  dataDir: setting("DATA_DIR", "Directory for the embedded database, blobs and temporary uploads", "./data", Config.String("DATA_DIR").pipe(Config.withDefault("./data"))),
  databaseUrl: setting("DATABASE_URL", "PostgreSQL URL; when unset an embedded PGlite database under DATA_DIR/pglite is used", "(unset: embedded)", Config.option(Config.Redacted("DATABASE_URL"))),
  databaseResponseTimeoutS: setting("DATABASE_RESPONSE_TIMEOUT_S", "PostgreSQL over plain TCP: a connection that sent a statement and heard nothing back for this long is closed and the request fails with 503 database_unavailable (a peer gone silent would otherwise hold it until TCP gives up); keep it above the slowest query, s (0: no bound)", "15", intIn("DATABASE_RESPONSE_TIMEOUT_S", 15, 0, 3600)),
  workers: setting("WORKERS", "Inference worker threads in the pool", "number of CPUs", intIn("WORKERS", cpuCount, 1, 256)),
  workerNice: setting("WORKER_NICE", "How many nice steps the inference worker threads (Linux) and the ffmpeg and Apertium processes run below the main thread, which then gets a core ahead of them when it wakes to admit a request or write audio (0: the same priority)", "10", intIn("WORKER_NICE", 10, 0, 19)),
  poolMaxQueue: setting("POOL_MAX_QUEUE", "Tasks that may wait for a worker before new work is refused with 503", "512", intIn("POOL_MAX_QUEUE", 512, 1, 1_000_000)),
  maxJsonBodyBytes: setting("MAX_JSON_BODY_BYTES", "Largest JSON request body, bytes", String(mib), intIn("MAX_JSON_BODY_BYTES", mib, 1024, 64 * mib)),
  logLevel: setting("LOG_LEVEL", `Log level: ${logLevels.join(", ")}; debug also writes one line per HTTP request (method, path, route, status, ms, request id)`, "info", Config.Literals(logLevels, "LOG_LEVEL").pipe(Config.withDefault("info" as const))),
  shutdownGraceMs: setting("SHUTDOWN_GRACE_MS", "After SIGTERM, how long in-flight requests and streams may run before they are cut, ms", "10000", intIn("SHUTDOWN_GRACE_MS", 10_000, 0, 600_000)),
  speakerEmbeddingDir: setting("SPEAKER_EMBEDDING_DIR", "Directory of a neural speaker embedding (an ONNX model and speaker-embedding.json, see README); unset: the built-in classical embedding", "(unset)", {
    config: Config.option(Config.String("SPEAKER_EMBEDDING_DIR")),
    check: (dir) => {
      if (Option.isNone(dir)) return undefined
      try {
        speakerModelProfile(dir.value)
        return undefined
      } catch (e) {
        return e instanceof Error ? e.message : String(e)
      }
    }
  }),
  pocketsphinxLibrary: setting("POCKETSPHINX_LIBRARY", "Speech-to-text: dlopen name or path of PocketSphinx's library (Debian libpocketsphinx3); when it does not load, speech-to-text answers 502 engine_unavailable and the rest of the service runs", POCKETSPHINX_DEFAULTS.libraryPath, Config.String("POCKETSPHINX_LIBRARY").pipe(Config.withDefault(POCKETSPHINX_DEFAULTS.libraryPath))),
  pocketsphinxModelDir: setting("POCKETSPHINX_MODEL_DIR", "Speech-to-text: directory of PocketSphinx's US English model: en-us/, en-us.lm.bin, cmudict-en-us.dict (Debian pocketsphinx-en-us)", POCKETSPHINX_DEFAULTS.modelDirectory, Config.String("POCKETSPHINX_MODEL_DIR").pipe(Config.withDefault(POCKETSPHINX_DEFAULTS.modelDirectory))),
  sttModelIdleReleaseS: setting("STT_MODEL_IDLE_RELEASE_S", "Speech-to-text models (PocketSphinx decoder ~90 MB, Silero VAD ~20 MB, per worker thread that used them) are given back after this long without use and load again on the next request (PocketSphinx ~0.6 s); 0 keeps them loaded, s", "60", intIn("STT_MODEL_IDLE_RELEASE_S", 60, 0, 86400)),
  sttSessionsPerWorker: setting("STT_SESSIONS_PER_WORKER", "Realtime speech-to-text sessions one worker thread hosts at most; past WORKERS times this, new sessions are refused as busy. A session holds a PocketSphinx decoder (~97 MB) only while an utterance runs, and one stream costs ~0.25-0.5 of a core (bench/sttStreamingRtf.ts)", "4", intIn("STT_SESSIONS_PER_WORKER", 4, 1, 1000)),
  sttRealtimeIdleS: setting("STT_REALTIME_IDLE_S", "A realtime speech-to-text session that sends no audio this long ends with insufficient_audio_activity (it holds one of the few recognizer places), seconds", "30", intIn("STT_REALTIME_IDLE_S", 30, 1, 3600)),
  sttRealtimeMaxUtteranceS: setting("STT_REALTIME_MAX_UTTERANCE_S", "Audio a realtime speech-to-text session may send without a commit before the service commits it by itself, seconds (a commit decodes its utterance again as a whole, holding a worker thread about a tenth of its length)", "20", intIn("STT_REALTIME_MAX_UTTERANCE_S", 20, 1, 120)),
  sttRealtimeMaxSessionS: setting("STT_REALTIME_MAX_SESSION_S", "Longest realtime speech-to-text session (GET /v1/speech-to-text/realtime), seconds; past it the session gets session_time_limit_exceeded and is closed", "3600", intIn("STT_REALTIME_MAX_SESSION_S", 3600, 1, 86_400)),
  piperVoicesDir: setting("PIPER_VOICES_DIR", "Directory of Piper voices (*.onnx + *.onnx.json); unset: Piper off", "(unset)", Config.option(Config.String("PIPER_VOICES_DIR"))),
  wsEnabled: setting("WS_ENABLED", "WebSocket text-to-speech sessions (stream-input, multi-stream-input); false answers their upgrades with 503", "true", Config.Boolean("WS_ENABLED").pipe(Config.withDefault(true))),
  wsDefaultLanguage: setting("WS_DEFAULT_LANGUAGE", "Language of a WebSocket session that sends no language: an ISO 639-1 code (the spec's Estonian by default; every preset speaks it with its own timbre), or preset (each preset's own language, e.g. English for emma-en: what LiveKit and Pipecat agents, which send none, expect)", "et", {
    config: Config.String("WS_DEFAULT_LANGUAGE").pipe(Config.withDefault("et"), Config.map(sessionLanguage)),
    check: (v) => (v === "preset" || languageInfo(v) !== undefined ? undefined : `must be preset or a language of the catalogue (ISO 639-1 code or English name), got "${v}"`)
  }),
  wsIdleTimeoutS: setting("WS_IDLE_TIMEOUT_S", "A WebSocket session with no inbound frame, no frame sent and no synthesis running for this long is closed with 1011, s", "60", intIn("WS_IDLE_TIMEOUT_S", 60, 1, 3600)),
  ffmpegPath: setting("FFMPEG_PATH", "The ffmpeg that decodes uploads; unset: the system's on PATH (Debian's ffmpeg package, with security updates), else npm's 2018 static build (start-up log and /readyz warn about it)", "(unset)", Config.option(Config.String("FFMPEG_PATH"))),
  sttMaxConcurrentDecodes: setting("STT_MAX_CONCURRENT_DECODES", "Speech-to-text files decoded (ffmpeg) at once; four times as many more may wait, past that requests get 503 server_busy", "2", intIn("STT_MAX_CONCURRENT_DECODES", 2, 1, 256)),
  urlFetchAllowPrivate: setting("URL_FETCH_ALLOW_PRIVATE", "Let speech-to-text fetch source URLs on private and loopback addresses (tests, private deployments)", "false", Config.Boolean("URL_FETCH_ALLOW_PRIVATE").pipe(Config.withDefault(false))),
  urlFetchCaFile: setting("URL_FETCH_CA_FILE", "PEM file of extra CA certificates trusted when fetching source URLs", "(unset)", Config.option(Config.String("URL_FETCH_CA_FILE"))),
  initialCredits: setting("INITIAL_CREDITS", "Credits given to a user created without an explicit amount", "10000", intIn("INITIAL_CREDITS", 10_000, 0, Number.MAX_SAFE_INTEGER)),
  instanceHeartbeatS: setting("INSTANCE_HEARTBEAT_S", "PostgreSQL: how often each instance records that it is alive and gives back the credits reserved by dead instances, s", "10", intIn("INSTANCE_HEARTBEAT_S", 10, 1, 3600)),
  instanceStaleS: setting("INSTANCE_STALE_S", "PostgreSQL: an instance silent this long counts as dead and its reserved credits are given back; keep it several heartbeats, s", "60", intIn("INSTANCE_STALE_S", 60, 2, 86_400)),
  tmpMaxAgeS: setting("TMP_MAX_AGE_S", "Temporary upload files under DATA_DIR/tmp older than this are deleted hourly and, with PostgreSQL, at start-up (younger ones may be another instance's upload in progress; embedded mode deletes them all at start-up), s", "21600", intIn("TMP_MAX_AGE_S", 21_600, 60, 365 * 86_400)),
  uploadMaxBytes: setting("UPLOAD_MAX_BYTES", "Largest file an authenticated caller may upload for a recognition job, bytes (anonymous callers: 25 MB)", String(2048 * mib), intIn("UPLOAD_MAX_BYTES", 2048 * mib, mib, Number.MAX_SAFE_INTEGER)),
  anonJobMaxMinutes: setting("ANON_JOB_MAX_MINUTES", "Longest audio an anonymous recognition job may transcribe, minutes (0: no cap)", "30", intIn("ANON_JOB_MAX_MINUTES", 30, 0, 100_000)),
  anonMinutesPerHour: setting("ANON_MINUTES_PER_HOUR", "Audio minutes anonymous jobs from one client address may transcribe per hour (0: no cap)", "60", intIn("ANON_MINUTES_PER_HOUR", 60, 0, 10_000_000)),
  jobsConcurrency: setting("JOBS_CONCURRENCY", "Recognition jobs this instance runs at once (0: this instance runs none, it only accepts them)", "1", intIn("JOBS_CONCURRENCY", 1, 0, 256)),
  jobLeaseS: setting("JOB_LEASE_S", "A running job's lease; renewed every third of it, and a job whose instance stopped renewing is claimed again after it, s", "30", intIn("JOB_LEASE_S", 30, 3, 3600)),
  jobPollMs: setting("JOB_POLL_MS", "How often an idle instance looks for queued jobs started on other instances, ms", "1000", intIn("JOB_POLL_MS", 1000, 10, 600_000)),
  jobMaxClaims: setting("JOB_MAX_CLAIMS", "Claims after which a job whose instances keep dying is failed instead of claimed again", "3", intIn("JOB_MAX_CLAIMS", 3, 1, 100)),
  speakerEnrollWindowMinutes: setting("SPEAKER_ENROLL_WINDOW_MINUTES", "How long a job run with speaker_recognition keeps its audio (not its voiceprints: jobs keep none) so that its speakers can be enrolled; enrollment computes the voiceprint from that audio, after it the answer is 409 (0: keep nothing, no enrollment), minutes", "1440", intIn("SPEAKER_ENROLL_WINDOW_MINUTES", 1440, 0, 43_200)),
  uploadSweepS: setting("UPLOAD_SWEEP_S", "How often reserved uploads whose address expired unused are removed (row and blob), and the audio of jobs whose speaker enrollment window has passed, s", "60", intIn("UPLOAD_SWEEP_S", 60, 1, 86_400)),
  blobStore: setting("BLOB_STORE", "Where clone samples and job uploads are kept: local (DATA_DIR/blobs, uploads PUT to the service itself) or s3 (an S3-compatible bucket, uploads PUT straight to it)", "local", Config.Literals(["local", "s3"] as const, "BLOB_STORE").pipe(Config.withDefault("local" as const))),
  s3Bucket: setting("S3_BUCKET", "BLOB_STORE=s3: the bucket", "(unset)", Config.option(Config.String("S3_BUCKET"))),
  s3Endpoint: setting("S3_ENDPOINT", "BLOB_STORE=s3: endpoint URL of an S3-compatible server (unset: AWS)", "(unset)", Config.option(Config.String("S3_ENDPOINT"))),
  s3Region: setting("S3_REGION", "BLOB_STORE=s3: region", "us-east-1", Config.String("S3_REGION").pipe(Config.withDefault("us-east-1"))),
  s3AccessKeyId: setting("S3_ACCESS_KEY_ID", "BLOB_STORE=s3: access key id (unset: the AWS SDK's default credential chain)", "(unset)", Config.option(Config.String("S3_ACCESS_KEY_ID"))),
  s3SecretAccessKey: setting("S3_SECRET_ACCESS_KEY", "BLOB_STORE=s3: secret access key", "(unset)", Config.option(Config.Redacted("S3_SECRET_ACCESS_KEY"))),
  s3ForcePathStyle: setting("S3_FORCE_PATH_STYLE", "BLOB_STORE=s3: path-style addresses (bucket in the path; most self-hosted S3 servers need it)", "true", Config.Boolean("S3_FORCE_PATH_STYLE").pipe(Config.withDefault(true))),
  webhookMaxAttempts: setting("WEBHOOK_MAX_ATTEMPTS", "Delivery attempts of one webhook event before it is marked dead", "8", intIn("WEBHOOK_MAX_ATTEMPTS", 8, 1, 100)),
  webhookBackoffS: setting("WEBHOOK_BACKOFF_S", "Wait before the second delivery attempt; each later wait is four times longer (with jitter), so 8 attempts span about a day at 20 s", "20", intIn("WEBHOOK_BACKOFF_S", 20, 1, 86_400)),
  webhookTimeoutS: setting("WEBHOOK_TIMEOUT_S", "A webhook receiver that has not answered within this long counts as a failed attempt, s", "10", intIn("WEBHOOK_TIMEOUT_S", 10, 1, 600)),
  webhookSweepS: setting("WEBHOOK_SWEEP_S", "How often every instance looks for webhook deliveries that are due (a crash between commit and send is picked up here), s", "15", intIn("WEBHOOK_SWEEP_S", 15, 1, 3600)),
  summaryEngine: setting("SUMMARY_ENGINE", "Who writes summaries: extractive (built in: picks the transcript's own sentences) or llm (the OpenAI-compatible endpoint LLM_BASE_URL)", "extractive", Config.Literals(["extractive", "llm"] as const, "SUMMARY_ENGINE").pipe(Config.withDefault("extractive" as const))),
  translateEngine: setting("TRANSLATE_ENGINE", "Who translates chunks: apertium (Debian's Apertium pairs installed on the machine) or llm (the OpenAI-compatible endpoint LLM_BASE_URL, any pair of its language list)", "apertium", Config.Literals(["apertium", "llm"] as const, "TRANSLATE_ENGINE").pipe(Config.withDefault("apertium" as const))),
  apertiumModesDir: setting("APERTIUM_MODES_DIR", "Where Apertium's installed pairs are found (*.mode files)", "/usr/share/apertium/modes", Config.String("APERTIUM_MODES_DIR").pipe(Config.withDefault("/usr/share/apertium/modes"))),
  apertiumWarm: setting("APERTIUM_WARM", "Apertium pairs started in the background at start-up, one after another: none, all (about 0.1 GB of memory a pair), or a comma list of pairs (eng-spa,spa-eng); a request for a pair not running starts it and waits up to 3 s, then gets 503 engine_starting", "none", Config.String("APERTIUM_WARM").pipe(Config.withDefault("none"))),
  llmBaseUrl: setting("LLM_BASE_URL", "Base URL of an OpenAI-compatible chat-completions API (the part before /chat/completions, e.g. http://127.0.0.1:11434/v1); an operator's address, so private ones are allowed", "(unset)", Config.option(Config.URL("LLM_BASE_URL"))),
  llmModel: setting("LLM_MODEL", "Model name sent to LLM_BASE_URL", "(unset)", Config.option(Config.String("LLM_MODEL"))),
  llmApiKey: setting("LLM_API_KEY", "Bearer key for LLM_BASE_URL (unset: no Authorization header)", "(unset)", Config.option(Config.Redacted("LLM_API_KEY"))),
  llmTimeoutS: setting("LLM_TIMEOUT_S", "Longest a chat-completions call may take in all (each silence between streamed chunks is limited to a third of it), s", "120", intIn("LLM_TIMEOUT_S", 120, 1, 3600)),
  translateRatePerS: setting("TRANSLATE_RATE_PER_S", "Translation chunks one credential (anonymous: one client address) may send per second on average, across all instances on the database; more gets 429 rate_limited", "5", intIn("TRANSLATE_RATE_PER_S", 5, 1, 100_000)),
  signup: setting("SIGNUP", "open: anyone may register on the site's sign-up page; closed: accounts are made with the admin CLI only", "closed", Config.Literals(["open", "closed"] as const, "SIGNUP").pipe(Config.withDefault("closed" as const))),
  oauthAccessTtlS: setting("OAUTH_ACCESS_TTL_S", "How long an OAuth access token lasts, s (clients refresh or authorize again after it)", "3600", intIn("OAUTH_ACCESS_TTL_S", 3600, 1, 86_400)),
  sessionTtlH: setting("SESSION_TTL_H", "How long a site sign-in lasts, hours", "168", intIn("SESSION_TTL_H", 168, 1, 8760)),
  translateBurst: setting("TRANSLATE_BURST", "Translation chunks one credential may send at once after a quiet spell (the token bucket's size)", "20", intIn("TRANSLATE_BURST", 20, 1, 1_000_000))
} as const

type Settings = typeof settings
export type AppConfigShape = {
  readonly [K in keyof Settings]: Settings[K] extends Setting<infer A> ? A : never
} & { readonly apiBase: string; readonly siteUrlText: string }

export class AppConfig extends Context.Service<AppConfig, AppConfigShape>()("speech/runtime/AppConfig") {}

/** Parses every setting and reports all failures together. */
export const loadConfig = (provider: ConfigProvider.ConfigProvider) =>
  Effect.gen(function*() {
    const values: Record<string, unknown> = {}
    const problems: Array<string> = []
    for (const [key, s] of Object.entries(settings) as Array<[string, Setting<unknown>]>) {
      const result = yield* Effect.exit(s.config.parse(provider))
      if (result._tag === "Failure") {
        problems.push(`${s.env}: ${describe(result.cause)}`)
        continue
      }
      const complaint = s.check?.(result.value)
      if (complaint !== undefined) problems.push(`${s.env}: ${complaint}`)
      values[key] = result.value
    }
    // A bound under two heartbeats would declare an instance dead after one late heartbeat.
    const heartbeat = values.instanceHeartbeatS as number | undefined
    const stale = values.instanceStaleS as number | undefined
    if (heartbeat !== undefined && stale !== undefined && stale < 2 * heartbeat) {
      problems.push(`INSTANCE_STALE_S: must be at least twice INSTANCE_HEARTBEAT_S (${heartbeat}), got ${stale}`)
    }
    if (values.blobStore === "s3" && Option.isNone(values.s3Bucket as Option.Option<string>)) {
      problems.push("S3_BUCKET: must be set when BLOB_STORE=s3")
    }
    const wantsLlm = values.summaryEngine === "llm" || values.translateEngine === "llm"
    if (wantsLlm && (Option.isNone(values.llmBaseUrl as Option.Option<URL>) || Option.isNone(values.llmModel as Option.Option<string>))) {
      problems.push("LLM_BASE_URL and LLM_MODEL: must be set when SUMMARY_ENGINE=llm or TRANSLATE_ENGINE=llm")
    }
    if (problems.length > 0) {
      return yield* Effect.fail(new InvalidConfigError({ problems }))
    }
    const v = values as Omit<AppConfigShape, "apiBase" | "siteUrlText">
    const siteUrlText = Option.match(v.siteUrl, {
      onNone: () => `http://localhost:${v.port}`,
      onSome: (u) => u.toString().replace(/\/+$/, "")
    })
    const config: AppConfigShape = {
      ...v,
      dataDir: path.resolve(v.dataDir),
      siteUrlText,
      apiBase: "/api/v1"
    }
    return config
  })

/** The schema's own message, without Effect's wrappers, is what an operator needs to read. */
const describe = (cause: Cause.Cause<unknown>): string => {
  const error = Cause.squash(cause) as { cause?: { message?: string }; message?: string }
  return (error.cause?.message ?? error.message ?? String(error)).split("\n")[0]!
}

export class InvalidConfigError extends Error {
  readonly _tag = "InvalidConfigError"
  constructor(readonly fields: { problems: ReadonlyArray<string> }) {
    super(`invalid configuration:\n  ${fields.problems.join("\n  ")}`)
  }
}

/** Layer reading the process environment; the only place that touches `process.env`. */
export const AppConfigFromEnv = Layer.effect(AppConfig, loadConfig(ConfigProvider.fromEnv()))

/** Layer for tests and tools: explicit values as if they were environment variables. */
export const AppConfigFrom = (env: Record<string, string>) =>
  Layer.effect(AppConfig, loadConfig(ConfigProvider.fromEnvRecord(env as never)))

/** Rows for the README configuration table. */
export const settingsTable = (): Array<{ env: string; defaultText: string; doc: string }> =>
  Object.values(settings).map(({ env, defaultText, doc }) => ({ env, defaultText, doc }))

export const databaseUrlText = (c: AppConfigShape): string | undefined =>
  Option.match(c.databaseUrl, { onNone: () => undefined, onSome: (r) => Redacted.value(r) })
