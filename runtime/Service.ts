/**
 * Composition root: builds every layer of the service from an `AppConfigShape` and starts the
 * HTTP/WS server. `main.ts` runs it for the process; tests run it in-process on port 0.
 *
 * Order matters for shutdown: the server is built last so it is drained first (scope finalizers
 * run in reverse), then the worker pool closes, then the database.
 */
import { Context, Effect, Layer, Option, Redacted, References, Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import { readFileSync } from "node:fs"
import { buildOpenApi } from "../protocol/OpenApi.ts"
import { makeModelList } from "../protocol/schemas/Model.ts"
import { Synthesizer, SynthesizerLive } from "../actors/Synthesizer.ts"
import { Transcriber, TranscriberLive } from "../actors/Transcription.ts"
import { SpeakerLabellerLive } from "../actors/Diarization.ts"
import { SpeakerEnrollment, SpeakerEnrollmentLive } from "../actors/SpeakerEnrollment.ts"
import { sttRoutes } from "../protocol/routes/stt.ts"
import { VoiceCloning, VoiceCloningLive } from "../actors/VoiceCloning.ts"
import { userRoutes } from "../protocol/routes/user.ts"
import { voiceCatalogueRoutes, voiceRoutes } from "../protocol/routes/voices.ts"
import { BlobStore, localBlobStoreLayer } from "../storage/BlobStore.ts"
import { recognitionJobsLayer } from "../storage/RecognitionJobs.ts"
import { SavedSpeakers, savedSpeakersLayer } from "../storage/SavedSpeakers.ts"
import { sharedSecret } from "../storage/ServiceSecrets.ts"
import { uploadSweeperLayer } from "../storage/UploadSweeper.ts"
import { Webhooks, webhooksLayer } from "../storage/Webhooks.ts"
import { WebhookDispatcher, webhookDispatcherLayer } from "../actors/WebhookDispatcher.ts"
import { makeOutboundGuard } from "../storage/OutboundAddress.ts"
import { postJson } from "../storage/OutboundPost.ts"
import { webhookRoutes } from "../protocol/routes/webhooks.ts"
import { speakerRoutes } from "../protocol/routes/speakers.ts"
import { fetchToFile } from "../storage/RemoteMedia.ts"
import { JobRunner, JobRunnerLive } from "../actors/RecognitionJobRunner.ts"
import { toApiError } from "../protocol/ApiError.ts"
import { jobRoutes } from "../protocol/routes/jobs.ts"
import { uploadPath, uploadRoutes } from "../protocol/routes/uploads.ts"
import { MAX_INLINE_BYTES } from "../protocol/routes/stt.ts"
import { RecognitionJobs } from "../storage/RecognitionJobs.ts"
import { VoiceClonesLive } from "../storage/VoiceClones.ts"
import * as path from "node:path"
import type { Route } from "../protocol/Http.ts"
import { LANGUAGE_ROWS } from "../engines/tts/Voices.ts"
import { ttsRoutes } from "../protocol/routes/tts.ts"
import { MetricsText, Readiness, SiteInfo, systemRoutes } from "../protocol/routes/system.ts"
import { ApiKeys, apiKeysLayer } from "../storage/ApiKeys.ts"
import { Credits, creditsLayer } from "../storage/Credits.ts"
import { Users, usersLayer } from "../storage/Users.ts"
import { Database, databaseLayer, databaseReady } from "../storage/Database.ts"
import { instanceRegistryLayer, newInstanceId } from "../storage/InstanceRegistry.ts"
import { AppConfig, type AppConfigShape, databaseUrlText } from "./Config.ts"
import { uncaughtFaults } from "./FaultGuard.ts"
import { makeHttpServer } from "./HttpServer.ts"
import { loggingLayer } from "./Logging.ts"
import { HttpMetrics, renderMetrics } from "./Metrics.ts"
import { Router } from "./Router.ts"
import { tmpPurgeLayer } from "./TmpPurge.ts"
import { makeTtsWebSockets } from "./WebSocketServer.ts"
import { makeSttRealtimeSocket } from "./SttRealtimeSocket.ts"
import { PoolStreamingRecognizer } from "../engines/asr/StreamingRecognizer.ts"
import { WorkerPool } from "./WorkerPool.ts"
import { Inference } from "../engines/Inference.ts"
import { asrReady, espeakNativeReady, ffmpegReady, logEngineChecks, pocketsphinxOptions } from "./EngineChecks.ts"
import { PoolRecognizer } from "../engines/asr/Recognizer.ts"
import { PoolCloneAnalysis } from "../engines/clone/CloneAnalysis.ts"
import { useFfmpeg } from "../engines/media/FfmpegBinary.ts"
import { FfmpegMediaDecoder } from "../engines/media/MediaDecoderService.ts"
import { PoolSpeakerEmbedding } from "../engines/speaker/SpeakerEmbeddingService.ts"
import { speakerModelProfile } from "../engines/speaker/SpeakerModel.ts"
import { PoolTts } from "../engines/tts/Tts.ts"
import { PoolDenoiser } from "../engines/denoise/Denoiser.ts"
import type { Summarizer } from "../engines/summary/Summarizer.ts"
import { Translator } from "../engines/translate/Translator.ts"
import { RateLimiter } from "../protocol/RateLimiter.ts"
import { summaryRoutes } from "../protocol/routes/summaries.ts"
import { translateRoutes } from "../protocol/routes/translate.ts"
import { Summaries, summariesLayer } from "../storage/Summaries.ts"
import { languageEngineLayers, translationGauges, translationReady } from "./LanguageEngines.ts"
import { siteRoutes } from "./SiteRoutes.ts"
import { WebSessions, webSessionsLayer } from "../storage/WebSessions.ts"
import { apiKeyScopes } from "../storage/ApiKeys.ts"
import { OAuthStore, oauthStoreLayer } from "../storage/OAuthStore.ts"
import { SingleUseTokens, singleUseTokensLayer } from "../storage/SingleUseTokens.ts"
import { socketTokenConsumer } from "../protocol/SingleUseToken.ts"
import { tokenRoutes } from "../protocol/routes/tokens.ts"
import { withScopes } from "../protocol/oauth/OAuthScopes.ts"
import { setChildNice } from "../engines/ChildNice.ts"
import { credentialAuthenticator } from "./Credentials.ts"

const version: string = JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")).version

export interface RunningService {
  readonly port: number
  readonly siteUrl: string
  readonly drain: Effect.Effect<void>
  /** For the admin paths of in-process callers (tests, tools); HTTP never exposes these. */
  readonly users: Users["Service"]
  readonly keys: ApiKeys["Service"]
  readonly credits: Credits["Service"]
  readonly webSessions: WebSessions["Service"]
  /** The database, for tests that check what is stored (voiceprints, upload claims). */
  readonly sql: SqlClient
  /** For tests that wait for a translation pair to be ready. */
  readonly translator: Translator["Service"]
}

/** Languages the TTS model reports: every language of the preset catalogue. */
const modelLanguages = LANGUAGE_ROWS.map((l) => ({ language_id: l.code, name: l.name }))

/** What tests may change beyond the configuration: the PostgreSQL schema to work in. */
export interface ServiceOverrides {
  readonly searchPath?: string
}

/** The site's public URL as known so far: with PORT=0 it is fixed once the server listens. */
export class SiteAddress extends Context.Service<SiteAddress, { current: string }>()("speech/runtime/SiteAddress") {}

export const serviceLayers = (config: AppConfigShape, overrides: ServiceOverrides = {}) => {
  const siteAddress = { current: config.siteUrlText }
  const database = databaseLayer({
    databaseUrl: databaseUrlText(config),
    dataDir: config.dataDir,
    ...(config.databaseResponseTimeoutS > 0 ? { responseTimeoutMs: config.databaseResponseTimeoutS * 1000 } : {}),
    ...(overrides.searchPath !== undefined ? { searchPath: overrides.searchPath } : {})
  })
  // Reservations taken by this process carry its instance id; the registry gives back those of
  // dead instances before the server is built, and keeps this one's heartbeat (PostgreSQL).
  const instanceId = newInstanceId()
  const accounts = Layer.mergeAll(
    usersLayer({ initialCredits: config.initialCredits }).pipe(
      Layer.provideMerge(apiKeysLayer({ instanceId, liveWithinMs: config.instanceStaleS * 1000 }))
    ),
    creditsLayer({ instanceId }),
    webSessionsLayer({ lifetimeMs: config.sessionTtlH * 3_600_000 }),
    oauthStoreLayer({ accessTtlS: config.oauthAccessTtlS }),
    singleUseTokensLayer
  ).pipe(Layer.provideMerge(database))
  const housekeeping = Layer.mergeAll(
    instanceRegistryLayer({ instanceId, heartbeatMs: config.instanceHeartbeatS * 1000, staleAfterMs: config.instanceStaleS * 1000 }),
    tmpPurgeLayer({ dir: path.join(config.dataDir, "tmp"), maxAgeMs: config.tmpMaxAgeS * 1000 })
  ).pipe(Layer.provide(accounts))
  const pool = WorkerPool.layer({ workers: config.workers, maxQueue: config.poolMaxQueue, nice: config.workerNice, sessionsPerWorker: config.sttSessionsPerWorker })
  // ffmpeg and Apertium, started by the main thread, run at the workers' priority too.
  setChildNice(config.workerNice)
  // Which ffmpeg decodes uploads, once for the process (logged when listening).
  useFfmpeg(Option.getOrUndefined(config.ffmpegPath))
  // Checked when the configuration was read: a bad directory stops the service at start.
  const speakerModel = speakerModelProfile(Option.getOrUndefined(config.speakerEmbeddingDir))
  // One service per engine kind; today each runs on the worker pool (ffmpeg: a child process).
  const engines = Layer.mergeAll(
    PoolTts.layer,
    PoolRecognizer.layerWith({
      pocketsphinx: pocketsphinxOptions(config),
      ...(config.sttModelIdleReleaseS > 0 ? { releaseAfterMs: config.sttModelIdleReleaseS * 1000 } : {})
    }),
    PoolSpeakerEmbedding.layer(speakerModel),
    PoolCloneAnalysis.layer,
    PoolDenoiser.layer,
    FfmpegMediaDecoder.layer
  ).pipe(Layer.provideMerge(pool))
  const voiceClones = VoiceClonesLive.pipe(Layer.provide(accounts))
  // Clone samples and job uploads; the local store's presigned addresses point at this service
  // (its URL is known only after listening with PORT=0: read per address).
  const blobStore = config.blobStore === "s3"
    // The AWS SDK (~4 MB of heap) is loaded only when S3 is configured.
    ? Layer.effect(BlobStore, Effect.map(Effect.promise(() => import("../storage/S3BlobStore.ts")), ({ makeS3BlobStore }) =>
      makeS3BlobStore({
        bucket: Option.getOrThrow(config.s3Bucket),
        endpoint: Option.getOrUndefined(config.s3Endpoint),
        region: config.s3Region,
        forcePathStyle: config.s3ForcePathStyle,
        credentials: Option.isSome(config.s3AccessKeyId) && Option.isSome(config.s3SecretAccessKey)
          ? { accessKeyId: config.s3AccessKeyId.value, secretAccessKey: Redacted.value(config.s3SecretAccessKey.value) }
          : undefined
      })))
    : Layer.unwrap(Effect.map(sharedSecret("upload_signing"), (secret) =>
      localBlobStoreLayer(path.join(config.dataDir, "blobs"), { baseUrl: () => `${siteAddress.current}${uploadPath(config.apiBase)}`, secret }))).pipe(
        Layer.provide(accounts)
      )
  const synthesizer = SynthesizerLive({ piperDirectory: Option.getOrUndefined(config.piperVoicesDir) }).pipe(
    Layer.provide(voiceClones),
    Layer.provideMerge(engines)
  )
  const cloning = VoiceCloningLive.pipe(
    Layer.provide(Layer.mergeAll(synthesizer, voiceClones, blobStore))
  )
  const transcriber = TranscriberLive({
    concurrency: config.workers,
    maxConcurrentDecodes: config.sttMaxConcurrentDecodes,
    tmpDir: path.join(config.dataDir, "tmp")
  }).pipe(
    Layer.provide(SpeakerLabellerLive),
    Layer.provide(Layer.merge(engines, accounts))
  )
  const tmpDir = path.join(config.dataDir, "tmp")
  const ca = Option.match(config.urlFetchCaFile, { onNone: () => undefined, onSome: (f) => readFileSync(f, "utf8") })
  const jobStore = Layer.mergeAll(recognitionJobsLayer, webhooksLayer, savedSpeakersLayer, summariesLayer).pipe(Layer.provide(accounts))
  const guard = makeOutboundGuard({ allowPrivate: config.urlFetchAllowPrivate })
  const dispatcher = webhookDispatcherLayer({
    maxAttempts: config.webhookMaxAttempts,
    backoffMs: config.webhookBackoffS * 1000,
    sweepMs: config.webhookSweepS * 1000,
    // Held past the send timeout, so another instance never sends a row this one is still sending.
    leaseMs: config.webhookTimeoutS * 1000 + 30_000,
    post: (url, body, headers) => postJson(url, body, headers, { guard, timeoutMs: config.webhookTimeoutS * 1000, ca })
  }).pipe(Layer.provide(jobStore))
  const jobRunner = Layer.unwrap(Effect.gen(function*() {
    const webhooks = yield* WebhookDispatcher
    return JobRunnerLive({
      instanceId,
      concurrency: config.jobsConcurrency,
      leaseMs: config.jobLeaseS * 1000,
      pollMs: config.jobPollMs,
      maxClaims: config.jobMaxClaims,
      tmpDir,
      anonJobMaxSeconds: config.anonJobMaxMinutes * 60,
      anonSecondsPerHour: config.anonMinutesPerHour * 60,
      describeError: (failure) => {
        const { error } = toApiError(failure)
        return { code: error.code, message: error.message }
      },
      fetchSource: (url) =>
        fetchToFile(url, { tmpDir, maxBytes: MAX_INLINE_BYTES, timeoutMs: 120_000, allowPrivate: config.urlFetchAllowPrivate, ca }).pipe(
          Effect.map((r) => r.file)
        ),
      deliveryWritten: webhooks.kick,
      matchThreshold: speakerModel.matchThreshold,
      enrollWindowMs: config.speakerEnrollWindowMinutes * 60_000
    })
  })).pipe(Layer.provide(Layer.mergeAll(transcriber, jobStore, blobStore, accounts, dispatcher)))
  // Enrollment recomputes a voiceprint from a job's kept audio (jobs keep no voiceprints).
  const speakerEnrollment = SpeakerEnrollmentLive({ tmpDir }).pipe(
    Layer.provide(SpeakerLabellerLive),
    Layer.provide(Layer.merge(engines, blobStore))
  )
  const sweeper = uploadSweeperLayer(config.uploadSweepS * 1000).pipe(Layer.provide(Layer.merge(jobStore, blobStore)))
  return Layer.mergeAll(
    accounts,
    housekeeping,
    synthesizer,
    transcriber,
    cloning,
    jobStore,
    blobStore,
    jobRunner,
    dispatcher,
    sweeper,
    speakerEnrollment,
    languageEngineLayers(config),
    Layer.succeed(SiteAddress, siteAddress),
    Layer.succeed(AppConfig, config)
  )
}

/** Starts the server inside the caller's scope; the returned `drain` performs graceful shutdown. */
export const startServer = Effect.gen(function*() {
  const config = yield* AppConfig
  const users = yield* Users
  const translator = yield* Translator
  const keys = yield* ApiKeys
  const credits = yield* Credits
  const webSessions = yield* WebSessions
  const authenticate = credentialAuthenticator(keys, yield* OAuthStore)
  const pool = yield* Inference
  const sql = yield* SqlClient
  const database = yield* Database
  const context = yield* Effect.context<never>()
  const metrics = new HttpMetrics(context)
  // With PORT=0 and no SITE_URL the real port is known only after listening.
  let siteUrl = config.siteUrlText
  /** SPEC 7: every 401 points at the protected-resource metadata. */
  const resourceMetadataUrl = () => `${siteUrl}/.well-known/oauth-protected-resource`

  const siteAddress = yield* SiteAddress
  type ApiServices = Readiness | MetricsText | SiteInfo | Synthesizer | Users | Credits | Transcriber | VoiceCloning | RecognitionJobs | BlobStore | JobRunner | Webhooks | SavedSpeakers | SpeakerEnrollment | Summaries | Summarizer | Translator | SingleUseTokens
  // Every route gets the OAuth scope it needs (protocol/oauth/OAuthScopes.ts); API keys hold them all.
  const routes: Array<Route<ApiServices>> = withScopes<ApiServices>(config.apiBase, [
    ...systemRoutes(config.apiBase, makeModelList(modelLanguages)),
    ...voiceCatalogueRoutes({ apiBase: config.apiBase, siteUrl: () => siteUrl }),
    ...ttsRoutes({
      apiBase: config.apiBase,
      maxJsonBodyBytes: config.maxJsonBodyBytes,
      ahead: config.workers
    }),
    ...voiceRoutes({ apiBase: config.apiBase, tmpDir: path.join(config.dataDir, "tmp") }),
    ...userRoutes(config.apiBase),
    ...tokenRoutes(config.apiBase),
    ...sttRoutes({
      apiBase: config.apiBase,
      tmpDir: path.join(config.dataDir, "tmp"),
      urlFetch: { allowPrivate: config.urlFetchAllowPrivate, caFile: Option.getOrUndefined(config.urlFetchCaFile) }
    }),
    ...jobRoutes({
      apiBase: config.apiBase,
      maxJsonBodyBytes: config.maxJsonBodyBytes,
      uploadMaxBytes: config.uploadMaxBytes,
      anonSecondsPerHour: config.anonMinutesPerHour * 60,
      deliveryDue: (yield* WebhookDispatcher).kick
    }),
    ...speakerRoutes({ apiBase: config.apiBase, maxJsonBodyBytes: config.maxJsonBodyBytes }),
    ...summaryRoutes({ apiBase: config.apiBase, maxJsonBodyBytes: config.maxJsonBodyBytes }),
    ...translateRoutes({
      apiBase: config.apiBase,
      maxJsonBodyBytes: config.maxJsonBodyBytes,
      limiter: new RateLimiter(sql, { name: "translate", perSecond: config.translateRatePerS, burst: config.translateBurst })
    }),
    ...webhookRoutes({ apiBase: config.apiBase, maxJsonBodyBytes: config.maxJsonBodyBytes, guard: makeOutboundGuard({ allowPrivate: config.urlFetchAllowPrivate }) }),
    ...(config.blobStore === "local"
      ? uploadRoutes({ apiBase: config.apiBase, tmpDir: path.join(config.dataDir, "tmp"), secret: yield* sharedSecret("upload_signing").pipe(Effect.provideService(SqlClient, sql)) })
      : [])
  ])
  let openApiText: string | undefined
  const site = SiteInfo.of({
    get siteUrl() {
      return siteUrl
    },
    apiBase: config.apiBase,
    version,
    openApi: () => (openApiText ??= JSON.stringify(buildOpenApi(routes, { siteUrl, version })))
  })
  const readiness = Readiness.of({
    checks: [
      { name: "database", run: databaseReady.pipe(Effect.provideService(SqlClient, sql)) },
      { name: "worker_pool", run: pool.ready.pipe(Effect.timeout("5 seconds")) },
      // Optional: without its Debian packages only speech-to-text fails (502 engine_unavailable);
      // the instance still serves everything else, so it stays ready and says what is missing.
      { name: "speech_to_text", optional: true, run: asrReady(config) },
      // Optional too: without Debian's library espeak-ng speaks with the bundled build, slower.
      { name: "espeak_native", optional: true, run: espeakNativeReady },
      // Optional: without a system ffmpeg, uploads are decoded by npm's 2018 build (or not at all).
      { name: "media_decoder", optional: true, run: ffmpegReady },
      // Optional: pairs start in the background after the instance is ready (503 engine_starting meanwhile).
      { name: "translation", optional: true, run: translationReady(translator) }
    ]
  })
  const webSockets = makeTtsWebSockets({
    apiBase: config.apiBase,
    enabled: config.wsEnabled,
    idleTimeoutMs: config.wsIdleTimeoutS * 1000,
    defaultLanguage: config.wsDefaultLanguage,
    authenticate,
    consumeToken: socketTokenConsumer(yield* SingleUseTokens),
    resourceMetadataUrl
  })
  const sttRealtime = makeSttRealtimeSocket({
    apiBase: config.apiBase,
    enabled: config.wsEnabled,
    authenticate,
    consumeToken: socketTokenConsumer(yield* SingleUseTokens),
    maxSessionMs: config.sttRealtimeMaxSessionS * 1000,
    idleMs: config.sttRealtimeIdleS * 1000,
    maxUtteranceMs: config.sttRealtimeMaxUtteranceS * 1000,
    balance: users.balance
  })
  // The realtime sessions' recognizer: long-lived decoder sessions on the same pool.
  const streamingRecognizer = yield* Layer.build(PoolStreamingRecognizer.layer({
    pocketsphinx: pocketsphinxOptions(config),
    ...(config.sttModelIdleReleaseS > 0 ? { releaseAfterMs: config.sttModelIdleReleaseS * 1000 } : {})
  }).pipe(Layer.provide(Layer.succeed(Inference, pool))))
  const metricsText = MetricsText.of({
    render: renderMetrics([
      { name: "worker_pool_queue_depth", description: "Tasks waiting for a worker", read: () => pool.stats().queueSize },
      { name: "worker_pool_running", description: "Tasks running on workers", read: () => pool.stats().running },
      { name: "worker_pool_threads", description: "Worker threads alive", read: () => pool.stats().threads },
      { name: "http_in_flight", description: "HTTP requests and streams in progress", read: () => server.inFlight() },
      { name: "process_uncaught_faults", description: "Exceptions and rejections no handler caught, kept from ending the process (each is logged)", read: uncaughtFaults },
      { name: "tts_ws_sessions_active", description: "Open WebSocket text-to-speech sessions", read: webSockets.activeSessions },
      { name: "tts_ws_sessions_backpressured", description: "WebSocket sessions waiting for their client to read", read: webSockets.backpressuredSessions },
      { name: "tts_ws_buffered_bytes", description: "Bytes held in WebSocket send buffers", read: webSockets.bufferedBytes },
      { name: "stt_realtime_sessions_active", description: "Open realtime speech-to-text WebSocket sessions", read: sttRealtime.activeSessions },
      ...translationGauges(translator)
    ]).pipe(Effect.provideContext(context))
  })

  const server = yield* makeHttpServer({
    host: config.host,
    port: config.port,
    router: new Router<(typeof routes)[number] extends Route<infer R> ? R | ApiKeys | WebSessions | OAuthStore : never>([...routes, ...siteRoutes(config, () => siteUrl, () => JSON.parse(site.openApi()), version, sql)]),
    authenticate,
    authenticateSession: (token) =>
      Effect.map(webSessions.find(token), (s) =>
        s === undefined ? undefined : { principal: { userId: s.userId, keyId: null, scopes: apiKeyScopes }, csrfToken: s.csrfToken }),
    metrics,
    accessLog: config.logLevel === "debug" || config.logLevel === "trace",
    spillDir: path.join(config.dataDir, "tmp"),
    resourceMetadataUrl,
    // Route handlers never see the keys service; only the WebSocket revocation watch needs it.
    configure: (app) =>
      Effect.andThen(
        webSockets.register(app),
        sttRealtime.register(app).pipe(Effect.provideContext(streamingRecognizer), Effect.provideService(Inference, pool))
      ).pipe(Effect.provideService(ApiKeys, keys))
  }).pipe(
    Effect.provideService(SiteInfo, site),
    Effect.provideService(Readiness, readiness),
    Effect.provideService(MetricsText, metricsText)
  )
  if (config.port === 0) siteUrl = siteUrl.replace(/:0$/, `:${server.port}`)
  siteAddress.current = siteUrl
  yield* logEngineChecks(config)
  yield* Effect.logInfo("listening", { host: config.host, port: server.port, siteUrl, workers: config.workers, database: database.description })
  return {
    port: server.port,
    siteUrl,
    // Run with the service's context so its logs go through the service's logger.
    drain: server.drain(config.shutdownGraceMs).pipe(Effect.provideContext(context)),
    users,
    keys,
    credits,
    webSessions,
    sql,
    translator
  } satisfies RunningService
})

/**
 * Spans off: nothing here exports them (no tracer is configured), yet with tracing on every
 * `Effect.fn` call on a request's path builds a span, reads the clock and copies annotations.
 * Names of `Effect.fn` still appear in the stack traces of logged failures.
 */
const noSpans = Layer.succeed(References.TracerEnabled, false)

/**
 * Everything a process needs: layers, logging, then the server. The layers are built into the
 * caller's scope (not `Effect.provide`d), because they must outlive `startServer`: the pool and
 * the database serve requests until that scope closes.
 */
export const runService = (config: AppConfigShape, overrides: ServiceOverrides = {}): Effect.Effect<RunningService, unknown, Scope.Scope> =>
  Effect.gen(function*() {
    // Provided to the layers too, not merged beside them: fibers forked while they are built (the
    // job runner, the webhook dispatcher, sweepers) keep the logger they were forked with.
    const context = yield* Layer.build(serviceLayers(config, overrides).pipe(Layer.provideMerge(Layer.merge(loggingLayer(config.logLevel), noSpans))))
    return yield* startServer.pipe(Effect.provideContext(context))
  })
