/**
 * What the native espeak-ng binding (EspeakNativeLib.ts) reads from the library file's ELF
 * headers (64-bit little-endian, x86-64): the writable segment its rewinds restore, and the
 * .got.plt slots it points elsewhere (the allocators, EspeakHeap.ts; rand, EspeakRand.ts).
 */

/** The R_X86_64_JUMP_SLOT relocations of a 64-bit little-endian ELF file: symbol → GOT offset. */
export const jumpSlots = (elf: Uint8Array): Map<string, bigint> => {
  const view = new DataView(elf.buffer, elf.byteOffset, elf.byteLength)
  const shoff = Number(view.getBigUint64(0x28, true))
  const shentsize = view.getUint16(0x3a, true)
  const shnum = view.getUint16(0x3c, true)
  const section = (i: number) => {
    const o = shoff + i * shentsize
    return {
      type: view.getUint32(o + 4, true),
      offset: Number(view.getBigUint64(o + 24, true)),
      size: Number(view.getBigUint64(o + 32, true)),
      link: view.getUint32(o + 40, true),
      entsize: Number(view.getBigUint64(o + 56, true))
    }
  }
  const SHT_RELA = 4
  const R_X86_64_JUMP_SLOT = 7
  const slots = new Map<string, bigint>()
  const utf8 = new TextDecoder()
  for (let i = 0; i < shnum; i++) {
    const rela = section(i)
    if (rela.type !== SHT_RELA || rela.entsize !== 24) continue
    const symtab = section(rela.link)
    const strtab = section(symtab.link)
    for (let o = rela.offset; o < rela.offset + rela.size; o += 24) {
      const info = view.getBigUint64(o + 8, true)
      if (Number(info & 0xffffffffn) !== R_X86_64_JUMP_SLOT) continue
      const nameAt = strtab.offset + view.getUint32(symtab.offset + Number(info >> 32n) * symtab.entsize, true)
      let end = nameAt
      while (elf[end] !== 0) end++
      slots.set(utf8.decode(elf.subarray(nameAt, end)), view.getBigUint64(o, true))
    }
  }
  return slots
}

/** Reads the writable loadable segment from a 64-bit little-endian ELF file's program headers. */
export const writableSegment = (elf: Uint8Array): { vaddr: bigint; memsz: bigint } => {
  const view = new DataView(elf.buffer, elf.byteOffset, elf.byteLength)
  if (view.getUint32(0) !== 0x7f454c46 || elf[4] !== 2 || elf[5] !== 1) throw new Error("not a 64-bit little-endian ELF file")
  const phoff = Number(view.getBigUint64(0x20, true))
  const phentsize = view.getUint16(0x36, true)
  const phnum = view.getUint16(0x38, true)
  const found: Array<{ vaddr: bigint; memsz: bigint }> = []
  for (let i = 0; i < phnum; i++) {
    const o = phoff + i * phentsize
    const PT_LOAD = 1
    const PF_W = 2
    if (view.getUint32(o, true) === PT_LOAD && (view.getUint32(o + 4, true) & PF_W) !== 0) {
      found.push({ vaddr: view.getBigUint64(o + 16, true), memsz: view.getBigUint64(o + 40, true) })
    }
  }
  if (found.length !== 1) throw new Error(`expected one writable PT_LOAD segment, found ${found.length}`)
  return found[0]!
}
