"""Unit tests of check-docs.py, the README and docs/ link checker:
python3 -B -m unittest discover -s scripts -p check_docs_test.py"""

import importlib.util
import io
import tempfile
import unittest
from contextlib import redirect_stdout
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("check_docs", Path(__file__).with_name("check-docs.py"))
check_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(check_docs)


class CheckDocsTest(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)
        (self.root / "docs").mkdir()
        (self.root / "scripts").mkdir()
        (self.root / "scripts" / "test.sh").write_text("#!/bin/sh\n")
        (self.root / "docs" / "page.md").write_text(
            "# The page\n\n## Set up: `crilet run`, the flags\n\ntext\n\n## Notes\n\n## Notes\n\n"
            "```sh\n# not a heading\n```\n"
        )

    def tearDown(self):
        self._tmp.cleanup()

    def run_on(self, readme):
        (self.root / "README.md").write_text(readme)
        out = io.StringIO()
        with redirect_stdout(out):
            rc = check_docs.main(["check-docs.py", str(self.root)])
        return rc, out.getvalue()

    def test_a_good_file_link_passes(self):
        rc, out = self.run_on("See [the page](docs/page.md) and [test.sh](scripts/test.sh).\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("docs: ok (2 files, 2 relative links", out)

    def test_a_link_from_docs_goes_up_with_dot_dot(self):
        (self.root / "docs" / "other.md").write_text("[script](../scripts/test.sh)\n[bad](scripts/test.sh)\n")
        rc, out = self.run_on("# Readme\n")
        self.assertEqual(rc, 1)
        self.assertEqual(
            out.strip(), "docs/other.md:2: broken link scripts/test.sh (no such file: scripts/test.sh)"
        )

    def test_a_missing_file_is_reported_with_its_line(self):
        rc, out = self.run_on("# Readme\n\ntext\n[gone](docs/gone.md)\n")
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip(), "README.md:4: broken link docs/gone.md (no such file: docs/gone.md)")

    def test_a_good_anchor_passes(self):
        rc, out = self.run_on("[flags](docs/page.md#set-up-crilet-run-the-flags)\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("1 of them with an anchor", out)

    def test_a_bad_anchor_is_reported(self):
        rc, out = self.run_on("[flags](docs/page.md#set-up)\n")
        self.assertEqual(rc, 1)
        self.assertEqual(
            out.strip(), "README.md:1: broken link docs/page.md#set-up (no heading #set-up in docs/page.md)"
        )

    def test_an_anchor_on_the_same_page(self):
        rc, out = self.run_on("# Readme\n\n## Layout\n\n[layout](#layout) [nope](#nope)\n")
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip(), "README.md:5: broken link #nope (no heading #nope in this page)")

    def test_duplicate_headings_get_numbered_anchors(self):
        rc, out = self.run_on("[a](docs/page.md#notes) [b](docs/page.md#notes-1)\n")
        self.assertEqual(rc, 0, out)
        rc, out = self.run_on("[c](docs/page.md#notes-2)\n")
        self.assertEqual(rc, 1)
        self.assertIn("no heading #notes-2", out)

    def test_a_heading_in_a_code_block_is_no_anchor(self):
        rc, out = self.run_on("[x](docs/page.md#not-a-heading)\n")
        self.assertEqual(rc, 1)

    def test_external_links_are_ignored(self):
        rc, out = self.run_on(
            "[a](https://example.invalid/missing.md#x) [b](http://example.invalid/) [c](mailto:a@example.invalid)\n"
        )
        self.assertEqual(rc, 0, out)
        self.assertIn("0 relative links", out)

    def test_links_in_code_are_ignored(self):
        rc, out = self.run_on(
            "```md\n[gone](docs/gone.md)\n```\n\nA span: `[gone](docs/gone.md)`.\n\n    [gone](indented.md)\n"
        )
        self.assertEqual(rc, 0, out)
        self.assertIn("0 relative links", out)

    def test_link_text_with_code_and_a_title(self):
        rc, out = self.run_on('[`docs/page.md`](docs/page.md "the page") ![img](docs/missing.png)\n')
        self.assertEqual(rc, 1)
        self.assertEqual(out.strip(), "README.md:1: broken link docs/missing.png (no such file: docs/missing.png)")

    def test_slugs_follow_githubs_rules(self):
        self.assertEqual(
            check_docs.slugify("Taints, and pods crilet does not run: `--register-with-taints`"),
            "taints-and-pods-crilet-does-not-run---register-with-taints",
        )
        self.assertEqual(check_docs.slugify("Fuzzing (`fuzz/`, `scripts/fuzz.sh`)"), "fuzzing-fuzz-scriptsfuzzsh")
        self.assertEqual(check_docs.slugify("`snake_case` and **bold** [link](x.md)"), "snake_case-and-bold-link")


if __name__ == "__main__":
    unittest.main()
