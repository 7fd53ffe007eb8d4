#!/usr/bin/env python3
"""Every program and Python module the tests run, declared (issue 36).

tests/programs.txt names each program (and each non-standard Python module) a test, benchmark
or test script runs, with the Debian package that ships it. Two checks keep it true:

    programs.py scan         the sources run nothing undeclared (and declare nothing unused)
    programs.py installable  each declaration is shipped by a package that a fresh bookworm
                             has, or that packaging/install-deps.sh installs, with its
                             dependencies, and that package really ships it

so a test that starts to use a tool the README's test command does not install fails in CI on
the developer's machine, not in a user's first hour. `scan` reads the sources only (no dpkg);
`installable` reads dpkg's database, where install-deps.sh has run.

What the scan sees as "runs a program":
- Python: the first string of a list or tuple (`["promtool", "check", ...]`, through the
  wrappers `ip netns exec NS`, `env`, `timeout`, `unshare`, `nsenter`...), `shutil.which("x")`,
  any absolute path under /bin, /sbin, /usr/bin, /usr/sbin; `import` of a module that is not in
  the standard library nor the tests' own.
- Shell: the word in command position of each simple command (after `;`, `|`, `&&`, `$(`, a
  keyword...), builtins and functions defined in the file left out.
- CMake: `COMMAND word` and `find_program(VAR NAMES ...)`.
A candidate counts when it is declared or when it names an executable on this machine (so a
list of label names is not taken for a program); `# programs: ignore` on a line skips it.
The lab's guest scripts (tests/lab/guest_init.sh, scenarios/) run in the guest's busybox with
the programs build_guest.py copies from the host by name: those names are scanned from its
PROGRAMS list, the scripts themselves are not.

Standard library only."""

import ast
import os
import re
import shlex
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MANIFEST = os.path.join(ROOT, "tests", "programs.txt")
INSTALL_DEPS = os.path.join(ROOT, "packaging", "install-deps.sh")
# Where the tests, benchmarks and the scripts they run live.
SCANNED = ["tests", "fuzz", "packaging", ".ci"]
GUEST_SCRIPTS = ("tests/lab/guest_init.sh", "tests/lab/scenarios/")
IGNORE_MARK = "programs: ignore"
# This checker and its test: their strings are fixtures, not programs run.
SELF = ("tests/common/programs.py", "tests/common/programs_test.py")
# The tree fresh-check.sh makes (mmdebstrap --variant=apt --include=git,ca-certificates): the
# Essential packages, apt, and what a user needs to clone the repository.
FRESH_ROOTS = ["apt", "git", "ca-certificates"]  # programs: ignore (packages)

# Words that put the next word in command position, and how many words they take first.
WRAPPERS = {"sudo": 0, "env": 0, "exec": 0, "nohup": 0, "setsid": 0, "time": 0, "command": 0,
            "nice": 0, "timeout": 1, "taskset": 1, "chroot": 1, "unshare": 0, "nsenter": 0,
            "setpriv": 0, "xargs": 0, "busybox": 0, "stdbuf": 0, "fakeroot": 0, "ionice": 0}
SHELL_KEYWORDS = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for",
                  "case", "esac", "in", "function", "{", "}", "!", "[[", "]]", "select",
                  "coproc", "((", "))"}
BASH_BUILTINS = set("""
. : [ alias bg bind break builtin caller cd command compgen complete compopt continue declare
dirs disown echo enable eval exec exit export false fc fg getopts hash help history jobs kill
let local logout mapfile popd printf pushd pwd read readarray readonly return set shift shopt
source suspend test times trap true type typeset ulimit umask unalias unset wait
""".split())


# --- the manifest --------------------------------------------------------------------------

