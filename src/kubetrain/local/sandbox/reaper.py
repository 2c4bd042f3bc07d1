"""Plain mode's parent for a container: what bwrap's PID namespace gives for free.

Run as ``python -I -c REAPER <status-file> <command...>`` with the daemon's interpreter. It
makes itself a child subreaper, so every process the command leaves behind (even one that
started a new session and lost its parent) stays below it; it records the command's exit
code where bwrap would; and when the command ends it kills whatever is left, as the end of a
container's PID namespace does on a node. SIGTERM/SIGINT/SIGHUP are caught (and reset for
the command), so a group-wide signal cannot make it lose the exit code.
"""

from __future__ import annotations

__all__ = ["REAPER"]

REAPER = r"""
import ctypes, os, signal, sys, time
PR_SET_CHILD_SUBREAPER = 36
ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
caught = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
for s in caught:
    signal.signal(s, lambda *_: None)
status, cmd = sys.argv[1], sys.argv[2:]
try:
    main = os.posix_spawnp(cmd[0], cmd, os.environ, setsigdef=caught)
except OSError as err:
    print(f"exec {cmd[0]}: {err.strerror}", file=sys.stderr, flush=True)
    main, code = None, 127
while main is not None:
    try:
        pid, st = os.waitpid(-1, 0)
    except InterruptedError:
        continue
    if pid == main:
        code = os.waitstatus_to_exitcode(st)
        code = 128 - code if code < 0 else code
        break
with open(status, "a") as f:
    f.write('{ "exit-code": %d }\n' % code)

def below(root):
    kids = {}
    for e in os.listdir("/proc"):
        if e.isdigit():
            try:
                ppid = int(open(f"/proc/{e}/stat").read().rpartition(")")[2].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(e))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out

for _ in range(50):
    left = below(os.getpid())
    if not left:
        break
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    time.sleep(0.01)
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
sys.exit(code)
"""
