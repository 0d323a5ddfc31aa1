/**
 * Entry module of every inference worker thread (loaded by `runtime/worker.mjs`): the registry
 * of task kinds this service runs, and the function piscina calls with each `TaskRequest`.
 *
 * An engine module adds its kinds by exporting `defineTasks({ "tts.synthesize": ... })` and
 * being spread in below. Importing an engine module here must stay cheap: models load lazily
 * inside handlers (`perThread`), once per thread, not at import.
 */
import { poolTasks, serveTasks } from "./tasks.ts"
import { serveSessions } from "./sessions.ts"
import { asrSessions } from "./asr/streamingSessions.ts"
import { asrTasks } from "./asr/tasks.ts"
import { ttsTasks } from "./tts/tasks.ts"
import { expressiveTasks } from "./tts/expressiveTasks.ts"
import { vadTasks } from "./vad/tasks.ts"
import { speakerTasks } from "./speaker/tasks.ts"
import { cloneTasks } from "./clone/tasks.ts"
import { denoiseTasks } from "./denoise/tasks.ts"

export const tasks = {
  ...poolTasks,
  ...ttsTasks,
  ...expressiveTasks,
  ...asrTasks,
  ...vadTasks,
  ...speakerTasks,
  ...cloneTasks,
  ...denoiseTasks
}

export type Tasks = typeof tasks

/** Long-lived session kinds (engines/sessions.ts; the contract is in engines/Inference.ts). */
export const sessions = {
  ...asrSessions
}

export type Sessions = typeof sessions

/** Called once per thread by the bootstrap (runtime/worker.mjs). */
export const hostSessions = () => serveSessions(sessions)

export default serveTasks(tasks)
