"""Finds repository paths named in documentation, comments and help text that do not exist.

A *named path* is a token that starts with one of the repository's top-level folders (or a folder
the tree once had: src/, pipeline/, cuda/), e.g. `stages/arfi/arfi_conventions.h`,
`docs/operations.md`, `tools/run/`, `config/*.yaml`. Such a token must name something that exists:

- `*`, `**` and `<placeholder>` match any name (`stages/<chain>/<stage>/` must match at least one
  folder); `{h,cpp}` expands to each alternative, and every alternative must exist;
- `name.h/.cpp` names `name.h` and `name.cpp`;
- trailing punctuation (`.`, `,`, `:`, `;`, `)`, backquote) is not part of a path;
- a Markdown link target (`[text](target)`) is resolved against the folder of the document.

Scanned: README.md and docs/**/*.md (CHANGELOG.md is history: it names files as they were), and
the whole text (comments, help strings, messages) of source, build and script files. A token glued
to a path character on its left (`${PROJECT_SOURCE_DIR}/config`, `build/tools/...`, `/usr/lib/...`)
is not a repository-relative path and is not checked.
"""
from __future__ import annotations

import glob
import os
import re
import subprocess
from dataclasses import dataclass

# Folders the tree used to have: a reference to them is stale unless the folder is back.
FORMER_TOP_FOLDERS = ("src", "pipeline", "cuda")

# Paths that may be named although they do not exist in this checkout, each with its reason.
# An entry whose path exists is reported as stale (remove it then).
ALLOWED_MISSING: dict[str, str] = {
    "pipeline/output": "the `<pipeline>/<output>` notation of result topics, not a path",
    "tests/testutil_security.hpp": "a file of libzmq's repository (its test key pair), not of ours",
    "src/mach/kernel.cu": "a file of mach's repository (tools/bench/mach_bench.sh builds it from a checkout), not of ours",
    "src/mach/vendor/": "a folder of mach's repository, not of ours",
}

DOC_SUFFIXES = (".md",)
CODE_SUFFIXES = (".h", ".hpp", ".c", ".cpp", ".cu", ".cuh", ".py", ".sh", ".cmake", ".proto", ".m",
                 ".in", ".yaml", ".yml", ".map", ".js", ".html", ".css", ".service", ".txt")
CODE_NAMES = ("CMakeLists.txt", "run")

_PATH_CHARS = r"[\w.*<>{},/+-]"


@dataclass(frozen=True)
class Missing:
    file: str
    line: int
    path: str
    why: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.path}: {self.why}"


def repository_root() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    return subprocess.run(["git", "-C", here, "rev-parse", "--show-toplevel"], check=True,
                          capture_output=True, text=True).stdout.strip()


def tracked_files(root: str) -> list[str]:
    out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard"], check=True,
                         capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if line and os.path.exists(os.path.join(root, line))]


def top_folders(files: list[str]) -> set[str]:
    tops = {f.split("/", 1)[0] for f in files if "/" in f and not f.startswith(".")}
    return tops | set(FORMER_TOP_FOLDERS)


def path_pattern(tops: set[str]) -> re.Pattern[str]:
    names = "|".join(sorted((re.escape(t) for t in tops), key=len, reverse=True))
    return re.compile(rf"(?<![\w./$}}-])((?:{names})/{_PATH_CHARS}*)")


# Paths into the build tree handed to the test helper that resolves them there.
_BUILD_RELATIVE = re.compile(r"binary_path\(\s*\"$")

_MD_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def _expand_braces(path: str) -> list[str]:
    match = re.search(r"\{([^{}]*,[^{}]*)\}", path)
    if not match:
        return [path]
    out = []
    for alternative in match.group(1).split(","):
        out.extend(_expand_braces(path[:match.start()] + alternative + path[match.end():]))
    return out


def _split_extensions(path: str) -> list[str]:
    # "x.h/.cpp" -> x.h, x.cpp
    match = re.match(r"^(.*/)?([^/]+?)(\.\w+)((?:/\.\w+)+)/?$", path)
    if not match:
        return [path]
    stem = (match.group(1) or "") + match.group(2)
    return [stem + match.group(3)] + [stem + ext for ext in match.group(4).split("/") if ext]


