#!/usr/bin/env python3
"""The functions a running agent executes, as a linker symbol ordering file.

Reads lld's link map of the release binary (build.rs writes it beside the
build script's output) and callgrind's output of that same binary run through
an agent's life (scripts/text-order.sh), with the address of every
instruction that ran; the map says which function's input section holds each
address. The order: the functions whose instructions ran most often first
(what an idle agent runs every second), then the rest that ran at all
(start-up, pod starts, adoption, removal), each named once.

    text_order.py BINARY MAP CALLGRIND_OUT [...] > build/text-order.txt

Prints a summary (functions, bytes) on stderr.
"""

import bisect
import re
import sys

# lld's map: "VMA LMA Size Align Out In Symbol", hex numbers; an input
# section line names its file and section in the "In" column, and a symbol
# line follows it with the symbol alone.
MAP_LINE = re.compile(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+(.*)$")
INPUT_SECTION = re.compile(r"^\s*\S.*:\((\.text[^)]*)\)\s*$")


def text_sections(map_text):
    """[(start, size, symbol)] of the map's .text input sections, sorted,
    each named by the first symbol defined in it."""
    sections = []
    current = None
    for line in map_text.splitlines():
        m = MAP_LINE.match(line)
        if not m:
            continue
        start, size, rest = int(m.group(1), 16), int(m.group(2), 16), m.group(3)
        section = INPUT_SECTION.match(rest)
        if section:
            current = [start, size, None]
            sections.append(current)
            continue
        name = rest.strip()
        if current is not None and current[2] is None and name and not name.startswith("."):
            # Indented under its section: a symbol defined in it.
            if current[0] <= start < current[0] + max(current[1], 1):
                current[2] = name
    out = [(s, n, sym) for s, n, sym in sections if sym and n > 0]
    out.sort()
    return out


# callgrind with --dump-instr=yes --dump-line=no (name compression on):
# "ob=(id) name" / "ob=(id)" sets the object of the cost lines that follow
# (the binary, libc, ...), and "cob=" a callee's, which may name it first;
# a cost line starts with the instruction's
# address: "0x2e0c40", "+3"/"-8" from the last one, or "*" the same; then
# its cost (instructions executed). "calls=N TARGET" describes the call
# made by the next cost line, whose cost is the callee's too: that line's
# instruction ran, its cost is not its own.
OB = re.compile(r"^(c?ob)=\((\d+)\)(?: (.*))?$")
POSITION = re.compile(r"^(0x[0-9a-fA-F]+|[+-]\d+|\*)\s+(\d+)")


def executed(callgrind_text, binary):
    """{address: instructions executed there} of the code in the object
    `binary` (a path suffix): every instruction that ran, whatever function
    callgrind counted it under (a tail call's target has no name of its
    own in a stripped binary)."""
    objects = {}
    out = {}
    ours = False
    last = 0
    inclusive = False
    for line in callgrind_text.splitlines():
        m = OB.match(line)
        if m:
            # A callee's object ("cob=") may be the first to name it.
            if m.group(3):
                objects[m.group(2)] = m.group(3)
            if m.group(1) == "ob":
                ours = objects.get(m.group(2), "").endswith(binary)
            continue
        if line.startswith("calls="):
            inclusive = True
            continue
        m = POSITION.match(line)
        if not m:
            continue
        pos, cost = m.group(1), int(m.group(2))
        if pos.startswith("0x"):
            last = int(pos, 16)
        elif pos != "*":
            last += int(pos)
        if ours:
            out[last] = out.get(last, 0) + (0 if inclusive else cost)
        inclusive = False
    return out


def order(sections, addresses):
    """The symbols whose section holds an executed address, those whose
    instructions ran most often first (ties: by address), each once; and
    their total size."""
    starts = [s for s, _, _ in sections]
    weight = {}
    for addr, n in addresses.items():
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0:
            continue
        start, size, sym = sections[i]
        if addr < start + size:
            weight[(start, size, sym)] = weight.get((start, size, sym), 0) + n + 1
    ranked = sorted(weight.items(), key=lambda kv: (-kv[1], kv[0][0]))
    return [sym for (_, _, sym), _ in ranked], sum(size for (_, size, _), _ in ranked)


def main(argv):
    if len(argv) < 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    binary = argv[1]
    with open(argv[2]) as f:
        sections = text_sections(f.read())
    addresses = {}
    for path in argv[3:]:
        with open(path) as f:
            for addr, n in executed(f.read(), binary).items():
                addresses[addr] = addresses.get(addr, 0) + n
    symbols, size = order(sections, addresses)
    total = sum(n for _, n, _ in sections)
    for sym in symbols:
        print(sym)
    print(
        f"text_order: {len(symbols)} of {len(sections)} functions ran, "
        f"{size / 1048576:.2f} of {total / 1048576:.2f} MiB of code",
        file=sys.stderr,
    )
    return 0 if symbols else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
