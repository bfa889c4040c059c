"""Tests of text_order.py on a small lld map and callgrind output."""

import unittest

import text_order

MAP = """\
             VMA              LMA     Size Align Out     In      Symbol
          2e0c40           2e0c40   db4281    64 .text
          2e0c40           2e0c40       30    16         crilet.o:(.text._ZN3hot4idle17h0000000000000001E)
          2e0c40           2e0c40        0     1                 _ZN3hot4idle17h0000000000000001E
          2e0c70           2e0c70       20    16         crilet.o:(.text._ZN4cold5never17h0000000000000002E)
          2e0c70           2e0c70        0     1                 _ZN4cold5never17h0000000000000002E
          2e0c90           2e0c90       40    16         crilet.o:(.text._ZN4once5start17h0000000000000003E)
          2e0c90           2e0c90        0     1                 _ZN4once5start17h0000000000000003E
          2e0cd0           2e0cd0       10    16         crilet.o:(.text)
          2e0cd0           2e0cd0        0     1                 _start
          300000           300000       10     8 .rodata
          300000           300000       10     8         crilet.o:(.rodata._ZN3hot5TABLE17h0000000000000004E)
"""

# As callgrind --dump-instr=yes --dump-line=no writes it: objects named
# once then by number, positions absolute, relative or "*"; the line after
# "calls=" is the call instruction with the callee's cost.
CALLGRIND = """\
version: 1
creator: callgrind-3.19.0
positions: instr
events: Ir
ob=(1) /usr/lib/x86_64-linux-gnu/libc.so.6
fn=(1) malloc
0x2e0c70 5
cob=(2) /tmp/w/crilet
cfn=(2) 0x00000000002e0c90
calls=1 0x2e0c90
+2 45
ob=(2)
fn=(2)
0x2e0c90 40
+4 3
cfn=(3) 0x00000000002e0c48
calls=1000 0x2e0c48
* 7000
+2 1
fn=(3)
0x2e0c48 900
* 100
fn=(4) 0x00000000002e0cd0'2
+144 1
ob=(1)
fn=(5) free
0x2e0c70 9
"""


class TextOrderTest(unittest.TestCase):
    def test_sections_are_named_by_their_first_symbol(self):
        sections = text_order.text_sections(MAP)
        self.assertEqual(
            [(hex(s), n, sym) for s, n, sym in sections],
            [
                ("0x2e0c40", 0x30, "_ZN3hot4idle17h0000000000000001E"),
                ("0x2e0c70", 0x20, "_ZN4cold5never17h0000000000000002E"),
                ("0x2e0c90", 0x40, "_ZN4once5start17h0000000000000003E"),
                ("0x2e0cd0", 0x10, "_start"),
            ],
        )

    def test_every_instruction_of_the_binary_counts_once_by_its_own_cost(self):
        # 0x2e0c70 ran in libc's object, not ours; the call's line has the
        # callee's cost, so only the call instruction itself is counted.
        self.assertEqual(
            text_order.executed(CALLGRIND, "/crilet"),
            {0x2E0C90: 40, 0x2E0C94: 3, 0x2E0C96: 1, 0x2E0C48: 1000, 0x2E0CD8: 1},
        )

    def test_most_run_first_never_run_code_left_out(self):
        sections = text_order.text_sections(MAP)
        symbols, size = text_order.order(sections, text_order.executed(CALLGRIND, "/crilet"))
        self.assertEqual(
            symbols,
            [
                "_ZN3hot4idle17h0000000000000001E",
                "_ZN4once5start17h0000000000000003E",
                "_start",
            ],
        )
        self.assertEqual(size, 0x30 + 0x40 + 0x10)

    def test_an_address_outside_every_section_is_ignored(self):
        sections = text_order.text_sections(MAP)
        self.assertEqual(text_order.order(sections, {0x100: 5, 0x2E0CE5: 1}), ([], 0))


if __name__ == "__main__":
    unittest.main()
