import t from "tap"
import { linearToMulaw, mulawDecode, mulawEncode, mulawToLinear } from "../../../engines/audio/Mulaw.ts"

t.test("G.711 reference points", async (t) => {
  t.equal(linearToMulaw(0), 0xff, "zero")
  t.equal(linearToMulaw(32767), 0x80, "positive full scale")
  t.equal(linearToMulaw(-32768), 0x00, "negative full scale")
  t.equal(linearToMulaw(-1), 0x7f, "tiny negative")
  t.equal(mulawToLinear(0xff), 0)
  t.equal(mulawToLinear(0x80), 32124)
  t.equal(mulawToLinear(0x00), -32124)
})

t.test("round trip error stays within the segment's quantisation step", async (t) => {
  let worst = 0
  for (let x = -32768; x <= 32767; x += 3) {
    const y = mulawToLinear(linearToMulaw(x))
    const clipped = Math.max(-32124, Math.min(32124, x))
    worst = Math.max(worst, Math.abs(y - clipped) / Math.max(Math.abs(clipped), 132))
  }
  t.ok(worst <= 1 / 16, `worst relative error ${worst.toFixed(4)}`)
  let monotonic = true
  for (let b = 0x7f; b > 0; b--) if (!(mulawToLinear(b - 1) < mulawToLinear(b))) monotonic = false
  t.ok(monotonic, "decode is monotonic within a sign")
  const samples = Int16Array.from({ length: 800 }, (_, i) => Math.round(8000 * Math.sin(i / 5)))
  const encoded = mulawEncode(samples)
  t.equal(encoded.length, samples.length, "one byte per sample")
  const decoded = mulawDecode(encoded)
  let err = 0
  let sig = 0
  samples.forEach((s, i) => {
    err += (decoded[i]! - s) ** 2
    sig += s * s
  })
  t.ok(10 * Math.log10(sig / err) > 30, `SNR ${(10 * Math.log10(sig / err)).toFixed(1)} dB`)
})
