#!/usr/bin/env python3
"""pcmail's Windows suite: the cross-built pcmail.exe (and pcmail-hook.exe when
built) under Wine, headless, against a Linux `pcmail serve` on loopback.

Run by tests/windows/run.sh, which builds the binaries, the test-only
ProcessPrng shim and the Wine prefix. Every PC's home, store and the exe
itself live under C:\\users\\山田 太郎\\ (spaces and non-ASCII). Closes with
`windows: N passed, M failed` and exits non-zero on any failure.
"""

import argparse
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import traceback

P = argparse.ArgumentParser()
P.add_argument("--exe-dir", required=True, help="Unix path of the Windows folder holding pcmail.exe (and the shim)")
P.add_argument("--linux-pcmail", required=True)
P.add_argument("--prefix", required=True, help="WINEPREFIX")
P.add_argument("--unit-tests", action="append", default=[],
               help="Unix path of a lib test exe for Windows whose win_tests run under Wine (given once per exe: pcmail-local's, pcmail-client's)")
ARGS = P.parse_args()

PREFIX = ARGS.prefix
USER_DIR_WIN = "C:\\users\\山田 太郎"
EXE_DIR_WIN = USER_DIR_WIN + "\\bin dir"
TOKEN = "win-suite-token-0123456789"
HOOK_EXE = os.path.join(ARGS.exe_dir, "pcmail-hook.exe")
USE_HOOK_EXE = os.path.exists(HOOK_EXE)
WORK = tempfile.mkdtemp(prefix="pcmail-win-")
PASSED = 0
FAILED = 0


def unix(win_path):
    """C:\\a\\b → $WINEPREFIX/drive_c/a/b"""
    assert win_path[1:3] == ":\\", win_path
    return os.path.join(PREFIX, "drive_" + win_path[0].lower(), *win_path[3:].split("\\"))


def check(name, cond, detail=""):
    global PASSED, FAILED
    if cond:
        PASSED += 1
        print(f"ok - {name}", flush=True)
    else:
        FAILED += 1
        print(f"FAIL - {name}: {detail}", flush=True)
    return cond


def scenario(fn):
    print(f"# {fn.__doc__.strip().splitlines()[0]}", flush=True)
    try:
        fn()
    except Exception:
        check(f"{fn.__name__} ran to the end", False, traceback.format_exc())


def credential_for(home):
    """Each simulated installation's own credential (its label is bound to it on
    `pcmail serve`), stable per PCMAIL_HOME, in the environment as on a machine
    without a keyring."""
    import hashlib
    return hashlib.sha256(("pcmail-test-credential " + home).encode()).hexdigest()


def wine_env(home, token=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PCMAIL_TOKEN", "PCMAIL_HOME", "DISPLAY")}
    env.update(WINEPREFIX=PREFIX, WINEDEBUG="-all", LC_ALL="C.UTF-8", PCMAIL_HOME=home,
               PCMAIL_CREDENTIAL=credential_for(home))
    if token:
        env["PCMAIL_TOKEN"] = token
    return env


class WinPc:
    """A Windows PC: pcmail.exe under Wine with its own PCMAIL_HOME."""

    def __init__(self, label, home, token=None):
        self.label, self.home, self.token = label, home, token
        os.makedirs(unix(home), exist_ok=True)

    def run(self, args, stdin=None, exe="pcmail.exe", prefix=(), timeout=120, stderr_to_file=False):
        cmd = [*prefix, "wine", os.path.join(ARGS.exe_dir, exe), *args]
        if not stderr_to_file:
            return subprocess.run(cmd, input=stdin, capture_output=True, env=wine_env(self.home, self.token), timeout=timeout, cwd=WORK)
        # Wine hands every process it starts the Unix stderr of its parent (for
        # its own debug output), whatever the Windows handles say: a stderr
        # pipe would stay open as long as a spawned poller lives, which real
        # Windows does not do. stdout, the pipe Claude Code reads, stays a pipe.
        with tempfile.TemporaryFile(dir=WORK) as err:
            r = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=err, env=wine_env(self.home, self.token), timeout=timeout, cwd=WORK)
            err.seek(0)
            r.stderr = err.read()
        return r

    def ok(self, args, **kw):
        r = self.run(args, **kw)
        if r.returncode != 0:
            raise AssertionError(f"pcmail.exe {args} exited {r.returncode}\nstdout: {r.stdout.decode(errors='replace')}\nstderr: {r.stderr.decode(errors='replace')}")
        return r.stdout.decode()

    def json(self, args):
        return json.loads(self.ok(["--json", *args]))

    def send(self, args):
        return self.json(["send", *args])["ids"][0]

    def state_of(self, mail_id):
        return self.json(["status", mail_id])[0]["state"]

    def hook_cmd(self):
        """pcmail-hook.exe when it is built, else `pcmail.exe hook`."""
        return ("pcmail-hook.exe", []) if USE_HOOK_EXE else ("pcmail.exe", ["hook"])

    def hook_raw(self, session, event="UserPromptSubmit", prefix=()):
        exe, args = self.hook_cmd()
        payload = json.dumps({"session_id": session, "hook_event_name": event, "cwd": "C:\\\\work", "prompt": "hi"}).encode()
        return self.run(args, stdin=payload, exe=exe, prefix=prefix, stderr_to_file=True)

    def hook(self, session, event="UserPromptSubmit", prefix=()):
        r = self.hook_raw(session, event, prefix)
        assert r.returncode == 0 and r.stderr == b"", f"hook exited {r.returncode}, stderr {r.stderr!r}"
        out = r.stdout.decode().strip()
        if not out:
            return ""
        return json.loads(out)["hookSpecificOutput"]["additionalContext"]

    def store(self):
        return unix(self.home + "\\store.db")

    def set_meta(self, key, value):
        with sqlite3.connect(self.store()) as c:
            c.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, str(value)))


