/**
 * The outbound address guard against the ways a URL can spell an address. fast-check draws
 * addresses inside every special-purpose range (IANA's registries, written out here by hand
 * so the test does not trust the library it checks) and spells them as a client could: IPv4 in
 * decimal, hex, octal and short forms, IPv6 compressed or zero-padded, upper case, with a
 * dotted tail, and as every IPv6 form that carries an IPv4 address. Each spelling goes through
 * WHATWG URL parsing (what the route sees) and then the guard: all refused. Public addresses,
 * bare or wrapped, are allowed.
 */
import { Effect } from "effect"
import fc from "fast-check"
import * as net from "node:net"
import t from "tap"
import { classifyAddress, makeOutboundGuard, OutboundAddressError, pinnedLookup } from "../../storage/OutboundAddress.ts"

const RUNS = 300

// ---------------------------------------------------------------------------------------------
// Ranges (IANA IPv4 / IPv6 special-purpose registries, plus multicast and reserved space)
// ---------------------------------------------------------------------------------------------

const v4 = (dotted: string): number => dotted.split(".").reduce((n, part) => n * 256 + Number(part), 0)
const REFUSED_V4: ReadonlyArray<readonly [string, number]> = [
  ["0.0.0.0", 8], ["10.0.0.0", 8], ["100.64.0.0", 10], ["127.0.0.0", 8], ["169.254.0.0", 16],
  ["172.16.0.0", 12], ["192.0.0.0", 24], ["192.0.2.0", 24], ["192.31.196.0", 24], ["192.52.193.0", 24],
  ["192.88.99.0", 24], ["192.168.0.0", 16], ["192.175.48.0", 24], ["198.18.0.0", 15], ["198.51.100.0", 24],
  ["203.0.113.0", 24], ["224.0.0.0", 4], ["240.0.0.0", 4], ["255.255.255.255", 32]
]
const inV4Range = (n: number, [base, len]: readonly [string, number]) => Math.floor(n / 2 ** (32 - len)) === Math.floor(v4(base) / 2 ** (32 - len))
const isRefusedV4 = (n: number) => REFUSED_V4.some((r) => inV4Range(n, r))

const refusedV4 = fc.constantFrom(...REFUSED_V4).chain(([base, len]) =>
  fc.integer({ min: 0, max: 2 ** (32 - len) - 1 }).map((offset) => v4(base) + offset)
)
const publicV4 = fc.integer({ min: 0, max: 2 ** 32 - 1 }).filter((n) => !isRefusedV4(n))

