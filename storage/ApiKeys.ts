/**
 * API keys: minting, deleting, listing, and `authenticate`, which turns a key into a `Principal`
 * (the one credential type; protocol/Http.ts and the bridges in runtime/ use it as it is here).
 *
 * `authenticate` runs on every request, so key lookups are cached in memory by key hash, with
 * bounds on both memory and staleness:
 * - a key deleted through this process stops working at once (the cache entry is dropped);
 * - with PostgreSQL, a trigger on `api_keys` NOTIFYs every change and each process LISTENs, so a
 *   key deleted by another process (psql) stops working within milliseconds; while the LISTEN
 *   connection is down, entries live only `shortTtlMs`;
 * - `deleteKey` on PostgreSQL returns once every live instance (heartbeat within `liveWithinMs`)
 *   has said it dropped the key (a NOTIFY with a token, answered on the same channel), so
 *   a key deleted through any instance or the admin CLI is refused by all once that answers.
 *   An instance silent for `shortTtlMs` is dead or has its LISTEN down, and then its entries
 *   live at most that long: the delete answers then and logs which instances were silent;
 * - embedded PGlite has one backend shared by all connections, and notifications do not reach
 *   other connections, let alone other processes: there a positive entry lives `shortTtlMs`
 *   (2 s), so a key deleted by the admin CLI keeps working for at most 2 s in a running server;
 * - unknown keys are remembered for `shortTtlMs` in a separate, smaller cache, so a flood of
 *   bad keys can neither grow memory nor evict good keys;
 * - keys in use are refreshed ahead of expiry: every shortTtlMs / 2 one query re-reads those
 *   used in the last minute whose entry is about to lapse (a deleted one is dropped then). A
 *   key in use therefore never misses the cache, so authenticating it needs no I/O and
 *   completes synchronously, which the WebSocket upgrade relies on (runtime/WebSocketServer.ts);
 *   the staleness bounds above stay as they are.
 * Sessions that outlive one request (WebSocket) learn of their key's deletion through
 * `watchRevocations`, within the same bounds.
 *
 * Key format and hashing: storage/ApiKey.ts. Users: storage/Users.ts.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { Context, Duration, Effect, Latch, Layer, Option, Queue, Schedule, type Scope } from "effect"
import { SqlClient } from "effect/sql/SqlClient"
import type { SqlError } from "effect/sql/SqlError"
import { AccountsError, userNotFound } from "./AccountsError.ts"
import { apiKeyPrefix, displayPrefix, generateApiKey, hashApiKey, isWellFormedApiKey, randomId } from "./ApiKey.ts"
import { BoundedCache } from "./BoundedCache.ts"
import { Database } from "./Database.ts"
import { acknowledgement, type AckBook, changeAcknowledgedByAll, hear, makeAckBook } from "./InstanceAcks.ts"
import { newInstanceId } from "./InstanceRegistry.ts"

export interface Principal {
  readonly userId: string
  /** The API key used, or null for credentials that are not keys (OAuth tokens). */
  readonly keyId: string | null
  readonly scopes: ReadonlyArray<string>
  /** The OAuth client the token was issued to (OAuth tokens only). */
  readonly clientId?: string | undefined
  /** The OAuth grant behind the token (OAuth tokens only): single-use tokens it mints die with it. */
  readonly grantId?: string | undefined
}

/** What an API key may do: everything (keys are the owner's own credential). */
export const apiKeyScopes: ReadonlyArray<string> = Object.freeze(["tts", "asr", "voices", "summary", "translate", "denoise"])

export interface KeyInfo {
  readonly keyId: string
  readonly userId: string
  readonly name: string
  /** First characters of the key, for recognising it in a list. */
  readonly prefix: string
  /** Last four characters; undefined for keys minted before they were kept. */
  readonly suffix: string | undefined
  readonly createdAt: Date
  /** Within about a minute; undefined when never used. */
  readonly lastUsedAt: Date | undefined
}

export interface MintedKey {
  readonly keyId: string
  /** The only time the full key exists outside its owner's hands: show it once. */
  readonly apiKey: string
  readonly prefix: string
}

export interface DeletedKey {
  readonly keyId: string
  readonly userId: string
}

/** Keys held by long-lived sessions (WebSocket), watched for deletion; see `watchRevocations`. */
export interface KeyWatch {
  /** Key ids in use now; read at every check. */
  readonly keyIds: () => Iterable<string>
  /** Called with ids found deleted (each id reported until it leaves `keyIds`). */
  readonly revoked: (keyIds: ReadonlyArray<string>) => void
}

