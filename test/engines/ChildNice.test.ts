/**
 * engines/ChildNice.ts: engine child processes started by the main thread run WORKER_NICE steps
 * below it, read back from the kernel; 0 steps leaves them alone.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { once } from "node:events"
import { getPriority } from "node:os"
import t from "tap"
import { lowerChild, nicedCommand, setChildNice } from "../../engines/ChildNice.ts"

const posix = process.platform === "win32" && "no nice on Windows"
const tooNice = getPriority() > 14 && "this process runs at nice > 14"
const before = getPriority()

const started = (command: string, args: ReadonlyArray<string>) => {
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "ignore"] })
  t.teardown(() => void child.kill("SIGKILL"))
  return child
}
/** The first line the child prints. */
const firstLine = async (child: ChildProcess) => {
  const [chunk] = (await once(child.stdout!, "data")) as [Buffer]
  return chunk.toString().split("\n")[0]!
}

t.afterEach(() => setChildNice(0))

t.test("lowerChild: a single process just started goes the given steps below this thread", { skip: posix || tooNice }, async (t) => {
  setChildNice(5)
  const child = started("sh", ["-c", "echo ready; sleep 30"])
  lowerChild(child)
  await firstLine(child)
  t.equal(getPriority(child.pid), before + 5)
  t.equal(getPriority(), before, "this thread is untouched")
})

t.test("nicedCommand: a shell and the programs it starts at once all run lower", { skip: posix || tooNice }, async (t) => {
  setChildNice(4)
  const [command, args] = nicedCommand("sh", ["-c", "sleep 30 & echo $!; wait"])
  t.equal(command, "nice")
  const shell = started(command, args)
  const sleeper = Number(await firstLine(shell))
  t.equal(getPriority(shell.pid), before + 4, "the shell (nice execs it: the same pid)")
  t.equal(getPriority(sleeper), before + 4, "a program the shell started")
})

t.test("0 steps: commands unchanged, children at this thread's priority", { skip: posix }, async (t) => {
  t.same(nicedCommand("sh", ["-c", "true"]), ["sh", ["-c", "true"]])
  const child = started("sh", ["-c", "echo ready; sleep 30"])
  lowerChild(child)
  await firstLine(child)
  t.equal(getPriority(child.pid), before)
})
