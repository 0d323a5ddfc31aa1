/**
 * A throwaway self-signed TLS certificate for test https servers, valid for the given subject
 * alternative names (e.g. `IP:127.0.0.1`, `DNS:localhost`). Made with the system's openssl.
 */
import { execFileSync } from "node:child_process"
import * as path from "node:path"

export const selfSignedCert = (dir: string, altNames: ReadonlyArray<string>): { certFile: string; keyFile: string } => {
  const certFile = path.join(dir, "cert.pem")
  const keyFile = path.join(dir, "key.pem")
  execFileSync("openssl", [
    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
    "-keyout", keyFile, "-out", certFile, "-days", "2", "-subj", "/CN=127.0.0.1",
    "-addext", `subjectAltName=${altNames.join(",")}`
  ], { stdio: ["ignore", "ignore", "pipe"] })
  return { certFile, keyFile }
}