class LinuxPc:
    def __init__(self, label, url):
        self.label = label
        self.home = os.path.join(WORK, "linux " + label)
        self.ok(["init", "--label", label, "--server", url])

    def run(self, args):
        env = {k: v for k, v in os.environ.items() if k != "DBUS_SESSION_BUS_ADDRESS"}
        env.update(PCMAIL_HOME=self.home, PCMAIL_TOKEN=TOKEN, PCMAIL_CREDENTIAL=credential_for(self.home))
        return subprocess.run([ARGS.linux_pcmail, *args], capture_output=True, env=env, stdin=subprocess.DEVNULL, timeout=60)

    def ok(self, args):
        r = self.run(args)
        if r.returncode != 0:
            raise AssertionError(f"pcmail {args} exited {r.returncode}: {r.stderr.decode()}")
        return r.stdout.decode()

    def json(self, args):
        return json.loads(self.ok(["--json", *args]))

    def send(self, args):
        return self.json(["send", *args])["ids"][0]

    def state_of(self, mail_id):
        return self.json(["status", mail_id])[0]["state"]


def wait_until(what, cond, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return check(what, False, f"not within {seconds} s")


def start_serve():
    db_dir = os.path.join(WORK, "serve")
    os.makedirs(db_dir)
    env = dict(os.environ, PCMAIL_TOKEN=TOKEN, PCMAIL_HOME=db_dir)
    p = subprocess.Popen([ARGS.linux_pcmail, "serve", "--listen", "127.0.0.1:0", "--db", os.path.join(db_dir, "serve.db")],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    for line in p.stdout:
        line = line.decode()
        if "listening on " in line:
            url = line.split("listening on ", 1)[1].strip()
            threading.Thread(target=lambda: [None for _ in p.stdout], daemon=True).start()
            return p, url
    raise AssertionError("pcmail serve exited before listening")


class GateProxy:
    """A TCP proxy to the real server that holds every connection while the
    gate is shut: a poller blocked here is provably alive and connected."""

    def __init__(self, target_url):
        host_port = target_url.split("//", 1)[1].split("/", 1)[0]
        host, port = host_port.rsplit(":", 1)
        self.target = (host, int(port))
        self.path = "/" + target_url.split("//", 1)[1].split("/", 1)[1]
        self.open = threading.Event()
        self.open.set()
        self.held = 0
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}{self.path}"
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            c, _ = self.sock.accept()
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        if not self.open.is_set():
            with self.lock:
                self.held += 1
            self.open.wait()
        up = socket.create_connection(self.target)

        def pump(a, b):
            try:
                while (d := a.recv(65536)):
                    b.sendall(d)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        threading.Thread(target=pump, args=(up, c), daemon=True).start()
        pump(c, up)


def pollers_running():
    """Windows processes show up in ps with their exe path and arguments."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if "pcmail.exe sync --quiet" in l or "pcmail.exe\" sync --quiet" in l]


# ---------------------------------------------------------------- scenarios

def definition_of_done_on_the_embedded_default():
    """the basic definition of done on the embedded default (store and server db under C:\\users\\山田 太郎\\…)"""
    pc = WinPc("kim-laptop", USER_DIR_WIN + "\\pcmail a")
    shared = USER_DIR_WIN + "\\共有 データ\\server.db"
    pc.ok(["init", "--label", "kim-laptop", "--server", "embedded", "--embedded-db", shared])
    pc.ok(["sync"])
    pc.ok(["roster", "add", "kim-desktop", "--hostname", "desk"])
    mail = pc.send(["kim-laptop", "--body", "note to self: rerun the flaky test"])
    check("sent mail is new", pc.state_of(mail) == "new")
    pc.ok(["sync"])
    check("delivered within one cycle", pc.state_of(mail) == "delivered")
    check("store.db under a non-ASCII path with spaces", os.path.getsize(pc.store()) > 0)
    check("embedded server db at the non-ASCII path", os.path.getsize(unix(shared)) > 0)
    ctx = pc.hook("session-new-1", "SessionStart")
    first = ctx.find("<pcmail-mail id=")
    check("a new session's hook shows the mail first", first >= 0 and ctx[first:].startswith(f'<pcmail-mail id="{mail}"'), ctx)
    pc.ok(["sync"])
    tl = pc.json(["status", mail])[0]
    states = [e["state"] for e in tl["timeline"]]
    check("status says seen, timeline new → delivered → seen", states == ["new", "delivered", "seen"], states)
    pc.ok(["ack", mail])
    check("ack makes it done", pc.state_of(mail) == "done")
    r = pc.run(["send", "kim", "--body", "hi"])
    err = r.stderr.decode()
    check("a partial address exits 4 with the candidates", r.returncode == 4 and "kim-laptop" in err and "kim-desktop" in err, (r.returncode, err))
    check("the same session is not shown the mail again", pc.hook("session-new-1") == "")


STATE = {}


def windows_and_linux_mail_each_other():
    """a Windows PC and a Linux PC mail each other through a Linux `pcmail serve` (decision, reply, timeline)"""
    serve, url = start_serve()
    STATE["serve"], STATE["url"] = serve, url
    lin = LinuxPc("linux-pc", url)
    win = WinPc("win-pc", USER_DIR_WIN + "\\pcmail win")
    # The first contact binds the label with the shared token (the migration path to per-PC credentials:
    # a credential the server has never seen is not enrolled without it).
    win.token = TOKEN
    win.ok(["init", "--label", "win-pc", "--server", url])
    win.token = None
    # The token: Windows Credential Manager through keyring where Wine has it.
    r = win.run(["token", "set"], stdin=(TOKEN + "\n").encode())
    via_keyring = r.returncode == 0 and win.run(["sync"]).returncode == 0
    if via_keyring:
        print("# token: read from Windows Credential Manager (keyring's windows-native store; Wine implements CredWriteW/CredReadW)")
    else:
        print(f"# token: Windows Credential Manager unavailable under this Wine ({r.stderr.decode().strip()}); using PCMAIL_TOKEN")
        win.token = TOKEN
        win.ok(["sync"])
    check("the Windows PC polls with its token", True)
    lin.ok(["sync"])
    win.ok(["sync"])
    lin.ok(["roster"])
    dec = lin.send(["win-pc", "--kind", "decision", "--subject", "[判断依頼] ship it?", "--body", "yes or no"])
    note = lin.send(["win-pc", "--body", "fyi from linux"])
    win.ok(["sync"])
    check("Linux → Windows: delivered", lin.state_of(dec) == "delivered")
    ctx = win.hook("win-session")
    check("the decision request is shown first on Windows", 0 <= ctx.find(dec) < ctx.find(note), ctx)
    win.ok(["reply", dec, "--body", "yes, ship it"])
    check("the reply answers the decision: done on the server", lin.state_of(dec) == "done")
    states = [e["state"] for e in lin.json(["status", dec])[0]["timeline"]]
    check("the Linux sender sees the whole timeline", states[:2] == ["new", "delivered"] and states[-1] == "done", states)
    lin.ok(["sync"])
    inbox = lin.json(["inbox"])
    check("the reply reached the Linux PC", any(m.get("inReplyTo") == dec or m.get("in_reply_to") == dec for m in inbox), inbox)
    back = win.send(["linux-pc", "--body", "Windows → Linux, パス C:\\users\\山田 太郎"])
    lin.ok(["sync"])
    check("Windows → Linux: delivered", win.state_of(back) == "delivered")
    shown = lin.ok(["read", back])
    check("the Linux PC reads the Windows mail intact", "パス C:\\users\\山田 太郎" in shown, shown)
    STATE["lin"], STATE["win"] = lin, win


def stop_wineserver():
    """Ends the prefix's wineserver and every Wine process it serves, and waits for it."""
    env = {k: v for k, v in os.environ.items() if k != "DISPLAY"}
    env.update(WINEPREFIX=PREFIX, WINEDEBUG="-all")
    subprocess.run(["wineserver", "-k"], env=env, capture_output=True, timeout=60)
    subprocess.run(["wineserver", "-w"], env=env, capture_output=True, timeout=60)


def hook_without_network_and_with_a_corrupt_store():
    """the hook with no network (a network namespace with nothing in it) and with a corrupt store: silent"""
    lin, win = STATE["lin"], STATE["win"]
    mail = lin.send(["win-pc", "--body", "read me offline"])
    win.ok(["sync"])
    win.set_meta("last_poll_ok_at", 0)  # stale: the hook may start a poller, which must not hurt
    if os.geteuid() == 0 and shutil.which("unshare"):
        # Wine makes sockets in the wineserver, so the one serving the hook
        # must be started inside the empty namespace (else the hook's poller
        # would have the network), and ended after it (else it would serve
        # every later process with no network).
        stop_wineserver()
        ctx = win.hook("offline-session", prefix=("unshare", "--net"))
        check("with no network at all the hook shows stored mail", mail in ctx, ctx)
        stop_wineserver()
    else:
        print("# not root: the no-network namespace part needs CAP_SYS_ADMIN (CI runs as root)")
    broken = WinPc("win-broken", USER_DIR_WIN + "\\pcmail broken")
    broken.token = win.token
    broken.ok(["init", "--label", "win-broken", "--server", STATE["url"]])
    broken.ok(["sync"])
    with open(broken.store(), "wb") as f:
        f.write(b"this is not a database")
    for ext in ("-wal", "-shm"):
        try:
            os.remove(broken.store() + ext)
        except FileNotFoundError:
            pass
    r = broken.hook_raw("s9")
    check("a corrupt store: exit 0, nothing on stdout or stderr", r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r)
    exe, args = broken.hook_cmd()
    r = broken.run(args, stdin=b"\x00not json", exe=exe, stderr_to_file=True)
    check("garbage on stdin: exit 0, silent", r.returncode == 0 and r.stdout == b"" and r.stderr == b"", r)


def hook_starts_a_detached_poller_that_outlives_it():
    """the hook's detached poller: the hook returns at once and the spawned poller outlives it"""
    lin = STATE["lin"]
    gate = GateProxy(STATE["url"])
    pc = WinPc("win-gated", USER_DIR_WIN + "\\pcmail gated", TOKEN)  # binds the label (see above)
    pc.ok(["init", "--label", "win-gated", "--server", gate.url])
    pc.token = STATE["win"].token
    if pc.token is None:  # the keyring holds one token per server URL
        pc.ok(["token", "set"], stdin=(TOKEN + "\n").encode())
    pc.ok(["sync"])
    lin.ok(["roster"])
    mail = lin.send(["win-gated", "--body", "pick me up"])
    check("no poller runs before the hook", not pollers_running(), pollers_running())
    pc.set_meta("last_poll_ok_at", 0)
    pc.set_meta("last_spawn_at", 0)
    gate.open.clear()  # the poller's request will be held
    t0 = time.monotonic()
    ctx = pc.hook("gated-session")
    took = time.monotonic() - t0
    alive = pollers_running()
    # Were the hook's stdout/stderr inherited by the poller, the hook's caller
    # (Claude Code; here subprocess.run) would wait for the poller to end.
    check("the hook returned while its poller still runs (no inherited pipe kept the caller waiting)", ctx == "" and len(alive) >= 1,
          f"poller processes after the hook returned: {alive}; the hook took {took:.1f} s")
    print(f"# the hook returned in {took:.1f} s under Wine")
    wait_until("the spawned poller connected to the server and is held there", lambda: gate.held >= 1)
    gate.open.set()
    wait_until("the detached poller delivered the mail", lambda: lin.state_of(mail) == "delivered")
    wait_until("the poller exits after its cycle", lambda: not pollers_running())
    check("the next hook shows the mail", mail in pc.hook("gated-session-2"))


def one_daemon_per_user():
    """one daemon per user: the lock works on Windows"""
    win = STATE["win"]
    env = wine_env(win.home, win.token)
    exe = os.path.join(ARGS.exe_dir, "pcmail.exe")

    def start():
        p = subprocess.Popen(["wine", exe, "daemon"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, cwd=WORK)
        line = p.stderr.readline().decode()  # "pcmail: daemon for …" once it holds the lock
        threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
        return p, line

    first, line = start()
    try:
        check("the first daemon takes the lock", "daemon for win-pc" in line, line)
        r = win.run(["daemon"], timeout=60)
        check("a second daemon exits at once: one is already running", r.returncode == 0 and b"already running" in r.stdout, r)
        r = win.run(["sync", "--quiet"])
        check("a quiet sync defers to the running daemon", r.returncode == 0 and r.stdout == b"", r)
    finally:
        first.kill()
        first.wait()
    third, line = start()
    try:
        check("the lock is released when its daemon dies (killed)", "daemon for win-pc" in line, line)
    finally:
        third.kill()
        third.wait()


def hooks_install_writes_a_command_that_runs():
    """the hook command `hooks install` writes to settings.json (exe and settings under C:\\users\\山田 太郎\\…) runs as Git Bash would run it"""
    win = STATE["win"]
    settings_win = USER_DIR_WIN + "\\.claude\\settings.json"
    win.ok(["hooks", "install", "--settings", settings_win])
    with open(unix(settings_win), encoding="utf-8") as f:
        settings = json.load(f)
    entry = settings["hooks"]["UserPromptSubmit"][0]["hooks"][0]
    command = entry["command"]
    print(f"# settings.json command: {command!r} args: {entry.get('args')!r}")
    if "args" in entry:
        argv = [command, *entry["args"]]  # exec form
    else:
        # Shell form: Claude Code hands it to Git Bash on Windows; bash's own
        # word splitting and quote removal give the argv.
        argv = subprocess.run(["bash", "-c", "printf '%s\\0' " + command], capture_output=True, check=True).stdout.decode().split("\0")[:-1]
    check("the hook path is a plain Windows path (no \\\\?\\ prefix, which Git Bash cannot run)", not argv[0].startswith("\\\\?\\"), argv[0])
    exe_path = argv[0].removeprefix("\\\\?\\")
    check("the hook path is this exe, spaces and non-ASCII intact", exe_path.lower() in (EXE_DIR_WIN + "\\pcmail.exe").lower() + (EXE_DIR_WIN + "\\pcmail-hook.exe").lower(), exe_path)
    lin = STATE["lin"]
    mail = lin.send(["win-pc", "--body", "via the installed hook command"])
    win.ok(["sync"])
    payload = json.dumps({"session_id": "installed-hook", "hook_event_name": "UserPromptSubmit", "prompt": "hi"}).encode()
    r = subprocess.run(["wine", exe_path, *argv[1:]], input=payload, capture_output=True, env=wine_env(win.home, win.token), timeout=60, cwd=WORK)
    out = r.stdout.decode()
    check("the installed command runs and shows the mail", r.returncode == 0 and mail in out, (r.returncode, out, r.stderr))


def service_as_a_task_scheduler_task():
    """the service as a Task Scheduler task (schtasks /Create /XML under Wine)"""
    win = STATE["win"]
    task_file = os.path.join(PREFIX, "drive_c", "windows", "system32", "tasks", "pcmail")
    xml_file = unix(win.home + "\\pcmail-task.xml")
    # `service install` starts the task (schtasks /Run): the daemon it starts
    # would hold a stderr pipe open under Wine (see WinPc.run), so stderr goes
    # to a file for every service command.
    r = win.run(["service", "install"], stderr_to_file=True)
    out = r.stdout.decode()
    check("service install registers the task", r.returncode == 0 and "Task Scheduler task installed" in out and os.path.exists(task_file), (r, out))
    raw = open(xml_file, "rb").read()
    xml = raw[2:].decode("utf-16-le")
    check("the XML is UTF-16LE with a BOM, as schtasks reads it", raw[:2] == b"\xff\xfe" and xml.startswith('<?xml version="1.0" encoding="UTF-16"?>'))
    check("start at logon, restart on failure, `pcmail.exe daemon` at the non-ASCII path",
          "<LogonTrigger>" in xml and "<RestartOnFailure>" in xml and f"<Command>{EXE_DIR_WIN}\\pcmail.exe</Command>" in xml
          and "<Arguments>daemon</Arguments>" in xml, xml)
    with open(task_file, encoding="utf-8-sig", errors="replace") as f:
        registered = f.read()
    check("Wine's task service accepted the definition", "pcmail poller" in registered, registered)
    r = win.run(["service", "install"], stderr_to_file=True)
    check("install again: same task, exit 0", r.returncode == 0 and b"already installed" in r.stdout, r)
    r = win.run(["--json", "service", "status"], stderr_to_file=True)
    check("service status answers", r.returncode == 0, r)
    st = json.loads(r.stdout)
    print(f"# service status under Wine: {st['service']} — Wine's schtasks /Query prints nothing, so the rule sees no task status; "
          "the rule itself is tested on recorded schtasks outputs (crates/service/tests)")
    r = win.run(["service", "uninstall"], stderr_to_file=True)
    check("uninstall removes the task and the XML", r.returncode == 0 and not os.path.exists(task_file) and not os.path.exists(xml_file), r)
    r = win.run(["service", "uninstall"], stderr_to_file=True)
    check("uninstall again: nothing to remove, exit 0", r.returncode == 0 and b"was not installed" in r.stdout, r)


def windows_unit_tests():
    """The Windows unit tests under Wine: process identity (PID + start time, parents, descendants) in pcmail-local, the job's Job Object in pcmail-client"""
    if not ARGS.unit_tests:
        check("the unit test exes were built", False, "run.sh passes --unit-tests")
        return
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "PCMAIL_CLAUDE_PID")}
    env.update(WINEPREFIX=PREFIX, WINEDEBUG="-all", LC_ALL="C.UTF-8")
    total, failed = 0, []
    for exe in ARGS.unit_tests:
        r = subprocess.run(["wine", exe, "win_tests", "--test-threads=2"], capture_output=True, env=env, timeout=300, cwd=WORK)
        out = r.stdout.decode(errors="replace")
        ran = [l for l in out.splitlines() if l.startswith("test ") and " ... " in l]
        for line in ran:
            name, verdict = line[5:].split(" ... ", 1)
            if verdict.startswith("ignored"):
                continue
            check(f"unit: {name}", verdict.startswith("ok"), out[out.find("failures:"):] if "failures:" in out else out[-3000:])
        total += len(ran)
        if r.returncode != 0:
            failed.append((exe, r.returncode, out[-2000:], r.stderr.decode(errors="replace")[-2000:]))
    check("the Windows unit tests ran and passed", not failed and total >= 7, (total, failed))


