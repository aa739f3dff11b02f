#!/usr/bin/env python3
"""Keeps the rooms' order (docs/architecture.md): a file may include its own room's headers and those of rooms
on lower levels, never one on its own level or above, so each room builds on the ones under it alone and a
change to a higher room can never reach down. Rooms on one level know nothing of each other (io/ and kernels/).
The rooms above train/ (infer/, commands/, main) reach train/ through its public headers only.

  scripts/check_include_rooms.py [REPO_ROOT]   exit 1, printing file:line of each offending include

Registered as the unit test include_rooms_keep_their_order (tests/CMakeLists.txt)."""
import os
import re
import sys

# The room order, lowest first: one line a level, the rooms of a level separated by spaces. A room is a folder:
# common/, io/, kernels/ at the top of the repository, the others under src/ (src/main.cpp is the room main).
LEVELS = """
common
io kernels
util
config obs
model
dist
backend data
train
infer
commands
main
"""
# What the rooms above a room may include of it, where a room keeps internals (a room not named here: all of it).
PUBLIC = {
    "train": {"trainer.h", "run_context.h", "start_point.h", "network_setup.h", "evaluation.h", "stop_request.h",
              "launcher_watch.h", "fault_injection.h"},
}
SCANNED = ["common", "io", "kernels", "src"]
SOURCE = re.compile(r".*\.(h|hpp|cpp|cc|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"/]+)/([^"]+)"')

LEVEL = {room: n for n, line in enumerate(LEVELS.split("\n")) for room in line.split()}


def room_of(path):
    """The room of a file, by its path relative to the repository root."""
    parts = path.split("/")
    if parts[0] != "src":
        return parts[0]
    return "main" if len(parts) == 2 else parts[1]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems, files = [], 0
    for top in SCANNED:
        for folder, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not SOURCE.match(name):
                    continue
                path = os.path.relpath(os.path.join(folder, name), root)
                room = room_of(path)
                files += 1
                if room not in LEVEL:
                    problems.append(f"{path}: room '{room}' has no place in LEVELS (scripts/check_include_rooms.py)")
                    continue
                with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target, header = m.group(1), m.group(2)
                        where = f"{path}:{number}: {line.strip()}"
                        if target not in LEVEL:
                            problems.append(f"{where}: '{target}/' is no room in LEVELS")
                        elif target == room:
                            continue
                        elif LEVEL[target] > LEVEL[room]:
                            problems.append(f"{where}: {room}/ includes {target}/, a room above it")
                        elif LEVEL[target] == LEVEL[room]:
                            problems.append(f"{where}: {room}/ includes {target}/, a room on its own level")
                        elif target in PUBLIC and header not in PUBLIC[target]:
                            problems.append(f"{where}: {target}/{header} is internal to {target}/; its public headers "
                                            f"are {', '.join(sorted(PUBLIC[target]))}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} break(s) of the room order in {files} files; docs/architecture.md says why it "
              "holds: move the code to the room that may know both, or the shared type down to a room below both")
        return 1
    print(f"{files} files: every include points to the file's own room or a room below it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
