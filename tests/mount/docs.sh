#!/usr/bin/env bash
# docs.sh: the documents stand on their own in a clone: every relative link
# in a tracked Markdown file reaches a tracked file (and a #anchor one of its
# headings, as GitHub names them), and no document points at this project's
# tracker ("issue 17") instead of saying what was decided. Needs no mount.
set -euo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "$0")/../lib.sh"

if ! command -v python3 >/dev/null 2>&1; then
	t_skip_all "python3 is missing (contrib/install-deps.sh installs it)"
fi

# The checker prints one line per check: "ok<TAB>NAME" or
# "bad<TAB>NAME<TAB>REASON".
while IFS=$'\t' read -r verdict name reason; do
	case $verdict in
	ok) t_pass "$name" ;;
	*) t_fail "$name" "$reason" ;;
	esac
done < <(
	cd "$T_ROOT"
	python3 - <<'EOF' || printf 'bad\tdocs checker\tpython3 exited %s\n' "$?"
import os, re, subprocess, sys, unicodedata
from urllib.parse import unquote

# Tracked files when this is a git work tree; otherwise (an unpacked
# tarball) every file but build output.
try:
    out = subprocess.run(["git", "ls-files", "-z"], check=True,
                         capture_output=True).stdout.decode()
    files = sorted(f for f in out.split("\0") if f and os.path.exists(f))
except (OSError, subprocess.CalledProcessError):
    files = []
    for d, dirs, names in os.walk("."):
        dirs[:] = [x for x in dirs if x not in (".git", "build")]
        files += [os.path.normpath(os.path.join(d, n)) for n in names]
    files.sort()
known = set(files)
dirs = {os.path.dirname(f) for f in files}
for f in list(dirs):
    while f:
        f = os.path.dirname(f)
        dirs.add(f)

def code_free(text):
    """Lines of text with fenced blocks blanked and code spans removed."""
    lines, fence = [], None
    for line in text.split("\n"):
        m = re.match(r"\s{0,3}(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            lines.append("")
            continue
        if m:
            fence = m.group(1)
            lines.append("")
            continue
        lines.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return lines

def slug(heading):
    """GitHub's anchor for a heading's text."""
    t = re.sub(r"!\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    t = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", t)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.replace("`", "").replace("*", "").strip().lower()
    keep = []
    for ch in t:
        if ch.isalnum() or ch in "-_" or unicodedata.category(ch)[0] == "M":
            keep.append(ch)
        elif ch == " ":
            keep.append("-")
    return "".join(keep)

anchor_cache = {}
def anchors(path):
    if path not in anchor_cache:
        seen, found, fence = {}, set(), None
        text = open(path, encoding="utf-8").read()
        prev = ""
        for line in text.split("\n"):
            m = re.match(r"\s{0,3}(`{3,}|~{3,})", line)
            if fence or m:
                if fence and m and m.group(1)[0] == fence[0]:
                    fence = None
                elif not fence:
                    fence = m.group(1)
                prev = ""
                continue
            h = re.match(r"\s{0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line)
            if not h and prev.strip() and re.match(r"\s{0,3}(=+|-+)\s*$", line):
                h = re.match(r"(.*)", prev.strip())
            if h:
                s = slug(h.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else "%s-%d" % (s, n))
            for a in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
                found.add(a.lower())
            prev = line
        anchor_cache[path] = found
    return anchor_cache[path]

LINK = re.compile(r"\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)")
HTML = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"")

def check_links(md):
    bad = []
    lines = code_free(open(md, encoding="utf-8").read())
    for no, line in enumerate(lines, 1):
        targets = LINK.findall(line) + HTML.findall(line)
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for t in targets:
            if not t or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:|//", t):
                continue
            path, _, frag = t.partition("#")
            path = unquote(path)
            if path:
                base = "." if path.startswith("/") else os.path.dirname(md)
                dest = os.path.normpath(os.path.join(base, path.lstrip("/")))
                if dest.startswith(".."):
                    bad.append("%s:%d: %s leaves the repository" % (md, no, t))
                    continue
                if dest not in known and dest not in dirs:
                    bad.append("%s:%d: %s: no such tracked file" % (md, no, t))
                    continue
            else:
                dest = md
            if frag and dest.endswith(".md") and dest in known:
                if unquote(frag).lower() not in anchors(dest):
                    bad.append("%s:%d: %s: no heading #%s in %s" % (md, no, t, frag, dest))
    return bad

# Another project's tracker may be quoted; ours may not (a clone has none).
ISSUE = re.compile(r"\b[Ii]ssues?[ -]#?[0-9]+")
OTHERS = re.compile(r"\b(httpdirfs|mountpoint-s3's|rclone's|libfuse's|"
                    r"curl's|nginx's|their|upstream) issues? #[0-9]+")

def check_wording(doc):
    bad = []
    for no, line in enumerate(open(doc, encoding="utf-8"), 1):
        for m in ISSUE.finditer(OTHERS.sub("", line)):
            bad.append("%s:%d: '%s' names a tracker a clone does not have"
                       % (doc, no, m.group(0)))
    return bad

def report(name, bad):
    if bad:
        reason = "; ".join(bad[:5])
        if len(bad) > 5:
            reason += "; and %d more" % (len(bad) - 5)
        print("bad\t%s\t%s" % (name, reason.replace("\t", " ").replace("\n", " ")))
    else:
        print("ok\t%s" % name)

docs = [f for f in files if f.endswith(".md")]
for md in docs:
    report("links in " + md, check_links(md))
for doc in docs + [f for f in files if re.search(r"\.[1-8]$", f)]:
    report("no tracker numbers in " + doc, check_wording(doc))
if not docs:
    print("bad\tdocs\tno Markdown file found under %s" % os.getcwd())
EOF
)
t_done
