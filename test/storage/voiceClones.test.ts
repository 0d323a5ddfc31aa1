/**
 * The clone repository (owner filtering, unique active names, soft delete) and the local blob
 * store (atomic put, get, delete, key checks).
 */
import { Effect, Exit, Layer } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import t from "tap"
import { Users } from "../../storage/Users.ts"
import { makeLocalBlobStore } from "../../storage/BlobStore.ts"
import { VoiceClones, VoiceClonesLive } from "../../storage/VoiceClones.ts"
import { accountLayers } from "../support/accounts.ts"
import { useTestDatabaseWith } from "../support/database.ts"

t.test("voice clones: per-owner rows, unique active names, soft delete", async (t) => {
  const db = useTestDatabaseWith(t, Layer.merge(accountLayers(), VoiceClonesLive))
  const [alice, bob] = await db.run(Effect.all([
    Effect.flatMap(Users, (a) => a.createUser({ name: "alice" })),
    Effect.flatMap(Users, (a) => a.createUser({ name: "bob" }))
  ]))
  const clone = (name: string) => ({
    name,
    language: "et",
    description: null,
    labels: { accent: "võru" },
    refText: null,
    sampleBlobKey: "clones/x/sample",
    profile: { f0: { medianHz: 120 } },
    previewText: null
  })
  const made = await db.run(Effect.flatMap(VoiceClones, (c) => c.create(alice!.userId, clone("Mina"))))
  t.match(made.voiceId, /^vc_[0-9a-f]{20}$/)
  t.same(made.labels, { accent: "võru" }, "labels round-trip as an object")
  t.same(made.profile, { f0: { medianHz: 120 } }, "profile round-trips as an object")

  const dup = await db.run(Effect.flip(Effect.flatMap(VoiceClones, (c) => c.create(alice!.userId, clone("Mina")))))
  t.equal((dup as { reason?: string }).reason, "NameTaken", "the same name twice is NameTaken")
  await db.run(Effect.flatMap(VoiceClones, (c) => c.create(bob!.userId, clone("Mina"))))
  t.pass("another user may use the same name")

  const bobSees = await db.runtime.runPromiseExit(Effect.flatMap(VoiceClones, (c) => c.get(bob!.userId, made.voiceId)))
  t.ok(Exit.isFailure(bobSees), "another user's clone is not found")
  t.equal((await db.run(Effect.flatMap(VoiceClones, (c) => c.list(alice!.userId)))).length, 1)

  await db.run(Effect.flatMap(VoiceClones, (c) => c.remove(alice!.userId, made.voiceId)))
  t.equal((await db.run(Effect.flatMap(VoiceClones, (c) => c.list(alice!.userId)))).length, 0, "deleted clones are not listed")
  await db.run(Effect.flatMap(VoiceClones, (c) => c.create(alice!.userId, clone("Mina"))))
  t.pass("a deleted clone's name is free again")
})

t.test("local blob store", async (t) => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "blobs-"))
  t.teardown(() => fs.rmSync(root, { recursive: true, force: true }))
  const store = makeLocalBlobStore(root)
  await Effect.runPromise(store.put("clones/vc_1/sample", new Uint8Array([1, 2, 3])))
  t.same([...await Effect.runPromise(store.get("clones/vc_1/sample"))], [1, 2, 3])
  t.same(fs.readdirSync(path.join(root, "clones", "vc_1")), ["sample"], "no temporary file is left")
  t.equal(await Effect.runPromise(store.exists("clones/vc_1/sample")), true)
  await Effect.runPromise(store.delete("clones/vc_1/sample"))
  t.equal(await Effect.runPromise(store.exists("clones/vc_1/sample")), false)
  await Effect.runPromise(store.delete("clones/vc_1/sample"))
  t.pass("deleting a missing blob succeeds")
  const missing = await Effect.runPromiseExit(store.get("clones/none"))
  t.ok(Exit.isFailure(missing), "a missing blob fails")
  t.throws(() => Effect.runSync(store.get("../etc/passwd")), "keys cannot leave the root")
})
