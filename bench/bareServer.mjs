// The baseline of bench/http and bench/tts: a bare uWebSockets.js handler answering one fixed
// body, to GET at once and to POST once the request body has arrived (the least any handler of
// a POST must do). argv: port, path, body file. Prints "listening <port>" once ready.
import uWS from "@based/uws"
import { readFileSync } from "node:fs"

const [port, path, bodyFile] = process.argv.slice(2)
const body = readFileSync(bodyFile)
const answer = (res) => {
  res.cork(() => {
    res.writeStatus("200 OK").writeHeader("content-type", "application/json").end(body)
  })
}
uWS.App()
  .get(path, answer)
  .post(path, (res) => {
    let aborted = false
    res.onAborted(() => {
      aborted = true
    })
    res.onData((_chunk, isLast) => {
      if (isLast && !aborted) answer(res)
    })
  })
  .listen("127.0.0.1", Number(port), (socket) => {
    if (!socket) process.exit(1)
    console.log(`listening ${port}`)
  })