export interface ApiKeysShape {
  readonly authenticate: (apiKey: string) => Effect.Effect<Principal, AccountsError | SqlError>
  /** UserNotFound when there is no such user. Usable inside a transaction (Users.createUserWithKey). */
  readonly mintKey: (userId: string, name?: string) => Effect.Effect<MintedKey, AccountsError | SqlError>
  /** Takes a key id (`key_…`) or the full key (`sk_svc_…`). */
  readonly deleteKey: (keyIdOrKey: string) => Effect.Effect<DeletedKey, AccountsError | SqlError>
  readonly listKeys: (userId: string) => Effect.Effect<ReadonlyArray<KeyInfo>, AccountsError | SqlError>
  /**
   * Tells `watch` which of its keys were deleted, for as long as the scope is open. A session that
   * authenticated once must learn of a revocation itself: checks run right after any key change
   * this process hears of (its own `deleteKey`, a NOTIFY from another process) and every
   * shortTtlMs / 2 where notifications cannot be relied on (embedded mode, LISTEN down); so within
   * the same bounds as the key cache. `recheck` asks for a check soon: for a session admitted
   * after a database read, whose key may have been deleted (and notified) before it was watched.
   */
  readonly watchRevocations: (watch: KeyWatch) => Effect.Effect<{ readonly recheck: () => void }, never, Scope.Scope>
}

export class ApiKeys extends Context.Service<ApiKeys, ApiKeysShape>()("speech/storage/ApiKeys") {}

export interface ApiKeysOptions {
  /** Staleness bound where no notification can be relied on, ms. Default 2000. */
  readonly shortTtlMs?: number
  /** Lifetime of a cached key while LISTEN is confirmed (a safety net only), ms. Default 300000. */
  readonly listenTtlMs?: number
  /** Cached valid keys. Default 10000. */
  readonly maxCachedKeys?: number
  /** Cached unknown keys. Default 1000. */
  readonly maxCachedUnknownKeys?: number
  /** How often `last_used_at` of keys in use is written, ms. Default 60000. */
  readonly lastUsedFlushMs?: number
  /** This process's instance id (`service_instances.id`), named in its acknowledgements. */
  readonly instanceId?: string
  /** A delete waits for instances whose heartbeat is this recent (INSTANCE_STALE_S), ms. Default 60000. */
  readonly liveWithinMs?: number
}

/** A key used within this window is kept warm in the cache, ms. */
const IN_USE_WINDOW_MS = 60_000

/**
 * Channel the `api_keys` trigger of migration 0001 notifies, payload = hex of key_hash; a
 * deleter adds " <token>" to ask every listener to answer "ack <token> <instance id>" on it too.
 */
const keyChannel = "speech_api_keys"

const invalidKey = () => new AccountsError({ reason: "InvalidKey", message: "invalid API key" })

