"""An orbitkv-manager process for the gate, and its failpoint controls.

``ManagerProcess(binary, socket, http_port)`` starts the Manager with
``--bootstrap-socket SOCKET --http-addr 127.0.0.1:PORT --ram-capacity 256MiB
--hugepages off`` and waits for its "orbitkv-manager serving" line. With a
binary built with ``-tags failpoints`` the HTTP address serves
``/debug/failpoints/{arm,wait,resume}`` (gocore/failpoint/on.go):
``arm(name)``, ``wait_paused(name, timeout_s)``, ``resume(name)``, and the
hold points ``/debug/failpoints/{hold,held}``: ``hold(name, on)``,
``held(name, timeout_s)`` (``restore-done``: restore copies complete but
their terminal state is withheld while every other request is served).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

__all__ = ["ManagerProcess", "free_port"]


def free_port() -> int:
    """A loopback TCP port (int) that was free a moment ago (the kernel's
    choice for port 0), for a Manager's --http-addr."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:
    """preexec_fn of the Manager: SIGKILL it when this process dies."""
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


class ManagerProcess:
    """One orbitkv-manager process: the Python tests' and the e2e gate's
    only launcher of the Manager (the Go side's is internal/launch). Ready
    once its stderr has ``READY``, the line the Manager logs when its
    bootstrap socket and HTTP listener serve."""

    READY = "orbitkv-manager serving"

    def __init__(self, binary: str, sock: str, http_port: int | None, ram: str = "256MiB",
                 timeout_s: float = 20, extra: tuple[str, ...] = ()):
        """http_port None: no HTTP address (--http-addr ""); extra: more
        Manager flags. Raises FileNotFoundError (no binary) or RuntimeError
        (it did not print the ready line within timeout_s seconds)."""
        if not os.access(binary, os.X_OK):
            raise FileNotFoundError(f"{binary}: no Manager binary (build it: make e2e builds it)")
        self.sock, self.port = sock, http_port
        self.log: list[str] = []
        self._ready = threading.Event()
        http = "" if http_port is None else f"127.0.0.1:{http_port}"
        self.proc = subprocess.Popen(
            [binary, "--bootstrap-socket", sock, "--http-addr", http, "--ram-capacity", ram,
             "--hugepages", "off", *extra], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True, preexec_fn=_die_with_parent)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + timeout_s
        while not self._ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("orbitkv-manager did not start:\n" + "".join(self.log[-20:]))

    @property
    def pid(self) -> int:
        """The Manager's process id."""
        return self.proc.pid

    def _read(self) -> None:
        """Reader thread: keep every stderr line in ``log``; set ready on READY."""
        for line in self.proc.stderr:
            self.log.append(line)
            if self.READY in line:
                self._ready.set()

    def _http(self, method: str, path: str, timeout_s: float = 30) -> int:
        """The HTTP status of ``method path`` on the Manager's HTTP address
        (a 4xx/5xx answer is returned, not raised; OSError when it does not
        answer within timeout_s seconds)."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method)
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def health(self) -> dict:
        """GET /health: the Manager-wide figures (sessions, blocks, leases,
        pins, reserved_bytes, operations, tickets, lookups, ...) that a
        session's own Health frame does not show. Needs an HTTP port;
        raises RuntimeError without one, OSError when it does not answer."""
        if self.port is None:
            raise RuntimeError("this Manager has no HTTP address: Manager-wide figures come only from GET /health")
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=10) as r:
            return json.load(r)

    def _control(self, what: str, path: str) -> None:
        """POST a failpoint control ``path``; RuntimeError naming ``what``
        unless the Manager answers 200 (a Manager built without
        ``-tags failpoints`` answers 404)."""
        code = self._http("POST", path)
        if code != 200:
            raise RuntimeError(f"{what}: HTTP {code} (is this the -tags failpoints build?)")

    def arm(self, name: str) -> None:
        """Arm failpoint ``name``: the next operation reaching it pauses
        there. Raises RuntimeError (not a failpoints build, unknown name)."""
        self._control(f"arming failpoint {name}", f"/debug/failpoints/arm?name={name}")

    def arm_device_fault(self, module: str) -> None:
        """Arm the CUDA backend's device fault (failpoints build, Manager on
        ``--copy-backend cuda``): the next copy job on device 0 first
        launches the kernel ``okv_fault`` of the PTX or cubin file
        ``module`` (native/tests/gpu/fault.cu), so the device faults and the
        Manager must end in fail-stop (docs/design.md §6 rule 9). Raises
        RuntimeError (not a failpoints build, no CUDA backend, a module
        that does not load)."""
        from urllib.parse import quote
        self._control(f"arming the device fault from {module}",
                      f"/debug/failpoints/cuda-device-fault?module={quote(module)}")

    def wait_paused(self, name: str, timeout_s: float = 20) -> bool:
        """Whether an operation paused at failpoint ``name`` within
        ``timeout_s`` seconds."""
        return self._http("GET", f"/debug/failpoints/wait?name={name}&timeout={int(timeout_s)}s",
                          timeout_s + 5) == 200

    def resume(self, name: str) -> None:
        """Let the operation paused at failpoint ``name`` go on (best
        effort: the answer is not checked)."""
        self._http("POST", f"/debug/failpoints/resume?name={name}")

    def hold(self, name: str, on: bool) -> None:
        """Turn hold point ``name`` on or off. Raises RuntimeError (not a
        failpoints build, unknown name)."""
        self._control(f"hold point {name} on={on}", f"/debug/failpoints/hold?name={name}&on={1 if on else 0}")

    def held(self, name: str, timeout_s: float = 20) -> bool:
        """Whether hold point ``name`` held something within ``timeout_s``
        seconds."""
        return self._http("GET", f"/debug/failpoints/held?name={name}&timeout={int(timeout_s)}s",
                          timeout_s + 5) == 200

    def kill(self) -> None:
        """SIGKILL the Manager (if running) and wait up to 10 s for it;
        subprocess.TimeoutExpired if it does not go."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        self._close()

    def _close(self) -> None:
        """After the exit: end the log reader and close its pipe."""
        self._reader.join(5)
        if self.proc.stderr is not None and not self.proc.stderr.closed:
            self.proc.stderr.close()

    def stop(self) -> None:
        """SIGTERM the Manager, SIGKILL after 10 s; waits for the exit."""
        terminate(self.proc)
        self._close()


def terminate(proc: subprocess.Popen, grace_s: float = 10) -> None:
    """SIGTERM proc unless it exited, SIGKILL it after grace_s seconds;
    waits for the exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(grace_s)
