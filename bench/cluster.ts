/**
 * bench/cluster: three instances (WORKERS=1 each) on one PostgreSQL database and one DATA_DIR
 * behind nginx configured from deploy/nginx.conf + deploy/nginx-locations.conf; mixed traffic
 * through nginx (streamed TTS, WebSocket stream-input, sync STT, recognition jobs with webhooks,
 * voice clones); one instance SIGKILLed halfway. Checks and prints: jobs spread over instances
 * and none run twice, one webhook delivery per terminal state, a key deleted on one instance
 * refused by all, credits exact and never negative, the translation rate limit shared, MCP
 * sessions kept on one instance, no failed request except those on the killed instance, and
 * WebSocket clients carrying on through another instance. Exits 1 on any violated invariant.
 *
 * Needs PostgreSQL (BENCH_DATABASE_URL or DATABASE_URL; a database `cluster_<pid>` is created
 * there and dropped) and nginx. Run: npm run bench:cluster [-- --seconds N]; `--smoke`: 10 s.
 */
import { runCluster } from "./clusterDriver.ts"
import { nginxBinary } from "./clusterNodes.ts"
import { smoke } from "./support.ts"

const url = process.env.BENCH_DATABASE_URL ?? process.env.DATABASE_URL
const secondsArg = process.argv.indexOf("--seconds")
const durationS = secondsArg > 0 ? Number(process.argv[secondsArg + 1]) : smoke ? 10 : 60
if (url === undefined || url === "") {
  console.error("bench:cluster needs PostgreSQL: set DATABASE_URL or BENCH_DATABASE_URL (embedded PGlite cannot be shared by processes)")
  process.exit(1)
}
if (nginxBinary() === undefined) {
  console.error("bench:cluster needs nginx (apt-get install nginx-light)")
  process.exit(1)
}
const result = await runCluster({ databaseUrl: url, durationS })
console.log("")
console.log("invariant".padEnd(52) + "result")
for (const c of result.checks) console.log(`${c.name.padEnd(52)}${c.ok ? "ok" : "VIOLATED"}\n    ${c.detail}`)
process.exit(result.ok ? 0 : 1)