def read_manifest(path=MANIFEST):
    """({name: (packages, optional)} for programs, {module: (packages, optional)} for Python
    modules); raises ValueError on a malformed line. A line is `PROGRAM PACKAGE[|PACKAGE...]
    [optional]` or `module NAME PACKAGE [optional]`; optional: only run when present (a flag
    of a benchmark run by hand), so not required of install-deps.sh."""
    programs, modules = {}, {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            table = programs
            if words[0] == "module":
                table, words = modules, words[1:]
            optional = words[-1:] == ["optional"]
            if optional:
                words = words[:-1]
            if len(words) != 2:
                raise ValueError(f"{path}:{number}: expected 'PROGRAM PACKAGE [optional]' or "
                                 f"'module NAME PACKAGE [optional]', got {line.strip()!r}")
            table[words[0]] = (words[1].split("|"), optional)
    return programs, modules


# --- scanning the sources ------------------------------------------------------------------

def _after_wrappers(words):
    """The words of a command line from the program that really runs: `ip netns exec NS X`,
    `env A=1 X`, `timeout 5 X`, `unshare --net X` -> [X, ...] (each wrapper kept as well)."""
    found = []
    i = 0
    while i < len(words):
        word = words[i]
        if not isinstance(word, str) or not word:
            break
        found.append(word)
        name = os.path.basename(word)
        if name == "ip" and words[i + 1:i + 3] == ["netns", "exec"]:
            i += 4
            continue
        if name in ("ip",) and len(words) > i + 2 and words[i + 1] == "-n":
            break
        if name not in WRAPPERS:
            break
        i += 1
        skip = WRAPPERS[name]
        while i < len(words) and isinstance(words[i], str) and (
                words[i].startswith("-") or (name == "env" and "=" in words[i])):
            i += 1
        i += skip
    return found


def _looks_like_program(word):
    """A file name, not a number, an option or an all-capitals word (HTTP's GET is a program of
    libwww-perl's, and no test runs it)."""
    return (bool(re.fullmatch(r"(/[\w.+-]+)+|[\w][\w.+-]*", word)) and not word[0].isdigit()
            and not word.isupper())


def scan_python(text, filename="<python>"):
    """[(line, name, kind)] with kind "program" or "module"."""
    tree = ast.parse(text, filename)
    lines = text.splitlines()
    found = []

    def ignored(node):
        return 0 < node.lineno <= len(lines) and IGNORE_MARK in lines[node.lineno - 1]

    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def command_like(node):
        """A list that can be a command line: only strings, names, calls and starred parts, and
        in a place a command goes (a call's first argument, an assignment, a concatenation),
        not a keyword argument's list of names nor a tuple of a table."""
        if not all(isinstance(e, (ast.Constant, ast.Name, ast.Attribute, ast.Call, ast.Starred,
                                  ast.JoinedStr, ast.Subscript, ast.BinOp)) for e in node.elts):
            return False
        parent = parents.get(node)
        if isinstance(parent, ast.Call):
            return bool(parent.args) and parent.args[0] is node
        return isinstance(parent, (ast.Assign, ast.AnnAssign, ast.BinOp, ast.Return,
                                   ast.AugAssign))

    for node in ast.walk(tree):
        # A module's PROGRAMS list names programs all through (build_guest.py's, copied into
        # the lab guest from the host's PATH).
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "PROGRAMS"
                                                for t in node.targets) \
                and isinstance(node.value, (ast.List, ast.Tuple)):
            found += [(e.lineno, e.value, "program") for e in node.value.elts
                      if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if isinstance(node, (ast.List, ast.Tuple)) and node.elts:
            words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
            if isinstance(words[0], str) and command_like(node) and not ignored(node):
                for word in _after_wrappers(words):
                    if _looks_like_program(word):
                        found.append((node.lineno, word, "program"))
        elif isinstance(node, ast.Call) and not ignored(node):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "which" and node.args and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value, "program"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and re.fullmatch(r"/(usr/)?s?bin/[\w.+-]+", node.value) and not ignored(node):
            found.append((node.lineno, node.value, "program"))
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and not ignored(node):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    continue
                names = [node.module]
            else:
                names = [alias.name for alias in node.names]
            for module in names:
                found.append((node.lineno, module.split(".")[0], "module"))
    return found


def _shell_lines(text):
    """Logical lines (continuations joined) with their first physical line number; here-document
    bodies are dropped (they are data or another program's input)."""
    out = []
    heredoc_end = None
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if heredoc_end is not None:
            if line.strip() == heredoc_end:
                heredoc_end = None
            continue
        m = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", line)
        if m:
            heredoc_end = m.group(1)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def _shell_words(segment):
    try:
        lexer = shlex.shlex(segment, posix=True, punctuation_chars=False)
        lexer.whitespace_split = True
        lexer.commenters = "#"
        return list(lexer)
    except ValueError:
        return segment.split()


def scan_shell(text):
    """[(line, name, "program")]: the command words of a shell script."""
    functions = set(re.findall(r"^\s*(?:function\s+)?([\w-]+)\s*\(\)", text, re.M))
    found = []
    for number, line in _shell_lines(text):
        if IGNORE_MARK in line:
            continue
        # Command positions: the line's start and after each separator or substitution.
        line = re.sub(r"(^|\s)#.*$", "", line) if not line.lstrip().startswith("#!") else ""
        for segment in re.split(r"\|\||&&|[;|&`()]|\$\(", line):
            words = _shell_words(segment)
            while words and (re.fullmatch(r"\w+=.*", words[0]) or words[0] in SHELL_KEYWORDS):
                words = words[1:]
            if not words or words[0] in functions or words[0].startswith(("$", "-", "<", ">")):
                continue
            for word in _after_wrappers(words):
                if word in BASH_BUILTINS or word in functions or word.startswith("$"):
                    continue
                if _looks_like_program(word):
                    found.append((number, word, "program"))
    return found


def scan_cmake(text):
    """[(line, name, "program")]: `COMMAND word` and find_program's names."""
    found = []
    for m in re.finditer(r"\bCOMMAND\s+([^\s)$\"]+)", text):
        line = text.count("\n", 0, m.start()) + 1
        found.append((line, m.group(1), "program"))
    for m in re.finditer(r"find_program\(\s*\w+\s+(?:NAMES\s+)?([^)]*)\)", text):
        line = text.count("\n", 0, m.start()) + 1
        for word in m.group(1).split():
            if word.isupper() or word.startswith("$"):
                break  # PATHS, HINTS, REQUIRED... end the names
            found.append((line, word, "program"))
    return found


def _local_modules():
    """Modules the tests import from their own folders (sys.path inserts)."""
    names = set()
    for folder in SCANNED:
        for dirpath, _, files in os.walk(os.path.join(ROOT, folder)):
            names.update(f[:-3] for f in files if f.endswith(".py"))
    return names


def source_files():
    for folder in SCANNED:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if d not in ("corpus", "fixtures", "node_modules")]
            for f in sorted(files):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, ROOT)
                if rel.startswith(GUEST_SCRIPTS) or rel in SELF:
                    continue
                if f.endswith(".py") or f.endswith(".sh") or f == "CMakeLists.txt" or \
                        f == "run" and folder == ".ci":
                    yield rel
    yield "CMakeLists.txt"


