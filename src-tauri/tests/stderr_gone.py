#!/usr/bin/env python3
"""The tray app goes on when its stderr goes away (the terminal it was
started from closed, a log pipe whose reader died): started under Xvfb with
stderr a pipe whose other end is closed at once, logging at `info`, it must
still run some seconds later. A log line that cannot be written is dropped;
before, the log subscriber's own report of the failure panicked the thread
that logged (exit 101 within a second).

    python3 src-tauri/tests/stderr_gone.py PATH/TO/pcmail-tray
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

tray = sys.argv[1]
# Not a TemporaryDirectory: the desktop's document portal may mount a folder
# under the app's HOME that no cleanup can remove.
home = tempfile.mkdtemp()
env = dict(os.environ, PCMAIL_HOME=home, HOME=home, PCMAIL_LOG="info")
env.pop("DBUS_SESSION_BUS_ADDRESS", None)
app = subprocess.Popen(
    ["xvfb-run", "-a", tray], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, start_new_session=True
)
app.stderr.close()
time.sleep(8)
ended = app.poll()
for sig, wait in ((15, 10), (9, None)):
    try:
        os.killpg(app.pid, sig)
    except ProcessLookupError:
        break
    try:
        app.wait(timeout=wait)
        break
    except subprocess.TimeoutExpired:
        continue
# A FUSE mount the document portal left under HOME answers every call with
# an error once its daemon is gone (ECONNABORTED from fstat, which rmtree's
# ignore_errors does not cover): unmount what is mounted there first, and a
# folder that still cannot go is left behind, not a failed test.
with open("/proc/self/mounts") as mounts:
    under = [line.split()[1] for line in mounts if line.split()[1].startswith(home + "/")]
for mnt in sorted(under, key=len, reverse=True):
    for umount in (["fusermount", "-u", "-z", mnt], ["umount", "-l", mnt]):
        try:
            if subprocess.run(umount, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
                break
        except OSError:
            continue
try:
    shutil.rmtree(home, ignore_errors=True)
except OSError as e:
    print(f"stderr-gone: left {home} behind ({e})")
if ended is not None:
    print(f"stderr-gone: the tray app ended (exit {ended}) when its stderr went away")
    sys.exit(1)
print("stderr-gone: 1 passed, 0 failed (the tray app ran on with its stderr gone)")
