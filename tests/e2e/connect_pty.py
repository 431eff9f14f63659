#!/usr/bin/env python3
# Drives `mcli connect RUN` on a real terminal (a PTY), as a person at a keyboard would: the
# remote terminal has the local one's size and follows a resize, Ctrl-C stops the remote
# program and not mcli, and mcli exits with the shell's exit code.
#   connect_pty.py MCLI RUN   (TESSERA_ENDPOINT and TESSERA_API_KEY in the environment)
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios
import time

mcli, run = sys.argv[1], sys.argv[2]
pid, fd = pty.fork()
if pid == 0:
    fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    os.execv(mcli, [mcli, "connect", run])

seen = b""


def read_until(marker, timeout=60):
    global seen
    deadline = time.time() + timeout
    while marker not in seen:
        left = deadline - time.time()
        if left <= 0:
            sys.exit("timed out waiting for %r; the terminal showed:\n%s" % (marker, seen.decode(errors="replace")))
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                sys.exit("mcli ended early; the terminal showed:\n%s" % seen.decode(errors="replace"))
            seen += chunk
    at = seen.index(marker) + len(marker)
    seen = seen[at:]


def send(text):
    os.write(fd, text)


send(b"stty size; echo size-$((40+2))\r")
read_until(b"30 100")
read_until(b"size-42")
print("size at start: 30 100")
fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
os.kill(pid, signal.SIGWINCH)
time.sleep(0.5)
send(b"stty size; echo resized-$((40+3))\r")
read_until(b"40 120")
read_until(b"resized-43")
print("size after a resize: 40 120")
send(b"sleep 1000; echo slept-$((40+4))\r")
time.sleep(1)
send(b"\x03")
send(b"echo interrupted-$((40+5))\r")
read_until(b"interrupted-45")
if b"slept-44" in seen:
    sys.exit("Ctrl-C did not stop the remote sleep")
print("Ctrl-C stopped the remote program; mcli goes on")
send(b"exit 5\r")
_, status = os.waitpid(pid, 0)
code = os.waitstatus_to_exitcode(status)
print("mcli exited %d" % code)
sys.exit(0 if code == 5 else "mcli exited %d, not the shell's 5" % code)
