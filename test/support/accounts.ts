/**
 * The three account services (storage/Users.ts, storage/ApiKeys.ts, storage/Credits.ts) as one
 * layer over the `SqlClient` in context, wired as runtime/Service.ts wires them: for tests that
 * need users, keys and credits together.
 */
import { Layer } from "effect"
import { type ApiKeysOptions, apiKeysLayer } from "../../storage/ApiKeys.ts"
import { creditsLayer } from "../../storage/Credits.ts"
import { usersLayer } from "../../storage/Users.ts"

export interface AccountLayersOptions {
  readonly initialCredits?: number
  readonly instanceId?: string
  readonly keys?: ApiKeysOptions
}

export const accountLayers = (options: AccountLayersOptions = {}) =>
  Layer.mergeAll(
    usersLayer(options.initialCredits === undefined ? {} : { initialCredits: options.initialCredits }).pipe(
      Layer.provideMerge(apiKeysLayer(options.keys))
    ),
    creditsLayer(options.instanceId === undefined ? {} : { instanceId: options.instanceId })
  )
