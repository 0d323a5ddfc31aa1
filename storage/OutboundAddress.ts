/**
 * The one address guard for every connection the service opens on a caller's behalf: URL input
 * of speech-to-text today, webhook delivery later. A caller-named host may only be reached on
 * public (global unicast) addresses, so a request cannot turn the server against its own
 * loopback, its private network or the cloud metadata service.
 *
 * Addresses are classified with `ipaddr.js`, not by hand: the same 32 bits have many spellings
 * and IPv6 has several forms that carry an IPv4 address (`::ffff:7f00:1` is 127.0.0.1). Those
 * forms are unwrapped and the IPv4 inside is classified too.
 *
 * Use: `const target = yield* guard.check(url.hostname)`, then connect with
 * `{ lookup: target.lookup, agent: false }` so the socket goes to an address that was checked and
 * the name is not looked up a second time (DNS rebinding). Hazard: a pooled keep-alive agent could
 * hand out a socket opened for an earlier check; use `agent: false` or an agent of your own.
 * Check every redirect target again.
 *
 * It lives in storage/ (where bytes come from and go: database, blob store, remote URLs) and
 * imports nothing above it, so any actor that opens a connection can use it.
 */
import { Data, Effect } from "effect"
import ipaddr from "ipaddr.js"
import * as dns from "node:dns"
import * as net from "node:net"

export interface AddressClass {
  /** True when a caller-named connection may go to this address. */
  readonly allowed: boolean
  /**
   * The range that decided: `unicast` when allowed; otherwise ipaddr.js's name (`loopback`,
   * `private`, `linkLocal`, `uniqueLocal`, `reserved`, ...) or ours: `ipv4Compatible`,
   * `notGlobalUnicast` (IPv6 outside 2000::/3), `invalid`.
   */
  readonly range: string
  /** The IPv4 address carried by an IPv6 form (mapped, compatible, NAT64, 6to4, Teredo). */
  readonly embedded?: string
}

const v4FromParts = (high: number, low: number) => new ipaddr.IPv4([high >> 8, high & 0xff, low >> 8, low & 0xff])

/** RFC 6052 well-known NAT64 prefix; DNS64 on an IPv6-only network answers public hosts in it. */
const nat64WellKnown = ipaddr.IPv6.parseCIDR("64:ff9b::/96")

const classifyV4 = (v4: ipaddr.IPv4): AddressClass => {
  const range = v4.range()
  return { allowed: range === "unicast", range }
}

/** An IPv6 form that reaches (or names) an IPv4 host: allowed exactly when those hosts are public. */
const wrapping = (range: string, ...carried: ReadonlyArray<ipaddr.IPv4>): AddressClass => {
  const refused = carried.find((v4) => v4.range() !== "unicast")
  return {
    allowed: refused === undefined,
    range: refused === undefined ? range : `${range} of ${refused.range()}`,
    embedded: carried[carried.length - 1]!.toString()
  }
}

const classifyV6 = (v6: ipaddr.IPv6): AddressClass => {
  const p = v6.parts
  const range = v6.range()
  switch (range) {
    case "ipv4Mapped":
      // ::ffff:a.b.c.d: the kernel connects to a.b.c.d itself.
      return wrapping(range, v6.toIPv4Address())
    case "rfc6052":
      // Only the well-known /96 carries a plain IPv4 address; the local-use 64:ff9b:1::/48
      // (RFC 8215) is a network's own prefix and never a public destination.
      return v6.match(nat64WellKnown) ? wrapping("nat64", v4FromParts(p[6]!, p[7]!)) : { allowed: false, range: "nat64LocalUse" }
    case "6to4":
      // 2002:AABB:CCDD::/48 is the site behind the IPv4 address AABBCCDD.
      return wrapping(range, v4FromParts(p[1]!, p[2]!))
    case "teredo":
      // 2001:0:SSSS:SSSS:flags:port:CCCC:CCCC; the client address is stored inverted.
      return wrapping(range, v4FromParts(p[2]!, p[3]!), v4FromParts(~p[6]! & 0xffff, ~p[7]! & 0xffff))
    case "rfc6145":
      // ::ffff:0:a.b.c.d (SIIT translated): never a public server's address.
      return { allowed: false, range, embedded: v4FromParts(p[6]!, p[7]!).toString() }
    case "unicast": {
      if (p.slice(0, 6).every((x) => x === 0)) {
        // ::a.b.c.d, IPv4-compatible (deprecated by RFC 4291); some stacks tunnel it to a.b.c.d.
        return { allowed: false, range: "ipv4Compatible", embedded: v4FromParts(p[6]!, p[7]!).toString() }
      }
      // IANA hands out global unicast only from 2000::/3; the rest is unassigned or special.
      return (p[0]! & 0xe000) === 0x2000 ? { allowed: true, range } : { allowed: false, range: "notGlobalUnicast" }
    }
    default:
      return { allowed: false, range }
  }
}

