"""Every repository path named in README.md, docs/, comments and help text exists (doc_paths.py),
and the checker itself finds a wrong path."""
import os
import tempfile
import unittest

import doc_paths


class CheckerFindsWrongPaths(unittest.TestCase):
    """The checker on a small synthetic tree, so that a checker that finds nothing fails here."""

    def setUp(self):
        self.folder = tempfile.TemporaryDirectory()
        self.root = self.folder.name
        for name in ("stages/arfi/loupas/loupas.h", "stages/arfi/loupas/loupas.cpp", "docs/operations.md",
                     "config/demo.yaml", "config/arfi.yaml", "tools/run/main.cpp", "tools/sim/arfi_sim.h"):
            os.makedirs(os.path.join(self.root, os.path.dirname(name)), exist_ok=True)
            open(os.path.join(self.root, name), "w").close()
        self.pattern = doc_paths.path_pattern({"stages", "docs", "config", "tools", "src"})

    def tearDown(self):
        self.folder.cleanup()

    def missing(self, text, name="docs/x.md", markdown=True):
        return [m.path for m in doc_paths.find_missing_in_text(self.root, text, name, self.pattern, markdown)]

    def test_a_path_that_does_not_exist_is_reported_with_its_file_and_line(self):
        found = doc_paths.find_missing_in_text(
            self.root, "fine: config/demo.yaml\nsee `docs/no-such-page.md`, and stages/arfi/loupas.h.\n",
            "README.md", self.pattern, True)
        self.assertEqual([(m.file, m.line, m.path) for m in found],
                         [("README.md", 2, "docs/no-such-page.md"), ("README.md", 2, "stages/arfi/loupas.h")])

    def test_a_former_top_folder_in_a_code_comment_is_reported(self):
        self.assertEqual(self.missing("// kernels in src/loupas.cu (docs/readme/mat.md)\n", "x.cpp", False),
                         ["src/loupas.cu", "docs/readme/mat.md"])

    def test_existing_paths_globs_placeholders_and_alternatives_pass(self):
        text = ("config/*.yaml, stages/<chain>/<stage>/, stages/arfi/loupas/loupas.{h,cpp}, "
                "stages/arfi/loupas/loupas.h/.cpp, tools/run/, tools/sim/arfi_sim, docs/operations.md.\n")
        self.assertEqual(self.missing(text), [])

    def test_one_missing_alternative_or_unmatched_glob_is_reported(self):
        self.assertEqual(self.missing("stages/arfi/loupas/loupas.{h,cu} and config/*.json\n"),
                         ["stages/arfi/loupas/loupas.{h,cu}", "config/*.json"])

    def test_markdown_links_resolve_against_the_document_folder(self):
        self.assertEqual(self.missing("[ops](operations.md) [cfg](../config/demo.yaml) [bad](../config/x.yaml)"
                                      " [web](https://example.org/a.md)\n", "docs/x.md"),
                         ["../config/x.yaml"])

    def test_paths_glued_to_a_prefix_are_not_repository_paths(self):
        text = 'build/tools/run/nothing /usr/share/config/x ${DIR}/config/none binary_path("tools/sim/sonopipe-sim")\n'
        self.assertEqual(self.missing(text, "x.cpp", False), [])


class RepositoryPathsExist(unittest.TestCase):
    def test_every_path_named_in_docs_comments_and_help_text_exists(self):
        root = doc_paths.repository_root()
        missing = [str(m) for m in doc_paths.find_missing(root)]
        self.assertEqual(missing, [], "paths named but not in the tree (fix the text, or add a reasoned "
                                      "entry to ALLOWED_MISSING in tests/docs/doc_paths.py):\n" + "\n".join(missing))

    def test_no_allowance_is_kept_for_a_path_that_exists(self):
        self.assertEqual(doc_paths.stale_allowances(doc_paths.repository_root()), [])

    def test_every_allowance_gives_a_reason(self):
        for path, why in doc_paths.ALLOWED_MISSING.items():
            self.assertGreater(len(why.split()), 3, path)


if __name__ == "__main__":
    unittest.main()
