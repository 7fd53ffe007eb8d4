"""Shared helpers for tests that run the real rdmascope binary: start it on a free port,
scrape it, parse the exposition, materialise fixture trees. Standard library only."""

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

SKIP = 77  # ctest SKIP_RETURN_CODE


def keep_scrape(body):
    """Keeps a real scrape in $RDMASCOPE_SCRAPE_DIR (set by ctest) for the check that every
    metric a rule or dashboard uses is one the exporter really serves."""
    directory = os.environ.get("RDMASCOPE_SCRAPE_DIR")
    if not directory or not body:
        return
    os.makedirs(directory, exist_ok=True)
    handle, _ = tempfile.mkstemp(prefix=f"{os.getpid()}-", suffix=".prom", dir=directory)
    with os.fdopen(handle, "w") as f:
        f.write(body)


@contextlib.contextmanager
def reachable_copy(program):
    """A copy of `program` in a fresh directory every user can search, removed afterwards, for
    tests that run it as another user: the clone, and so the build tree, may live where only
    root can reach it (a user's home is 0700; /root on a fresh machine, issue 25)."""
    directory = tempfile.mkdtemp(prefix="rdmascope-bin-")
    try:
        os.chmod(directory, 0o755)
        copy = os.path.join(directory, os.path.basename(program))
        shutil.copy2(program, copy)
        os.chmod(copy, 0o755)
        yield copy
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class Exporter:
    """`rdmascope serve` on 127.0.0.1:<free port>, optionally inside a network namespace."""

    def __init__(self, binary, args=(), netns=None, timeout=60, prefix=(), env=None,
                 launcher=()):
        """prefix: arguments between `binary` and `serve` (e.g. runuser's -u USER -- PATH);
        launcher: a command that runs `binary` (cgroups.UNSHARE_CGROUP: in a cgroup namespace);
        env: variables added to the exporter's environment (LD_PRELOAD seams, libfiu).
        timeout: for the exporter to listen, a guard against a hang, not a speed check.
        Building the collectors loads and attaches the MR and verbs probes: under 1 s here,
        but 11 s when the verifier worked through an MR program to its limit (E2BIG, fixed
        in session 15; host_mr_* catch the probes not attaching), and more on a loaded host."""
        self.log = tempfile.NamedTemporaryFile(prefix="rdmascope-log-", delete=False)
        os.chmod(self.log.name, 0o666)  # writable by an unprivileged exporter too
        cmd = [*launcher, binary, *prefix, "serve", "--web.listen-address=127.0.0.1:0", *args]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **env} if env else None)
        deadline = time.monotonic() + timeout
        self.port = None
        while time.monotonic() < deadline and self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError("exporter exited early:\n" + self.read_log())
            match = re.search(r'msg=listening .* port=(\d+)', self.read_log())
            if match:
                self.port = int(match.group(1))
            else:
                time.sleep(0.05)
        if self.port is None:
            log = self.read_log()  # before stop(), which removes the file
            self.stop()
            raise RuntimeError("exporter did not start listening:\n" + log)
        self.netns = netns

    def read_log(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def get(self, path="/metrics", timeout=10):
        """Returns (status, body). In a netns the loopback is the namespace's own."""
        url = f"http://127.0.0.1:{self.port}{path}"
        if self.netns:
            out = subprocess.run(
                ["ip", "netns", "exec", self.netns, "curl", "-s", "-m", str(timeout),
                 "-w", "\n%{http_code}", url],
                capture_output=True, text=True, check=True)
            body, _, status = out.stdout.rpartition("\n")
            return int(status), body
        try:
            with urllib.request.urlopen(url, timeout=timeout) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()

    def metrics(self):
        status, body = self.get()
        if status != 200:
            raise RuntimeError(f"scrape returned HTTP {status}")
        keep_scrape(body)
        return body

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        os.unlink(self.log.name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Checker:
    """Expectations that print "ok"/"FAIL" as they go and collect what failed."""

    def __init__(self):
        self.failures = []

    def expect(self, what, got, want):
        print(("ok" if got == want else "FAIL") + f": {what}: {got}" +
              ("" if got == want else f" (want {want})"))
        if got != want:
            self.failures.append(what)

    def result(self):
        """The test's exit code: 0, or 1 after a line naming every failed expectation."""
        if self.failures:
            print("FAIL: " + ", ".join(self.failures))
            return 1
        return 0


def parse(text):
    """{(name, frozenset(labels.items())): value} for every sample."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        if not match:
            raise ValueError("unparseable exposition line: " + line)
        labels = {}
        if match.group(2):
            for key, value in LABEL.findall(match.group(2)):
                labels[key] = value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\")
        samples[(match.group(1), frozenset(labels.items()))] = float(match.group(3))
    return samples


def series(samples, name, **labels):
    """Samples of one metric whose labels include `labels`: {frozenset: value}."""
    want = set(labels.items())
    return {key[1]: value for key, value in samples.items()
            if key[0] == name and want <= set(key[1])}


def value(samples, name, **labels):
    """The value of the one series of `name` whose labels include `labels`, else None."""
    values = list(series(samples, name, **labels).values())
    return values[0] if len(values) == 1 else None


def materialise_tree(tree_file, root):
    """Creates the files a tests/fixtures/sysfs/*.tree describes (see its header); `path ->
    target` is a symbolic link, as tests/unit/fixture_tree.cc reads it."""
    with open(tree_file, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            if " -> " in line and " = " not in line:
                rel, target = line.split(" -> ", 1)
                path = os.path.join(root, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.symlink(target, path)
                continue
            if " = " not in line and line.endswith("/"):
                os.makedirs(os.path.join(root, line), exist_ok=True)
                continue
            if " = " in line:
                rel, content = line.split(" = ", 1)
            else:
                rel, content = line[:-2], ""
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as out:
                out.write(content + "\n")


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def require_root_and_netns():
    if os.geteuid() != 0:
        print("SKIP: host tier needs root")
        raise SystemExit(SKIP)
    probe = subprocess.run(["ip", "netns", "add", "rdmascope-probe"], capture_output=True)
    if probe.returncode != 0:
        print("SKIP: cannot create network namespaces:", probe.stderr.decode().strip())
        raise SystemExit(SKIP)
    subprocess.run(["ip", "netns", "del", "rdmascope-probe"], capture_output=True)
