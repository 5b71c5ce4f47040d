"""A vendor library that runs in another process (the peers' virtualenv: PyTorch, and numpy / onnxruntime of
their own versions), timed in the same alternating rounds as the sides in this process.

A peer script (``peer_kernels.py``, ``peer_torch_onnx.py``) started with ``--serve`` sets its libraries up
once, prints one JSON line ``{"peers": [name, ...], ...}``, then answers each request line
``{"time": name, "seconds": s}`` with ``{"peer": name, "seconds": median}``: one block of
:func:`_timing.median_time` (the same rule as this process's), and waits idle on its input in between. So
:func:`_timing.alternating_medians` with :func:`timer` times a peer's block in its turn, after the same pause,
while every other side is idle, exactly as it times a function of this process: the process is kept alive
for the rounds rather than started per block (start-up and warm-up would otherwise land in every block).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import threading
from collections.abc import Callable

from _timing import median_time


class PeerError(RuntimeError):
    """The peer process failed or broke the protocol; the message ends with its last line of stderr."""


class PeerProcess:
    """``python script args... --serve``, kept alive until :meth:`close` (or the ``with`` block ends)."""

    def __init__(self, python: str, script: str, args: list[str], timeout: float = 600.0) -> None:
        self.timeout = timeout
        self._err = tempfile.TemporaryFile(mode="w+")  # a file, not a pipe: a chatty peer cannot block on it
        self.proc = subprocess.Popen([python, script, *args, "--serve"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._err, text=True, bufsize=1)
        self.hello = self._read()
        self.names: list[str] = list(self.hello.get("peers", []))

    def sides(self, prefix: str = "") -> dict[str, PeerSide]:
        """Each library of the peer as a side for :func:`_timing.alternating_medians` (with :func:`timer`)."""
        return {prefix + n: PeerSide(self, n) for n in self.names}

    def median(self, name: str, seconds: float) -> float:
        """One block: the peer's median seconds of library ``name`` over about ``seconds``."""
        self._send({"time": name, "seconds": seconds})
        reply = self._read()
        if reply.get("peer") != name or "seconds" not in reply:
            raise PeerError(f"unexpected reply to a request for {name}: {reply}")
        return float(reply["seconds"])

    def _send(self, msg: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise PeerError(f"the peer process has exited: {self._stderr_tail()}") from e

    def _read(self) -> dict:
        watchdog = threading.Timer(self.timeout, self.proc.kill)  # a hung peer ends the read with EOF
        watchdog.start()
        try:
            while True:
                line = self.proc.stdout.readline()
                if not line:
                    raise PeerError(f"the peer process ended (exit status {self.proc.poll()}): "
                                    f"{self._stderr_tail()}")
                if line.startswith("{"):
                    msg = json.loads(line)
                    if "error" in msg:
                        raise PeerError(msg["error"])
                    return msg
        finally:
            watchdog.cancel()

    def _stderr_tail(self) -> str:
        self._err.seek(0)
        lines = self._err.read().strip().splitlines()
        return lines[-1] if lines else "(nothing on stderr)"

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # end of input: the peer exits
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self._err.close()

    def __enter__(self) -> PeerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PeerSide:
    """One library of a :class:`PeerProcess`, as a side of :func:`_timing.alternating_medians`."""

    def __init__(self, peer: PeerProcess, name: str) -> None:
        self.peer, self.name = peer, name

    def median(self, seconds: float) -> float:
        return self.peer.median(self.name, seconds)


def timer(fn: Callable[[], object] | PeerSide, seconds: float) -> float:
    """``alternating_medians``'s timer for sides in this process and in peer processes alike."""
    return fn.median(seconds) if isinstance(fn, PeerSide) else median_time(fn, seconds)


def serve(libraries: dict[str, Callable[[], object]], stdin, stdout, **hello: object) -> None:
    """The peer's side of the protocol: announce ``libraries`` (and ``hello``), then time one block per request
    until the input ends. A request for a library it does not have is answered with an error line."""
    print(json.dumps({"peers": list(libraries), **hello}), file=stdout, flush=True)
    for line in stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        fn = libraries.get(req.get("time"))
        if fn is None:
            print(json.dumps({"error": f"no library {req.get('time')!r} here; have {list(libraries)}"}),
                  file=stdout, flush=True)
            continue
        print(json.dumps({"peer": req["time"], "seconds": median_time(fn, float(req.get("seconds", 1.0)))}),
              file=stdout, flush=True)