export const makeApiKeys = (options: ApiKeysOptions = {}) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient
    const database = yield* Effect.serviceOption(Database)
    const pg = yield* Effect.serviceOption(PgClient.PgClient)
    const shortTtlMs = options.shortTtlMs ?? 2_000
    const listenTtlMs = options.listenTtlMs ?? 300_000
    const instanceId = options.instanceId ?? newInstanceId()
    const liveWithinMs = options.liveWithinMs ?? 60_000

    const known = new BoundedCache<string, Principal>(options.maxCachedKeys ?? 10_000)
    const unknown = new BoundedCache<string, true>(options.maxCachedUnknownKeys ?? 1_000)
    /** True only while a LISTEN on `keyChannel` is confirmed. */
    let listening = false
    /**
     * Bumped by every invalidation. A lookup that began before one must not cache its result:
     * it may have read a row that the invalidation was about.
     */
    let epoch = 0
    /**
     * Keys invalidated while a refresh of keys in use is reading them ("all" after a full
     * invalidation); that refresh must not re-cache those rows. Per key, not the epoch: on a
     * shared database other keys' notifications arrive all the time, and discarding a whole
     * refresh for them let keys in use expire (a miss, an async WebSocket upgrade).
     */
    let invalidatedDuringRefresh: Set<string> | "all" | undefined
    const markInvalidated = (hashHex: string | undefined) => {
      epoch++
      if (invalidatedDuringRefresh === undefined || invalidatedDuringRefresh === "all") return
      if (hashHex === undefined) invalidatedDuringRefresh = "all"
      else invalidatedDuringRefresh.add(hashHex)
    }
    /** Opened by every invalidation: revocation checks run then (see watchRevocations). */
    const keysChanged = Latch.makeUnsafe(false)
    const invalidate = (hashHex: string | undefined) => {
      markInvalidated(hashHex)
      keysChanged.openUnsafe()
      if (hashHex === undefined) {
        known.clear()
        unknown.clear()
      } else {
        known.delete(hashHex)
        unknown.delete(hashHex)
      }
    }

    /** Deletions wait for other processes only where notifications reach them (not embedded PGlite). */
    const acks = Option.isSome(pg) && Option.isSome(database) && database.value.crossProcessNotify ? makeAckBook(pg.value) : undefined
    if (acks !== undefined) {
      const { client } = acks
      const listenOnce = Effect.scoped(
        Effect.gen(function*() {
          const notifications = yield* client.listen(keyChannel)
          // Changes before this point were not heard: start from an empty cache.
          invalidate(undefined)
          listening = true
          acks.ready.openUnsafe()
          yield* Effect.forever(Effect.gen(function*() {
            const { payload } = yield* Queue.take(notifications)
            if (hear(acks, payload)) return
            const [hashHex, token] = payload.split(" ")
            invalidate(hashHex)
            // Answered after the key is gone from this process's cache, never before.
            if (token !== undefined) {
              yield* client.notify(keyChannel, acknowledgement(token, instanceId)).pipe(
                Effect.catch((error) => Effect.logWarning("could not acknowledge an API key deletion", error))
              )
            }
          }))
        })
      ).pipe(
        Effect.ensuring(Effect.sync(() => {
          listening = false
          acks.ready.closeUnsafe()
          invalidate(undefined)
        })),
        Effect.tapError((error) => Effect.logWarning("API key change notifications lost; retrying", error))
      )
      yield* Effect.forkScoped(Effect.retry(listenOnce, Schedule.spaced("1 second")))
    }

    // Keys used since the last write of `last_used_at`, written about once a minute: a request
    // never waits on it, and a busy key costs one UPDATE a minute, not one per request.
    const usedSinceFlush = new Set<string>()
    const flushLastUsed = Effect.suspend(() => {
      if (usedSinceFlush.size === 0) return Effect.void
      const ids = [...usedSinceFlush]
      usedSinceFlush.clear()
      return sql`UPDATE api_keys SET last_used_at = now() WHERE id IN ${sql.in(ids)}`.pipe(Effect.asVoid)
    }).pipe(Effect.catchCause((cause) => Effect.logWarning("last-used times of API keys not written", cause)))
    yield* Effect.forkScoped(Effect.repeat(flushLastUsed, Schedule.spaced(`${options.lastUsedFlushMs ?? 60_000} millis`)))
    yield* Effect.addFinalizer(() => flushLastUsed)

    /** Keys authenticated lately: hash hex → last use (ms). Bounded like `known`. */
    const inUse = new Map<string, number>()
    const noteUse = (hashHex: string) => {
      if (inUse.size < known.maxEntries || inUse.has(hashHex)) inUse.set(hashHex, Date.now())
    }
    const refreshMs = Math.max(20, Math.floor(shortTtlMs / 2))
    const refreshKeysInUse = Effect.gen(function*() {
      const now = Date.now()
      const due: Array<string> = []
      for (const [hashHex, lastUse] of inUse) {
        if (now - lastUse > IN_USE_WINDOW_MS) inUse.delete(hashHex)
        else if ((known.expiresAt(hashHex) ?? 0) - now < 2 * refreshMs) due.push(hashHex)
      }
      if (due.length === 0) return
      invalidatedDuringRefresh = new Set()
      let dirty: Set<string> | "all" | undefined
      const rows = yield* sql<{ key_hash: Uint8Array; id: string; user_id: string }>`
        SELECT key_hash, id, user_id FROM api_keys
        WHERE key_hash IN ${sql.in(due.map((h) => Buffer.from(h, "hex")))} AND deleted_at IS NULL`.pipe(
        Effect.ensuring(Effect.sync(() => {
          dirty = invalidatedDuringRefresh
          invalidatedDuringRefresh = undefined
        }))
      )
      // An invalidation during the query may concern these rows: the next round re-reads them.
      if (dirty === "all") return
      const alive = new Set<string>()
      for (const row of rows) {
        const hashHex = Buffer.from(row.key_hash).toString("hex")
        alive.add(hashHex)
        if (dirty?.has(hashHex)) continue
        known.set(hashHex, { userId: row.user_id, keyId: row.id, scopes: apiKeyScopes }, listening ? listenTtlMs : shortTtlMs, Date.now())
      }
      for (const hashHex of due) {
        if (alive.has(hashHex) || dirty?.has(hashHex)) continue
        known.delete(hashHex)
        inUse.delete(hashHex)
      }
    })
    yield* Effect.forkScoped(
      refreshKeysInUse.pipe(
        Effect.catch((error) => Effect.logWarning("refreshing cached API keys failed; they expire normally", error)),
        Effect.repeat(Schedule.spaced(refreshMs))
      )
    )

    // ---- revocation of keys held by long-lived sessions -----------------------------------------
    const watches = new Set<KeyWatch>()
    const checkRevocations = Effect.gen(function*() {
      const ids = new Set<string>()
      for (const w of watches) for (const id of w.keyIds()) ids.add(id)
      if (ids.size === 0) return
      const all = [...ids]
      const alive = new Set<string>()
      for (let i = 0; i < all.length; i += 1000) {
        const rows = yield* sql<{ id: string; key_hash: Uint8Array; alive: boolean }>`
          SELECT id, key_hash, deleted_at IS NULL AS alive FROM api_keys WHERE id IN ${sql.in(all.slice(i, i + 1000))}`
        for (const row of rows) {
          if (row.alive) alive.add(row.id)
          else {
            // Found before the cache's own bound ran out: a reconnect must fail as the session did.
            // (epoch: a lookup or refresh that read the row before the delete must not cache it.)
            const hashHex = Buffer.from(row.key_hash).toString("hex")
            markInvalidated(hashHex)
            known.delete(hashHex)
            inUse.delete(hashHex)
          }
        }
      }
      const gone = all.filter((id) => !alive.has(id))
      if (gone.length > 0) for (const w of watches) w.revoked(gone)
    })
    yield* Effect.forkScoped(Effect.forever(Effect.gen(function*() {
      // With LISTEN confirmed every change wakes us; the timer is a safety net then.
      yield* Effect.timeoutOption(keysChanged.await, Duration.millis(listening ? listenTtlMs : refreshMs))
      // Closed before the check: a change during the query wakes the next round.
      keysChanged.closeUnsafe()
      yield* checkRevocations.pipe(
        Effect.catch((error) => Effect.logWarning("checking API keys of open sessions failed; retrying", error))
      )
    })))
    const recheck = () => void keysChanged.openUnsafe()
    const watchRevocations = (watch: KeyWatch) =>
      Effect.acquireRelease(
        Effect.sync(() => {
          watches.add(watch)
          return { recheck }
        }),
        () => Effect.sync(() => void watches.delete(watch))
      )

    // Every request runs this: a key in the cache is answered without a generator or a span.
    const authenticate = (apiKey: string): Effect.Effect<Principal, AccountsError | SqlError> =>
      Effect.suspend(() => {
        if (!isWellFormedApiKey(apiKey)) return invalidKey()
        const hash = hashApiKey(apiKey)
        const hashHex = hash.toString("hex")
        const cached = known.get(hashHex, Date.now())
        if (cached === undefined) return lookUp(hash, hashHex)
        noteUse(hashHex)
        if (cached.keyId !== null && usedSinceFlush.size < known.maxEntries) usedSinceFlush.add(cached.keyId)
        return Effect.succeed(cached)
      })

    const lookUp = Effect.fn("ApiKeys.lookUp")(function*(hash: Buffer, hashHex: string) {
      if (unknown.get(hashHex, Date.now()) !== undefined) return yield* invalidKey()
      const startedAt = epoch
      const rows = yield* sql<{ id: string; user_id: string }>`
        SELECT id, user_id FROM api_keys WHERE key_hash = ${hash} AND deleted_at IS NULL`
      const row = rows[0]
      const cacheable = startedAt === epoch
      if (row === undefined) {
        if (cacheable) unknown.set(hashHex, true, shortTtlMs, Date.now())
        return yield* invalidKey()
      }
      const principal: Principal = { userId: row.user_id, keyId: row.id, scopes: apiKeyScopes }
      if (cacheable) known.set(hashHex, principal, listening ? listenTtlMs : shortTtlMs, Date.now())
      noteUse(hashHex)
      if (usedSinceFlush.size < known.maxEntries) usedSinceFlush.add(row.id)
      return principal
    })

    /** None when the user does not exist. */
    const insertKey = (userId: string, name: string) =>
      Effect.gen(function*() {
        const apiKey = generateApiKey()
        const keyId = randomId("key")
        const prefix = displayPrefix(apiKey)
        const hash = hashApiKey(apiKey)
        const rows = yield* sql`
          INSERT INTO api_keys (id, user_id, name, key_hash, key_prefix, key_suffix)
          SELECT ${keyId}, id, ${name}, ${hash}, ${prefix}, ${apiKey.slice(-4)} FROM users WHERE id = ${userId}
          RETURNING id`
        if (rows.length === 0) return Option.none<MintedKey>()
        // A lookup of this exact key can only have failed by guessing it; forget it anyway.
        invalidate(hash.toString("hex"))
        return Option.some<MintedKey>({ keyId, apiKey, prefix })
      })

    const mintKey = Effect.fn("ApiKeys.mintKey")(function*(userId: string, name?: string) {
      const key = yield* insertKey(userId, name ?? "default")
      if (Option.isNone(key)) return yield* userNotFound(userId)
      return key.value
    })

    const markDeleted = (keyIdOrKey: string) =>
      keyIdOrKey.startsWith(apiKeyPrefix)
        ? sql<{ id: string; user_id: string; key_hash: Uint8Array }>`
            UPDATE api_keys SET deleted_at = now()
            WHERE key_hash = ${hashApiKey(keyIdOrKey)} AND deleted_at IS NULL
            RETURNING id, user_id, key_hash`
        : sql<{ id: string; user_id: string; key_hash: Uint8Array }>`
            UPDATE api_keys SET deleted_at = now()
            WHERE id = ${keyIdOrKey} AND deleted_at IS NULL
            RETURNING id, user_id, key_hash`
    /** Marks the key deleted and drops it here; fails KeyNotFound. Returns the row and its hash (hex). */
    const deleteHere = (keyIdOrKey: string) =>
      Effect.gen(function*() {
        const row = (yield* markDeleted(keyIdOrKey))[0]
        if (row === undefined) {
          return yield* new AccountsError({ reason: "KeyNotFound", message: `no active key ${describeKey(keyIdOrKey)}` })
        }
        const hashHex = Buffer.from(row.key_hash).toString("hex")
        invalidate(hashHex)
        return { deleted: { keyId: row.id, userId: row.user_id } satisfies DeletedKey, hashHex }
      })

    /** deleteHere, then waits for every other live instance to drop the key (see the module comment). */
    const deleteEverywhere = (listener: AckBook, keyIdOrKey: string) =>
      changeAcknowledgedByAll(
        listener,
        // A silent instance is dead or deaf (LISTEN down), and a deaf one caches for shortTtlMs.
        { self: instanceId, liveWithinMs, timeoutMs: shortTtlMs, what: `an API key was deleted; instances that did not answer cache keys for at most ${shortTtlMs} ms` },
        (token) =>
          Effect.gen(function*() {
            const { deleted, hashHex } = yield* deleteHere(keyIdOrKey)
            yield* listener.client.notify(keyChannel, `${hashHex} ${token}`)
            return deleted
          })
      )

    const deleteKey = Effect.fn("ApiKeys.deleteKey")(function*(keyIdOrKey: string) {
      if (acks !== undefined) return yield* deleteEverywhere(acks, keyIdOrKey)
      return (yield* deleteHere(keyIdOrKey)).deleted
    })

    const userExists = (userId: string) =>
      Effect.map(sql`SELECT 1 FROM users WHERE id = ${userId}`, (rows) => rows.length > 0)

    const listKeys = Effect.fn("ApiKeys.listKeys")(function*(userId: string) {
      const rows = yield* sql<{ id: string; user_id: string; name: string; key_prefix: string; key_suffix: string | null; created_at: Date; last_used_at: Date | null }>`
        SELECT id, user_id, name, key_prefix, key_suffix, created_at, last_used_at FROM api_keys
        WHERE user_id = ${userId} AND deleted_at IS NULL
        ORDER BY created_at, id`
      if (rows.length === 0 && !(yield* userExists(userId))) return yield* userNotFound(userId)
      return rows.map((row): KeyInfo => ({
        keyId: row.id,
        userId: row.user_id,
        name: row.name,
        prefix: row.key_prefix,
        suffix: row.key_suffix ?? undefined,
        createdAt: row.created_at,
        lastUsedAt: row.last_used_at ?? undefined
      }))
    })
    return ApiKeys.of({ authenticate, mintKey, deleteKey, listKeys, watchRevocations })
  })

/** Never echo a full key back (it may land in a log): keep its display prefix only. */
const describeKey = (keyIdOrKey: string): string =>
  keyIdOrKey.startsWith(apiKeyPrefix) ? `${displayPrefix(keyIdOrKey)}…` : keyIdOrKey

/** API keys over the `SqlClient` in context; uses LISTEN when the `Database` says it crosses processes. */
export const apiKeysLayer = (options: ApiKeysOptions = {}): Layer.Layer<ApiKeys, never, SqlClient> =>
  Layer.effect(ApiKeys, makeApiKeys(options))

/** API keys with the default cache bounds. */
export const ApiKeysLive: Layer.Layer<ApiKeys, never, SqlClient> = apiKeysLayer()