class WinProcess:
    """A Windows program under Wine whose stdout lines are collected as they come."""

    def __init__(self, exe, args, env):
        self.p = subprocess.Popen(["wine", os.path.join(ARGS.exe_dir, exe), *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                  stdin=subprocess.DEVNULL, env=env, cwd=WORK)
        self.lines = []
        threading.Thread(target=lambda: [self.lines.append(l.decode(errors="replace").rstrip("\r\n")) for l in self.p.stdout], daemon=True).start()

    def line(self, prefix, seconds=60):
        """The first line starting with prefix (waits for it)."""
        wait_until(f"a line {prefix!r}", lambda: any(l.startswith(prefix) for l in self.lines), seconds)
        return next((l for l in self.lines if l.startswith(prefix)), "")

    def between(self, first, last):
        i = self.lines.index(first)
        j = self.lines.index(last, i + 1)
        return "\n".join(self.lines[i + 1:j])


def taskkill(win_pid, env):
    """kill -9 the Windows way: TerminateProcess through Wine's taskkill /F."""
    return subprocess.run(["wine", "taskkill", "/F", "/PID", str(win_pid)], capture_output=True, env=env, timeout=60, cwd=WORK).returncode == 0


def wine_processes(name):
    """Windows processes whose command line holds name, as Linux ps sees Wine's processes (Wine's tasklist prints nothing)."""
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    return [l for l in ps.splitlines() if name in l and not l.startswith(("wine ", "timeout "))]


def start_daemon(pc):
    env = wine_env(pc.home, pc.token)
    p = subprocess.Popen(["wine", os.path.join(ARGS.exe_dir, "pcmail.exe"), "daemon"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, env=env, cwd=WORK)
    line = p.stderr.readline().decode()
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    STATE.setdefault("daemons", []).append(p)
    return p, line


def leases_follow_windows_processes():
    """leases follow Windows processes (PID + start time; a claude.exe two levels up; the parent) and a killed holder's lease is released by the daemon within one heartbeat period"""
    lin, win = STATE["lin"], STATE["win"]
    env = {k: v for k, v in wine_env(win.home, win.token).items() if k not in ("PCMAIL_CLAUDE_PID", "PCMAIL_SESSION")}
    pcmail = EXE_DIR_WIN + "\\pcmail.exe"
    heartbeat_s = 30  # pcmail_core::lease::HEARTBEAT_MS

    def live():
        return {l["resource"]: l for l in lin.json(["lease", "list"])["leases"]}

    # --pid: a process that just waits.
    sleeper = WinProcess("helper.exe", ["sleep"], env)
    s_pid = int(sleeper.line("pid ").split()[1])
    r = win.run(["--json", "lease", "claim", "win/gpu:0", "-d", "follows --pid", "--pid", str(s_pid)])
    claim = json.loads(r.stdout or b"null")
    check("lease claim --pid PID follows that Windows process", r.returncode == 0 and claim["outcome"] == "granted"
          and claim["follows"]["how"] == "pid" and claim["follows"]["pid"] == s_pid, (r, claim))
    # Claude Code → its shell → pcmail.exe: the lease follows claude.exe, found two ancestors up.
    claude = WinProcess("claude.exe", ["run", EXE_DIR_WIN + "\\bash.exe", "run", pcmail, "--json", "lease", "claim", "win/module", "-d", "follows claude.exe"], env)
    wait_until("the shell's pcmail.exe ended", lambda: any(" exit " in l for l in claude.lines), 60)
    starts = [l for l in claude.lines if l.endswith(" started")]
    c_pid, b_pid = int(starts[0].split()[2]), int(starts[1].split()[2])
    b_exit = next(l for l in claude.lines if " exit " in l)
    claim = json.loads(claude.between(starts[1], b_exit) or "null")
    check("from a Claude Code session the lease follows claude.exe (two ancestors up, through its shell)",
          b_exit.endswith("exit 0") and claim["outcome"] == "granted" and claim["follows"]["how"] == "claude" and claim["follows"]["pid"] == c_pid,
          claude.lines)
    # No Claude Code, no --pid: the lease follows the caller's parent, and says so.
    parent = WinProcess("helper.exe", ["run", pcmail, "--json", "lease", "claim", "win/parent", "-d", "follows the parent"], env)
    wait_until("its pcmail.exe ended", lambda: any(" exit " in l for l in parent.lines))
    p_start = next(l for l in parent.lines if l.endswith(" started"))
    p_exit = next(l for l in parent.lines if " exit " in l)
    p_pid = int(p_start.split()[2])
    claim = json.loads(parent.between(p_start, p_exit) or "null")
    check("outside Claude Code the lease follows the parent process (parent_pid on Windows)",
          claim["outcome"] == "granted" and claim["follows"]["how"] == "parent" and claim["follows"]["pid"] == p_pid and claim["follows"].get("note"),
          (parent.lines,))
    leases = live()
    check("the Linux PC sees the three leases", {"win/gpu:0", "win/module", "win/parent"} <= set(leases), leases)

    write_jobs_config(win)  # before the daemon starts, so its first poll publishes the whitelist
    daemon, line = start_daemon(win)
    check("the Windows daemon runs (it renews and releases leases)", "daemon for win-pc" in line, line)
    check("taskkill /F claude.exe", taskkill(c_pid, env))
    killed = time.monotonic()
    released = wait_until("claude.exe's lease released", lambda: "win/module" not in live(), heartbeat_s)
    took = time.monotonic() - killed
    check(f"claude.exe's lease released within one heartbeat period ({took:.1f} s ≤ {heartbeat_s} s)", released and took <= heartbeat_s, took)
    print(f"# lease released {took:.1f} s after its claude.exe was killed (the daemon's liveness check runs every 3 s)")
    leases = live()
    check("the leases of processes still alive stay (their start time reads the same at every check)",
          "win/gpu:0" in leases and "win/parent" in leases, leases)
    check("taskkill /F the --pid process and the parent", taskkill(s_pid, env) and taskkill(p_pid, env))
    killed = time.monotonic()
    wait_until("both leases released", lambda: not ({"win/gpu:0", "win/parent"} & set(live())), heartbeat_s)
    took = time.monotonic() - killed
    check(f"theirs too within one heartbeat period ({took:.1f} s)", took <= heartbeat_s, took)
    r = win.run(["lease", "claim", "win/dead", "--pid", str(s_pid)])
    check("--pid of a dead process is refused (no start time for it)", r.returncode != 0 and b"no such process" in r.stderr, r)
    taskkill(b_pid, env)
    for w in (sleeper, claude, parent):
        try:
            w.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            w.p.kill()


JOBS_CONFIG = r"""
[jobs]
allowed_submitters = ["linux-pc"]

[jobs.checkouts]
app = '{app}'

# Starts a child that would outlive it, then waits: killed at its 2 s limit.
[[jobs.commands]]
name = "tree"
argv = ['{helper}', "tree", "pids.txt", "stay"]
cwd = "app"
time_limit_secs = 2

# The same with a long limit: its daemon is killed mid-job.
[[jobs.commands]]
name = "tree-long"
argv = ['{helper}', "tree", "long-pids.txt", "stay"]
cwd = "app"
time_limit_secs = 120

# Starts a child that would outlive it, then exits 0 at once.
[[jobs.commands]]
name = "tree-exit"
argv = ['{helper}', "tree", "exit-pids.txt", "exit"]
cwd = "app"
time_limit_secs = 60
"""


def write_jobs_config(pc):
    """The Windows PC's [jobs] (once); returns the checkout's Windows path."""
    app = USER_DIR_WIN + "\\job checkout"
    if not STATE.get("jobs_config"):
        os.makedirs(unix(app), exist_ok=True)
        with open(unix(pc.home + "\\config.toml"), "a", encoding="utf-8") as f:
            f.write(JOBS_CONFIG.format(app=app, helper=EXE_DIR_WIN + "\\helper.exe"))
        STATE["jobs_config"] = True
    return app


def jobs_kill_their_whole_tree():
    """a job's whole process tree ends with it (Job Object): at its time limit (timed_out), and when its own process exits"""
    lin, win = STATE["lin"], STATE["win"]
    app = write_jobs_config(win)
    wl = win.ok(["job", "whitelist"])
    listed = [line.split()[0] for line in wl.splitlines()[1:] if line.startswith("  ") and "(" in line]
    check("the Windows PC's whitelist has the three commands (and the four built-in probes)",
          sorted(c for c in listed if not c.startswith("_debug_")) == ["tree", "tree-exit", "tree-long"] and len(listed) == 7, wl)
    if not STATE.get("daemons") or STATE["daemons"][-1].poll() is not None:
        start_daemon(win)
    before = set(wine_processes("helper.exe"))

    def run_job(name):
        out = {}

        def submitted():
            r = lin.run(["--json", "job", "run", "win-pc", name, "--wait", "--timeout", "60s"])
            out["r"] = r
            return r.returncode != 13  # 13: refused (the whitelist has not reached the server yet)
        wait_until(f"job {name} accepted", submitted, 60)
        return out["r"]

    r = run_job("tree-exit")
    ans = json.loads(r.stdout or b"null") or {}
    check("a job whose process exits at once ends ok", r.returncode == 0 and ans.get("job", {}).get("state") == "ok", (r.returncode, r.stdout, r.stderr))
    text = open(unix(app + "\\exit-pids.txt")).read().split()
    print(f"# tree-exit: leader {text[0]}, the child it left {text[1]}")
    wait_until("the child its process left running is gone", lambda: not (set(wine_processes("helper.exe")) - before), 20)

    r = run_job("tree")
    ans = json.loads(r.stdout or b"null") or {}
    job = ans.get("job", {})
    check("a job past its time limit ends timed_out (exit 14)", r.returncode == 14 and job.get("state") == "timed_out", (r.returncode, r.stdout, r.stderr))
    text = open(unix(app + "\\pids.txt")).read().split()
    print(f"# tree: leader {text[0]}, its child {text[1]}")
    gone = wait_until("neither the job's process nor its child remains", lambda: not (set(wine_processes("helper.exe")) - before), 20)
    check("the job's process and the child that would outlive it are both gone", gone, wine_processes("helper.exe"))

    # The daemon killed mid-job: its Job Object handle closes with it, and
    # KILL_ON_JOB_CLOSE ends the job's processes; the next daemon reports the run.
    r = lin.run(["--json", "job", "run", "win-pc", "tree-long"])
    job_id = (json.loads(r.stdout or b"null") or {}).get("job", {}).get("id")
    check("tree-long accepted", r.returncode == 0 and job_id, (r.returncode, r.stdout, r.stderr))
    wait_until("tree-long's processes started", lambda: os.path.exists(unix(app + "\\long-pids.txt")), 60)
    check("tree-long's process and its child run", len(set(wine_processes("helper.exe")) - before) >= 2, wine_processes("helper.exe"))
    daemon = STATE["daemons"].pop()
    daemon.kill()
    daemon.wait()
    gone = wait_until("the job's processes end with their killed daemon", lambda: not (set(wine_processes("helper.exe")) - before), 20)
    check("a daemon killed mid-job leaves no orphan: its Job Object took the job's processes with it", gone, wine_processes("helper.exe"))
    start_daemon(win)

    def status():
        r = lin.run(["--json", "job", "status", job_id])
        return (json.loads(r.stdout or b"null") or {}).get("job", {})
    wait_until("the next daemon reports the run", lambda: status().get("state") == "timed_out", 60)
    job = status()
    # No exit record on Windows (no keeper): the reason says the executor stopped, never a guess.
    check("the run is reported timed_out, the executor stopped", job.get("state") == "timed_out" and "executor stopped" in (job.get("reason") or ""), job)


def main():
    print(f"# Windows suite under Wine ({subprocess.run(['wine', '--version'], capture_output=True, text=True).stdout.strip()}); "
          f"hook binary: {'pcmail-hook.exe' if USE_HOOK_EXE else 'pcmail.exe hook'}", flush=True)
    try:
        for s in (definition_of_done_on_the_embedded_default, windows_and_linux_mail_each_other,
                  hook_without_network_and_with_a_corrupt_store, hook_starts_a_detached_poller_that_outlives_it,
                  one_daemon_per_user, hooks_install_writes_a_command_that_runs, service_as_a_task_scheduler_task,
                  leases_follow_windows_processes, jobs_kill_their_whole_tree, windows_unit_tests):
            only = os.environ.get("WIN_ONLY")  # a debugging aid: run the scenarios whose name contains one of its comma-separated words (+ the one they need)
            if only and not any(o in s.__name__ for o in only.split(",")) and s is not windows_and_linux_mail_each_other:
                continue
            if s not in (windows_unit_tests, definition_of_done_on_the_embedded_default, windows_and_linux_mail_each_other) and "win" not in STATE:
                check(f"{s.__name__} (needs the Windows ⇄ Linux scenario)", False, "skipped: an earlier scenario failed")
                continue
            scenario(s)
    finally:
        for d in STATE.get("daemons", []):
            d.kill()
            d.wait()
        if "serve" in STATE:
            STATE["serve"].kill()
            STATE["serve"].wait()
        shutil.rmtree(WORK, ignore_errors=True)
    print(f"windows: {PASSED} passed, {FAILED} failed")
    sys.exit(1 if FAILED else 0)


main()
