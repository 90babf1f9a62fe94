#!/usr/bin/python3
"""Fails when a function in the tracked C++ sources is longer than 150 lines (issue 37's rule).

Relies on the .clang-format layout (checked before this runs): a function defined at namespace
scope starts at column 0 with its signature and ends at the first line that is exactly '}'.
Functions defined inside a class body are indented and not measured; they are short by habit.
"""
import subprocess
import sys

LIMIT = 150
SKIP_PREFIXES = ("namespace", "struct", "class", "enum", "extern", "union", "#", "//", "template")


def starts_function(lines, i):
    line = lines[i]
    if not line or line[0].isspace() or line.startswith(SKIP_PREFIXES) or "(" not in line:
        return False
    if "=" in line.split("(")[0]:  # an initialised variable, not a signature
        return False
    for j in range(i, min(i + 8, len(lines))):  # a signature wraps over at most a few lines
        text = lines[j].rstrip()
        if text.endswith("{"):
            return True
        if text.endswith(";") or text.endswith("}"):
            return False
    return False


def main():
    files = subprocess.check_output(
        ["git", "ls-files", "*.cpp", "*.h"], text=True).split()
    long_ones = []
    for path in files:
        lines = open(path, encoding="utf-8").read().split("\n")
        start = None
        for i, line in enumerate(lines):
            if start is None:
                if starts_function(lines, i):
                    start = i
            elif line.startswith("}"):
                if i - start + 1 > LIMIT:
                    long_ones.append(f"{path}:{start + 1}: {i - start + 1} lines: {lines[start][:70]}")
                start = None
    if long_ones:
        print(f"check_function_size: {len(long_ones)} function(s) over {LIMIT} lines:", file=sys.stderr)
        for entry in long_ones:
            print("  " + entry, file=sys.stderr)
        return 1
    print(f"check_function_size: no function over {LIMIT} lines in {len(files)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
