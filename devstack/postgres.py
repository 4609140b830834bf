"""A local PostgreSQL server for the dev harness and the tests: Dagster's storage on PostgreSQL
(README "Dagster on PostgreSQL") on a real server, never a mock.

The binaries are PostgreSQL's own, from the ``pgserver`` wheel (the ``dev`` extra): nothing to install
from the system. The server is run with ``pg_ctl`` on a folder of its own (default
``.devstack/postgres``: ``data/`` is PGDATA, ``postgres.log`` its log) and, like a broker, outlives the
command that started it (``pg_ctl`` gives the postmaster a session of its own); its pid file is
PostgreSQL's ``postmaster.pid``, so ``start``/``stop``/``status`` work from any process.

It listens on a Unix socket only, no TCP port: nothing to collide with another PostgreSQL on the
machine, nothing reachable from the network, and local connections need no password (``trust`` on
the socket), so no secret is written anywhere. ``url`` is what ``OFFSET_PIPELINE_DAGSTER_PG_URL``
holds for ``dagster.yaml``.

PostgreSQL refuses to run as root; as root (a container, CI) the server runs as the unprivileged
account ``pgserver`` (the one the ``pgserver`` package itself uses; created when missing), which owns
the folder and can traverse its parents (``o+x`` is added where missing).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from devstack.errors import DevStackError
from devstack.liveness import pid_alive, pid_runs
from devstack.paths import stack_dir
from devstack.processes import log_file_tail

DATABASE = "dagster"  # Dagster's tables go into a database of their own, as on a real server
SUPERUSER = "postgres"
SERVICE_ACCOUNT = "pgserver"  # who runs the server when we are root
CONNECT_TIMEOUT_S = 10  # libpq's connect_timeout, in the URL: every connection attempt is bounded
SOCKET_NAME = ".s.PGSQL.5432"
# sun_path holds 108 bytes with its terminating NUL; stay clear of it.
MAX_SOCKET_PATH = 100
LOG_TAIL_LINES = 30


def postgres_bin_dir() -> Path:
    """The ``pgserver`` wheel's PostgreSQL binaries (``pg_ctl``, ``initdb``, ``postgres``). Found, not
    imported: importing ``pgserver`` sets up its own server management, which this module does not use."""
    spec = importlib.util.find_spec("pgserver")
    folders = list(spec.submodule_search_locations or []) if spec else []
    bin_dir = Path(folders[0]) / "pginstall" / "bin" if folders else None
    if bin_dir is None or not (bin_dir / "pg_ctl").exists():
        raise DevStackError("the PostgreSQL binaries come from the `pgserver` package (the dev extra): "
                            "run bin/setup, or `.venv/bin/pip install -e '.[dev]'`")
    return bin_dir


def default_base_dir() -> Path:
    return stack_dir() / "postgres"


STORAGE_ENV = "OFFSET_PIPELINE_DAGSTER_STORAGE"
STORAGE_CHOICES = ("sqlite", "postgres")


def dagster_storage(env: Mapping[str, str] | None = None) -> str:
    """Where the local stack's Dagster keeps its runs: ``OFFSET_PIPELINE_DAGSTER_STORAGE``, ``sqlite``
    (files in DAGSTER_HOME, the default) or ``postgres`` (this module's server)."""
    env = os.environ if env is None else env
    value = (env.get(STORAGE_ENV) or "sqlite").strip().lower()
    if value not in STORAGE_CHOICES:
        raise DevStackError(f"{STORAGE_ENV}={value!r}: expected one of {', '.join(STORAGE_CHOICES)}")
    return value


@dataclass(frozen=True)
class ServiceAccount:
    """The account the server's commands run as: ourselves, or ``pgserver`` when we are root."""

    uid: int
    gid: int

    @classmethod
    def for_this_process(cls) -> ServiceAccount | None:
        if os.geteuid() != 0:
            return None
        import pwd

        try:
            entry = pwd.getpwnam(SERVICE_ACCOUNT)
        except KeyError:
            done = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                                   SERVICE_ACCOUNT], check=False, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise DevStackError(f"PostgreSQL refuses to run as root and the account {SERVICE_ACCOUNT!r} could "
                                    f"not be created: {done.stderr.strip()}") from None
            entry = pwd.getpwnam(SERVICE_ACCOUNT)
        return cls(entry.pw_uid, entry.pw_gid)

    def run_kwargs(self) -> dict:
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def own(self, path: Path) -> None:
        os.chown(path, self.uid, self.gid)


