#!/usr/bin/python3
"""Owns the check that every repository path README.md and docs/*.md name exists, so that a moved or deleted file
cannot leave the docs pointing at nothing (CTest `doc_paths_exist`, label unit).

    scripts/doc_paths_exist.py [REPO_ROOT]     exit 0, or 1 listing each missing path as doc:line: path

What counts as a path (the rule; a token that fits none of it is prose, not checked):
  * Candidates are the targets of Markdown links, [text](target), and the words inside backticks, inline or in
    fenced code blocks. Link targets lose their #anchor; http(s):, mailto: and pure #anchor links are skipped.
  * A word is a path only if it has a '/', is made of path characters, and holds no placeholder (<date>, *, {a,b},
    $VAR, ...): `perf/results/<date>-gpu-<topic>/` is a pattern, not a file. A trailing :LINE or punctuation is
    dropped (`src/train/loader.cpp:120` names src/train/loader.cpp).
  * Link targets resolve as Markdown resolves them: against the doc's own folder.
  * A backtick path resolves, in this order, against
      1. the repository root, when its first component is an entry git tracks at the root (src/, docs/, perf/,
         jobs/, scripts/, tests/, kernels/, io/, common/, ...; so build/, .gpurt/, run.dir/ and /usr/ are not
         repository paths and are skipped);
      2. src/, when its first component is a room under src/ and it names a source file (.h .hpp .cpp .cu .cuh):
         the docs name `backend/cpu/pool_choice.h` as the code includes it. Only source files with their suffix,
         since a room's name is also a common word in runtime paths (`data/fmnist/train`) and metric names
         (`train/lr`);
      3. the doc's own folder, when the path exists there (docs/ naming its neighbours).
    A path without a suffix may also name a file pair by its stem (`io/shard_reader` for io/shard_reader.h and
    .cpp): it exists when some file of that stem does. A path that fits rule 1 or 2 and exists under none of 1-3
    is reported missing.
"""
import re
import subprocess
import sys
from pathlib import Path

SOURCE_SUFFIXES = (".h", ".hpp", ".cpp", ".cu", ".cuh")
PATH_WORD = re.compile(r"^[A-Za-z0-9_.\-/+]+$")
PLACEHOLDER = re.compile(r"[<>*{}$\[\]…]|\.\.\.")
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
INLINE_CODE = re.compile(r"`([^`]+)`")


def clean(word):
    """The path a word names, or None when it is not path-shaped."""
    word = word.strip().strip("'\"(),;")
    word = re.sub(r":[0-9][0-9,\-]*$", "", word)  # file.cpp:120, file.cpp:10-24
    word = word.rstrip(".:,;")
    if "/" not in word or PLACEHOLDER.search(word) or not PATH_WORD.match(word):
        return None
    if word.startswith(("http", "//")) or "=" in word:
        return None
    return word


def candidates(text):
    """(line number, kind, word) for every link target and backtick word of a Markdown text."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            for word in line.split():
                yield number, "code", word
            continue
        for target in LINK.findall(line):
            yield number, "link", target
        for code in INLINE_CODE.findall(line):
            for word in code.split():
                yield number, "code", word


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    tracked = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True, text=True, check=True)
    top = {name.split("/", 1)[0] for name in tracked.stdout.splitlines()}
    rooms = {p.name for p in (root / "src").iterdir() if p.is_dir()}
    docs = [root / "README.md"] + sorted((root / "docs").glob("*.md"))
    missing = []
    for doc in docs:
        for number, kind, raw in candidates(doc.read_text(encoding="utf-8")):
            if kind == "link":
                target = raw.split("#", 1)[0]
                if not target or re.match(r"^[a-z]+:", raw):
                    continue
                if not (doc.parent / target).exists():
                    missing.append((doc, number, target))
                continue
            path = clean(raw)
            if path is None:
                continue
            first = path.lstrip("./").split("/", 1)[0]
            if path.startswith("/") or (first not in top and not (first in rooms and path.endswith(SOURCE_SUFFIXES))):
                continue
            places = [root / path, root / "src" / path, doc.parent / path]
            if not any(p.exists() or (not p.suffix and any(p.parent.glob(p.name + ".*"))) for p in places):
                missing.append((doc, number, path))
    for doc, number, path in missing:
        print(f"{doc.relative_to(root)}:{number}: {path}")
    if missing:
        print(f"{len(missing)} path(s) named in README.md or docs/*.md do not exist (rule: scripts/doc_paths_exist.py)")
        return 1
    print(f"every repository path named in {len(docs)} docs exists")
    return 0


if __name__ == "__main__":
    sys.exit(main())
