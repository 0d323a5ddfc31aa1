// The baseline of bench/http: a bare uWebSockets.js handler answering one fixed body.
// argv: port, path, body file. Prints "listening <port>" once ready.
import uWS from "@based/uws"
import { readFileSync } from "node:fs"

const [port, path, bodyFile] = process.argv.slice(2)
const body = readFileSync(bodyFile)
uWS.App()
  .get(path, (res) => {
    res.cork(() => {
      res.writeStatus("200 OK").writeHeader("content-type", "application/json").end(body)
    })
  })
  .listen("127.0.0.1", Number(port), (socket) => {
    if (!socket) process.exit(1)
    console.log(`listening ${port}`)
  })