def clean_token(token: str) -> str:
    token = token.rstrip(".,:;)'\"`")
    while token.endswith(("/.", "/,")):
        token = token[:-1]
    return token


def _exists(root: str, path: str) -> bool:
    pattern = re.sub(r"<[^<>/]*>", "*", path)
    pattern = re.sub(r"\{[^{},]*\}", "*", pattern)  # a format placeholder: config/{name}
    full = os.path.join(root, pattern)
    if any(c in pattern for c in "*?["):
        return bool(glob.glob(full, recursive=True))
    if os.path.exists(full):
        return True
    # A stem names its files: tools/sim/arfi_sim is arfi_sim.h and arfi_sim.cpp.
    return "." not in os.path.basename(pattern) and bool(glob.glob(glob.escape(full) + ".*"))


def check_path(root: str, path: str) -> str | None:
    """None when `path` (relative to `root`) exists, else why not."""
    if path in ALLOWED_MISSING or path.rstrip("/") in ALLOWED_MISSING:
        return None
    if "..." in path:
        path = path.split("...", 1)[0]
    for alternative in _expand_braces(path):
        for candidate in _split_extensions(alternative):
            if not _exists(root, candidate):
                return "does not exist" if candidate == path else f"{candidate} does not exist"
    return None


def find_missing_in_text(root: str, text: str, name: str, pattern: re.Pattern[str],
                         markdown: bool = False) -> list[Missing]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in pattern.finditer(line):
            if _BUILD_RELATIVE.search(line[:match.start()]):
                continue
            token = clean_token(match.group(1))
            if "/" not in token.rstrip("/"):
                if not token.endswith("/"):
                    continue
            why = check_path(root, token)
            if why:
                found.append(Missing(name, number, token, why))
        if markdown:
            for match in _MD_LINK.finditer(line):
                target = match.group(1)
                if re.match(r"^[a-z]+:", target):  # http:, mailto:
                    continue
                relative = os.path.normpath(os.path.join(os.path.dirname(name), target))
                if relative.startswith(".."):
                    found.append(Missing(name, number, target, "leaves the repository"))
                    continue
                why = check_path(root, relative)
                if why:
                    found.append(Missing(name, number, target, why))
    return found


def scanned_files(files: list[str]) -> list[tuple[str, bool]]:
    out = []
    for f in files:
        base = os.path.basename(f)
        if f == "CHANGELOG.md" or f.startswith("tests/docs/"):
            continue  # history names files as they were; this checker and its test name bad paths on purpose
        if "/regressions/" in f or "/corpus/" in f or f.startswith("tests/data/"):
            continue  # fuzz inputs and reference data, not text about the tree
        if f == "README.md" or (f.startswith("docs/") and f.endswith(DOC_SUFFIXES)):
            out.append((f, True))
        elif f.endswith(DOC_SUFFIXES):
            out.append((f, True))
        elif f.endswith(CODE_SUFFIXES) or base in CODE_NAMES:
            out.append((f, False))
    return out


def find_missing(root: str) -> list[Missing]:
    files = tracked_files(root)
    pattern = path_pattern(top_folders(files))
    found = []
    for name, markdown in scanned_files(files):
        try:
            with open(os.path.join(root, name), encoding="utf-8") as handle:
                text = handle.read()
        except UnicodeDecodeError:
            continue
        found.extend(find_missing_in_text(root, text, name, pattern, markdown))
    return found


def stale_allowances(root: str) -> list[str]:
    return [f"{path}: exists now; remove it from ALLOWED_MISSING ({why})"
            for path, why in ALLOWED_MISSING.items() if os.path.exists(os.path.join(root, path))]


if __name__ == "__main__":
    import sys
    repo = repository_root()
    problems = [str(m) for m in find_missing(repo)] + stale_allowances(repo)
    print("\n".join(problems) if problems else "every named path exists")
    sys.exit(1 if problems else 0)
