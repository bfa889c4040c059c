"""Tests of scripts/layers.py, the structure check of src/."""

import unittest

import layers


def problems(files, text):
    deps, ground = layers.parse_map(text)
    return layers.analyse(files, deps, ground)


class ParseMap(unittest.TestCase):
    def test_folders_uses_and_the_ground_floor(self):
        deps, ground = layers.parse_map("# c\na: b c\nb: c  # why\nground c:\n")
        self.assertEqual(deps, {"a": {"b", "c"}, "b": {"c"}, "c": set()})
        self.assertEqual(ground, {"c"})

    def test_an_undeclared_use_is_refused(self):
        with self.assertRaisesRegex(ValueError, "uses d, which is not declared"):
            layers.parse_map("a: d\n")

    def test_a_folder_declared_twice_is_refused(self):
        with self.assertRaisesRegex(ValueError, "declared twice"):
            layers.parse_map("a:\na:\n")


class UseTrees(unittest.TestCase):
    def test_nested_groups_self_and_aliases(self):
        self.assertEqual(
            sorted(layers.expand_use("crate::a::{b::{C, d as e}, self, f}")),
            ["crate::a", "crate::a::b::C", "crate::a::b::d", "crate::a::f"],
        )


class Analyse(unittest.TestCase):
    MAP = "top: low\nground low:\n"

    def test_a_declared_use_passes(self):
        files = {"top/mod.rs": "use crate::low::x::Y;\n", "low/mod.rs": "pub mod x;\n", "low/x.rs": ""}
        self.assertEqual(problems(files, self.MAP), [])

    def test_an_undeclared_use_is_reported_with_its_file(self):
        files = {"top/mod.rs": "", "low/mod.rs": "fn f() { crate::top::g() }\n"}
        self.assertEqual(
            problems(files, self.MAP),
            ["layers: src/low/mod.rs uses crate::top, which low may not use (scripts/layers.txt)"],
        )

    def test_a_use_in_a_test_file_counts_for_the_folders(self):
        files = {"top/mod.rs": "", "low/mod.rs": "", "low/x_tests.rs": "use crate::top::T;\n"}
        self.assertEqual(len(problems(files, self.MAP)), 1)

    def test_a_use_in_a_comment_does_not_count(self):
        files = {"top/mod.rs": "", "low/mod.rs": "/// see [`crate::top::T`]\n// crate::top\n"}
        self.assertEqual(problems(files, self.MAP), [])

    def test_a_folder_missing_from_the_map(self):
        files = {"top/mod.rs": "", "low/mod.rs": "", "new/mod.rs": ""}
        self.assertIn("layers: src/new/ is not declared in scripts/layers.txt", problems(files, self.MAP))

    def test_a_cycle_in_the_declared_graph(self):
        out = problems({}, "a: b\nb: a\n")
        self.assertIn("layers: the declared folder graph has a cycle: a -> b -> a", out)

    def test_a_ground_floor_folder_that_uses_a_subsystem(self):
        out = problems({}, "top:\nground low: top\n")
        self.assertIn("layers: the ground floor's low is declared to use the subsystem top", out)

    def test_two_files_that_import_each_other(self):
        files = {
            "low/mod.rs": "mod a;\nmod b;\n",
            "low/a.rs": "use super::b::B;\npub struct A;\n",
            "low/b.rs": "use super::a::A;\npub struct B;\n",
        }
        self.assertEqual(
            problems(files, self.MAP),
            ["layers: files import each other: src/low/a.rs, src/low/b.rs"],
        )

    def test_a_cycle_through_a_third_file_and_a_crate_path(self):
        files = {
            "low/mod.rs": "",
            "low/a.rs": "use super::b::B;\n",
            "low/b.rs": "fn f() { crate::low::c::g() }\n",
            "low/c.rs": "use crate::low::a::A;\n",
        }
        out = problems(files, self.MAP)
        self.assertEqual(out, ["layers: files import each other: src/low/a.rs, src/low/b.rs, src/low/c.rs"])

    def test_a_module_and_its_own_children_are_no_cycle(self):
        files = {
            "low/mod.rs": "mod a;\npub use a::A;\npub struct M;\n",
            "low/a.rs": "use super::M;\npub struct A;\n",
        }
        self.assertEqual(problems(files, self.MAP), [])

    def test_tests_may_import_back(self):
        files = {
            "low/mod.rs": "",
            "low/a.rs": "use super::b::B;\n#[cfg(test)]\nmod tests {\n    use crate::low::b::x;\n}\n",
            "low/b.rs": "#[cfg(test)]\n#[path = \"b_tests.rs\"]\nmod tests;\n",
            "low/b_tests.rs": "use crate::low::a::A;\n",
        }
        self.assertEqual(problems(files, self.MAP), [])

    def test_a_feature_file_name_in_two_folders(self):
        files = {"top/pleg.rs": "", "top/mod.rs": "", "low/pleg.rs": "", "low/mod.rs": ""}
        self.assertEqual(
            problems(files, self.MAP),
            ["layers: the file name pleg.rs stands in 2 folders: src/low/, src/top/"],
        )

    def test_role_names_and_test_files_may_repeat(self):
        files = {
            "top/mod.rs": "", "top/manager.rs": "", "top/fake.rs": "", "top/x_tests.rs": "",
            "low/mod.rs": "", "low/manager.rs": "", "low/fake.rs": "", "low/x_tests.rs": "",
        }
        self.assertEqual(problems(files, self.MAP), [])


if __name__ == "__main__":
    unittest.main()