/**
 * The address in the one spelling both the kernel and ipaddr.js read alike, or undefined.
 * Hazard: ipaddr.js reads the dotted IPv4-compatible `::a.b.c.d` as IPv4-mapped
 * `::ffff:a.b.c.d`, so text goes through the WHATWG URL parser first (hex groups only). A zone
 * id is dropped: it picks an interface, not an address, and link-local is refused whatever it is.
 */
const canonical = (address: string): string | undefined => {
  const bare = address.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "")
  let host: string
  try {
    host = new URL(`http://${bare.includes(":") ? `[${bare}]` : bare}/`).hostname.replace(/^\[(.*)\]$/, "$1")
  } catch {
    return undefined
  }
  return net.isIP(host) !== 0 ? host : undefined
}

/** Classifies one address as a resolver returns it (IPv4 dotted or IPv6, with or without brackets or zone). */
export const classifyAddress = (address: string): AddressClass => {
  const text = canonical(address)
  if (text === undefined || !ipaddr.isValid(text)) return { allowed: false, range: "invalid" }
  const ip = ipaddr.parse(text)
  return ip.kind() === "ipv4" ? classifyV4(ip as ipaddr.IPv4) : classifyV6(ip as ipaddr.IPv6)
}

/** True for addresses a caller-named connection may reach. */
export const isPublicAddress = (address: string): boolean => classifyAddress(address).allowed

export class OutboundAddressError extends Data.TaggedError("OutboundAddressError")<{
  /** `Refused`: an address is not public. `Unresolvable`: the name has no address. */
  readonly reason: "Refused" | "Unresolvable"
  readonly host: string
  /** For the log only: it names addresses and ranges, which a client must not learn. */
  readonly message: string
}> {}

export interface CheckedAddress {
  readonly address: string
  readonly family: 4 | 6
}

export interface CheckedTarget {
  readonly host: string
  /** Every address the host resolved to, each of them checked. */
  readonly addresses: ReadonlyArray<CheckedAddress>
  /** A `lookup` for net / tls / http(s) options that answers with `addresses` only. */
  readonly lookup: net.LookupFunction
}

export interface OutboundGuardOptions {
  /** Skip the public-address rule (tests, private deployments); the connection is still pinned. */
  readonly allowPrivate: boolean
  /** Replaces the public-address rule, for tests of the code around the guard. */
  readonly isAllowed?: (address: string) => boolean
}

export interface OutboundGuard {
  /** Resolves `host` (a URL's hostname; IPv6 in brackets is fine) and checks every address. */
  readonly check: (host: string) => Effect.Effect<CheckedTarget, OutboundAddressError>
}

/** A lookup that never asks DNS: node calls it with `all: true` when it races families. */
export const pinnedLookup = (addresses: ReadonlyArray<CheckedAddress>): net.LookupFunction => (_hostname, options, callback) => {
  const wanted = options.family === 4 || options.family === "IPv4" ? 4 : options.family === 6 || options.family === "IPv6" ? 6 : 0
  const usable = wanted === 0 ? addresses : addresses.filter((a) => a.family === wanted)
  if (usable.length === 0) {
    const error: NodeJS.ErrnoException = new Error(`no checked IPv${wanted} address`)
    error.code = "ENOTFOUND"
    return callback(error, "", 0)
  }
  if (options.all === true) return callback(null, usable.map((a) => ({ address: a.address, family: a.family })))
  callback(null, usable[0]!.address, usable[0]!.family)
}

const resolve = (host: string): Effect.Effect<ReadonlyArray<CheckedAddress>, OutboundAddressError> => {
  const literal = net.isIP(host)
  if (literal !== 0) return Effect.succeed([{ address: host, family: literal as 4 | 6 }])
  return Effect.tryPromise({
    try: () => dns.promises.lookup(host, { all: true, verbatim: true }),
    catch: (e) => new OutboundAddressError({ reason: "Unresolvable", host, message: `cannot resolve ${host}: ${(e as NodeJS.ErrnoException).code ?? String(e)}` })
  }).pipe(
    Effect.flatMap((found) =>
      found.length === 0
        ? Effect.fail(new OutboundAddressError({ reason: "Unresolvable", host, message: `${host} has no address` }))
        : Effect.succeed(found.map((a) => ({ address: a.address, family: a.family === 6 ? 6 as const : 4 as const })))
    )
  )
}

export const makeOutboundGuard = (options: OutboundGuardOptions): OutboundGuard => ({
  check: Effect.fn("OutboundAddress.check")(function*(rawHost: string) {
    const host = rawHost.replace(/^\[(.*)\]$/, "$1")
    const addresses = yield* resolve(host)
    if (!options.allowPrivate) {
      for (const a of addresses) {
        const verdict = options.isAllowed !== undefined
          ? { allowed: options.isAllowed(a.address), range: "test rule" }
          : classifyAddress(a.address)
        if (!verdict.allowed) {
          const carried = "embedded" in verdict && verdict.embedded !== undefined ? `, carrying ${verdict.embedded}` : ""
          return yield* new OutboundAddressError({
            reason: "Refused",
            host,
            message: `${host} resolves to ${a.address} (${verdict.range}${carried}), not a public address`
          })
        }
      }
    }
    return { host, addresses, lookup: pinnedLookup(addresses) }
  })
})