type Parts = ReadonlyArray<number>
/** [first parts of the prefix, prefix length in bits]. */
const REFUSED_V6: ReadonlyArray<readonly [Parts, number, string]> = [
  [[0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified"], [[0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback"],
  [[0xfe80], 10, "link-local"], [[0xfec0], 10, "site-local"], [[0xfc00], 7, "unique-local"],
  [[0xff00], 8, "multicast"], [[0x100, 0, 0, 0], 64, "discard"], [[0x2001, 0xdb8], 32, "documentation"],
  [[0x3fff, 0], 20, "documentation (RFC 9637)"], [[0x2001, 0x2, 0], 48, "benchmarking"], [[0x2001, 0x3], 32, "AMT"],
  [[0x2001, 0x4, 0x112], 48, "AS112"], [[0x2620, 0x4f, 0x8000], 48, "AS112"], [[0x2001, 0x10], 28, "ORCHID"],
  [[0x2001, 0x20], 28, "ORCHIDv2"], [[0x2001, 0x30], 28, "DRIP"], [[0x5f00], 16, "segment routing"]
]

const part16 = fc.integer({ min: 0, max: 0xffff })
/** 8 parts inside prefix/len: the prefix bits kept, the rest drawn. */
const inV6Range = (prefix: Parts, len: number) =>
  fc.array(part16, { minLength: 8, maxLength: 8 }).map((random) =>
    random.map((r, i) => {
      const keep = Math.max(0, Math.min(16, len - 16 * i))
      const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff
      return ((prefix[i] ?? 0) & mask) | (r & ~mask & 0xffff)
    })
  )
const refusedNativeV6 = fc.constantFrom(...REFUSED_V6).chain(([prefix, len]) => inV6Range(prefix, len))
/** Outside 2000::/3 (unassigned or special), leaving out the forms that carry IPv4 (tested apart). */
const nonGlobalV6 = fc.array(part16, { minLength: 8, maxLength: 8 })
  .filter((p) => (p[0]! & 0xe000) !== 0x2000 && !(p[0] === 0x64 && p[1] === 0xff9b) && !p.slice(0, 5).every((x) => x === 0))
/** 2001::/23 beyond Teredo (2001::/32): IETF protocol assignments, not public servers. */
const ietfV6 = inV6Range([0x2001], 23).filter((p) => p[1] !== 0)
/** Global unicast outside every special block. */
const publicNativeV6 = fc.array(part16, { minLength: 8, maxLength: 8 })
  .map((p) => [0x2000 | (p[0]! & 0x1fff), ...p.slice(1)])
  .filter((p) =>
    !(p[0] === 0x2001 && p[1]! < 0x200) && p[0] !== 0x2002 && !(p[0] === 0x2620 && p[1] === 0x4f && p[2] === 0x8000) &&
    !(p[0] === 0x3fff && p[1]! < 0x1000)
  )

const hi = (n: number) => Math.floor(n / 65536)
const lo = (n: number) => n % 65536

/** Every IPv6 form that carries an IPv4 address, around `n`; `other` fills a Teredo server. */
const wrappers = (n: number, other: number, r: Parts): ReadonlyArray<readonly [string, Parts]> => [
  ["IPv4-mapped", [0, 0, 0, 0, 0, 0xffff, hi(n), lo(n)]],
  ["NAT64", [0x64, 0xff9b, 0, 0, 0, 0, hi(n), lo(n)]],
  ["6to4", [0x2002, hi(n), lo(n), r[0]!, r[1]!, r[2]!, r[3]!, r[4]!]],
  ["Teredo (client)", [0x2001, 0, hi(other), lo(other), r[0]!, r[1]!, 0xffff - hi(n), 0xffff - lo(n)]],
  ["Teredo (server)", [0x2001, 0, hi(n), lo(n), r[0]!, r[1]!, 0xffff - hi(other), 0xffff - lo(other)]]
]
/** Forms refused whatever they carry. */
const alwaysRefusedWrappers = (n: number, r: Parts): ReadonlyArray<readonly [string, Parts]> => [
  ["IPv4-compatible", [0, 0, 0, 0, 0, 0, hi(n), lo(n)]],
  ["IPv4-translated", [0, 0, 0, 0, 0xffff, 0, hi(n), lo(n)]],
  ["NAT64 local-use", [0x64, 0xff9b, 1, r[0]!, r[1]!, r[2]!, r[3]!, r[4]!]]
]

// ---------------------------------------------------------------------------------------------
// Spellings
// ---------------------------------------------------------------------------------------------

const dotted = (n: number) => [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff].join(".")

/** How one number of an IPv4 host is written (WHATWG: decimal, 0x hex, 0-prefixed octal). */
const radix = fc.record({
  base: fc.constantFrom("dec", "hex", "oct"),
  upper: fc.boolean(),
  zeros: fc.integer({ min: 0, max: 3 })
})
type Radix = { base: string; upper: boolean; zeros: number }
const writeNumber = (value: number, r: Radix): string => {
  if (r.base === "dec") return String(value)
  if (r.base === "hex") {
    const digits = "0".repeat(r.zeros) + value.toString(16)
    return (r.upper ? "0X" : "0x") + (r.upper ? digits.toUpperCase() : digits)
  }
  return "0" + "0".repeat(r.zeros) + value.toString(8)
}

/** An IPv4 address as a URL host may spell it: 1 to 4 numbers, each in its own radix. */
const spellV4 = (n: number) =>
  fc.record({ count: fc.integer({ min: 1, max: 4 }), radixes: fc.array(radix, { minLength: 4, maxLength: 4 }), dot: fc.boolean() })
    .map(({ count, radixes, dot }) => {
      const bytes = [n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]
      // The last number holds all the bytes the earlier ones do not.
      const numbers = [...bytes.slice(0, count - 1), bytes.slice(count - 1).reduce((a, b) => a * 256 + b, 0)]
      return numbers.map((x, i) => writeNumber(x, radixes[i]!)).join(".") + (dot ? "." : "")
    })

/** An IPv6 address (8 parts) spelled freely: padding, case, `::` anywhere it fits, dotted tail. */
const spellV6 = (p: Parts) =>
  fc.record({
    pad: fc.boolean(),
    upper: fc.boolean(),
    dottedTail: fc.boolean(),
    compress: fc.boolean()
  }).map(({ pad, upper, dottedTail, compress }) => {
    const words = p.map((x) => (pad ? x.toString(16).padStart(4, "0") : x.toString(16)))
    let groups: Array<string> = dottedTail ? [...words.slice(0, 6), `${p[6]! >> 8}.${p[6]! & 0xff}.${p[7]! >> 8}.${p[7]! & 0xff}`] : words
    if (compress) {
      // The longest run of zero groups (not the dotted tail) becomes "::".
      let best = [-1, 0]
      for (let i = 0; i < groups.length; i++) {
        let j = i
        while (j < groups.length && /^0+$/.test(groups[j]!)) j++
        if (j - i > best[1]!) best = [i, j - i]
      }
      if (best[1]! >= 1) {
        const [at, len] = best as [number, number]
        const left = groups.slice(0, at).join(":")
        const right = groups.slice(at + len).join(":")
        groups = [`${left}::${right}`]
      }
    }
    const text = groups.join(":")
    return upper ? text.toUpperCase() : text
  })

/** The hostname the route sees for `https://<host>/`, or undefined when the URL is invalid. */
const urlHost = (host: string): string | undefined => {
  try {
    return new URL(`https://${host}/`).hostname
  } catch {
    return undefined
  }
}

const guard = makeOutboundGuard({ allowPrivate: false })
/** The guard's verdict on an IP literal (no DNS involved, so it runs synchronously). */
const guardRefuses = (host: string): boolean => {
  const result = Effect.runSync(Effect.result(guard.check(host)))
  return result._tag === "Failure" && result.failure.reason === "Refused"
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

t.test("every IPv4 spelling of a special-purpose address is refused after URL parsing", async (t) => {
  fc.assert(
    fc.property(refusedV4.chain((n) => fc.tuple(fc.constant(n), spellV4(n))), ([n, spelling]) => {
      const host = urlHost(spelling)
      // The generator spells what the URL parser reads back: the same address.
      if (host !== dotted(n)) throw new Error(`${spelling} parsed as ${host}, not ${dotted(n)}`)
      const verdict = classifyAddress(host)
      if (verdict.allowed) throw new Error(`${spelling} (${host}) allowed`)
      if (!guardRefuses(host)) throw new Error(`the guard let ${host} through`)
    }),
    { numRuns: RUNS }
  )
  t.pass(`${RUNS} spellings refused`)
})

t.test("every IPv6 spelling of a special-purpose IPv6 address is refused after URL parsing", async (t) => {
  const addresses = fc.oneof(refusedNativeV6, nonGlobalV6, ietfV6)
  fc.assert(
    fc.property(addresses.chain((p) => fc.tuple(fc.constant(p), spellV6(p))), ([p, spelling]) => {
      const host = urlHost(`[${spelling}]`)
      if (host === undefined) throw new Error(`[${spelling}] did not parse`)
      if (classifyAddress(host).allowed) throw new Error(`[${spelling}] → ${host} allowed`)
      if (classifyAddress(spelling).allowed) throw new Error(`${spelling} allowed when classified directly`)
      if (!guardRefuses(host)) throw new Error(`the guard let ${host} through (${p.map((x) => x.toString(16)).join(":")})`)
    }),
    { numRuns: RUNS }
  )
  t.pass(`${RUNS} spellings refused`)
})

t.test("IPv6 forms carrying a special-purpose IPv4 address are refused (mapped, compatible, NAT64, 6to4, Teredo)", async (t) => {
  const cases = fc.tuple(refusedV4, publicV4, fc.array(part16, { minLength: 5, maxLength: 5 })).chain(([n, other, r]) =>
    fc.constantFrom(...wrappers(n, other, r), ...alwaysRefusedWrappers(n, r)).chain(([form, p]) =>
      fc.tuple(fc.constant(form), fc.constant(dotted(n)), spellV6(p))
    )
  )
  fc.assert(
    fc.property(cases, ([form, carried, spelling]) => {
      const host = urlHost(`[${spelling}]`)
      if (host === undefined) throw new Error(`[${spelling}] did not parse`)
      const verdict = classifyAddress(host)
      if (verdict.allowed) throw new Error(`${form} [${spelling}] → ${host} carrying ${carried} allowed`)
      if (!guardRefuses(host)) throw new Error(`the guard let ${host} through`)
    }),
    { numRuns: RUNS }
  )
  // The outsider's spellings, by hand.
  for (const host of ["[::ffff:127.0.0.1]", "[::ffff:7f00:1]", "[0:0:0:0:0:ffff:127.0.0.1]", "[::127.0.0.1]", "[64:ff9b::a9fe:a9fe]"]) {
    const verdict = classifyAddress(urlHost(host)!)
    t.notOk(verdict.allowed, `${host}: refused as ${verdict.range}, carrying ${verdict.embedded}`)
  }
  t.equal(classifyAddress("2001:0:4136:e378:8000:63bf:80ff:fffe").embedded, "127.0.0.1", "Teredo: the client address is the inverted last 32 bits")
  // ipaddr.js alone reads dotted ::a.b.c.d as ::ffff:a.b.c.d; the guard must not.
  t.equal(classifyAddress("::8.8.8.8").range, "ipv4Compatible", "::8.8.8.8 is IPv4-compatible (refused), not mapped")
  t.equal(classifyAddress("::0.0.0.0").range, "unspecified", "::0.0.0.0 is ::")
  t.equal(classifyAddress("2002:a9fe:a9fe::1").embedded, "169.254.169.254", "6to4: bits 16-47")
})

t.test("zone ids: the URL parser rejects them; the guard refuses link-local with or without one", async (t) => {
  for (const host of ["[fe80::1%25eth0]", "[fe80::1%eth0]", "[FE80::1%251]"]) {
    const parsed = urlHost(host)
    t.ok(parsed === undefined || !classifyAddress(parsed).allowed, `${host}: ${parsed ?? "not a URL"}`)
  }
  t.notOk(classifyAddress("fe80::1%eth0").allowed, "fe80::1%eth0 refused")
  t.notOk(classifyAddress("not an address").allowed, "garbage is refused, not allowed")
})

t.test("public addresses are allowed, bare or carried by NAT64, mapped, 6to4 and Teredo forms", async (t) => {
  fc.assert(
    fc.property(publicV4, (n) => {
      const verdict = classifyAddress(dotted(n))
      if (!verdict.allowed) throw new Error(`${dotted(n)} refused as ${verdict.range}`)
    }),
    { numRuns: RUNS }
  )
  fc.assert(
    fc.property(publicNativeV6.chain((p) => spellV6(p)), (spelling) => {
      const host = urlHost(`[${spelling}]`)!
      const verdict = classifyAddress(host)
      if (!verdict.allowed) throw new Error(`${host} refused as ${verdict.range}`)
    }),
    { numRuns: RUNS }
  )
  const wrapped = fc.tuple(publicV4, publicV4, fc.array(part16, { minLength: 5, maxLength: 5 })).chain(([n, other, r]) =>
    fc.constantFrom(...wrappers(n, other, r)).chain(([form, p]) => fc.tuple(fc.constant(form), spellV6(p)))
  )
  fc.assert(
    fc.property(wrapped, ([form, spelling]) => {
      const host = urlHost(`[${spelling}]`)!
      const verdict = classifyAddress(host)
      if (!verdict.allowed) throw new Error(`${form} ${host} refused as ${verdict.range}`)
    }),
    { numRuns: RUNS }
  )
  for (const address of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "64:ff9b::808:808", "::ffff:8.8.8.8"]) {
    t.ok(classifyAddress(address).allowed, `${address} allowed`)
  }
})

t.test("the guard resolves names and checks what they resolve to", async (t) => {
  const localhost = await Effect.runPromise(Effect.flip(guard.check("localhost")))
  t.ok(localhost instanceof OutboundAddressError, "localhost fails")
  t.equal(localhost.reason, "Refused", "localhost is refused (it resolves to loopback)")
  t.match(localhost.message, /127\.0\.0\.1|::1/, "the log message names the address")
  const missing = await Effect.runPromise(Effect.flip(guard.check("nonexistent.invalid")))
  t.equal(missing.reason, "Unresolvable")
  const open = await Effect.runPromise(makeOutboundGuard({ allowPrivate: true }).check("[::ffff:127.0.0.1]"))
  t.same(open.addresses, [{ address: "::ffff:127.0.0.1", family: 6 }], "allowPrivate: checked, not refused")
})

t.test("pinnedLookup: connections go to the checked address, never to a new lookup", async (t) => {
  const server = net.createServer((socket) => socket.end("pinned"))
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  const port = (server.address() as net.AddressInfo).port
  const lookup = pinnedLookup([{ address: "127.0.0.1", family: 4 }])
  // The name does not exist in DNS: the bytes can only come through the pinned address.
  for (const autoSelectFamily of [true, false]) {
    const got = await new Promise<string>((resolve, reject) => {
      const socket = net.connect({ host: "pinned.invalid", port, lookup, autoSelectFamily })
      let text = ""
      socket.on("data", (d) => (text += d.toString()))
      socket.on("end", () => resolve(text))
      socket.on("error", reject)
    })
    t.equal(got, "pinned", `autoSelectFamily ${autoSelectFamily}: connected to the pinned address`)
  }
  const noV6 = await new Promise<string | undefined>((resolve) =>
    lookup("x", { family: 6 }, (err) => resolve((err as NodeJS.ErrnoException | null)?.code))
  )
  t.equal(noV6, "ENOTFOUND", "no checked address of the asked family: no address at all")
})