def socket_dir_for(base_dir: Path) -> Path:
    """``<base>/socket`` when the socket's path fits a Unix socket address, else a folder in the
    system's temporary directory named after the base folder (deep test folders): the same base
    always gets the same socket, so the URL is known before the server starts."""
    preferred = base_dir / "socket"
    if len(str(preferred / SOCKET_NAME)) <= MAX_SOCKET_PATH:
        return preferred
    digest = hashlib.sha256(str(base_dir).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"offset-pipeline-pg-{digest}"


#: The scheme of Dagster's ``postgres_url``: SQLAlchemy 2.1 maps a bare ``postgresql://`` to psycopg 3,
#: which dagster-postgres does not install (it brings psycopg2), so the driver is named.
DAGSTER_SCHEME = "postgresql+psycopg2"


def connection_url(socket_dir: Path, database: str = DATABASE, scheme: str = DAGSTER_SCHEME) -> str:
    """A URL to the server's socket: for Dagster's ``postgres_url`` (SQLAlchemy, the default scheme), or
    with ``scheme="postgresql"`` for libpq itself (psycopg2, psql)."""
    return (f"{scheme}://{SUPERUSER}@/{quote(database)}?host={quote(str(socket_dir), safe='/')}"
            f"&connect_timeout={CONNECT_TIMEOUT_S}")


class LocalPostgres:
    """Start, stop and inspect one local PostgreSQL server under ``base_dir``."""

    def __init__(self, base_dir: Path | None = None):
        self.base_dir = (base_dir or default_base_dir()).resolve()
        self.data_dir = self.base_dir / "data"
        self.log_path = self.base_dir / "postgres.log"
        self.socket_dir = socket_dir_for(self.base_dir)
        self.name = "postgres"

    @property
    def url(self) -> str:
        """The Dagster database's URL (``OFFSET_PIPELINE_DAGSTER_PG_URL``)."""
        return connection_url(self.socket_dir)

    # -- files ------------------------------------------------------------------------------
    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_file_tail(self.log_path, lines, "(no server log was written)")

    def _recorded_pid(self) -> int | None:
        try:
            return int((self.data_dir / "postmaster.pid").read_text().splitlines()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def pid(self) -> int | None:
        """The postmaster's pid while this folder's server runs (``postmaster.pid``, checked against
        the process: a file left by a crash, or a reused pid, is not a running server)."""
        pid = self._recorded_pid()
        return pid if pid is not None and pid_runs(pid, str(self.data_dir)) else None

    def _await_crashed_postmaster(self, timeout_s: float = 20.0) -> None:
        """A postmaster that died stays a zombie until its parent (init, once pg_ctl has left) reaps it,
        and PostgreSQL refuses to start while the pid in ``postmaster.pid`` exists at all: wait for it
        to go (a living process with a reused pid is PostgreSQL's to report)."""
        pid = self._recorded_pid()
        deadline = time.monotonic() + timeout_s
        while pid is not None and _is_zombie(pid):
            if time.monotonic() > deadline:
                raise DevStackError(f"postgres: the server that crashed (pid {pid}, a zombie) was not reaped within "
                                    f"{timeout_s:.0f}s, and PostgreSQL will not start while its pid exists")
            time.sleep(0.1)

    def status_line(self) -> str:
        pid = self.pid()
        state = f"running pid {pid}" if pid else "stopped"
        return f"{self.name:22} {state:16} {self.socket_dir}  log {self.log_path}"

    # -- lifecycle --------------------------------------------------------------------------
    def _run(self, account: ServiceAccount | None, program: str, *args: str, timeout: float,
             ) -> subprocess.CompletedProcess:
        command = [str(postgres_bin_dir() / program), *args]
        # Output to a file, not a pipe: pg_ctl's postmaster would inherit a pipe and keep it open.
        with tempfile.TemporaryFile("w+") as out:
            try:
                done = subprocess.run(command, check=False, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                      cwd=self.base_dir, timeout=timeout, text=True,
                                      **(account.run_kwargs() if account else {}))
            except subprocess.TimeoutExpired:
                out.seek(0)
                raise DevStackError(f"postgres: `{program} {' '.join(args)}` did not finish within {timeout:.0f}s:\n"
                                    f"{out.read()[-2000:]}\nLast lines of {self.log_path}:\n{self.log_tail()}") from None
            out.seek(0)
            done.stdout = out.read()
        return done

    def _prepare_folders(self, account: ServiceAccount | None) -> None:
        for folder in (self.base_dir, self.data_dir, self.socket_dir):
            folder.mkdir(parents=True, exist_ok=True)
        if account is None:
            return
        for folder in (self.base_dir, self.data_dir, self.socket_dir):
            account.own(folder)
        self.data_dir.chmod(0o700)  # PostgreSQL refuses a data folder others can read
        if self.log_path.exists():
            account.own(self.log_path)
        # The service account must reach its folders and the binaries (a virtualenv under /root, say):
        # traverse (not list) every parent.
        for parent in [*self.base_dir.parents, *self.socket_dir.parents, *postgres_bin_dir().parents]:
            mode = parent.stat().st_mode
            if not mode & stat.S_IXOTH:
                parent.chmod(mode | stat.S_IXOTH)

    def _init_data(self, account: ServiceAccount | None) -> bool:
        if (self.data_dir / "PG_VERSION").exists():
            return False
        done = self._run(account, "initdb", "-D", str(self.data_dir), "-U", SUPERUSER, "--auth-local=trust",
                         "--auth-host=reject", "--encoding=UTF8", "--no-instructions", timeout=180)
        if done.returncode != 0:
            raise DevStackError(f"postgres: initdb failed in {self.data_dir}:\n{done.stdout[-3000:]}")
        return True

    def start(self, timeout_s: float = 90.0) -> int:
        """Start the server unless it runs, and return once the Dagster database answers. Idempotent."""
        running = self.pid()
        if running is None:
            self._start_server(timeout_s)
        self._ensure_database(timeout_s)
        pid = self.pid()
        if pid is None:
            raise DevStackError(f"postgres: the server exited right after its start. Last lines of "
                                f"{self.log_path}:\n{self.log_tail()}")
        return pid

    @contextmanager
    def running(self, timeout_s: float = 90.0) -> Iterator[str]:
        """The server for the ``with`` body (tests): started, its Dagster URL given, stopped at the end
        whatever happened in the body."""
        try:
            self.start(timeout_s)
            yield self.url
        finally:
            self.stop()

    def _start_server(self, timeout_s: float) -> None:
        account = ServiceAccount.for_this_process()
        self._prepare_folders(account)
        self._init_data(account)
        # A postmaster.pid left by a crash names a process that is gone: the postmaster checks that
        # itself and starts anyway, once the process is really gone.
        self._await_crashed_postmaster()
        options = f"-c listen_addresses='' -c unix_socket_directories='{self.socket_dir}' -c max_connections=200"
        done = self._run(account, "pg_ctl", "start", "-D", str(self.data_dir), "-l", str(self.log_path),
                         "-o", options, "-w", "-t", str(int(timeout_s)), timeout=timeout_s + 15)
        if done.returncode != 0:
            raise DevStackError(f"postgres: the server did not start within {timeout_s:.0f}s (pg_ctl: "
                                f"{done.stdout.strip()[-1000:]}). Last lines of {self.log_path}:\n{self.log_tail()}")

    def _ensure_database(self, timeout_s: float) -> None:
        import psycopg2
        from psycopg2 import sql

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                connection = psycopg2.connect(connection_url(self.socket_dir, "postgres", scheme="postgresql"))
                break
            except psycopg2.OperationalError as exc:
                # pg_ctl -w returns once the server accepts connections; this only bridges a restart
                if time.monotonic() > deadline:
                    raise DevStackError(f"postgres: no connection within {timeout_s:.0f}s on {self.socket_dir}: "
                                        f"{exc}Last lines of {self.log_path}:\n{self.log_tail()}") from None
                time.sleep(0.5)
        try:
            connection.autocommit = True  # CREATE DATABASE runs outside a transaction
            with connection.cursor() as cursor:
                cursor.execute("SET statement_timeout = %s", (f"{int(timeout_s)}s",))
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,))
                if cursor.fetchone() is None:
                    cursor.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        finally:
            connection.close()

    def stop(self, timeout: float = 20.0) -> bool:
        """Stop the server: PostgreSQL's fast shutdown (clients disconnected, a clean checkpoint),
        SIGKILL of the postmaster's process group if it has not ended within ``timeout``. Returns
        whether one ran."""
        pid = self.pid()
        if pid is None:
            return False
        account = ServiceAccount.for_this_process()
        try:
            self._run(account, "pg_ctl", "stop", "-D", str(self.data_dir), "-m", "fast", "-w",
                      "-t", str(int(timeout)), timeout=timeout + 10)
        except DevStackError:
            pass  # SIGKILL below
        deadline = time.monotonic() + 5
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(pid):
            # pg_ctl starts the postmaster in a session of its own: its group holds every backend
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            deadline = time.monotonic() + 10
            while pid_alive(pid):
                if time.monotonic() > deadline:
                    raise DevStackError(f"postgres: postmaster pid {pid} survived SIGKILL for 10s")
                time.sleep(0.1)
        if not self.socket_dir.is_relative_to(self.base_dir):
            # the short socket folder in the system's temporary directory goes with the server
            shutil.rmtree(self.socket_dir, ignore_errors=True)
        return True


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False
