"""Programs in cgroup v2 directories a test makes, and the exporter in a cgroup namespace rooted
at one of them: how the host tests and the benchmarks of workload attribution (issue 28) put
processes in the kubelet's, Slurm's and systemd's shapes and let the exporter see those shapes
at the top of its tree, where the kubelet, the runtime and slurmstepd make them. The cgroup
rules match only there (issue 37: a delegated cgroup deeper down must not pass for a pod), so
the directories are made under a test directory of the cgroup2 mount, never in the host's own
kubepods or system slices, and the exporter's view is rooted at that directory.

    import cgroups
    mount, unmount = cgroups.mount_cgroup2()
    root = cgroups.Root(mount, f"rdmascope-test-{os.getpid()}")
    try:
        unit = root.make("system.slice/rdma-storage.service")
        root.enter()
        exporter = subprocess.Popen(cgroups.in_namespace([binary, "serve", ...]))
        program = subprocess.Popen([...], preexec_fn=cgroups.joiner(unit))
        ...
    finally:
        ...  # stop the programs first: a cgroup holding a process cannot be removed
        root.close()
        unmount()

Standard library only."""

import os
import subprocess
import tempfile

# `unshare --cgroup PROGRAM`, run from inside the test's directory: PROGRAM's cgroup namespace
# is rooted at that directory (the caller's cgroup when it unshares).
UNSHARE_CGROUP = ("unshare", "--cgroup")


def in_namespace(command):
    """`command` (a list) run in a new cgroup namespace rooted at the caller's cgroup."""
    return [*UNSHARE_CGROUP, *command]


def cgroup2_mount():
    """Where a cgroup2 hierarchy is mounted (the unified hierarchy of a hybrid host), or None."""
    with open("/proc/self/mounts") as mounts:
        for line in mounts:
            fields = line.split()
            if fields[2] == "cgroup2":
                return fields[1]
    return None


def mount_cgroup2():
    """A cgroup2 mount, and a cleanup function: the host's, or one mounted here when the host
    has none (then the cleanup unmounts it)."""
    mounted = cgroup2_mount()
    if mounted:
        return mounted, lambda: None
    path = tempfile.mkdtemp(prefix="rdmascope-cgroup2-")
    subprocess.run(["mount", "-t", "cgroup2", "none", path], check=True)

    def unmount():
        subprocess.run(["umount", path], check=False)
        os.rmdir(path)
    return path, unmount


def own_cgroup():
    """This process's cgroup v2 path ("0::" line of /proc/self/cgroup), from the mount's root."""
    with open("/proc/self/cgroup") as own:
        return next(line.split(":", 2)[2].strip() for line in own if line.startswith("0::"))


def move(pid, directory):
    """Moves process `pid` into cgroup directory `directory`."""
    with open(os.path.join(directory, "cgroup.procs"), "w") as procs:
        procs.write(str(pid))


def joiner(directory):
    """A preexec_fn for subprocess.Popen: the child moves itself into `directory` before it
    execs, so that it runs there from its first instruction (no window in the parent's cgroup
    that a scrape could read)."""
    def join():
        move(os.getpid(), directory)
    return join


def remove(base, note=print):
    """Removes `base` and the directories under it, deepest first; one still holding a process
    stays (and `note` says so, unless None)."""
    for root, _, _ in sorted(os.walk(base), key=lambda entry: -len(entry[0])):
        try:
            os.rmdir(root)
        except OSError as error:
            if note is not None:
                note(f"note: {root} not removed: {error}")


class Root:
    """The test's cgroup directory, `name` under `mount`. enter() moves this process into it:
    the programs it starts through in_namespace() from then on see it as their cgroup root.
    close() moves this process back to the cgroup it left (first: a cgroup holding a process
    cannot be removed) and removes the directory with what is under it; `note` reports one
    left behind (None: silently). Also a context manager (enter, close)."""

    def __init__(self, mount, name, note=print):
        self.mount = mount
        self.base = os.path.join(mount, name)
        self.note = note
        self.home = None

    def make(self, relative):
        """Makes `relative` under the test's directory (and its parents); returns its path."""
        path = os.path.join(self.base, relative)
        os.makedirs(path, exist_ok=True)
        return path

    def enter(self):
        home = own_cgroup()
        os.makedirs(self.base, exist_ok=True)
        move(os.getpid(), self.base)
        self.home = home
        return self

    def close(self):
        """Safe on every path: before enter(), after a failed one, twice."""
        if self.home is not None:
            move(os.getpid(), os.path.join(self.mount, self.home.lstrip("/")))
            self.home = None
        remove(self.base, self.note)

    def __enter__(self):
        try:
            return self.enter()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc):
        self.close()
        return False
