#!/usr/bin/env python3
"""Writes parkwise-agent(1) or parkwise-bridge(1) in roff from the program's own `help` output, so the man
page never drifts from the CLI. The program is run as given (e.g. under qemu-aarch64-static for an arm64
build); its name is the program file's, its version the second word of what `--version` prints (`NAME VERSION
(wire contract ...)`). The program's CONVENTIONS (--config, version, older spellings) and every subcommand's
DEPRECATED options make sections of their own. FILE:TEXT arguments make the FILES section.

    help2man.py DATE [FILE:TEXT...] -- COMMAND...
    e.g. help2man.py 2026-12-01 "/etc/parkwise-agent/agent.yaml:The configuration." -- .build/release/parkwise-agent
"""
import re
import subprocess
import sys


def run(command, *args):
    return subprocess.run([*command, *args], check=True, capture_output=True, text=True).stdout


def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    text = re.sub(r"`([^`]+)`", r"\\fB\1\\fR", text)
    return "\n".join("\\&" + line if line.startswith((".", "'")) else line for line in text.split("\n"))


def parse(help_text):
    """OVERVIEW paragraph, discussion paragraphs, USAGE line, and (name, help) rows per section."""
    overview, discussion, usage, sections = [], [], "", {}
    section, rows, paragraph = "overview", None, []
    for line in help_text.split("\n"):
        if line.startswith("OVERVIEW: "):
            paragraph = overview
            paragraph.append(line[len("OVERVIEW: "):])
        elif line.startswith("USAGE: "):
            usage, paragraph = line[len("USAGE: "):], None
        elif re.fullmatch(r"[A-Z]+:", line):
            section = line[:-1]
            rows = sections.setdefault(section, [])
            paragraph = None
        elif rows is not None and re.match(r"  [-a-z<]", line):
            m = re.match(r"  (\S.*?)(?: {2,}(.*))?$", line)
            rows.append([m.group(1), m.group(2) or ""])
        elif rows is not None and line.startswith(" " * 26) and rows and not rows[-1][1]:
            rows[-1][1] = line.strip()
        elif line.strip() and paragraph is not None:
            paragraph.append(line)
        elif not line.strip() and section == "overview" and usage == "":
            discussion.append([])
            paragraph = discussion[-1]
    return " ".join(overview), [" ".join(p) for p in discussion if p], usage, sections


def options(rows):
    out = []
    for name, text in rows:
        m = re.match(r"(\S+(?:, \S+)*)(?: (<.*>))?$", name)
        flag, value = (m.group(1), m.group(2)) if m else (name, None)
        head = "\\fB" + roff(flag) + "\\fR" + (" \\fI" + roff(value) + "\\fR" if value else "")
        out += [".TP", head, roff(text)]
    return out


def main():
    split = sys.argv.index("--")
    date, files, command = sys.argv[1], sys.argv[2:split], sys.argv[split + 1:]
    top, _, _, sections = parse(run(command, "help"))
    program, version = command[-1].rsplit("/", 1)[-1], run(command, "--version").split()[1]
    me = roff(program)
    name = top.partition(": ")[0]
    page = [
        f'.TH {me.upper()} 1 "{date}" "{me} {version}" "User Commands"',
        ".SH NAME", me + " \\- " + roff(name),
        ".SH SYNOPSIS",
        ".B " + me,
        ".I subcommand",
        "[\\fIoptions\\fR]",
        ".SH DESCRIPTION", roff(top if top.endswith(".") else top + "."),
        ".PP",
        f"Generated from \\fB{me} help\\fR and \\fB{me} help\\fR \\fIsubcommand\\fR.",
        ".SH OPTIONS", *options(sections.get("OPTIONS", [])),
    ]
    if sections.get("CONVENTIONS"):
        page += [".SH CONVENTIONS", *options(sections["CONVENTIONS"])]
    page += [".SH SUBCOMMANDS"]
    deprecated = []
    for sub, _ in sections.get("SUBCOMMANDS", []):
        if sub == "help":
            continue
        overview, discussion, usage, subsections = parse(run(command, "help", sub))
        page += [f".SS {sub}", roff(overview)]
        for paragraph in discussion:
            page += [".PP", roff(paragraph)]
        page += [".PP", ".nf", roff(usage), ".fi"]
        if subsections.get("ARGUMENTS"):
            page += [".PP", "Arguments:", ".RS", *options(subsections["ARGUMENTS"]), ".RE"]
        if subsections.get("OPTIONS"):
            page += [".PP", "Options:", ".RS", *options(subsections["OPTIONS"]), ".RE"]
        if subsections.get("DEPRECATED"):
            page += [".PP", "Deprecated:", ".RS", *options(subsections["DEPRECATED"]), ".RE"]
            deprecated += [[f"{sub} {name}", text] for name, text in subsections["DEPRECATED"]]
    page += [".SS help", f"Show help for a subcommand: \\fB{me} help\\fR \\fIsubcommand\\fR."]
    if deprecated:
        page += [".SH DEPRECATED",
                 "Older spellings, still accepted; each prints one line on standard error naming the new one.",
                 *options(deprecated)]
    page += [".SH FILES"]
    for file in files:
        path, _, text = file.partition(":")
        page += [".TP", f"\\fI{roff(path)}\\fR", roff(text)]
    page += [
        ".SH SEE ALSO",
        f"\\fBsystemctl\\fR(1), \\fBjournalctl\\fR(1), \\fI/usr/share/doc/{me}/README.md\\fR",
    ]
    sys.stdout.write("\n".join(page) + "\n")


if __name__ == "__main__":
    main()