def scan_file(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        text = f.read()
    if rel.endswith(".py"):
        return scan_python(text, rel)
    if rel.endswith("CMakeLists.txt"):
        return scan_cmake(text)
    return scan_shell(text)


def is_program(name):
    if name.startswith("/"):
        return os.path.isfile(name) and os.access(name, os.X_OK)
    return shutil.which(name) is not None


def check_scan(programs, modules, files=None):
    """Problems (strings): a run program or imported module not declared; a declaration that no
    source uses."""
    stdlib = set(sys.stdlib_module_names)
    local = _local_modules()
    problems, used_programs, used_modules = [], set(), set()
    for rel in files if files is not None else source_files():
        try:
            found = scan_file(rel)
        except (SyntaxError, UnicodeDecodeError) as e:
            problems.append(f"{rel}: cannot scan: {e}")
            continue
        for line, name, kind in found:
            if kind == "module":
                if name in stdlib or name in local:
                    continue
                used_modules.add(name)
                if name not in modules:
                    problems.append(f"{rel}:{line}: imports {name}, not declared in "
                                    f"tests/programs.txt ('module {name} PACKAGE')")
                continue
            if name in programs:
                used_programs.add(name)
            elif is_program(name):
                problems.append(f"{rel}:{line}: runs {name}, not declared in tests/programs.txt "
                                f"(add '{name} PACKAGE', the package install-deps.sh installs; "
                                f"or '# {IGNORE_MARK}' if it is no program)")
    if files is None:
        for name in sorted(set(programs) - used_programs):
            problems.append(f"tests/programs.txt: {name} is declared but no source runs it")
        for name in sorted(set(modules) - used_modules):
            problems.append(f"tests/programs.txt: module {name} is declared but nothing imports it")
    return problems


# --- what a fresh machine plus install-deps.sh has -----------------------------------------

def install_deps_packages(path=INSTALL_DEPS):
    """(packages install-deps.sh always installs, packages it adds on a condition such as
    `command -v npm || test_pkgs+=(npm)`)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    required, conditional = [], []
    for m in re.finditer(r"^\w+_pkgs=\((.*?)^\)", text, re.S | re.M):
        for line in m.group(1).splitlines():
            required += line.split("#", 1)[0].split()
    for m in re.finditer(r"\w+_pkgs\+=\(([^)]*)\)", text):
        conditional += m.group(1).split()
    return required, conditional


def parse_dpkg_status(text):
    """{package: {"depends": [[alternatives]], "provides": [...], "essential": bool,
    "installed": bool}} from /var/lib/dpkg/status."""
    db = {}
    for stanza in text.split("\n\n"):
        fields, key = {}, None
        for line in stanza.splitlines():
            if line.startswith((" ", "\t")) and key:
                fields[key] += " " + line.strip()
            elif ":" in line:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
        name = fields.get("Package")
        if not name:
            continue

        def relations(field):
            out = []
            for group in filter(None, (g.strip() for g in fields.get(field, "").split(","))):
                out.append([re.split(r"[\s(:]", alt.strip(), maxsplit=1)[0]
                            for alt in group.split("|")])
            return out
        db[name] = {
            "depends": relations("Pre-Depends") + relations("Depends"),
            "provides": [p[0] for p in relations("Provides")],
            "essential": fields.get("Essential") == "yes",
            "installed": fields.get("Status", "").endswith(" installed"),
        }
    return db


def closure(db, roots):
    """The packages apt installs for `roots` with --no-install-recommends: each root and its
    Depends/Pre-Depends, recursively; of alternatives the first that is a package here (or that
    a package here provides)."""
    providers = {}
    for name, info in db.items():
        if info["installed"]:
            for virtual in info["provides"]:
                providers.setdefault(virtual, name)
    have, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in have:
            continue
        if name not in db or not db[name]["installed"]:
            name = providers.get(name, name)
            if name in have:
                continue
        have.add(name)
        for group in db.get(name, {}).get("depends", []):
            if any(alt in have for alt in group):
                continue
            for alt in group:
                if alt in db and db[alt]["installed"] or alt in providers:
                    todo.append(alt)
                    break
    return have


def package_files(package):
    for arch in ("", ":amd64", ":" + os.uname().machine):
        path = f"/var/lib/dpkg/info/{package}{arch}.list"
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read().split("\n")
    return None


def ships(files, name, kind):
    """Whether a package's file list holds the program (on a bin path) or the Python module."""
    if kind == "module":
        return any(re.search(rf"/(dist|site)-packages/{re.escape(name)}(/__init__\.py|\.py|"
                             rf"\.cpython[^/]*\.so|/?)$", f) for f in files)
    listed = set(files)
    paths = [name] if name.startswith("/") else [
        f"{prefix}/{name}" for prefix in ("/bin", "/sbin", "/usr/bin", "/usr/sbin")]
    for path in paths:
        # merged /usr: dpkg lists /bin/ip, the file is /usr/bin/ip (and /bin/sh is /usr/bin/sh)
        candidates = {path, path.removeprefix("/usr")}
        # an alternative (awk -> mawk): the file it resolves to on this machine
        if os.path.exists(path):
            real = os.path.realpath(path)
            candidates |= {real, real.removeprefix("/usr")}
        if candidates & listed:
            return True
    return False


def check_installable(programs, modules, status_text, install_deps):
    """(problems, fresh packages, available packages): a declaration none of whose packages a
    fresh bookworm or install-deps.sh brings, or that none of them ships."""
    db = parse_dpkg_status(status_text)
    essential = [name for name, info in db.items() if info["essential"] and info["installed"]]
    fresh = closure(db, essential + FRESH_ROOTS)
    required, conditional = install_deps
    missing_deps = [p for p in required if p not in db or not db[p]["installed"]]
    if missing_deps:
        return ([f"install-deps.sh's packages not installed here: {' '.join(missing_deps)}: "
                 "run packaging/install-deps.sh first"], len(fresh), 0)
    installed_conditional = [p for p in conditional if p in db and db[p]["installed"]]
    available = closure(db, essential + FRESH_ROOTS + required + installed_conditional)
    problems = []
    for kind, table in (("program", programs), ("module", modules)):
        for name, (packages, optional) in sorted(table.items()):
            # A package install-deps.sh adds on a condition (npm, when the machine has no npm of
            # its own) is brought either way: by install-deps.sh or by the machine.
            brought = [p for p in packages if p in available or p in conditional]
            if not brought and not optional:
                problems.append(
                    f"{name}: its package {' or '.join(packages)} is neither in a fresh bookworm "
                    f"(--variant=apt) nor installed by packaging/install-deps.sh: add it there")
                continue
            lists = [package_files(p) for p in packages]
            if not any(files is not None and ships(files, name, kind) for files in lists) \
                    and not (optional and all(files is None for files in lists)):
                problems.append(f"{name}: package {' or '.join(packages)} does not ship it "
                                f"(dpkg -S {name} says which does)")
    return problems, len(fresh), len(available)


def main(argv):
    if len(argv) != 2 or argv[1] not in ("scan", "installable"):
        print("usage: programs.py scan|installable", file=sys.stderr)
        return 2
    programs, modules = read_manifest()
    if argv[1] == "scan":
        problems = check_scan(programs, modules)
        summary = f"{len(programs)} programs and {len(modules)} modules declared"
    else:
        if not os.path.exists("/var/lib/dpkg/status"):
            print("SKIP: no dpkg database (not a Debian machine)")
            return 77
        with open("/var/lib/dpkg/status", encoding="utf-8", errors="replace") as f:
            status = f.read()
        problems, fresh, available = check_installable(programs, modules, status,
                                                       install_deps_packages())
        summary = (f"{len(programs)} programs and {len(modules)} modules, each from a fresh "
                   f"bookworm's {fresh} packages or the {available} with install-deps.sh's")
    for problem in problems:
        print(f"FAIL: {problem}")
    if problems:
        return 1
    print(f"ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
