/**
 * Preloaded into every test process (.taprc `node-arg`; plain JavaScript, so that it needs no
 * loader wherever it is imported: worker threads inherit the preloads and run it too). tap's runner
 * loads its process tracker, @tapjs/processinfo, into each test process, and the tracker adds
 * itself to the NODE_OPTIONS of every process that one spawns (through process-on-spawn, whatever
 * env the spawn passes), so every node a test starts (a service, the admin CLI, a bench) loaded
 * it too: a module-loading hook on its own thread that posts back the text of every module
 * loaded, and source maps switched on. That tracking serves coverage, which is off here (.taprc);
 * it cost each child ~1.5 s of start-up (the admin CLI: 2.0 → 3.5 s; admin-cli.test.ts 89 → 56 s).
 * This listener runs after the tracker's and takes it back out of the child's NODE_OPTIONS; the
 * test process itself keeps it.
 */
import processOnSpawn from "process-on-spawn"

const tracker = "@tapjs/processinfo"

processOnSpawn.addListener((spawned) => {
  const options = spawned.env.NODE_OPTIONS
  if (options === undefined || !options.includes(tracker)) return
  const kept = options.split(/\s+/).filter((option) => option !== "" && !option.includes(tracker)).join(" ")
  const { NODE_OPTIONS: _, ...env } = spawned.env
  spawned.env = kept === "" ? env : { ...env, NODE_OPTIONS: kept }
})
