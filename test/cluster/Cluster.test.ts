/**
 * Several instances on one database behind nginx (bench/clusterDriver.ts in smoke mode: 10 s of
 * mixed traffic, one instance SIGKILLed halfway): every invariant of bench/cluster.ts holds.
 * Skipped, saying why, without PostgreSQL (embedded PGlite belongs to one process) or nginx.
 */
import t from "tap"
import { runCluster } from "../../bench/clusterDriver.ts"
import { nginxBinary } from "../../bench/clusterNodes.ts"

const url = process.env.DATABASE_URL
if (url === undefined || url === "") {
  t.test("cluster of three instances", { skip: "DATABASE_URL is unset: embedded PGlite cannot be shared by several processes" }, () => {})
} else if (nginxBinary() === undefined) {
  t.test("cluster of three instances", { skip: "nginx is not installed (apt-get install nginx-light)" }, () => {})
} else {
  t.test("three instances behind nginx keep every invariant through a SIGKILL", { timeout: 300_000 }, async (t) => {
    const result = await runCluster({ databaseUrl: url, durationS: 10, log: (line) => t.comment(line) })
    for (const c of result.checks) t.ok(c.ok, `${c.name}: ${c.detail}`)
    t.ok(result.checks.length >= 8, "every check ran")
  })
}
