#!/usr/bin/env python3
"""Prints the Depends of an ELF executable from the symbols/shlibs control files of the packages that
ship its shared libraries, the way dpkg-shlibdeps does, also for a foreign architecture (the arm64
sysroot's control files): for a library with a symbols file, the highest version among the symbols the
binary imports; otherwise the shlibs entry.

    shlibdeps.py BINARY CONTROL-FILE...    (files named *symbols / *shlibs)
"""
import re
import subprocess
import sys


def readelf(*args):
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def newer(a, b):
    return subprocess.run(["dpkg", "--compare-versions", a, "gt", b]).returncode == 0


def main():
    binary, files = sys.argv[1], sys.argv[2:]
    # Debian's cross-compiler libraries (libgcc-s1-arm64-cross, …: Architecture all, under /usr/<triplet>/lib) name
    # the host's sonames too; they are never what the binary loads. (With gcc-aarch64-linux-gnu installed, the amd64
    # package depended on libgcc-s1-arm64-cross, which a board does not have.)
    files = [f for f in files if not re.search(r"-cross\.(symbols|shlibs)$", f)]
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", binary))
    # Versioned imports as name@VERSION; unversioned ones match the symbols files' name@Base.
    imported = {s if "@" in s else s + "@Base"
                for s in re.findall(r"\sUND\s+(\S+?)(?: \(\d+\))?$", readelf("--dyn-syms", binary), re.M)}
    libraries = {}  # soname -> (dependency template, {symbol: version}) or (dependency, None)
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        if path.endswith("symbols"):
            current = None
            for line in lines:
                if line and not line[0].isspace() and line[0] not in "|*#":
                    soname, template = line.split(None, 1)
                    current = libraries.setdefault(soname, (template, {}))[1]
                elif line.startswith(" ") and current is not None and not line.lstrip().startswith("("):
                    parts = line.split()
                    if len(parts) >= 2:
                        current[parts[0]] = parts[1]
        else:
            for line in lines:
                m = re.match(r"(?:udeb: )?(\S+) (\S+) (.+)", line)
                if m and not line.startswith("udeb:"):
                    name, version, dependency = m.groups()
                    for soname in (f"{name}.so.{version}", f"{name}-{version}.so"):
                        libraries.setdefault(soname, (dependency, None))
    depends = {}
    for soname in needed:
        if soname not in libraries:
            sys.exit(f"shlibdeps: no symbols or shlibs file names {soname}")
        template, symbols = libraries[soname]
        if symbols is None:
            package, _, version = template.partition(" ")
            version = version.strip("()>= ")
        else:
            package = template.split()[0]
            version = "0"
            for symbol in imported:
                if symbols.get(symbol) and newer(symbols[symbol], version):
                    version = symbols[symbol]
        if package not in depends or newer(version, depends[package]):
            depends[package] = version
    print(", ".join(f"{p} (>= {v})" if v and v != "0" else p for p, v in sorted(depends.items())))


if __name__ == "__main__":
    main()
